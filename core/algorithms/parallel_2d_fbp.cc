#include "core/algorithms/parallel_2d_fbp.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/algorithms/angular_weights.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"

namespace tomo::core {

absl::StatusOr<Array3D> Fbp(const ParallelGeometry2D& geometry, const VolumeGeometry& volume,
                            const Array3D& projections, const FbpOptions& options, Backend& backend,
                            const RunContext& context) {
  if (volume.size().z != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "size.z: ", volume.size().z, " is not supported; 2D parallel-beam FBP needs 1"));
  }
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(),
                                      geometry.projection_dims(), "(views, rows, detectors)"));
  TOMO_ASSIGN_OR_RETURN(
      RampFilter filter,
      RampFilter::Create(options.filter, geometry.num_detectors(), geometry.detector_spacing_mm()));

  TOMO_RETURN_IF_ERROR(context.CheckCancelled("fbp / filter"));
  context.Report({0.0, "filter"});
  Array3D filtered = projections.Clone();
  TOMO_RETURN_IF_ERROR(backend.FilterRows(filter, filtered));

  // Joseph's transpose gives each pixel, per view, weights that sum to dx dy / ds (pixel
  // area over detector spacing) instead of 1, so ds / (dx dy) turns it into the
  // interpolating back projection that the FBP integral needs.
  const double ds = geometry.detector_spacing_mm();
  const double pixel_area = volume.voxel_size_mm().x * volume.voxel_size_mm().y;
  const std::vector<double> weights = ParallelBeamWeights(geometry.angles_rad());
  const int64_t row_length = filtered.dims().d1 * filtered.dims().d2;
  for (int64_t v = 0; v < filtered.dims().d0; ++v) {
    const float scale = static_cast<float>(weights[static_cast<size_t>(v)] * ds / pixel_area);
    float* row = filtered.data() + v * row_length;
    for (int64_t i = 0; i < row_length; ++i) row[i] *= scale;
  }

  TOMO_RETURN_IF_ERROR(context.CheckCancelled("fbp / back projection"));
  context.Report({0.5, "back projection"});
  Array3D image(volume.dims());
  TOMO_RETURN_IF_ERROR(backend.BackProject(geometry, volume, filtered, image));
  context.Report({1.0, "back projection"});
  return image;
}

}  // namespace tomo::core
