// UpdateSchedule: the order of one ICD iteration as a list of steps, each a set of voxel
// groups (ZVoxelGroups) updated together: their theta1, theta2 from the same residual, then
// their voxels, then their changes projected into the residual. All voxels of a step have
// zero correlation (no detector pixel in common in any view), so a step equals updating its
// voxels one after the other, and its forward update needs no atomics.
//
// columns_per_step = 1: a step is one group of one column, columns in the given order (the
// multi-voxel update as the literature defines it; with GroupingMode::kSingleVoxel, one
// voxel). columns_per_step = m in [2, kMaxColumnsPerStep]: each column not yet taken
// gathers, from the next kPartnerSearch free columns later in the order, up to m - 1
// partners whose transaxial footprints, widened by 0.01 column (a margin against float32
// rounding of the device's footprint edges), share no detector column with its own or each
// other's in any view (then no voxel of one correlates with any voxel of another, whatever
// their slices) and that are not prior neighbours; step k of the set holds group
// (k + j) mod G of its j-th column (G: the set's most groups), which evens the steps' sizes.
// Far-apart columns project to the same detector columns only in the few views whose rays
// pass through both, which the angular sampling often misses (on the 391-view literature
// case about one random pair in nine is disjoint in every view; with m = 2 all but 28 of the
// 262,144 columns find a partner and the steps of an iteration halve, with m = 3 they fall
// to a third (262,875 steps for 786,432 groups), with m = 4 to 230,967, the search then
// taking about 60 s of one core against 4 s for m = 2).
//
// The search holds the detector column range of every (column, view): 4 bytes each (410 MB
// for 512^2 columns and 391 views), freed when Make returns.
//
//   UpdateSchedule schedule = UpdateSchedule::Make(sf, groups, column_order, 2);
//   for (int64_t i = 0; i < schedule.num_steps(); ++i) for (const ScheduledGroup& g : schedule.Step(i)) ...
#pragma once

#include <cstdint>
#include <vector>

#include "core/statistical/separable_footprint.h"
#include "core/statistical/z_voxel_groups.h"

namespace tomo::core::statistical {

// Slices first_slice, first_slice + stride, ... (size of them) of column iy nx + ix.
struct ScheduledGroup {
  int32_t column = 0;
  int32_t first_slice = 0;
  int32_t stride = 1;
  int32_t size = 0;
};

class UpdateSchedule {
 public:
  static constexpr int kMaxColumnsPerStep = 4;
  static constexpr int kPartnerSearch = 2048;

  // columns_per_step in [1, kMaxColumnsPerStep] (clamped). The search runs on ParallelFor
  // threads over contiguous parts of the order (partners are searched within a part).
  static UpdateSchedule Make(const SeparableFootprintProjector& projector,
                             const ZVoxelGroups& groups, const std::vector<int32_t>& column_order,
                             int columns_per_step);

  int64_t num_steps() const { return static_cast<int64_t>(step_offsets_.size()) - 1; }
  int64_t num_groups() const { return static_cast<int64_t>(groups_.size()); }
  // Groups of step i.
  const ScheduledGroup* StepBegin(int64_t i) const { return groups_.data() + step_offsets_[i]; }
  const ScheduledGroup* StepEnd(int64_t i) const { return groups_.data() + step_offsets_[i + 1]; }
  int64_t StepGroupCount(int64_t i) const { return step_offsets_[i + 1] - step_offsets_[i]; }
  // The most voxels of one step.
  int64_t max_step_voxels() const { return max_step_voxels_; }
  // Columns updated with at least one partner.
  int64_t paired_columns() const { return paired_columns_; }

  // A set is one column with its partners: its steps, [SetFirstStep(i), SetFirstStep(i + 1)),
  // update each of its columns' groups once (step k: group (k + j) mod G of column j).
  int64_t num_sets() const { return static_cast<int64_t>(set_offsets_.size()) - 1; }
  int64_t SetFirstStep(int64_t i) const { return set_offsets_[static_cast<size_t>(i)]; }

  // The steps of iteration `iteration` (from 1) in the order it visits them: the sets in a
  // permutation drawn from (seed, iteration), a new one every iteration, each set's steps in
  // order. A new order every iteration matters: with one order for all iterations ICD left
  // errors constant along z in each column (z-stripes) that further iterations barely
  // removed, and its cost fell more slowly (bench/NOTES.md, icd-noise-study).
  std::vector<int64_t> IterationStepOrder(uint64_t seed, int64_t iteration) const;

 private:
  std::vector<ScheduledGroup> groups_;
  std::vector<int64_t> step_offsets_{0};
  std::vector<int64_t> set_offsets_{0};
  int64_t max_step_voxels_ = 0;
  int64_t paired_columns_ = 0;
};

}  // namespace tomo::core::statistical
