// The PWLS cost of core/statistical/icd_options.h, f(x) = 1/2 (y - A x)^T W (y - A x) + R(x),
// evaluated from scratch (a forward projection), and the prior R alone on a volume in any
// memory layout. ICD tracks the residual instead; tests compare the two.
//
//   TOMO_ASSIGN_OR_RETURN(PwlsCost f, EvaluatePwlsCost(projector, y, w, x, prior));
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/geometry/volume_geometry.h"
#include "core/statistical/qggmrf_prior.h"
#include "core/statistical/separable_footprint.h"

namespace tomo::core::statistical {

struct PwlsCost {
  double data_term = 0, prior_term = 0;
  double total() const { return data_term + prior_term; }
};

// R(x): every unordered pair of 26-neighbours inside the volume once. Voxel (ix, iy, iz)
// is values[ix * stride_x + iy * stride_y + iz * stride_z].
double QggmrfPriorValue(const QggmrfPrior& prior, const Size3& size, const float* values,
                        int64_t stride_x, int64_t stride_y, int64_t stride_z);

// 1/2 sum w (y - A x)^2 + R(x), volume (z, y, x). INVALID_ARGUMENT on mismatched dims.
absl::StatusOr<PwlsCost> EvaluatePwlsCost(const SeparableFootprintProjector& projector,
                                          const Array3D& line_integrals, const Array3D& weights,
                                          const Array3D& volume, const QggmrfPrior& prior);

}  // namespace tomo::core::statistical
