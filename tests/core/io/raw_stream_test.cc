#include "core/io/raw_stream.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

// The reference encoder: byte by byte, from the definition of each order and byte order.
std::vector<unsigned char> Encode(const std::vector<double>& values, const RawStreamLayout& layout) {
  const Dims3& d = layout.dims;
  const int64_t width = RawSampleBytes(layout.sample);
  std::vector<unsigned char> bytes(static_cast<size_t>(d.count() * width));
  for (int64_t v = 0; v < d.d0; ++v) {
    for (int64_t r = 0; r < d.d1; ++r) {
      for (int64_t c = 0; c < d.d2; ++c) {
        const double value = values[static_cast<size_t>((v * d.d1 + r) * d.d2 + c)];
        const int64_t index = layout.order == RawAxisOrder::kViewRowColumn
                                  ? (v * d.d1 + r) * d.d2 + c
                                  : (r * d.d0 + v) * d.d2 + c;
        uint32_t bits;
        if (layout.sample == RawSampleType::kUint16) {
          bits = static_cast<uint16_t>(value);
        } else {
          const float f = static_cast<float>(value);
          std::memcpy(&bits, &f, 4);
        }
        unsigned char* out = bytes.data() + index * width;
        for (int64_t b = 0; b < width; ++b) {
          const int shift = layout.byte_order == RawByteOrder::kLittleEndian
                                ? static_cast<int>(8 * b)
                                : static_cast<int>(8 * (width - 1 - b));
          out[b] = static_cast<unsigned char>((bits >> shift) & 0xff);
        }
      }
    }
  }
  return bytes;
}

TEST(RawStreamTest, DecodesEveryTypeByteOrderAndAxisOrder) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (RawSampleType sample : {RawSampleType::kFloat32, RawSampleType::kUint16}) {
    for (RawByteOrder order : {RawByteOrder::kLittleEndian, RawByteOrder::kBigEndian}) {
      for (RawAxisOrder axes : {RawAxisOrder::kViewRowColumn, RawAxisOrder::kRowViewColumn}) {
        const RawStreamLayout layout{sample, order, axes, {5, 3, 7}};
        SCOPED_TRACE(RawLayoutText(layout));
        std::vector<double> values(static_cast<size_t>(layout.dims.count()));
        std::uniform_int_distribution<int> counts(0, 65535);
        std::normal_distribution<double> normal(0, 1000);
        for (double& v : values) {
          v = sample == RawSampleType::kUint16 ? counts(random)
                                               : static_cast<float>(normal(random));
        }
        const std::vector<unsigned char> bytes = Encode(values, layout);
        ASSERT_EQ(bytes.size(), RawStreamBytes(layout));
        absl::StatusOr<Array3D> decoded = DecodeRawStream(bytes.data(), bytes.size(), layout, "x");
        ASSERT_TRUE(decoded.ok()) << decoded.status();
        ASSERT_EQ(decoded->dims(), layout.dims);
        for (int64_t i = 0; i < decoded->size(); ++i) {
          ASSERT_EQ(decoded->data()[i], static_cast<float>(values[static_cast<size_t>(i)])) << i;
        }
      }
    }
  }
}

TEST(RawStreamTest, ReadsAFileSliceAtAnOffset) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const RawStreamLayout layout{RawSampleType::kUint16, RawByteOrder::kBigEndian,
                               RawAxisOrder::kRowViewColumn, {4, 2, 9}};
  std::vector<double> values(static_cast<size_t>(layout.dims.count()));
  std::uniform_int_distribution<int> counts(0, 65535);
  for (double& v : values) v = counts(random);
  const std::vector<unsigned char> bytes = Encode(values, layout);
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / "raw_stream_offset.bin").string();
  {
    std::ofstream out(path, std::ios::binary);
    const std::string before(37, 'x'), after(11, 'y');  // other uploaded files around it
    out << before;
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out << after;
  }
  absl::StatusOr<Array3D> read = ReadRawStream(path, 37, bytes.size(), layout, "b.raw");
  ASSERT_TRUE(read.ok()) << read.status();
  for (int64_t i = 0; i < read->size(); ++i) {
    ASSERT_EQ(read->data()[i], values[static_cast<size_t>(i)]) << i;
  }
  // Past the end of the file.
  absl::StatusOr<Array3D> short_read = ReadRawStream(path, 60, bytes.size(), layout, "b.raw");
  ASSERT_EQ(short_read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_read.status().message(), HasSubstr("b.raw"));
  EXPECT_EQ(ReadRawStream(path + ".missing", 0, 4, layout, "c").status().code(),
            absl::StatusCode::kNotFound);
  std::filesystem::remove(path);
}

TEST(RawStreamTest, RefusesWrongSizesAndNonFiniteFloats) {
  const RawStreamLayout layout{RawSampleType::kFloat32, RawByteOrder::kLittleEndian,
                               RawAxisOrder::kViewRowColumn, {2, 3, 4}};
  std::vector<float> values(24, 1.0f);
  absl::StatusOr<Array3D> short_input =
      DecodeRawStream(values.data(), 95, layout, "scan.raw");
  ASSERT_EQ(short_input.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_input.status().message(),
              HasSubstr("scan.raw: 95 bytes, expected 96 bytes for float32 little-endian"));
  values[(1 * 3 + 2) * 4 + 3] = std::numeric_limits<float>::quiet_NaN();
  absl::StatusOr<Array3D> nan = DecodeRawStream(values.data(), 96, layout, "scan.raw");
  ASSERT_EQ(nan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(nan.status().message(), HasSubstr("(view 1, row 2, column 3) is NaN"));
  const RawStreamLayout negative{RawSampleType::kUint16, RawByteOrder::kLittleEndian,
                                 RawAxisOrder::kViewRowColumn, {-1, 3, 4}};
  EXPECT_EQ(DecodeRawStream(values.data(), 0, negative, "n").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Dims whose byte count passes 2^64 (2^62 x 2^2 x 2 x 4 wraps to 0) are refused, never
  // matched against a wrapped size.
  const RawStreamLayout huge{RawSampleType::kFloat32, RawByteOrder::kLittleEndian,
                             RawAxisOrder::kViewRowColumn, {int64_t{1} << 62, 4, 2}};
  EXPECT_EQ(RawStreamBytes(huge), kRawStreamBytesOverflow);
  absl::StatusOr<Array3D> wrapped = DecodeRawStream(values.data(), 0, huge, "huge.raw");
  ASSERT_EQ(wrapped.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrapped.status().message(), HasSubstr("do not fit 64 bits"));
}

}  // namespace
}  // namespace tomo::core
