// What the iterative methods (sirt.h, block_iterative.h, cgls.h) share besides their
// options: the geometry they run on, the split of the views into blocks, the memory check
// made before anything is allocated, and the per-iteration bookkeeping (progress events,
// the observer, the stopping rule). Host code over ResidentOperators only.
//
//   TOMO_ASSIGN_OR_RETURN(auto blocks, PartitionViews(views, 10, ViewOrder::kInterleaved));
//   IterationTracker tracker("sirt", options, context, b_norm2);
//   TOMO_ASSIGN_OR_RETURN(bool stop, tracker.Finish(k, residual_norm2, ops, x));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/algorithms/iterative_options.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/geometry/geometry.h"
#include "core/geometry/geometry_subset.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/resident_operators.h"

namespace tomo::core {

// Row and column sums at or below these count as zero (their weight is 0): a ray that
// crosses less than a thousandth of a voxel, a voxel that no view sees.
// Row sums are in mm of ray; column sums count views (interpolation weights sum to ~1).
constexpr double kRowSumEpsilonVoxels = 1e-3;
constexpr float kColumnSumEpsilon = 1e-3f;

// The views of each block, in the order the blocks are visited. blocks in [1, views]
// (INVALID_ARGUMENT naming "blocks" otherwise); block sizes differ by at most one (the
// first views % blocks blocks have one more). kSequential: consecutive views, blocks in
// order. kInterleaved: block k holds views k, k + blocks, k + 2 blocks, ..., and the blocks
// are visited in a spread order, k_i = i s mod blocks with s the integer nearest to
// 0.382 blocks (1 - 1/golden ratio) that is coprime with blocks, so that consecutive
// updates come from far-apart directions (for SART, one view per block, the difference
// between a sweep along the arc and a well-mixed one is large on noisy data).
// kGoldenRatio and kRandom: the views in the sequence ViewSequence gives, cut into
// consecutive runs (the first views % blocks runs one view longer), visited in turn; for
// SART (one view per block) the sequence is the visiting order.
absl::StatusOr<std::vector<std::vector<int64_t>>> PartitionViews(int64_t views, int64_t blocks,
                                                                 ViewOrder order);

// The seed of kRandom's shuffle: fixed, so that a job's result does not depend on the run.
constexpr uint64_t kRandomViewOrderSeed = 20261128;

// Every view index in [0, views) exactly once, in the order `order` visits them one at a
// time. kSequential: 0, 1, 2, ...; kInterleaved: i s mod views (the stride above);
// kGoldenRatio: visit i goes to the unvisited view nearest (cyclically, ties to the lower
// index) to frac(i / phi) x views, phi the golden ratio: view indices stand for angles
// spread evenly over the scan's range, so each view is far from the recent ones and the
// visited set stays nearly uniform at every moment (Kohler's golden-section access
// scheme); kRandom: a Fisher-Yates shuffle driven by a 64-bit Mersenne Twister seeded
// with kRandomViewOrderSeed (the same sequence on every platform). views >= 1.
std::vector<int64_t> ViewSequence(int64_t views, ViewOrder order);

// The listed views of projections (views, rows, columns), in that order.
Array3D GatherViews(const Array3D& projections, const std::vector<int64_t>& views);

// The smallest non-zero of context.memory_budget_bytes and ops.free_bytes(); 0: no limit.
uint64_t EffectiveBudget(const RunContext& context, const ResidentOperators& ops);

// The checks every iterative method makes before it allocates anything: its options
// (ValidateIterativeOptions), the geometry (a RadonGeometry: ValidateRadonGeometry), the
// projections' dims against it, and a vector geometry against the volume (no source inside
// it). INVALID_ARGUMENT naming the field.
absl::Status CheckIterativeInputs(const Geometry& geometry, const VolumeGeometry& volume,
                                  const Array3D& projections, const IterativeOptions& options,
                                  bool constrained_method);

// The guards of the SIRT weights, in the units of the geometry's kind and the projector
// model: row (ray or plane) sums and column (voxel) sums at or below them count as zero. A
// VectorGeometry: a ray crossing less than kRowSumEpsilonVoxels of the smallest voxel side
// (mm), a voxel seen by less than kColumnSumEpsilon of a view (a view adding 1 for the
// plain voxel-driven back projections, about V / A_pixel for kJoseph and the exact 2D pair,
// matched_back_projection.h). A RadonGeometry (projector kRadonPlaneIntegral, where one
// voxel adds at most V / dt to a sample and to its own column sum per direction): those
// fractions of V / dt.
struct WeightGuards {
  float row = 0;
  float column = 0;
};
WeightGuards WeightGuardsFor(const Geometry& geometry, const VolumeGeometry& volume,
                             ProjectorModel model);

// The budget a run must fit: the smallest non-zero of context.memory_budget_bytes and the
// device's free memory (0: no limit). RESOURCE_EXHAUSTED naming the method, what it needs
// (`what`, e.g. "3 volumes + 3 projection sets") and the budget when bytes exceed it.
absl::Status CheckFitsBudget(const std::string& method, uint64_t bytes, const std::string& what,
                             const RunContext& context, const ResidentOperators& ops);

// x = options.initial_volume or zeros, then clamped to [lower, upper] when bounded.
absl::Status LoadInitialVolume(const IterativeOptions& options, bool constrained,
                               ResidentOperators& ops, ResidentArray& x);
// Clamp x to the options' box when one of its bounds is finite.
absl::Status ApplyBox(const IterativeOptions& options, ResidentOperators& ops, ResidentArray& x);

// The SIRT weights of one projector. row_weights = 1 / (A 1), guarded by guards.row,
// computed with volume_scratch as the ones. column_sums = A^T 1 (projection_scratch as the
// ones), kept as sums: the update divides by them (ResidentOperators::AddScaledQuotient,
// guarded by guards.column). Scratch contents are overwritten.
absl::Status MakeRowWeights(ResidentOperators& ops, ResidentProjector& projector,
                            const WeightGuards& guards, ResidentArray& volume_scratch,
                            ResidentArray& row_weights);
absl::Status MakeColumnSums(ResidentOperators& ops, ResidentProjector& projector,
                            ResidentArray& projection_scratch, ResidentArray& column_sums);
// x = P_C(x + lambda back / column_sums): the update, in one pass.
absl::Status UpdateVolume(const IterativeOptions& options, const WeightGuards& guards,
                          ResidentOperators& ops, const ResidentArray& back,
                          const ResidentArray& column_sums, ResidentArray& x);

// Per-iteration bookkeeping of one run.
class IterationTracker {
 public:
  // b_norm2: ||b||^2, the scale of the relative residuals (1 is used when it is 0).
  IterationTracker(std::string method, const IterativeOptions& options,
                   const RunContext& context, double b_norm2, Dims3 volume_dims);

  // After iteration `iteration` (1-based) whose measured squared residual norm is
  // residual_norm2: records it, reports progress ("<method>: relative residual <r>",
  // iteration k of n), calls the observer (downloading x when it asked), and says whether
  // the run should stop (the stopping rule met). Errors: the observer's, a download's.
  absl::StatusOr<bool> Finish(int64_t iteration, double residual_norm2, ResidentOperators& ops,
                              const ResidentArray& x);
  // The cancellation check between blocks and iterations ("<method> / iteration k").
  absl::Status CheckCancelled(int64_t iteration) const;

  std::vector<double>& relative_residuals() { return relative_residuals_; }
  bool stopped_by_residual() const { return stopped_by_residual_; }
  // The run's result: x downloaded, the residuals and the stop reason moved out.
  absl::StatusOr<IterativeResult> TakeResult(ResidentOperators& ops, const ResidentArray& x);

 private:
  std::string method_;
  const IterativeOptions& options_;
  const RunContext& context_;
  double b_norm_;
  Dims3 volume_dims_;
  std::vector<double> relative_residuals_;
  bool stopped_by_residual_ = false;
};

}  // namespace tomo::core
