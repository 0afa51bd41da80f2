// The tiled layout's tasks (tiled_tasks.h), checked against the layout's warps on the
// symmetric fan cases and an odd grid, for several tile sides: every step of every warp lies
// in exactly one task, a task holds at most kTiledTaskSteps steps and starts on a multiple
// of them, the tasks of (stored view, orbit) are that pair's warps', and each view's forward
// has parts enough for its orbit with the most tasks and no more, the transpose takes each
// view's orbits once, largest first; malformed offsets are refused.
#include "core/system_matrix/tiled_tasks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
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
      const int64_t w = warp_begin[static_cast<size_t>(at)] + task.warp_offset;
      const int64_t first_step = int64_t{task.chunk} * kTiledTaskSteps;
      ASSERT_LT(w, warp_begin[static_cast<size_t>(at) + 1]) << "task " << i;
      const TiledWarp& warp = warps[static_cast<size_t>(w)];
      ASSERT_LT(first_step, warp.steps);
      EXPECT_EQ(covered[static_cast<size_t>(w)], first_step)
          << "the tasks of warp " << w << " are not in step order or overlap";
      covered[static_cast<size_t>(w)] =
          std::min<int64_t>(warp.steps, first_step + kTiledTaskSteps);
    }
  }
  for (size_t w = 0; w < warps.size(); ++w) {
    EXPECT_EQ(covered[w], warps[w].steps) << "warp " << w;
  }
  EXPECT_EQ(t.most_tasks_per_orbit(), most);
  // The forward's parts, view by view: enough for the orbit with the most tasks.
  const int64_t views = pairs / orbits;
  for (int64_t v = 0; v < views; ++v) {
    int64_t most = 0;
    for (int64_t o = 0; o < orbits; ++o) {
      const size_t at = static_cast<size_t>(v * orbits + o);
      most = std::max(most, t.orbit_task_begin()[at + 1] - t.orbit_task_begin()[at]);
    }
    EXPECT_GE(int64_t{t.forward_parts(v)} * kTiledForwardTasks, most) << "view " << v;
    EXPECT_LT(int64_t{t.forward_parts(v) - 1} * kTiledForwardTasks, std::max<int64_t>(most, 1))
        << "view " << v;
  }
  // The transpose's order: each view's orbits once, by decreasing tasks.
  ASSERT_EQ(static_cast<int64_t>(t.transpose_order().size()), pairs);
  for (int64_t v = 0; v < views; ++v) {
    std::vector<bool> seen(static_cast<size_t>(orbits), false);
    int64_t previous = std::numeric_limits<int64_t>::max();
    for (int64_t b = 0; b < orbits; ++b) {
      const int32_t o = t.transpose_order()[static_cast<size_t>(v * orbits + b)];
      ASSERT_GE(o, 0);
      ASSERT_LT(o, orbits);
      EXPECT_FALSE(seen[static_cast<size_t>(o)]) << "view " << v << ", orbit " << o << " twice";
      seen[static_cast<size_t>(o)] = true;
      const size_t at = static_cast<size_t>(v * orbits + o);
      const int64_t tasks = t.orbit_task_begin()[at + 1] - t.orbit_task_begin()[at];
      EXPECT_LE(tasks, previous) << "view " << v << ", block " << b;
      previous = tasks;
    }
  }
  EXPECT_EQ(t.bytes(), 4 * t.tasks().size() + 8 * t.orbit_task_begin().size() +
                           4 * t.transpose_order().size());
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

TEST(TiledTasksTest, WhatSixteenBitsCannotHoldIsRefused) {
  // 65536 warps in one orbit fit the task's warp offset; 65537 do not.
  const std::vector<TiledWarp> many(65537);
  EXPECT_TRUE(TiledTasks::Build({0, 65536}, many, 1).ok());
  const absl::StatusOr<TiledTasks> too_many = TiledTasks::Build({0, 65537}, many, 1);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("65537 warps in one orbit"), std::string::npos)
      << too_many.status();
  // A warp of 65536 tasks fits the chunk index; one more step does not.
  std::vector<TiledWarp> longest(1);
  longest[0].steps = 65536 * kTiledTaskSteps;
  EXPECT_TRUE(TiledTasks::Build({0, 1}, longest, 1).ok());
  longest[0].steps += 1;
  EXPECT_FALSE(TiledTasks::Build({0, 1}, longest, 1).ok());
}

}  // namespace
}  // namespace tomo::core::system_matrix
