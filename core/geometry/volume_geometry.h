// VolumeGeometry: the reconstruction grid, a validated value.
//
// size (x, y, z) voxels of voxel_size_mm each, centred at center_mm. Voxel (ix, iy, iz)
// has its centre at  center + (i - (n - 1) / 2) * voxel_size  on each axis. For 2D
// problems size.z == 1. Field names in errors are those of tomoserve.v1.Volume.
//
//   TOMO_ASSIGN_OR_RETURN(auto volume, VolumeGeometry::Create({512, 512, 1},
//                                                             {0.5, 0.5, 0.5}, {}));
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/array3d.h"
#include "core/geometry/vec3.h"

namespace tomo::core {

struct Size3 {
  int64_t x = 0, y = 0, z = 0;
};


class VolumeGeometry {
 public:
  // INVALID_ARGUMENT when a size is outside [1, kMaxSide], a voxel size is not a finite
  // value > 0, or a centre coordinate is not finite.
  static absl::StatusOr<VolumeGeometry> Create(Size3 size, Vec3 voxel_size_mm,
                                               Vec3 center_mm);
  static constexpr int64_t kMaxSide = 1 << 16;

  const Size3& size() const { return size_; }
  const Vec3& voxel_size_mm() const { return voxel_size_mm_; }
  const Vec3& center_mm() const { return center_mm_; }
  int64_t voxel_count() const { return size_.x * size_.y * size_.z; }
  // (z, y, x) dims of the array that holds this volume.
  Dims3 dims() const { return {size_.z, size_.y, size_.x}; }

  // Centre of voxel index i along each axis, in mm.
  double x_mm(double ix) const {
    return center_mm_.x + (ix - 0.5 * static_cast<double>(size_.x - 1)) * voxel_size_mm_.x;
  }
  double y_mm(double iy) const {
    return center_mm_.y + (iy - 0.5 * static_cast<double>(size_.y - 1)) * voxel_size_mm_.y;
  }
  double z_mm(double iz) const {
    return center_mm_.z + (iz - 0.5 * static_cast<double>(size_.z - 1)) * voxel_size_mm_.z;
  }

  // The slices [first, first + count) as a volume of their own (same voxels, same x and y):
  // a z-slab. INVALID_ARGUMENT naming `field` when the range is not inside [0, size.z).
  absl::StatusOr<VolumeGeometry> Slices(int64_t first, int64_t count,
                                        absl::string_view field = "slices") const;

 private:
  VolumeGeometry(Size3 size, Vec3 voxel, Vec3 center)
      : size_(size), voxel_size_mm_(voxel), center_mm_(center) {}
  Size3 size_;
  Vec3 voxel_size_mm_;
  Vec3 center_mm_;
};

}  // namespace tomo::core
