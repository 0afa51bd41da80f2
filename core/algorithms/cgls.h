// CGLS: conjugate gradients on the normal equations A^T A x = A^T b (Hestenes and
// Stiefel's least-squares form), from x0 = the initial volume:
//   r = b - A x0,  s = p = A^T r,  gamma = ||s||^2;  each iteration:
//   q = A p,  alpha = gamma / ||q||^2,  x += alpha p,  r -= alpha q,
//   s = A^T r,  gamma' = ||s||^2,  p = s + (gamma' / gamma) p,  gamma = gamma'.
// A is the Joseph forward projector, A^T the voxel-driven back projector (backend.h: close
// to but not exactly A's transpose, as in every GPU library; the residual still falls
// steadily over the tens of iterations CGLS is run for). No relaxation and no constraints
// (ValidateIterativeOptions refuses them). It stops early, besides the stopping rule, when
// gamma or ||q|| is 0 (an exact solution).
//
// Runs on the backend's ResidentOperators: 3 volumes (x, p, s) and 3 projection sets (b, r,
// q) plus the projector's own (docs/iterative.md); RESOURCE_EXHAUSTED before anything is
// allocated when that exceeds the budget.
//
// Several devices: the entry on ResidentOperators runs the same code on a
// SeveralDevicesResidentOperators (volumes replicated, projections split by views; arrays
// are allocated with their ResidentRole so that it can place them), each device then
// holding every volume and its share of the projections.
//
// Residual reported with iteration k: ||r|| = ||b - A x_k|| after its update (kept by the
// recursion, no extra projection). Progress: one event per iteration. Cancellation: before
// every iteration.
//
//   TOMO_ASSIGN_OR_RETURN(IterativeResult r, Cgls(geometry, volume, b, options, backend, ctx));
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
absl::StatusOr<IterativeResult> Cgls(const Geometry& geometry, const VolumeGeometry& volume,
                                     const Array3D& projections, const IterativeOptions& options,
                                     Backend& backend, const RunContext& context);
absl::StatusOr<IterativeResult> Cgls(const VectorGeometry& geometry, const VolumeGeometry& volume,
                                     const Array3D& projections, const IterativeOptions& options,
                                     Backend& backend, const RunContext& context);
// The same on given ResidentOperators (the backend's entry makes them with
// Backend::MakeResidentOperators): one device's, or SeveralDevicesResidentOperators for a
// run on several devices (iterative_algorithms.h).
absl::StatusOr<IterativeResult> Cgls(const Geometry& geometry, const VolumeGeometry& volume,
                                     const Array3D& projections, const IterativeOptions& options,
                                     ResidentOperators& ops, const RunContext& context);

}  // namespace tomo::core
