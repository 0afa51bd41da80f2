#include "core/io/tiff_stack_reader.h"

#include <tiffio.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) /
          (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
           name))
      .string();
}

struct Page {
  int64_t rows = 0, columns = 0;
  int bits = 16;  // 16 (uint) or 32 (float); 8 for a refused page
  std::vector<double> values;
};

// Writes pages with libtiff itself (LZW-compressed strips of 3 rows, so that decoding
// crosses strip boundaries).
void WriteTiff(const std::string& path, const std::vector<Page>& pages) {
  TIFF* tiff = TIFFOpen(path.c_str(), "w");
  ASSERT_NE(tiff, nullptr);
  for (const Page& page : pages) {
    TIFFSetField(tiff, TIFFTAG_IMAGEWIDTH, static_cast<uint32_t>(page.columns));
    TIFFSetField(tiff, TIFFTAG_IMAGELENGTH, static_cast<uint32_t>(page.rows));
    TIFFSetField(tiff, TIFFTAG_BITSPERSAMPLE, static_cast<uint16_t>(page.bits));
    TIFFSetField(tiff, TIFFTAG_SAMPLESPERPIXEL, static_cast<uint16_t>(1));
    TIFFSetField(tiff, TIFFTAG_SAMPLEFORMAT,
                 static_cast<uint16_t>(page.bits == 32 ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT));
    TIFFSetField(tiff, TIFFTAG_PHOTOMETRIC, static_cast<uint16_t>(PHOTOMETRIC_MINISBLACK));
    TIFFSetField(tiff, TIFFTAG_PLANARCONFIG, static_cast<uint16_t>(PLANARCONFIG_CONTIG));
    TIFFSetField(tiff, TIFFTAG_COMPRESSION, static_cast<uint16_t>(COMPRESSION_LZW));
    TIFFSetField(tiff, TIFFTAG_ROWSPERSTRIP, static_cast<uint32_t>(3));
    std::vector<unsigned char> line(static_cast<size_t>(page.columns * page.bits / 8));
    for (int64_t r = 0; r < page.rows; ++r) {
      for (int64_t c = 0; c < page.columns; ++c) {
        const double v = page.values[static_cast<size_t>(r * page.columns + c)];
        if (page.bits == 32) {
          const float f = static_cast<float>(v);
          std::memcpy(line.data() + 4 * c, &f, 4);
        } else if (page.bits == 16) {
          const uint16_t u = static_cast<uint16_t>(v);
          std::memcpy(line.data() + 2 * c, &u, 2);
        } else {
          line[static_cast<size_t>(c)] = static_cast<unsigned char>(v);
        }
      }
      ASSERT_EQ(TIFFWriteScanline(tiff, line.data(), static_cast<uint32_t>(r), 0), 1);
    }
    ASSERT_EQ(TIFFWriteDirectory(tiff), 1);
  }
  TIFFClose(tiff);
}

Page RandomPage(int64_t rows, int64_t columns, int bits, std::mt19937_64& random) {
  Page page{rows, columns, bits, {}};
  std::uniform_int_distribution<int> counts(0, 65535);
  std::normal_distribution<double> normal(0, 3);
  for (int64_t i = 0; i < rows * columns; ++i) {
    page.values.push_back(bits == 32 ? static_cast<float>(normal(random))
                                     : static_cast<double>(counts(random) % (bits == 8 ? 256 : 65536)));
  }
  return page;
}

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(TiffStackReaderTest, ReadsMultiPageAndOnePerFileStacksOfBothSampleTypes) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (int bits : {16, 32}) {
    SCOPED_TRACE(bits);
    const std::vector<Page> pages = {RandomPage(7, 11, bits, random),
                                     RandomPage(7, 11, bits, random),
                                     RandomPage(7, 11, bits, random)};
    // Two pages in one file, the third in a second file.
    const std::string a = TempPath(std::to_string(bits) + "_a.tif");
    const std::string b = TempPath(std::to_string(bits) + "_b.tif");
    WriteTiff(a, {pages[0], pages[1]});
    WriteTiff(b, {pages[2]});
    absl::StatusOr<Array3D> stack = ReadTiffStackFiles({a, b});
    ASSERT_TRUE(stack.ok()) << stack.status();
    ASSERT_EQ(stack->dims(), (Dims3{3, 7, 11}));
    for (int64_t v = 0; v < 3; ++v) {
      for (int64_t i = 0; i < 77; ++i) {
        ASSERT_EQ(stack->data()[v * 77 + i], static_cast<float>(pages[v].values[i]))
            << "view " << v << " index " << i;
      }
    }
    const std::string bytes = Contents(a);
    absl::StatusOr<TiffStackInfo> info = InspectTiff(bytes.data(), bytes.size(), "a.tif");
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->pages, 2);
    EXPECT_EQ(info->rows, 7);
    EXPECT_EQ(info->columns, 11);
    EXPECT_EQ(info->bits_per_sample, bits);
  }
}

