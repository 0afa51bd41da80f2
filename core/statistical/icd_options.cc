#include "core/statistical/icd_options.h"

#include "absl/strings/str_cat.h"

namespace tomo::core::statistical {

absl::Status ValidateIcdOptions(const IcdOptions& options) {
  if (options.iterations < 1 || options.iterations > IcdOptions::kMaxIterations) {
    return absl::InvalidArgumentError(absl::StrCat("iterations: ", options.iterations,
                                                   " must be in [1, ",
                                                   IcdOptions::kMaxIterations, "]"));
  }
  if (options.columns_per_step < 1 || options.columns_per_step > 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "columns_per_step: ", options.columns_per_step, " must be in [1, 4]"));
  }
  return ValidateQggmrfPrior(options.prior);
}

uint64_t IcdDeviceBytes(const VolumeGeometry& volume, const Dims3& projection_dims,
                        int64_t steps_per_iteration) {
  const uint64_t voxels = static_cast<uint64_t>(volume.voxel_count());
  const uint64_t pixels = static_cast<uint64_t>(projection_dims.count());
  const uint64_t columns = static_cast<uint64_t>(volume.size().x * volume.size().y);
  const uint64_t views = static_cast<uint64_t>(projection_dims.d0);
  // The theta partials' views are rounded up to whole groups of the largest size.
  constexpr uint64_t kMostTogether = uint64_t{1} << kIcdMaxViewGroupShift;
  const uint64_t partial_views = (views + kMostTogether - 1) / kMostTogether * kMostTogether;
  // Bound on a step's voxels: four whole columns.
  const uint64_t group = 4 * static_cast<uint64_t>(volume.size().z);
  return 4 * voxels + 2 * 4 * pixels + 64 * views + 2 * 4 * columns + 2 * 4 * group * partial_views +
         4 * 4 * group + kIcdStepTaskBytes * static_cast<uint64_t>(steps_per_iteration) + 4096;
}

uint64_t IcdHostBytes(const VolumeGeometry& volume, const Dims3& projection_dims,
                      int columns_per_step) {
  const uint64_t partner_search =
      columns_per_step > 1 ? 4 * static_cast<uint64_t>(volume.size().x * volume.size().y) *
                                 static_cast<uint64_t>(projection_dims.d0)
                           : 0;
  return 4 * static_cast<uint64_t>(volume.voxel_count()) +
         2 * 4 * static_cast<uint64_t>(projection_dims.count()) + partner_search;
}

}  // namespace tomo::core::statistical
