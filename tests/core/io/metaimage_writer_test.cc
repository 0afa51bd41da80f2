#include "core/io/metaimage_writer.h"

#include <filesystem>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/io/metaimage_reader_for_tests.h"
#include "tests/core/io/output_test_volumes.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;
using tomo::testing::RandomGrid;
using tomo::testing::RandomValues;
using tomo::testing::TestPath;

TEST(MetaImageWriterTest, RoundTripsValuesAndGrid) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const VolumeGeometry geometry = RandomGrid(random);
  const Array3D volume = RandomValues(geometry, random);
  const std::string path = TestPath("volume.mha");
  tomo::testing::Poison(path);
  ASSERT_TRUE(WriteMetaImage(path, volume, geometry).ok());

  std::optional<tomo::testing::MetaImageForTests> image =
      tomo::testing::ReadMetaImageForTests(path);
  ASSERT_TRUE(image.has_value());
  EXPECT_EQ(image->dim_size[0], geometry.size().x);
  EXPECT_EQ(image->dim_size[1], geometry.size().y);
  EXPECT_EQ(image->dim_size[2], geometry.size().z);
  EXPECT_EQ(image->spacing[0], geometry.voxel_size_mm().x);
  EXPECT_EQ(image->spacing[1], geometry.voxel_size_mm().y);
  EXPECT_EQ(image->spacing[2], geometry.voxel_size_mm().z);
  ASSERT_EQ(image->data.size(), static_cast<size_t>(volume.size()));
  for (int64_t i = 0; i < volume.size(); ++i) ASSERT_EQ(image->data[i], volume.data()[i]) << i;
  // LPS of random voxels: (x, -y, -z) of VolumeGeometry's centres.
  std::uniform_int_distribution<int64_t> ix(0, geometry.size().x - 1), iy(0, geometry.size().y - 1),
      iz(0, geometry.size().z - 1);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t i = ix(random), j = iy(random), k = iz(random);
    const std::array<double, 3> p = image->Position(i, j, k);
    EXPECT_NEAR(p[0], geometry.x_mm(i), 1e-9);
    EXPECT_NEAR(p[1], -geometry.y_mm(j), 1e-9);
    EXPECT_NEAR(p[2], -geometry.z_mm(k), 1e-9);
  }
  std::filesystem::remove(path);
}

TEST(MetaImageWriterTest, RefusesMismatchedDims) {
  const VolumeGeometry geometry = VolumeGeometry::Create({4, 5, 6}, {1, 1, 1}, {}).value();
  Array3D wrong({5, 5, 4});
  const absl::Status status = WriteMetaImage(TestPath("volume.mha"), wrong, geometry);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("(6, 5, 4)"));
}

}  // namespace
}  // namespace tomo::core
