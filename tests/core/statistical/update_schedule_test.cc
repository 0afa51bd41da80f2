// Tests of UpdateSchedule (core/statistical/update_schedule.cc): every voxel is updated
// once per iteration; every step, paired columns included, has zero correlation in every
// view, checked by brute force on the voxels' footprints (each pixel of every voxel's
// footprint stamped with its step: a pixel stamped twice within a step is a correlation);
// most columns find a partner. Run for every columns_per_step, the product's default among
// them, on a small anisotropic cone and on a reduced case of the literature's geometry
// (its distances, pixels, voxels and 391 views; fewer of each).
#include "core/statistical/update_schedule.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "core/geometry/geometry_builders.h"
#include "core/statistical/icd_options.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core::statistical {
namespace {

struct Counts {
  int64_t steps = 0, paired_columns = 0, total_groups = 0;
  // Sets of m columns that each have m groups: their steps must hold equally many voxels.
  int64_t even_sets = 0;
};

// Checks every step of the schedule for columns_per_step on projector and returns its counts.
Counts CheckSchedule(const SeparableFootprintProjector& sf, const std::vector<int32_t>& order,
                     int columns_per_step) {
  const Size3 n = sf.volume().size();
  const ZVoxelGroups groups = ZVoxelGroups::Find(sf, GroupingMode::kMultiVoxel);
  const UpdateSchedule schedule = UpdateSchedule::Make(sf, groups, order, columns_per_step);
  // stamp[(view, row, column)]: 1 + the last step whose voxel touched the pixel; owner: which
  // voxel of that step (index into the step's voxels).
  const int64_t rows = sf.rows(), columns = sf.columns();
  std::vector<int64_t> stamp(static_cast<size_t>(sf.num_views() * rows * columns), 0);
  std::vector<int64_t> owner(stamp.size(), -1);
  std::vector<int> updates(static_cast<size_t>(n.x * n.y * n.z), 0);
  for (int64_t step = 0; step < schedule.num_steps(); ++step) {
    int64_t voxels = 0;
    int64_t step_columns = 0;
    for (const ScheduledGroup* g = schedule.StepBegin(step); g != schedule.StepEnd(step); ++g) {
      ++step_columns;
      for (int64_t iz = g->first_slice, k = 0; k < g->size; iz += g->stride, ++k) {
        EXPECT_LT(iz, n.z);
        ++updates[static_cast<size_t>(g->column * n.z + iz)];
        for (const FootprintEntry& e : sf.VoxelFootprint(g->column % n.x, g->column / n.x, iz)) {
          const size_t pixel = static_cast<size_t>((e.view * rows + e.row) * columns + e.column);
          if (stamp[pixel] == step + 1) {
            ADD_FAILURE() << "step " << step << ": voxel (column " << g->column << ", slice "
                          << iz << ") shares pixel (view " << e.view << ", row " << e.row
                          << ", column " << e.column << ") with voxel " << owner[pixel]
                          << " of the step";
            return {};
          }
          stamp[pixel] = step + 1;
          owner[pixel] = voxels;
        }
        ++voxels;
      }
    }
    EXPECT_LE(step_columns, columns_per_step);
    EXPECT_LE(voxels, schedule.max_step_voxels());
  }
  // Once for every voxel of the ordered columns, never for the others.
  std::vector<int> expected(updates.size(), 0);
  for (int32_t column : order) {
    for (int64_t iz = 0; iz < n.z; ++iz) expected[static_cast<size_t>(column * n.z + iz)] = 1;
  }
  EXPECT_EQ(updates, expected);
  // A set whose m columns have m groups each: the step k takes group (k + j) mod m of its
  // j-th column, so every step holds one group of each index and as many voxels as the next.
  int64_t even_sets = 0;
  for (int64_t set = 0; set < schedule.num_sets(); ++set) {
    const int64_t first = schedule.SetFirstStep(set), end = schedule.SetFirstStep(set + 1);
    const int64_t members = schedule.StepGroupCount(first);
    bool square = end - first == members;
    for (const ScheduledGroup* g = schedule.StepBegin(first); g != schedule.StepEnd(first); ++g) {
      square = square && groups.GroupCount(g->column % n.x, g->column / n.x) == members;
    }
    if (!square || members < 2) continue;
    ++even_sets;
    std::vector<int64_t> voxels;
    for (int64_t step = first; step < end; ++step) {
      int64_t count = 0;
      for (const ScheduledGroup* g = schedule.StepBegin(step); g != schedule.StepEnd(step); ++g) {
        count += g->size;
      }
      voxels.push_back(count);
    }
    EXPECT_EQ(*std::min_element(voxels.begin(), voxels.end()),
              *std::max_element(voxels.begin(), voxels.end()))
        << "set " << set;
  }
  return {schedule.num_steps(), schedule.paired_columns(), schedule.num_groups(), even_sets};
}

// A small cone (29 views, 23 x 61 pixels) over a 24 x 22 x 10 volume of unequal,
// non-unit voxels off the origin.
SeparableFootprintProjector SmallConeProjector() {
  FanConeOptions cone;
  cone.detector = {23, 61, 0.9, 0.7, 0.3, 0};
  cone.source_origin_mm = 70;
  cone.origin_detector_mm = 50;
  cone.angles_rad = UniformAnglesRad(29, 0.05, 2 * M_PI);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const VolumeGeometry volume =
      VolumeGeometry::Create({24, 22, 10}, {0.55, 0.6, 0.45}, {0.2, -0.1, 0}).value();
  return SeparableFootprintProjector::Create(geometry, volume).value();
}

std::vector<int32_t> ShuffledColumns(int64_t count, std::mt19937_64& random) {
  std::vector<int32_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), random);
  return order;
}

