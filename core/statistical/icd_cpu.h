// ReconstructIcdCpu: PWLS with the q-GGMRF prior by ICD with the multi-voxel update, the
// CPU reference (core/statistical/icd_options.h has the method and the cost). Serial and
// plain: for tests and small volumes; the CUDA runner (core/statistical/cuda/icd_cuda.h)
// follows the same order and arithmetic.
//
// Per column (ix, iy) in the order of the problem: the transaxial footprint in every view
// once; then per group of ZVoxelGroups (options.grouping): theta1 = sum_i w_i a_ij e_i and
// theta2 = sum_i w_i a_ij^2 for all its voxels from the same residual, the update of each
// voxel (icd_update_math.h), and e += a_j (x_new - x_old) for each. The single-voxel update
// is the same code with groups of one voxel.
//
// Progress: one ProgressUpdate per iteration (stage "icd", iteration, fraction, relative
// residual ||y - A x|| / ||y|| and cost f). Cancellation is checked between groups
// (CANCELLED naming the iteration and column).
//
//   IcdOptions options;
//   options.prior = DefaultQggmrfPrior(projector.volume());
//   TOMO_ASSIGN_OR_RETURN(IcdResult result,
//                         ReconstructIcdCpu(projector, y, w, nullptr, options, context));
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/statistical/icd_options.h"
#include "core/statistical/separable_footprint.h"

namespace tomo::core::statistical {

// Called after each iteration with its number (from 1) and the volume (z, y, x), for
// studies of the iterates (bench/icd_noise_study.cc).
using IcdVolumeObserver = std::function<void(int64_t iteration, const Array3D& volume)>;

// line_integrals y and weights w are (view, row, column) as the projector's
// projection_dims(); start_volume (z, y, x) or null for zeros. Errors: PrepareIcdProblem's,
// CANCELLED.
absl::StatusOr<IcdResult> ReconstructIcdCpu(const SeparableFootprintProjector& projector,
                                            const Array3D& line_integrals,
                                            const Array3D& weights,
                                            const Array3D* start_volume,
                                            const IcdOptions& options,
                                            const RunContext& context,
                                            const IcdVolumeObserver& observe = nullptr);

}  // namespace tomo::core::statistical
