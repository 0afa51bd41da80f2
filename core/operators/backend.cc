#include "core/operators/backend.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/operators/host_resident_operators.h"

namespace tomo::core {

absl::Status Backend::FilterAndBackProject(const VectorGeometry& geometry,
                                           const VolumeGeometry& volume_geometry,
                                           const Array3D& projections, const RampFilter& filter,
                                           const FilteredBackProjectionWeights& weights,
                                           BackProjectionWeighting weighting, Array3D& volume) {
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(),
                                      geometry.projection_dims(), "(views, rows, columns)"));
  TOMO_RETURN_IF_ERROR(weights.Check(projections.dims()));
  Array3D weighted = projections.Clone();
  ApplyFilteredBackProjectionWeights(weights, weighted);
  TOMO_RETURN_IF_ERROR(FilterRows(filter, weighted));
  return BackProject(geometry, volume_geometry, weighted, weighting, volume);
}

absl::StatusOr<std::unique_ptr<ResidentOperators>> Backend::MakeResidentOperators() {
  return std::unique_ptr<ResidentOperators>(std::make_unique<HostResidentOperators>(*this));
}

}  // namespace tomo::core