TEST(UpdateScheduleTest, StepsCoverEveryVoxelOnceWithZeroCorrelation) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const SeparableFootprintProjector sf = SmallConeProjector();
  const std::vector<int32_t> order = ShuffledColumns(24 * 22, random);
  for (int columns_per_step : {1, 2, IcdOptions::kDefaultColumnsPerStep, 4}) {
    SCOPED_TRACE(columns_per_step);
    const Counts counts = CheckSchedule(sf, order, columns_per_step);
    std::printf("[ measure ] columns per step %d: %lld steps, %lld of %d columns paired\n",
                columns_per_step, static_cast<long long>(counts.steps),
                static_cast<long long>(counts.paired_columns), 24 * 22);
    if (columns_per_step == 1) {
      EXPECT_EQ(counts.paired_columns, 0);
      EXPECT_EQ(counts.steps, counts.total_groups);
    } else if (columns_per_step == 2) {
      // Measured: 280-298 of 528 columns paired, 1137-1164 steps for 1584 groups (a small
      // volume has few far-apart partners).
      EXPECT_GT(counts.paired_columns, 528 * 2 / 5);
      EXPECT_LT(counts.steps, counts.total_groups * 17 / 20);
    }
  }
}

// IterationStepOrder: every step once per iteration, each set's steps together and in
// order (a column's groups in turn), the same order for the same (seed, iteration), a new
// order for the next iteration and for another seed.
TEST(UpdateScheduleTest, EachIterationVisitsTheSetsInANewOrder) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const SeparableFootprintProjector sf = SmallConeProjector();
  const ZVoxelGroups groups = ZVoxelGroups::Find(sf, GroupingMode::kMultiVoxel);
  const UpdateSchedule schedule =
      UpdateSchedule::Make(sf, groups, ShuffledColumns(24 * 22, random), 3);
  ASSERT_GT(schedule.num_sets(), 1);
  ASSERT_EQ(schedule.SetFirstStep(schedule.num_sets()), schedule.num_steps());
  const uint64_t order_seed = random();
  std::vector<int64_t> set_of(static_cast<size_t>(schedule.num_steps()));
  for (int64_t set = 0; set < schedule.num_sets(); ++set) {
    for (int64_t s = schedule.SetFirstStep(set); s < schedule.SetFirstStep(set + 1); ++s) {
      set_of[static_cast<size_t>(s)] = set;
    }
  }
  std::vector<std::vector<int64_t>> orders;
  for (int64_t iteration = 1; iteration <= 3; ++iteration) {
    const std::vector<int64_t> order = schedule.IterationStepOrder(order_seed, iteration);
    EXPECT_EQ(order, schedule.IterationStepOrder(order_seed, iteration));
    ASSERT_EQ(static_cast<int64_t>(order.size()), schedule.num_steps());
    std::vector<int> seen(order.size(), 0);
    for (size_t i = 0; i < order.size(); ++i) {
      ++seen[static_cast<size_t>(order[i])];
      const int64_t set = set_of[static_cast<size_t>(order[i])];
      if (i > 0 && set == set_of[static_cast<size_t>(order[i - 1])]) {
        EXPECT_EQ(order[i], order[i - 1] + 1);  // a set's steps in order
      } else {
        EXPECT_EQ(order[i], schedule.SetFirstStep(set));
      }
    }
    for (int s : seen) ASSERT_EQ(s, 1);
    orders.push_back(order);
  }
  EXPECT_NE(orders[0], orders[1]);
  EXPECT_NE(orders[1], orders[2]);
  EXPECT_NE(orders[0], schedule.IterationStepOrder(order_seed + 1, 1));
}

