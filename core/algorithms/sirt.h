// SIRT, the simultaneous iterative reconstruction technique:
//   x <- P_C(x + lambda C A^T R (b - A x)),  R = diag(1 / (A 1)), C = diag(1 / (A^T 1)),
// with the row and column sums computed once by projecting ones (sums at or below
// iterative_common.h's epsilons give weight 0), A the Joseph forward projector and A^T the
// voxel-driven back projector of backend.h, P_C the box of the options. Every view takes
// part in every update: many cheap, smooth iterations (block_iterative.h trades them for
// fewer, sharper ones).
//
// Runs on the backend's ResidentOperators: the data are uploaded once, and the device
// holds 3 volumes (x, the back projection, C) and 3 projection sets (b, R, the residual),
// plus what the backend's projector keeps (docs/iterative.md); RESOURCE_EXHAUSTED before
// anything is allocated when that exceeds the budget (iterative_common.h).
//
// Several devices: the entry on ResidentOperators runs the same code on a
// SeveralDevicesResidentOperators (volumes replicated, projections split by views; arrays
// are allocated with their ResidentRole so that it can place them), each device then
// holding every volume and its share of the projections.
//
// Residual reported with iteration k: ||b - A x|| of the image iteration k started from
// (computed on the way: no extra projection). Progress: one event per iteration (stage
// "sirt: relative residual r", iteration k of n). Cancellation: checked before every
// iteration.
// Errors: INVALID_ARGUMENT from ValidateIterativeOptions or for projections whose dims are
// not the geometry's; CANCELLED; RESOURCE_EXHAUSTED; the backend's.
//
//   TOMO_ASSIGN_OR_RETURN(IterativeResult r, Sirt(geometry, volume, b, options, backend, ctx));
#pragma once

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

// Any geometry kind whose projector model options.projector takes (projector_model.h:
// kRadonPlaneIntegral for a RadonGeometry); INVALID_ARGUMENT naming the model and the kind
// otherwise.
absl::StatusOr<IterativeResult> Sirt(const Geometry& geometry, const VolumeGeometry& volume,
                                     const Array3D& projections, const IterativeOptions& options,
                                     Backend& backend, const RunContext& context);
absl::StatusOr<IterativeResult> Sirt(const VectorGeometry& geometry, const VolumeGeometry& volume,
                                     const Array3D& projections, const IterativeOptions& options,
                                     Backend& backend, const RunContext& context);
// The same on given ResidentOperators (the backend's entry makes them with
// Backend::MakeResidentOperators): one device's, or SeveralDevicesResidentOperators for a
// run on several devices (iterative_algorithms.h).
absl::StatusOr<IterativeResult> Sirt(const Geometry& geometry, const VolumeGeometry& volume,
                                     const Array3D& projections, const IterativeOptions& options,
                                     ResidentOperators& ops, const RunContext& context);

}  // namespace tomo::core
