// RadonOperators: what filtered back projection of the 3D Radon transform needs from a
// backend (core/algorithms/radon_fbp.h): row filtering and the scaled plane-integral back
// projection, on host arrays. Bound by CpuRadonOperators (cpu/cpu_radon_operators.h) and
// CudaRadonOperators (cuda/cuda_radon_operators.h); errors are absl::Status.
//
//   CpuRadonOperators operators(/*threads=*/0);
//   TOMO_RETURN_IF_ERROR(operators.FilterRows(filter, projections));
//   TOMO_RETURN_IF_ERROR(operators.BackProject(geometry, volume_geometry, projections,
//                                              weights, volume));
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/filters/ramp_filter.h"
#include "core/geometry/radon_geometry.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

class RadonOperators {
 public:
  virtual ~RadonOperators() = default;
  // Filters every row of `projections` (directions, 1, samples) in place, as
  // Backend::FilterRows.
  virtual absl::Status FilterRows(const RampFilter& filter, Array3D& projections) = 0;
  // volume = sum_i direction_scales[i] * (direction i's samples interpolated linearly at
  // x . n_i), every voxel written: B of cpu/cpu_radon_projector.h.
  virtual absl::Status BackProject(const RadonGeometry& geometry,
                                   const VolumeGeometry& volume_geometry,
                                   const Array3D& projections,
                                   const std::vector<double>& direction_scales,
                                   Array3D& volume) = 0;
};

}  // namespace tomo::core
