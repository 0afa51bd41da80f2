// Tests of UpdateSchedule (core/statistical/update_schedule.cc): every voxel is updated
// once per iteration; every step, paired columns included, has zero correlation in every
// view, checked by brute force on the voxels' footprints; most columns find a partner.
#include "core/statistical/update_schedule.h"

#include <cstdio>
#include <numeric>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "core/geometry/geometry_builders.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core::statistical {
namespace {

TEST(UpdateScheduleTest, StepsCoverEveryVoxelOnceWithZeroCorrelation) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  FanConeOptions cone;
  cone.detector = {23, 61, 0.9, 0.7, 0.3, 0};
  cone.source_origin_mm = 70;
  cone.origin_detector_mm = 50;
  cone.angles_rad = UniformAnglesRad(29, 0.05, 2 * M_PI);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const VolumeGeometry volume =
      VolumeGeometry::Create({24, 22, 10}, {0.55, 0.6, 0.45}, {0.2, -0.1, 0}).value();
  const auto sf = SeparableFootprintProjector::Create(geometry, volume).value();
  const ZVoxelGroups groups = ZVoxelGroups::Find(sf, GroupingMode::kMultiVoxel);
  std::vector<int32_t> order(static_cast<size_t>(24 * 22));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), random);
  for (int columns_per_step : {1, 2, 4}) {
    SCOPED_TRACE(columns_per_step);
    const UpdateSchedule schedule = UpdateSchedule::Make(sf, groups, order, columns_per_step);
    std::vector<int> updates(static_cast<size_t>(volume.voxel_count()), 0);
    for (int64_t step = 0; step < schedule.num_steps(); ++step) {
      std::set<std::tuple<int64_t, int64_t, int64_t>> touched;
      int64_t voxels = 0;
      for (const ScheduledGroup* g = schedule.StepBegin(step); g != schedule.StepEnd(step); ++g) {
        for (int64_t iz = g->first_slice, k = 0; k < g->size; iz += g->stride, ++k) {
          ASSERT_LT(iz, 10);
          ++updates[static_cast<size_t>(g->column * 10 + iz)];
          ++voxels;
          for (const FootprintEntry& e : sf.VoxelFootprint(g->column % 24, g->column / 24, iz)) {
            ASSERT_TRUE(touched.insert({e.view, e.row, e.column}).second)
                << "step " << step << ": voxel (column " << g->column << ", slice " << iz
                << ") shares pixel (view " << e.view << ", row " << e.row << ", column "
                << e.column << ") with another voxel of the step";
          }
        }
      }
      EXPECT_LE(voxels, schedule.max_step_voxels());
    }
    for (int u : updates) ASSERT_EQ(u, 1);
    std::printf("[ measure ] columns per step %d: %lld steps, %lld of %d columns paired\n",
                columns_per_step, static_cast<long long>(schedule.num_steps()),
                static_cast<long long>(schedule.paired_columns()), 24 * 22);
    if (columns_per_step == 1) {
      EXPECT_EQ(schedule.paired_columns(), 0);
      EXPECT_EQ(schedule.num_steps(), groups.total_groups());
    } else if (columns_per_step == 2) {
      // Measured: 280-298 of 528 columns paired, 1137-1164 steps for 1584 groups (a small
      // volume has few far-apart partners).
      EXPECT_GT(schedule.paired_columns(), 528 * 2 / 5);
      EXPECT_LT(schedule.num_steps(), groups.total_groups() * 17 / 20);
    }
  }
}

}  // namespace
}  // namespace tomo::core::statistical