// The literature's circular cone (source-detector 1147.7 mm, source-axis 647.7 mm, 391 views
// over 360 degrees, pixels 0.384 x 0.755 mm, voxels 0.415 x 0.415 x 0.3 mm) on a 20 x 330
// detector and a 161 x 158 x 10 volume (66 mm wide: partners must be tens of mm apart; 10
// slices, so that a column's groups differ in size), the
// product's ICD default columns per step: the steps of several columns keep zero correlation
// at the real magnification and angular sampling, where the partner search's footprint
// ranges are tight (a column about 3 pixels wide). The order holds 2500 random columns (a
// schedule of part of the volume), which keeps the brute-force check to seconds.
TEST(UpdateScheduleTest, LiteratureGeometryStepsHaveZeroCorrelation) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  FanConeOptions cone;
  cone.detector = {20, 330, 0.755, 0.384, 0.1, 0};
  cone.source_origin_mm = 647.7;
  cone.origin_detector_mm = 1147.7 - 647.7;
  cone.angles_rad = UniformAnglesRad(391, 0.0, 2 * M_PI);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const VolumeGeometry volume =
      VolumeGeometry::Create({161, 158, 10}, {0.415, 0.415, 0.3}, {0.3, -0.2, 0.1}).value();
  const auto sf = SeparableFootprintProjector::Create(geometry, volume).value();
  std::vector<int32_t> order = ShuffledColumns(161 * 158, random);
  order.resize(2500);
  for (int columns_per_step : {IcdOptions::kDefaultColumnsPerStep, 4}) {
    SCOPED_TRACE(columns_per_step);
    const Counts counts = CheckSchedule(sf, order, columns_per_step);
    std::printf("[ measure ] literature geometry, columns per step %d: %lld steps for %lld "
                "groups, %lld of %d columns paired, %lld sets of even steps\n",
                columns_per_step, static_cast<long long>(counts.steps),
                static_cast<long long>(counts.total_groups),
                static_cast<long long>(counts.paired_columns), 2500,
                static_cast<long long>(counts.even_sets));
    EXPECT_GT(counts.paired_columns, 0);
    EXPECT_LT(counts.steps, counts.total_groups);
    EXPECT_GT(counts.even_sets, 0);
  }
}

}  // namespace
}  // namespace tomo::core::statistical
