// The block-iterative method (OS-SART; Censor and Elfving's block-iterative SIRT): the views
// are dealt into B blocks (iterative_common.h's PartitionViews: sizes differing by at most
// one view, in any ViewOrder), and one iteration visits the blocks in turn, each
// making a SIRT update with its own rows only:
//   for k = 1 .. B:  x <- P_C(x + lambda C_k A_k^T R_k (b_k - A_k x)),
//   R_k = diag(1 / (A_k 1)),  C_k = diag(1 / (A_k^T 1)).
// B = 1 is SIRT (sirt.h, whose result it reproduces); B = views is SART (one view per
// update). More blocks: more updates per sweep over the data, so faster semi-convergence
// per iteration, less parallel work per update.
//
// Runs on the backend's ResidentOperators: one projector per block (its per-view
// parameters uploaded once), the block's projections b_k, row weights R_k and residual
// (3 projection sets in all), the volume x and one back projection; the column sums
// A_k^T 1 are kept per block (B volumes) when B <= kMaxKeptColumnWeights or when all that
// takes at most half of a known budget (the job's, or the device's free memory), else
// recomputed at each visit by back projecting ones (one volume, one extra back projection
// per block). The residual norms are summed on the device (no wait per block).
// RESOURCE_EXHAUSTED before anything is allocated when that exceeds the budget.
//
// Several devices: the entry on ResidentOperators runs the same code on a
// SeveralDevicesResidentOperators (volumes replicated, projections split by views; arrays
// are allocated with their ResidentRole so that it can place them), each device then
// holding every volume and its share of the projections.
//
// Residual reported with iteration k: the root of the sum over blocks of ||b_k - A_k x||^2,
// each measured as the sweep met the block (for B = 1, SIRT's). Progress: one event per
// iteration. Cancellation: checked before every block.
// Errors: INVALID_ARGUMENT from ValidateIterativeOptions, for blocks outside [1, views]
// ("blocks") or projections whose dims are not the geometry's; CANCELLED;
// RESOURCE_EXHAUSTED; the backend's.
//
//   TOMO_ASSIGN_OR_RETURN(IterativeResult r, BlockIterative(geometry, volume, b, options,
//                                                           10, ViewOrder::kInterleaved,
//                                                           backend, context));
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/algorithms/iterative_options.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/geometry/geometry.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/backend.h"
#include "core/operators/resident_operators.h"

namespace tomo::core {

// Column weights are kept per block up to this many blocks (each a volume).
constexpr int64_t kMaxKeptColumnWeights = 8;

// Any geometry kind whose projector model options.projector takes (a RadonGeometry's views
// are its directions).
absl::StatusOr<IterativeResult> BlockIterative(const Geometry& geometry,
                                               const VolumeGeometry& volume,
                                               const Array3D& projections,
                                               const IterativeOptions& options, int64_t blocks,
                                               ViewOrder order, Backend& backend,
                                               const RunContext& context);
absl::StatusOr<IterativeResult> BlockIterative(const VectorGeometry& geometry,
                                               const VolumeGeometry& volume,
                                               const Array3D& projections,
                                               const IterativeOptions& options, int64_t blocks,
                                               ViewOrder order, Backend& backend,
                                               const RunContext& context);
// The same on given ResidentOperators (one device's, or SeveralDevicesResidentOperators:
// each block's views are then split among the devices).
absl::StatusOr<IterativeResult> BlockIterative(const Geometry& geometry,
                                               const VolumeGeometry& volume,
                                               const Array3D& projections,
                                               const IterativeOptions& options, int64_t blocks,
                                               ViewOrder order, ResidentOperators& ops,
                                               const RunContext& context);

}  // namespace tomo::core
