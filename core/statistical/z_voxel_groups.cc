#include "core/statistical/z_voxel_groups.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/base/parallel_for.h"

namespace tomo::core::statistical {

ZVoxelGroups ZVoxelGroups::Find(const SeparableFootprintProjector& projector,
                                GroupingMode mode) {
  ZVoxelGroups groups;
  const Size3& n = projector.volume().size();
  groups.nx_ = n.x;
  groups.ny_ = n.y;
  groups.nz_ = n.z;
  groups.strides_.assign(static_cast<size_t>(n.x * n.y), 0);
  const double dz = projector.volume().voxel_size_mm().z;
  const int64_t nz = n.z;
  ParallelFor(n.y, [&](int64_t y0, int64_t y1) {
    for (int64_t iy = y0; iy < y1; ++iy) {
      for (int64_t ix = 0; ix < n.x; ++ix) {
        int64_t stride = nz;
        if (mode == GroupingMode::kMultiVoxel) {
          double rows_per_slice = std::numeric_limits<double>::infinity();
          for (int64_t view = 0; view < projector.num_views(); ++view) {
            const SfColumn col = projector.Column(view, ix, iy);
            rows_per_slice = std::min(rows_per_slice, std::abs(col.rows_per_mm) * dz);
          }
          const double s = std::floor((1.0 + 1e-3) / rows_per_slice) + 2.0;
          stride = s < static_cast<double>(nz) ? static_cast<int64_t>(s) : nz;
          stride = std::max<int64_t>(stride, 2);
        }
        groups.strides_[static_cast<size_t>(iy * n.x + ix)] = static_cast<int32_t>(stride);
      }
    }
  });
  for (int64_t iy = 0; iy < n.y; ++iy) {
    for (int64_t ix = 0; ix < n.x; ++ix) {
      const int64_t count = groups.GroupCount(ix, iy);
      groups.total_groups_ += count;
      const int64_t s = groups.Stride(ix, iy);
      groups.max_group_size_ = std::max(groups.max_group_size_, (nz + s - 1) / s);
    }
  }
  return groups;
}

int64_t ZVoxelGroups::GroupCount(int64_t ix, int64_t iy) const {
  return std::min<int64_t>(Stride(ix, iy), nz_);
}

std::vector<int64_t> ZVoxelGroups::Voxels(int64_t ix, int64_t iy, int64_t g) const {
  std::vector<int64_t> out;
  const int64_t s = Stride(ix, iy);
  for (int64_t iz = g; iz < nz_; iz += s) out.push_back(iz);
  return out;
}

}  // namespace tomo::core::statistical