TEST(TiffStackReaderTest, RefusesPagesOfDifferentSizesNamingFileAndPage) {
  std::mt19937_64 random(testing::TestSeed());
  const std::string a = TempPath("a.tif");
  WriteTiff(a, {RandomPage(7, 11, 16, random), RandomPage(7, 11, 16, random),
                RandomPage(7, 12, 16, random)});
  absl::StatusOr<Array3D> stack = ReadTiffStackFiles({a});
  ASSERT_EQ(stack.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(stack.status().message(), HasSubstr("a.tif: page 2 is 7 x 12 (rows x columns)"));

  const std::string b = TempPath("b.tif");
  const std::string c = TempPath("c.tif");
  WriteTiff(b, {RandomPage(7, 11, 16, random)});
  WriteTiff(c, {RandomPage(8, 11, 16, random)});
  stack = ReadTiffStackFiles({b, c});
  ASSERT_EQ(stack.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(stack.status().message(), HasSubstr("c.tif: page 0 is 8 x 11"));
  EXPECT_THAT(stack.status().message(), HasSubstr("b.tif"));
}

TEST(TiffStackReaderTest, RefusesUnsupportedSamplesTruncatedAndForeignFiles) {
  std::mt19937_64 random(testing::TestSeed());
  const std::string eight = TempPath("eight.tif");
  WriteTiff(eight, {RandomPage(4, 4, 8, random)});
  absl::StatusOr<Array3D> stack = ReadTiffStackFiles({eight});
  ASSERT_EQ(stack.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(stack.status().message(), HasSubstr("page 0: BitsPerSample 8"));

  const std::string good = TempPath("good.tif");
  WriteTiff(good, {RandomPage(40, 40, 16, random), RandomPage(40, 40, 16, random)});
  const std::string bytes = Contents(good);
  // Cut in the middle of the pixel data of the first page.
  for (size_t cut : {size_t{4}, size_t{100}, bytes.size() / 2, bytes.size() - 20}) {
    absl::StatusOr<Array3D> truncated = DecodeTiff(bytes.data(), cut, "cut.tif");
    ASSERT_FALSE(truncated.ok()) << cut;
    EXPECT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument) << cut;
    EXPECT_THAT(truncated.status().message(), HasSubstr("cut.tif")) << cut;
  }
  const std::string text = "this is not a TIFF file at all";
  absl::StatusOr<Array3D> foreign = DecodeTiff(text.data(), text.size(), "notes.txt");
  ASSERT_EQ(foreign.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(foreign.status().message(), HasSubstr("notes.txt: not a readable TIFF file"));
  EXPECT_EQ(ReadTiffStackFiles({good + ".missing"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(DecodeTiffStack({}).status().code(), absl::StatusCode::kInvalidArgument);
}

// A few hundred bytes whose header claims a 16000 x 16000 page: refused from the header,
// before 512 MB are allocated for pixels the file cannot hold.
TEST(TiffStackReaderTest, RefusesAForgedPageSizeBeforeAllocating) {
  std::mt19937_64 random(testing::TestSeed());
  Page page = RandomPage(16, 16, 16, random);
  const std::string path = TempPath("forged.tif");
  TIFF* tiff = TIFFOpen(path.c_str(), "w");
  ASSERT_NE(tiff, nullptr);
  TIFFSetField(tiff, TIFFTAG_IMAGEWIDTH, 16u);
  TIFFSetField(tiff, TIFFTAG_IMAGELENGTH, 16u);
  TIFFSetField(tiff, TIFFTAG_BITSPERSAMPLE, static_cast<uint16_t>(16));
  TIFFSetField(tiff, TIFFTAG_SAMPLESPERPIXEL, static_cast<uint16_t>(1));
  TIFFSetField(tiff, TIFFTAG_PHOTOMETRIC, static_cast<uint16_t>(PHOTOMETRIC_MINISBLACK));
  TIFFSetField(tiff, TIFFTAG_ROWSPERSTRIP, 16u);
  std::vector<uint16_t> line(16, 7);
  for (uint32_t r = 0; r < 16; ++r) ASSERT_EQ(TIFFWriteScanline(tiff, line.data(), r, 0), 1);
  TIFFClose(tiff);
  std::string bytes = Contents(path);
  ASSERT_TRUE(DecodeTiff(bytes.data(), bytes.size(), "forged.tif").ok());
  // Classic little-endian TIFF: the first IFD's offset at byte 4, then 12-byte entries.
  ASSERT_EQ(bytes.substr(0, 2), "II");
  uint32_t ifd;
  std::memcpy(&ifd, bytes.data() + 4, 4);
  uint16_t entries;
  std::memcpy(&entries, bytes.data() + ifd, 2);
  int patched = 0;
  for (uint16_t i = 0; i < entries; ++i) {
    char* entry = bytes.data() + ifd + 2 + 12 * i;
    uint16_t tag, type;
    std::memcpy(&tag, entry, 2);
    std::memcpy(&type, entry + 2, 2);
    if (tag == TIFFTAG_IMAGEWIDTH || tag == TIFFTAG_IMAGELENGTH) {
      const uint32_t huge = 16000;
      if (type == TIFF_SHORT) {
        const uint16_t short_huge = 16000;
        std::memcpy(entry + 8, &short_huge, 2);
      } else {
        std::memcpy(entry + 8, &huge, 4);
      }
      ++patched;
    }
  }
  ASSERT_EQ(patched, 2);
  absl::StatusOr<TiffStackInfo> info = InspectTiff(bytes.data(), bytes.size(), "forged.tif");
  ASSERT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(info.status().message(),
              HasSubstr("forged.tif: page 0 is 16000 x 16000 (512000000 bytes) but its strips "
                        "hold 512 bytes"));
  EXPECT_EQ(DecodeTiff(bytes.data(), bytes.size(), "forged.tif").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tomo::core
