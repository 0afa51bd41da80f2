// The argument check every backend's VectorGeometry operators share, so that CPU and CUDA
// refuse the same calls with the same words.
//
//   TOMO_RETURN_IF_ERROR(CheckVectorOperands(geometry, volume_geometry, volume, projections));
#pragma once

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

// INVALID_ARGUMENT when an array's dims do not match its geometry (showing both), or
// geometry.CheckAgainstVolume(volume_geometry) refuses.
absl::Status CheckVectorOperands(const VectorGeometry& geometry,
                                 const VolumeGeometry& volume_geometry, const Array3D& volume,
                                 const Array3D& projections);

}  // namespace tomo::core
