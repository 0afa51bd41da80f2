#include "core/algorithms/sirt.h"

#include <memory>
#include <utility>

#include "core/algorithms/iterative_common.h"
#include "core/base/status_macros.h"
#include "core/operators/resident_operators.h"

namespace tomo::core {

absl::StatusOr<IterativeResult> Sirt(const VectorGeometry& geometry, const VolumeGeometry& volume,
                                     const Array3D& projections, const IterativeOptions& options,
                                     Backend& backend, const RunContext& context) {
  return Sirt(Geometry(geometry), volume, projections, options, backend, context);
}

absl::StatusOr<IterativeResult> Sirt(const Geometry& geometry, const VolumeGeometry& volume,
                                     const Array3D& projections, const IterativeOptions& options,
                                     Backend& backend, const RunContext& context) {
  TOMO_RETURN_IF_ERROR(CheckIterativeInputs(geometry, volume, projections, options,
                                            /*constrained_method=*/true));
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<ResidentOperators> ops, backend.MakeResidentOperators());
  return Sirt(geometry, volume, projections, options, *ops, context);
}

absl::StatusOr<IterativeResult> Sirt(const Geometry& geometry, const VolumeGeometry& volume,
                                     const Array3D& projections, const IterativeOptions& options,
                                     ResidentOperators& resident, const RunContext& context) {
  TOMO_RETURN_IF_ERROR(CheckIterativeInputs(geometry, volume, projections, options,
                                            /*constrained_method=*/true));
  ResidentOperators* ops = &resident;
  const uint64_t volume_bytes = static_cast<uint64_t>(volume.voxel_count()) * sizeof(float);
  const uint64_t projection_bytes = static_cast<uint64_t>(projections.size()) * sizeof(float);
  TOMO_RETURN_IF_ERROR(CheckFitsBudget("sirt", 3 * volume_bytes + 3 * projection_bytes,
                                       "3 volumes + 3 projection sets", context, *ops));

  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<ResidentProjector> projector,
                        ops->MakeProjector(geometry, volume, options.projector));
  const WeightGuards guards = WeightGuardsFor(geometry, volume, options.projector);
  const Dims3 volume_dims = volume.dims();
  const Dims3 projection_dims = projections.dims();
  TOMO_ASSIGN_OR_RETURN(auto x, ops->Allocate(volume_dims));
  TOMO_ASSIGN_OR_RETURN(auto back, ops->Allocate(volume_dims));
  TOMO_ASSIGN_OR_RETURN(auto column_sums, ops->Allocate(volume_dims));
  TOMO_ASSIGN_OR_RETURN(auto b, ops->Allocate(projection_dims, ResidentRole::kProjections));
  TOMO_ASSIGN_OR_RETURN(auto row_weights,
                        ops->Allocate(projection_dims, ResidentRole::kProjections));
  TOMO_ASSIGN_OR_RETURN(auto residual, ops->Allocate(projection_dims, ResidentRole::kProjections));

  TOMO_RETURN_IF_ERROR(ops->Upload(projections, *b));
  TOMO_RETURN_IF_ERROR(MakeRowWeights(*ops, *projector, guards, *back, *row_weights));
  TOMO_RETURN_IF_ERROR(MakeColumnSums(*ops, *projector, *residual, *column_sums));
  TOMO_ASSIGN_OR_RETURN(const double b_norm2, ops->Dot(*b, *b));
  TOMO_RETURN_IF_ERROR(LoadInitialVolume(options, /*constrained=*/true, *ops, *x));

  IterationTracker tracker("sirt", options, context, b_norm2, volume_dims);
  for (int64_t k = 1; k <= options.iterations; ++k) {
    TOMO_RETURN_IF_ERROR(tracker.CheckCancelled(k));
    // residual = b - A x
    TOMO_RETURN_IF_ERROR(projector->Forward(*x, *residual));
    TOMO_RETURN_IF_ERROR(ops->Axpby(1.0f, *b, -1.0f, *residual));
    TOMO_ASSIGN_OR_RETURN(const double residual_norm2, ops->Dot(*residual, *residual));
    // x = P_C(x + lambda (A^T R residual) / (A^T 1))
    TOMO_RETURN_IF_ERROR(ops->Multiply(*row_weights, *residual));
    TOMO_RETURN_IF_ERROR(projector->Back(*residual, *back));
    TOMO_RETURN_IF_ERROR(UpdateVolume(options, guards, *ops, *back, *column_sums, *x));
    TOMO_ASSIGN_OR_RETURN(const bool stop, tracker.Finish(k, residual_norm2, *ops, *x));
    if (stop) break;
  }

  return tracker.TakeResult(*ops, *x);
}

}  // namespace tomo::core
