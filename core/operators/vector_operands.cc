#include "core/operators/vector_operands.h"

#include "core/base/status_macros.h"
#include "core/data/dims_check.h"

namespace tomo::core {

absl::Status CheckVectorOperands(const VectorGeometry& geometry,
                                 const VolumeGeometry& volume_geometry, const Array3D& volume,
                                 const Array3D& projections) {
  TOMO_RETURN_IF_ERROR(
      CheckDimsMatch("volume", volume.dims(), volume_geometry.dims(), "(z, y, x)"));
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(),
                                      geometry.projection_dims(), "(views, rows, columns)"));
  return geometry.CheckAgainstVolume(volume_geometry);
}

}  // namespace tomo::core
