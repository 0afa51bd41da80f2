// ZVoxelGroups: the groups of voxels one (x, y) column of the volume splits into for the
// multi-voxel update of ICD: voxels along z whose detector footprints share no detector
// pixel in any view (zero correlation: the columns of A of two voxels of a group have no
// common non-zero row), so that a group is updated in parallel, exactly as one voxel after
// the other, and without atomics when its changes are projected into the residual.
//
// How they are found. In the separable footprint every voxel of a column has the same
// transaxial footprint in a view, so two of them correlate only through the rows they
// touch; slice iz touches the rows its projected interval [lo + iz b, lo + (iz + 1) b]
// overlaps, where b = |rows_per_mm| dz (rows per slice) is the same for every slice of the
// column in that view. Slices iz and iz + s touch no common row when the gap between their
// intervals, (s - 1) b, is at least one row; so with the column's stride
//   s = floor((1 + 1e-3) / b_min) + 2,  b_min the smallest b over the views,
// the voxels iz, iz + s, iz + 2 s, ... of the column form one group (the intervals move
// monotonically with iz, so pairwise separation of neighbours in the group suffices), and
// the column holds min(s, nz) groups g = 0, 1, ...: {g, g + s, g + 2 s, ...}. The 1e-3 of a
// row keeps a margin against rounding: the device evaluates footprints in float32, where
// row coordinates of order 1e3 carry errors near 1e-4 rows. The stride is a sufficient
// condition, not the largest groups possible.
//
// The single-voxel update is the same structure with stride nz: nz groups of one voxel.
//
//   ZVoxelGroups groups = ZVoxelGroups::Find(projector, GroupingMode::kMultiVoxel);
//   for (int64_t g = 0; g < groups.GroupCount(ix, iy); ++g) ...groups.Voxels(ix, iy, g)...
#pragma once

#include <cstdint>
#include <vector>

#include "core/statistical/separable_footprint.h"

namespace tomo::core::statistical {

enum class GroupingMode { kMultiVoxel, kSingleVoxel };

class ZVoxelGroups {
 public:
  // Computed on ParallelFor threads: one footprint per (column, view).
  static ZVoxelGroups Find(const SeparableFootprintProjector& projector, GroupingMode mode);

  int64_t nx() const { return nx_; }
  int64_t ny() const { return ny_; }
  int64_t nz() const { return nz_; }
  // Stride of column (ix, iy), >= 2 (kSingleVoxel: nz).
  int32_t Stride(int64_t ix, int64_t iy) const {
    return strides_[static_cast<size_t>(iy * nx_ + ix)];
  }
  const std::vector<int32_t>& strides() const { return strides_; }
  int64_t GroupCount(int64_t ix, int64_t iy) const;
  // The slices of group g of column (ix, iy), ascending.
  std::vector<int64_t> Voxels(int64_t ix, int64_t iy, int64_t g) const;

  int64_t total_groups() const { return total_groups_; }
  int64_t max_group_size() const { return max_group_size_; }
  // Voxels per group over the whole volume: nx ny nz / total_groups.
  double mean_group_size() const {
    return static_cast<double>(nx_ * ny_ * nz_) / static_cast<double>(total_groups_);
  }

 private:
  int64_t nx_ = 0, ny_ = 0, nz_ = 0;
  std::vector<int32_t> strides_;
  int64_t total_groups_ = 0, max_group_size_ = 0;
};

}  // namespace tomo::core::statistical
