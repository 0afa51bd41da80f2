#include "core/algorithms/cgls.h"

#include <memory>
#include <utility>

#include "core/algorithms/iterative_common.h"
#include "core/base/status_macros.h"
#include "core/operators/resident_operators.h"

namespace tomo::core {

absl::StatusOr<IterativeResult> Cgls(const VectorGeometry& geometry, const VolumeGeometry& volume,
                                     const Array3D& projections, const IterativeOptions& options,
                                     Backend& backend, const RunContext& context) {
  return Cgls(Geometry(geometry), volume, projections, options, backend, context);
}

absl::StatusOr<IterativeResult> Cgls(const Geometry& geometry, const VolumeGeometry& volume,
                                     const Array3D& projections, const IterativeOptions& options,
                                     Backend& backend, const RunContext& context) {
  TOMO_RETURN_IF_ERROR(CheckIterativeInputs(geometry, volume, projections, options,
                                            /*constrained_method=*/false));
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<ResidentOperators> ops, backend.MakeResidentOperators());
  return Cgls(geometry, volume, projections, options, *ops, context);
}

absl::StatusOr<IterativeResult> Cgls(const Geometry& geometry, const VolumeGeometry& volume,
                                     const Array3D& projections, const IterativeOptions& options,
                                     ResidentOperators& resident, const RunContext& context) {
  TOMO_RETURN_IF_ERROR(CheckIterativeInputs(geometry, volume, projections, options,
                                            /*constrained_method=*/false));
  ResidentOperators* ops = &resident;
  const uint64_t volume_bytes = static_cast<uint64_t>(volume.voxel_count()) * sizeof(float);
  const uint64_t projection_bytes = static_cast<uint64_t>(projections.size()) * sizeof(float);
  TOMO_RETURN_IF_ERROR(CheckFitsBudget("cgls", 3 * volume_bytes + 3 * projection_bytes,
                                       "3 volumes + 3 projection sets", context, *ops));

  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<ResidentProjector> projector,
                        ops->MakeProjector(geometry, volume, options.projector));
  const Dims3 volume_dims = volume.dims();
  const Dims3 projection_dims = projections.dims();
  TOMO_ASSIGN_OR_RETURN(auto x, ops->Allocate(volume_dims));
  TOMO_ASSIGN_OR_RETURN(auto p, ops->Allocate(volume_dims));
  TOMO_ASSIGN_OR_RETURN(auto s, ops->Allocate(volume_dims));
  TOMO_ASSIGN_OR_RETURN(auto b, ops->Allocate(projection_dims, ResidentRole::kProjections));
  TOMO_ASSIGN_OR_RETURN(auto r, ops->Allocate(projection_dims, ResidentRole::kProjections));
  TOMO_ASSIGN_OR_RETURN(auto q, ops->Allocate(projection_dims, ResidentRole::kProjections));

  TOMO_RETURN_IF_ERROR(ops->Upload(projections, *b));
  TOMO_ASSIGN_OR_RETURN(const double b_norm2, ops->Dot(*b, *b));
  TOMO_RETURN_IF_ERROR(LoadInitialVolume(options, /*constrained=*/false, *ops, *x));
  // r = b - A x0; p = s = A^T r.
  TOMO_RETURN_IF_ERROR(projector->Forward(*x, *r));
  TOMO_RETURN_IF_ERROR(ops->Axpby(1.0f, *b, -1.0f, *r));
  TOMO_RETURN_IF_ERROR(projector->Back(*r, *s));
  TOMO_RETURN_IF_ERROR(ops->Fill(0.0f, *p));
  TOMO_RETURN_IF_ERROR(ops->Axpby(1.0f, *s, 0.0f, *p));
  TOMO_ASSIGN_OR_RETURN(double gamma, ops->Dot(*s, *s));

  IterationTracker tracker("cgls", options, context, b_norm2, volume_dims);
  for (int64_t k = 1; k <= options.iterations; ++k) {
    TOMO_RETURN_IF_ERROR(tracker.CheckCancelled(k));
    if (!(gamma > 0)) break;  // A^T r = 0: x solves the normal equations
    TOMO_RETURN_IF_ERROR(projector->Forward(*p, *q));
    TOMO_ASSIGN_OR_RETURN(const double q_norm2, ops->Dot(*q, *q));
    if (!(q_norm2 > 0)) break;
    const double alpha = gamma / q_norm2;
    TOMO_RETURN_IF_ERROR(ops->Axpby(static_cast<float>(alpha), *p, 1.0f, *x));
    TOMO_RETURN_IF_ERROR(ops->Axpby(static_cast<float>(-alpha), *q, 1.0f, *r));
    TOMO_ASSIGN_OR_RETURN(const double residual_norm2, ops->Dot(*r, *r));
    TOMO_RETURN_IF_ERROR(projector->Back(*r, *s));
    TOMO_ASSIGN_OR_RETURN(const double gamma_next, ops->Dot(*s, *s));
    TOMO_RETURN_IF_ERROR(ops->Axpby(1.0f, *s, static_cast<float>(gamma_next / gamma), *p));
    gamma = gamma_next;
    TOMO_ASSIGN_OR_RETURN(const bool stop, tracker.Finish(k, residual_norm2, *ops, *x));
    if (stop) break;
  }

  return tracker.TakeResult(*ops, *x);
}

}  // namespace tomo::core
