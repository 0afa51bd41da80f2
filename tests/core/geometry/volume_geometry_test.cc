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

TEST(VolumeGeometryTest, SlicesKeepEachVoxelWhereItWas) {
  auto volume = VolumeGeometry::Create({5, 3, 11}, {0.7, 0.9, 1.3}, {2.0, -1.0, 4.5});
  ASSERT_TRUE(volume.ok());
  for (int64_t first : {0, 3, 10}) {
    for (int64_t count = 1; first + count <= 11; count += 3) {
      auto part = volume->Slices(first, count);
      ASSERT_TRUE(part.ok()) << first << " " << count;
      EXPECT_EQ(part->size().z, count);
      EXPECT_EQ(part->size().x, 5);
      EXPECT_EQ(part->size().y, 3);
      EXPECT_DOUBLE_EQ(part->voxel_size_mm().z, 1.3);
      EXPECT_DOUBLE_EQ(part->x_mm(4), volume->x_mm(4));
      EXPECT_DOUBLE_EQ(part->y_mm(0), volume->y_mm(0));
      for (int64_t iz = 0; iz < count; ++iz) {
        EXPECT_NEAR(part->z_mm(static_cast<double>(iz)),
                    volume->z_mm(static_cast<double>(first + iz)), 1e-12);
      }
    }
  }
}

TEST(VolumeGeometryTest, SlicesOutsideTheVolumeAreRefusedNamingTheField) {
  auto volume = VolumeGeometry::Create({4, 4, 8}, {1, 1, 1}, {});
  ASSERT_TRUE(volume.ok());
  EXPECT_EQ(volume->Slices(6, 3, "slab").status().message(),
            "slab: slices [6, 9) are not inside [0, 8)");
  EXPECT_EQ(volume->Slices(-1, 2).status().message(),
            "slices: slices [-1, 1) are not inside [0, 8)");
  EXPECT_EQ(volume->Slices(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  // No overflow in the range check near the int64 limit.
  EXPECT_FALSE(volume->Slices(std::numeric_limits<int64_t>::max() - 1, 4).ok());
}

}  // namespace
}  // namespace tomo::core
