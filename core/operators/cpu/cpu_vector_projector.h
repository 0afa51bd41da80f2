// The CPU reference projectors for any VectorGeometry (definitions at the top of
// cpu_vector_projector.cc; backend.h and projector_model.h say what they compute). Arrays
// are checked against the geometry (INVALID_ARGUMENT naming the array); `threads` splits the
// work (ParallelFor), results do not depend on it.
#pragma once

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/filter_and_back_project_stream.h"

namespace tomo::core {

// projections (views, rows, columns) = Joseph's A volume (nz, ny, nx).
absl::Status CpuVectorForward(const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
                              const Array3D& volume, Array3D& projections, int threads);
// volume = voxel-driven back projection of projections, weighted as asked
// (INVALID_ARGUMENT: kFdk with a parallel beam).
absl::Status CpuVectorBack(const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
                           const Array3D& projections, BackProjectionWeighting weighting,
                           Array3D& volume, int threads);

}  // namespace tomo::core
