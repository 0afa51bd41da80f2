// IcdOptions: what a PWLS reconstruction by iterative coordinate descent (ICD) takes
// besides its data, the per-iteration record it produces, and the memory a run needs, so
// that a job can be refused before it starts.
//
// The cost minimised (the factor 1/2 on the data term keeps sigma's meaning of the usual
// q-GGMRF literature):
//   f(x) = 1/2 (y - A x)^T W (y - A x) + R(x),  x >= 0,
// A the separable-footprint projector, W the statistical weights
// (core/statistical/statistical_weights.h), R the q-GGMRF prior (qggmrf_prior.h).
//
// One iteration visits every (x, y) column of the volume once, in a random order drawn
// from column_order_seed and the iteration's number (a new order every iteration: with
// one order for all, ICD kept errors constant along z in each column, UpdateSchedule::
// IterationStepOrder), and within a column every group of ZVoxelGroups in turn; a group's
// voxels are updated together from the same residual. With columns_per_step > 1 a column
// is visited together with partner columns whose footprints never meet its own
// (UpdateSchedule, update_schedule.h; the partners are found once, from the seed's order),
// their groups in the same steps. Each voxel update is the exact minimiser over r >= 0 of
// the data term (a quadratic in r: theta1 (r - x) + theta2 (r - x)^2 / 2) plus the
// symmetric-bound quadratic
// surrogate of the prior at the current values (qggmrf_math.h): a closed form, clipped at
// 0. It never raises f (for p = 2; see QggmrfCoefficients for p < 2), so f decreases
// monotonically over the iterations.
//
//   IcdOptions options;
//   options.iterations = 4;
//   options.prior = DefaultQggmrfPrior(volume);
//   TOMO_RETURN_IF_ERROR(ValidateIcdOptions(options));
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/geometry/volume_geometry.h"
#include "core/statistical/qggmrf_prior.h"
#include "core/statistical/z_voxel_groups.h"

namespace tomo::core::statistical {

struct IcdOptions {
  static constexpr int64_t kMaxIterations = 1000;
  int64_t iterations = 4;
  QggmrfPrior prior;  // its neighbour weights: DefaultQggmrfPrior(volume)
  GroupingMode grouping = GroupingMode::kMultiVoxel;
  // [1, UpdateSchedule::kMaxColumnsPerStep = 4]: columns whose groups share a step. The
  // default, 3, is the fastest measured on CUDA (a 512^2 x Nz iteration 2.0-2.8x faster
  // than 1, bench/NOTES.md) and reaches the same cost per iteration (the same updates in
  // another order); 4 gains little over 3 and its partner search takes about 4x longer.
  // 1 is the multi-voxel update as the literature defines it (one group per step).
  static constexpr int kDefaultColumnsPerStep = 3;
  int columns_per_step = kDefaultColumnsPerStep;
  uint64_t column_order_seed = 1;
};

// INVALID_ARGUMENT naming the field: iterations outside [1, kMaxIterations],
// columns_per_step outside [1, 4], or the prior (ValidateQggmrfPrior).
absl::Status ValidateIcdOptions(const IcdOptions& options);

// The cost after one iteration and its parts.
struct IcdIterationRecord {
  int64_t iteration = 0;
  double cost = 0, data_term = 0, prior_term = 0;
  double relative_residual = 0;  // ||y - A x|| / ||y||
  double seconds = 0;            // wall time of the iteration's updates
};

struct IcdResult {
  Array3D volume;  // (z, y, x)
  std::vector<IcdIterationRecord> iterations;
  int64_t total_groups = 0;      // group updates per iteration
  int64_t steps = 0;             // steps per iteration (groups updated together)
  int64_t paired_columns = 0;    // columns sharing their steps with a partner
  int64_t max_group_size = 0;
  double mean_group_size = 0;
  double initial_cost = 0;
  // Wall time from the call to the first iteration: checks, layouts, groups, schedule and
  // (CUDA) upload and the start's projection.
  double setup_seconds = 0;
};

// Bytes a run holds at once. Device: the volume (z fastest), the residual and the weights
// (view, column, row), the per-view parameters, the step scratch (theta partial sums of the
// largest step, all views) and the task list, kIcdStepTaskBytes per step: steps_per_iteration
// is at most ZVoxelGroups::Find(projector, grouping).total_groups() (the single-voxel update:
// one per voxel, which makes its task list 16 times the volume). Host, beyond the caller's
// arrays: the z-fastest volume and the transposed residual and weights.
inline constexpr uint64_t kIcdStepTaskBytes = 64;
// The CUDA runner lays the theta partials of up to 2^kIcdMaxViewGroupShift views of a voxel
// side by side (IcdCudaTuning::partial_view_group_shift), the views rounded up to whole
// groups.
inline constexpr int kIcdMaxViewGroupShift = 4;
uint64_t IcdDeviceBytes(const VolumeGeometry& volume, const Dims3& projection_dims,
                        int64_t steps_per_iteration);
// With columns_per_step > 1 the partner search (UpdateSchedule::Make) also holds 4 bytes per
// (x, y) column and view while the schedule is made.
uint64_t IcdHostBytes(const VolumeGeometry& volume, const Dims3& projection_dims,
                      int columns_per_step);

}  // namespace tomo::core::statistical
