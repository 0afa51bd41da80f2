// The tiled layout's tasks (tiled_tasks.h), checked against the layout's warps on the
// symmetric fan cases and an odd grid, for several tile sides: every step of every warp lies
// in exactly one task, a task holds at most kTiledTaskSteps steps and starts on a multiple
// of them, the tasks of (stored view, orbit) are that pair's warps', and the forward's
// thread blocks cover each pair's tasks in order with at most kTiledForwardTasks each, all
// of one orbit; malformed offsets are refused.
#include "core/system_matrix/tiled_tasks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/system_matrix/tiled_runs.h"
#include "tests/core/system_matrix/fan_cases.h"

namespace tomo::core::system_matrix {
namespace {

void ExpectTasksCoverTheLayout(const TiledRuns& layout) {
  const TiledTasks& t = layout.tasks();
  const std::vector<TiledWarp>& warps = layout.warps();
  const std::vector<int64_t>& warp_begin = layout.orbit_warp_begin();
  const int64_t orbits = layout.orbits_per_view();
  const int64_t pairs = static_cast<int64_t>(warp_begin.size()) - 1;
  ASSERT_EQ(t.orbit_task_begin().size(), warp_begin.size());
  ASSERT_EQ(t.orbit_task_begin().front(), 0);
  ASSERT_EQ(t.orbit_task_begin().back(), static_cast<int64_t>(t.tasks().size()));
  // Steps covered per warp, counted from the tasks alone.
  std::vector<int64_t> covered(warps.size(), 0);
  int64_t most = 0;
  for (int64_t at = 0; at < pairs; ++at) {
    const int64_t begin = t.orbit_task_begin()[static_cast<size_t>(at)];
    const int64_t end = t.orbit_task_begin()[static_cast<size_t>(at) + 1];
    ASSERT_LE(begin, end);
    most = std::max(most, end - begin);
    for (int64_t i = begin; i < end; ++i) {
      const TiledTask& task = t.tasks()[static_cast<size_t>(i)];
      ASSERT_GE(task.warp, warp_begin[static_cast<size_t>(at)]) << "task " << i;
      ASSERT_LT(task.warp, warp_begin[static_cast<size_t>(at) + 1]) << "task " << i;
      const TiledWarp& warp = warps[static_cast<size_t>(task.warp)];
      EXPECT_EQ(task.first_step % kTiledTaskSteps, 0);
      ASSERT_LT(task.first_step, warp.steps);
      EXPECT_EQ(covered[static_cast<size_t>(task.warp)], task.first_step)
          << "the tasks of warp " << task.warp << " are not in step order or overlap";
      covered[static_cast<size_t>(task.warp)] =
          std::min<int64_t>(warp.steps, task.first_step + kTiledTaskSteps);
    }
  }
  for (size_t w = 0; w < warps.size(); ++w) {
    EXPECT_EQ(covered[w], warps[w].steps) << "warp " << w;
  }
  EXPECT_EQ(t.most_tasks_per_orbit(), most);
  // The forward's thread blocks, view by view.
  const int64_t views = pairs / orbits;
  ASSERT_EQ(static_cast<int64_t>(t.forward_block_begin().size()), views + 1);
  ASSERT_EQ(t.forward_block_begin().back(), static_cast<int64_t>(t.forward_blocks().size()));
  for (int64_t v = 0; v < views; ++v) {
    int64_t next_task = t.orbit_task_begin()[static_cast<size_t>(v * orbits)];
    for (int64_t b = t.forward_block_begin()[static_cast<size_t>(v)];
         b < t.forward_block_begin()[static_cast<size_t>(v) + 1]; ++b) {
      const TiledForwardBlock& block = t.forward_blocks()[static_cast<size_t>(b)];
      ASSERT_GE(block.orbit, 0);
      ASSERT_LT(block.orbit, orbits);
      const int64_t at = v * orbits + block.orbit;
      EXPECT_EQ(block.first_task, next_task) << "view " << v << ", block " << b;
      EXPECT_GE(block.tasks, 1);
      EXPECT_LE(block.tasks, kTiledForwardTasks);
      EXPECT_GE(block.first_task, t.orbit_task_begin()[static_cast<size_t>(at)]);
      EXPECT_LE(block.first_task + block.tasks, t.orbit_task_begin()[static_cast<size_t>(at) + 1]);
      next_task = block.first_task + block.tasks;
    }
    EXPECT_EQ(next_task, t.orbit_task_begin()[static_cast<size_t>((v + 1) * orbits)])
        << "view " << v << ": the forward's blocks leave tasks out";
  }
  EXPECT_GT(t.bytes(), t.tasks().size() * sizeof(TiledTask));
}

TEST(TiledTasksTest, TasksCoverEveryStepOfEveryWarpOnce) {
  std::vector<FanCase> cases = SymmetricFanCases();
  cases.push_back(MakeFanCase("odd-97-grid-104-views-131-rays", OddFanCaseSpec()));
  for (const FanCase& c : cases) {
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(c)).value();
    for (const int side : {4, 5, 16, 32}) {
      SCOPED_TRACE(c.name + ", tile side " + std::to_string(side));
      const absl::StatusOr<TiledRuns> layout = TiledRuns::Build(a, side);
      ASSERT_TRUE(layout.ok()) << layout.status();
      ExpectTasksCoverTheLayout(*layout);
    }
  }
}

TEST(TiledTasksTest, MalformedOffsetsAreRefused) {
  const std::vector<TiledWarp> warps(3);
  EXPECT_FALSE(TiledTasks::Build({}, warps, 1).ok());
  EXPECT_FALSE(TiledTasks::Build({0, 1, 3}, warps, 0).ok());
  // Two (view, orbit) pairs do not make whole views of 3 orbits.
  const absl::StatusOr<TiledTasks> uneven = TiledTasks::Build({0, 1, 3}, warps, 3);
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.status().message().find("3 orbits per view"), std::string::npos)
      << uneven.status();
}

}  // namespace
}  // namespace tomo::core::system_matrix
