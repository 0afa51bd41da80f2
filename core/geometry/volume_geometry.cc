#include "core/geometry/volume_geometry.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tomo::core {
namespace {

// Field names follow tomoserve.v1.Volume so that the server can prefix the proto path.
absl::Status CheckSide(absl::string_view field, int64_t value) {
  if (value < 1 || value > VolumeGeometry::kMaxSide) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", value, " is out of range [1, ", VolumeGeometry::kMaxSide, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckPositive(absl::string_view field, double value) {
  if (!std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", value, " must be a finite value > 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(absl::string_view field, double value) {
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", value, " must be a finite value"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<VolumeGeometry> VolumeGeometry::Create(Size3 size, Vec3 voxel_size_mm,
                                                      Vec3 center_mm) {
  for (absl::Status status :
       {CheckSide("size.x", size.x), CheckSide("size.y", size.y), CheckSide("size.z", size.z),
        CheckPositive("voxel_size_mm.x", voxel_size_mm.x),
        CheckPositive("voxel_size_mm.y", voxel_size_mm.y),
        CheckPositive("voxel_size_mm.z", voxel_size_mm.z), CheckFinite("center_mm.x", center_mm.x),
        CheckFinite("center_mm.y", center_mm.y), CheckFinite("center_mm.z", center_mm.z)}) {
    if (!status.ok()) return status;
  }
  return VolumeGeometry(size, voxel_size_mm, center_mm);
}

absl::StatusOr<VolumeGeometry> VolumeGeometry::Slices(int64_t first, int64_t count,
                                                      absl::string_view field) const {
  if (first < 0 || count < 1 || first > size_.z - count) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": slices [", first, ", ",
                                                   first + count, ") are not inside [0, ",
                                                   size_.z, ")"));
  }
  // The centre of the range's middle slice (half-way between two when the count is even).
  Vec3 center = center_mm_;
  center.z = z_mm(static_cast<double>(first) + 0.5 * static_cast<double>(count - 1));
  return VolumeGeometry({size_.x, size_.y, count}, voxel_size_mm_, center);
}

}  // namespace tomo::core
