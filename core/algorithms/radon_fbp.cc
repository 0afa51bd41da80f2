#include "core/algorithms/radon_fbp.h"

#include "core/base/status_macros.h"
#include "core/data/dims_check.h"

namespace tomo::core {

std::vector<double> RadonFbpDirectionScales(const RadonGeometry& geometry) {
  std::vector<double> scales;
  scales.reserve(geometry.directions.size());
  for (const RadonDirection& direction : geometry.directions) scales.push_back(direction.weight_sr);
  return scales;
}

absl::StatusOr<Array3D> RadonFbp(const RadonGeometry& geometry,
                                 const VolumeGeometry& volume_geometry, const Array3D& projections,
                                 const RadonFbpOptions& options, RadonOperators& operators) {
  TOMO_RETURN_IF_ERROR(ValidateRadonGeometry(geometry));
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(), geometry.projection_dims(),
                                      "(directions, 1, samples)"));
  TOMO_ASSIGN_OR_RETURN(RampFilter filter,
                        RampFilter::Create(options.filter, geometry.num_samples,
                                           geometry.sample_spacing_mm, FilterOrder::kParabola));
  Array3D filtered = projections.Clone();
  TOMO_RETURN_IF_ERROR(operators.FilterRows(filter, filtered));
  Array3D volume = Array3D::Uninitialized(volume_geometry.dims());
  TOMO_RETURN_IF_ERROR(operators.BackProject(geometry, volume_geometry, filtered,
                                             RadonFbpDirectionScales(geometry), volume));
  return volume;
}

}  // namespace tomo::core
