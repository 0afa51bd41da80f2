// Joseph's 2D parallel-beam projector and its exact transpose on the CPU (backend.h): the
// reference of ProjectorModel::kJosephExactTranspose2D. INVALID_ARGUMENT when the arrays do
// not match the geometry and the one-slice volume (parallel_2d_joseph.h).
#pragma once

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

// projections (num_views, 1, num_detectors) = A volume (1, ny, nx).
absl::Status CpuParallel2DForward(const ParallelGeometry2D& geometry,
                                  const VolumeGeometry& volume_geometry, const Array3D& volume,
                                  Array3D& projections, int threads);
// volume = A^T projections, exactly (up to float rounding).
absl::Status CpuParallel2DBack(const ParallelGeometry2D& geometry,
                               const VolumeGeometry& volume_geometry, const Array3D& projections,
                               Array3D& volume, int threads);

}  // namespace tomo::core
