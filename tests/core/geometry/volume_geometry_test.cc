#include "core/geometry/volume_geometry.h"

#include <limits>

#include "gtest/gtest.h"

namespace tomo::core {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(VolumeGeometryTest, AcceptsValidInput) {
  auto volume = VolumeGeometry::Create({512, 256, 1}, {0.5, 0.25, 1.0}, {1.0, -2.0, 0.0});
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->dims(), (Dims3{1, 256, 512}));
  EXPECT_EQ(volume->voxel_count(), 512 * 256);
}

TEST(VolumeGeometryTest, SizeOutOfRangeNamesAxisValueAndRange) {
  const absl::Status x = VolumeGeometry::Create({0, 4, 1}, {1, 1, 1}, {}).status();
  EXPECT_EQ(x.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(x.message(), "size.x: 0 is out of range [1, 65536]");
  EXPECT_EQ(VolumeGeometry::Create({4, -2, 1}, {1, 1, 1}, {}).status().message(),
            "size.y: -2 is out of range [1, 65536]");
  EXPECT_EQ(VolumeGeometry::Create({4, 4, 65537}, {1, 1, 1}, {}).status().message(),
            "size.z: 65537 is out of range [1, 65536]");
}

TEST(VolumeGeometryTest, VoxelSizeMustBeFiniteAndPositive) {
  EXPECT_EQ(VolumeGeometry::Create({4, 4, 1}, {-1, 1, 1}, {}).status().message(),
            "voxel_size_mm.x: -1 must be a finite value > 0");
  EXPECT_EQ(VolumeGeometry::Create({4, 4, 1}, {1, 0, 1}, {}).status().message(),
            "voxel_size_mm.y: 0 must be a finite value > 0");
  EXPECT_EQ(VolumeGeometry::Create({4, 4, 1}, {1, 1, kNaN}, {}).status().message(),
            "voxel_size_mm.z: nan must be a finite value > 0");
}

TEST(VolumeGeometryTest, CentreMustBeFinite) {
  const absl::Status status = VolumeGeometry::Create({4, 4, 1}, {1, 1, 1}, {0, kInf, 0}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "center_mm.y: inf must be a finite value");
}

TEST(VolumeGeometryTest, VoxelCentresAreSymmetricAboutTheCentre) {
  auto volume = VolumeGeometry::Create({4, 3, 1}, {0.5, 2.0, 1.0}, {10.0, -1.0, 3.0});
  ASSERT_TRUE(volume.ok());
  EXPECT_DOUBLE_EQ(volume->x_mm(0), 10.0 - 0.75);
  EXPECT_DOUBLE_EQ(volume->x_mm(3), 10.0 + 0.75);
  EXPECT_DOUBLE_EQ(volume->y_mm(1), -1.0);  // odd count: the middle voxel is on the centre
  EXPECT_DOUBLE_EQ(volume->y_mm(0), -3.0);
  EXPECT_DOUBLE_EQ(volume->z_mm(0), 3.0);
}

}  // namespace
}  // namespace tomo::core
