#include "core/algorithms/block_iterative.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/algorithms/iterative_common.h"
#include "core/base/status_macros.h"
#include "core/operators/resident_operators.h"

namespace tomo::core {
namespace {

// What the device holds for one block.
struct Block {
  std::unique_ptr<ResidentProjector> projector;
  std::unique_ptr<ResidentArray> b;               // the block's projections
  std::unique_ptr<ResidentArray> row_weights;     // R_k
  std::unique_ptr<ResidentArray> residual;        // scratch of the block's size
  std::unique_ptr<ResidentArray> column_sums;  // A_k^T 1 when kept
};

}  // namespace

absl::StatusOr<IterativeResult> BlockIterative(const VectorGeometry& geometry,
                                               const VolumeGeometry& volume,
                                               const Array3D& projections,
                                               const IterativeOptions& options, int64_t blocks,
                                               ViewOrder order, Backend& backend,
                                               const RunContext& context) {
  return BlockIterative(Geometry(geometry), volume, projections, options, blocks, order,
                        backend, context);
}

absl::StatusOr<IterativeResult> BlockIterative(const Geometry& geometry,
                                               const VolumeGeometry& volume,
                                               const Array3D& projections,
                                               const IterativeOptions& options, int64_t blocks,
                                               ViewOrder order, Backend& backend,
                                               const RunContext& context) {
  TOMO_RETURN_IF_ERROR(CheckIterativeInputs(geometry, volume, projections, options,
                                            /*constrained_method=*/true));
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<ResidentOperators> ops, backend.MakeResidentOperators());
  return BlockIterative(geometry, volume, projections, options, blocks, order, *ops, context);
}

absl::StatusOr<IterativeResult> BlockIterative(const Geometry& geometry,
                                               const VolumeGeometry& volume,
                                               const Array3D& projections,
                                               const IterativeOptions& options, int64_t blocks,
                                               ViewOrder order, ResidentOperators& resident,
                                               const RunContext& context) {
  TOMO_RETURN_IF_ERROR(CheckIterativeInputs(geometry, volume, projections, options,
                                            /*constrained_method=*/true));
  const int64_t views = ProjectionDims(geometry).d0;
  TOMO_ASSIGN_OR_RETURN(const std::vector<std::vector<int64_t>> partition,
                        PartitionViews(views, blocks, order));
  const std::string method = blocks == views ? "sart" : "os-sart";
  ResidentOperators* ops = &resident;
  const uint64_t volume_bytes = static_cast<uint64_t>(volume.voxel_count()) * sizeof(float);
  const uint64_t projection_bytes = static_cast<uint64_t>(projections.size()) * sizeof(float);
  // Column sums per block: up to kMaxKeptColumnWeights blocks always, more while they take
  // at most half of a known budget (the rest for the projectors' own arrays).
  const uint64_t budget = EffectiveBudget(context, *ops);
  const bool keep_column_sums =
      blocks <= kMaxKeptColumnWeights ||
      (budget > 0 && static_cast<uint64_t>(2 + blocks) * volume_bytes + 3 * projection_bytes <=
                         budget / 2);
  const int64_t volumes = 2 + (keep_column_sums ? blocks : 1);
  TOMO_RETURN_IF_ERROR(CheckFitsBudget(
      method, static_cast<uint64_t>(volumes) * volume_bytes + 3 * projection_bytes,
      absl::StrCat(volumes, " volumes + 3 projection sets"), context, *ops));

  const WeightGuards guards = WeightGuardsFor(geometry, volume, options.projector);
  const Dims3 volume_dims = volume.dims();
  TOMO_ASSIGN_OR_RETURN(auto x, ops->Allocate(volume_dims));
  TOMO_ASSIGN_OR_RETURN(auto back, ops->Allocate(volume_dims));
  std::unique_ptr<ResidentArray> visit_column_sums;
  if (!keep_column_sums) {
    TOMO_ASSIGN_OR_RETURN(visit_column_sums, ops->Allocate(volume_dims));
  }
  std::vector<Block> parts(partition.size());
  for (size_t k = 0; k < partition.size(); ++k) {
    TOMO_RETURN_IF_ERROR(context.CheckCancelled(absl::StrCat(method, " / setup")));
    Block& part = parts[k];
    TOMO_ASSIGN_OR_RETURN(const Geometry block_geometry, SubsetGeometry(geometry, partition[k]));
    TOMO_ASSIGN_OR_RETURN(part.projector, ops->MakeProjector(block_geometry, volume, options.projector));
    const Dims3 dims = ProjectionDims(block_geometry);
    TOMO_ASSIGN_OR_RETURN(part.b, ops->Allocate(dims, ResidentRole::kProjections));
    TOMO_ASSIGN_OR_RETURN(part.row_weights, ops->Allocate(dims, ResidentRole::kProjections));
    TOMO_ASSIGN_OR_RETURN(part.residual, ops->Allocate(dims, ResidentRole::kProjections));
    TOMO_RETURN_IF_ERROR(ops->Upload(GatherViews(projections, partition[k]), *part.b));
    TOMO_RETURN_IF_ERROR(ops->AccumulateDot(*part.b, *part.b));
    TOMO_RETURN_IF_ERROR(MakeRowWeights(*ops, *part.projector, guards, *back, *part.row_weights));
    if (keep_column_sums) {
      TOMO_ASSIGN_OR_RETURN(part.column_sums, ops->Allocate(volume_dims));
      TOMO_RETURN_IF_ERROR(
          MakeColumnSums(*ops, *part.projector, *part.residual, *part.column_sums));
    }
  }
  TOMO_ASSIGN_OR_RETURN(const double b_norm2, ops->TakeAccumulatedDot());
  TOMO_RETURN_IF_ERROR(LoadInitialVolume(options, /*constrained=*/true, *ops, *x));

  IterationTracker tracker(method, options, context, b_norm2, volume_dims);
  for (int64_t iteration = 1; iteration <= options.iterations; ++iteration) {
    for (Block& part : parts) {
      TOMO_RETURN_IF_ERROR(tracker.CheckCancelled(iteration));
      ResidentArray* column_sums = part.column_sums.get();
      if (column_sums == nullptr) {
        column_sums = visit_column_sums.get();
        TOMO_RETURN_IF_ERROR(
            MakeColumnSums(*ops, *part.projector, *part.residual, *column_sums));
      }
      // residual = b_k - A_k x
      TOMO_RETURN_IF_ERROR(part.projector->Forward(*x, *part.residual));
      TOMO_RETURN_IF_ERROR(ops->Axpby(1.0f, *part.b, -1.0f, *part.residual));
      TOMO_RETURN_IF_ERROR(ops->AccumulateDot(*part.residual, *part.residual));
      // x = P_C(x + lambda (A_k^T R_k residual) / (A_k^T 1))
      TOMO_RETURN_IF_ERROR(ops->Multiply(*part.row_weights, *part.residual));
      TOMO_RETURN_IF_ERROR(part.projector->Back(*part.residual, *back));
      TOMO_RETURN_IF_ERROR(UpdateVolume(options, guards, *ops, *back, *column_sums, *x));
    }
    TOMO_ASSIGN_OR_RETURN(const double residual_norm2, ops->TakeAccumulatedDot());
    TOMO_ASSIGN_OR_RETURN(const bool stop, tracker.Finish(iteration, residual_norm2, *ops, *x));
    if (stop) break;
  }

  return tracker.TakeResult(*ops, *x);
}

}  // namespace tomo::core
