#include "core/io/png_preview.h"

#include <png.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/io/output_test_volumes.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using tomo::testing::TestPath;

struct DecodedPng {
  int width = 0, height = 0;
  std::vector<uint8_t> grey;
};

// libpng's simplified reader, asked for 8-bit grey.
std::optional<DecodedPng> ReadPng(const std::string& path) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str())) return std::nullopt;
  image.format = PNG_FORMAT_GRAY;
  DecodedPng decoded;
  decoded.width = static_cast<int>(image.width);
  decoded.height = static_cast<int>(image.height);
  decoded.grey.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, decoded.grey.data(), 0, nullptr)) {
    png_image_free(&image);
    return std::nullopt;
  }
  return decoded;
}

uint8_t ExpectedGrey(double value, double lower, double upper) {
  const double t = std::clamp((value - lower) / (upper - lower), 0.0, 1.0);
  return static_cast<uint8_t>(std::lround(t * 255.0));
}

// Random isotropic volume, a given window: every pixel of every slice is the windowed value
// of the voxel the documented orientation puts there.
TEST(PngPreviewTest, SlicesShowTheDocumentedVoxelsWindowed) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int64_t> side(3, 40);
  const int64_t nx = side(random), ny = side(random), nz = side(random);
  const VolumeGeometry geometry = VolumeGeometry::Create({nx, ny, nz}, {0.7, 0.7, 0.7}, {}).value();
  const Array3D volume = tomo::testing::RandomValues(geometry, random);
  const DisplayWindow window{0.01, 0.03};
  const std::string directory = TestPath("previews");
  std::filesystem::create_directories(directory);
  for (const char* plane : {"axial", "coronal", "sagittal"}) {
    tomo::testing::Poison(directory + "/" + PreviewFileName(plane));
  }
  absl::StatusOr<std::vector<std::string>> names =
      WritePngPreviews(directory, volume, geometry, window);
  ASSERT_TRUE(names.ok()) << names.status();
  ASSERT_THAT(*names, ::testing::ElementsAre("preview_axial.png", "preview_coronal.png",
                                             "preview_sagittal.png"));
  const int64_t cx = nx / 2, cy = ny / 2, cz = nz / 2;
  struct Plane {
    std::string name;
    int64_t width, height;
    std::function<float(int64_t c, int64_t r)> voxel;
  };
  const Plane planes[] = {
      {"axial", nx, ny, [&](int64_t c, int64_t r) { return volume.at(cz, ny - 1 - r, c); }},
      {"coronal", nx, nz, [&](int64_t c, int64_t r) { return volume.at(r, cy, c); }},
      {"sagittal", ny, nz, [&](int64_t c, int64_t r) { return volume.at(r, ny - 1 - c, cx); }}};
  for (const Plane& plane : planes) {
    std::optional<DecodedPng> png = ReadPng(directory + "/preview_" + plane.name + ".png");
    ASSERT_TRUE(png.has_value()) << plane.name;
    ASSERT_EQ(png->width, plane.width) << plane.name;
    ASSERT_EQ(png->height, plane.height) << plane.name;
    for (int64_t r = 0; r < plane.height; ++r) {
      for (int64_t c = 0; c < plane.width; ++c) {
        ASSERT_EQ(png->grey[static_cast<size_t>(r * plane.width + c)],
                  ExpectedGrey(plane.voxel(c, r), window.lower, window.upper))
            << plane.name << " row " << r << " column " << c;
      }
    }
  }
  std::filesystem::remove_all(directory);
}

// Voxels twice as thick in z: coronal and sagittal previews are twice as tall as the slice
// count, so that the object keeps its proportions.
TEST(PngPreviewTest, AnisotropicVoxelsKeepProportions) {
  const VolumeGeometry geometry = VolumeGeometry::Create({20, 30, 10}, {0.5, 0.5, 1.0}, {}).value();
  Array3D volume(geometry.dims(), 1.0f);
  absl::StatusOr<std::vector<GreyImage>> images =
      RenderCentralSlices(volume, geometry, DisplayWindow{0, 2});
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ((*images)[0].width, 20);
  EXPECT_EQ((*images)[0].height, 30);
  EXPECT_EQ((*images)[1].width, 20);
  EXPECT_EQ((*images)[1].height, 20);
  EXPECT_EQ((*images)[2].width, 30);
  EXPECT_EQ((*images)[2].height, 20);
  EXPECT_EQ((*images)[2].pixels[0], 128);
}

// Values uniform in [0, 1) on the three central slices, plus a few huge outliers: the robust
// window is close to the 1st and 99th percentiles and ignores the outliers.
TEST(PngPreviewTest, RobustWindowIgnoresOutliers) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const VolumeGeometry geometry = VolumeGeometry::Create({64, 64, 64}, {1, 1, 1}, {}).value();
  Array3D volume(geometry.dims(), 0.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (int64_t i = 0; i < volume.size(); ++i) volume.data()[i] = uniform(random);
  for (int k = 0; k < 10; ++k) volume.at(32, k, k) = 1e6f;
  for (int k = 0; k < 10; ++k) volume.at(k, 32, k) = -1e6f;
  const DisplayWindow window = RobustDisplayWindow(volume);
  EXPECT_NEAR(window.lower, 0.01, 0.01);
  EXPECT_NEAR(window.upper, 0.99, 0.01);
  // A constant volume still gets a window of width 1.
  Array3D flat(geometry.dims(), 3.0f);
  const DisplayWindow flat_window = RobustDisplayWindow(flat);
  EXPECT_DOUBLE_EQ(flat_window.lower, 2.5);
  EXPECT_DOUBLE_EQ(flat_window.upper, 3.5);
}

TEST(PngPreviewTest, RefusesAnEmptyWindow) {
  const VolumeGeometry geometry = VolumeGeometry::Create({4, 4, 4}, {1, 1, 1}, {}).value();
  Array3D volume(geometry.dims());
  const absl::StatusOr<std::vector<std::string>> names =
      WritePngPreviews(TestPath(""), volume, geometry, DisplayWindow{1, 1});
  EXPECT_EQ(names.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tomo::core
