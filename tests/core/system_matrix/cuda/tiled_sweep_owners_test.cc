// The one-launch sweep's orbit owners (tiled_sweep_owners.h): every orbit owned once, dealt
// longest first to the least loaded thread block, and the critical path counted per view.
#include "core/system_matrix/cuda/tiled_sweep_owners.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace tomo::core::system_matrix::cuda {
namespace {

// Offsets of views x orbits task counts (counts[v][o]).
std::vector<int64_t> Offsets(const std::vector<std::vector<int64_t>>& counts) {
  std::vector<int64_t> begin = {0};
  for (const auto& view : counts) {
    for (const int64_t c : view) begin.push_back(begin.back() + c);
  }
  return begin;
}

TEST(TiledSweepOwnersTest, LongestFirstToTheLeastLoaded) {
  // Totals over two views: orbit 0: 4, 1: 10, 2: 7, 3: 3, 4: 6.
  const std::vector<int64_t> begin = Offsets({{1, 5, 3, 2, 3}, {3, 5, 4, 1, 3}});
  const TiledSweepOwners owners = AssignTiledSweepOwners(begin, 5, 2);
  // 10 -> block 0; 7 -> 1; 6 -> 1 (13); 4 -> 0 (14); 3 -> 1 (16).
  EXPECT_EQ(owners.begin, (std::vector<int32_t>{0, 2, 5}));
  EXPECT_EQ(owners.orbits, (std::vector<int32_t>{1, 0, 2, 4, 3}));
  EXPECT_EQ(owners.most_orbits, 3);
  // View 0: block 0 has 5 + 1 = 6, block 1 has 3 + 3 + 2 = 8; view 1: 8 and 8.
  EXPECT_EQ(owners.critical_tasks, 16);
}

TEST(TiledSweepOwnersTest, StageHoldsTheMostWarpsAndTasksOfOneBlockAndView) {
  // The owners of LongestFirstToTheLeastLoaded: block 0 owns orbits 1 and 0, block 1 owns
  // 2, 4 and 3.
  const std::vector<int64_t> tasks = Offsets({{1, 5, 3, 2, 3}, {3, 5, 4, 1, 3}});
  const std::vector<int64_t> warps = Offsets({{1, 2, 2, 1, 1}, {3, 1, 2, 1, 1}});
  const TiledSweepOwners owners = AssignTiledSweepOwners(tasks, 5, 2);
  const TiledSweepStage stage = CountTiledSweepStage(owners, warps, tasks, 5);
  // Warps: view 0: 3 and 4, view 1: 4 and 4. Tasks: view 0: 6 and 8, view 1: 8 and 8.
  EXPECT_EQ(stage.warps, 4);
  EXPECT_EQ(stage.tasks, 8);
  const TiledSweepStage more = CountTiledSweepStage(
      owners, Offsets({{1, 2, 2, 1, 1}, {3, 9, 2, 1, 1}}), tasks, 5);
  EXPECT_EQ(more.warps, 12);  // view 1, block 0: 9 + 3
}

TEST(TiledSweepOwnersTest, SlotsSpanEachOrbitsWarpsAndSumOverAThreadBlocksOrbits) {
  // The owners of LongestFirstToTheLeastLoaded (block 0: orbits 1 and 0; block 1: 2, 4
  // and 3). Warp w starts at slot 320 w and has w % 3 + 1 steps: an orbit's slots run from
  // its first warp's start to its last warp's end, gaps between its warps included.
  const std::vector<int64_t> tasks = Offsets({{1, 5, 3, 2, 3}, {3, 5, 4, 1, 3}});
  const TiledSweepOwners owners = AssignTiledSweepOwners(tasks, 5, 2);
  std::vector<TiledWarp> warps(15);
  for (int w = 0; w < 15; ++w) warps[static_cast<size_t>(w)] = {320 * int64_t{w}, w % 3 + 1, 0};
  // View 0 (warps 0-6): orbit 0 32, 1 416, 2 384, 3 96, 4 32: block 0 448, block 1 512.
  // View 1 (warps 7-14): orbit 0 672, 1 64, 2 352, 3 64, 4 96: block 0 736, block 1 512.
  EXPECT_EQ(CountTiledSweepSlots(owners, Offsets({{1, 2, 2, 1, 1}, {3, 1, 2, 1, 1}}), warps, 5),
            736);
  // An orbit without warps holds no slots: one view, orbit 1's two warps only (384).
  EXPECT_EQ(CountTiledSweepSlots(owners, Offsets({{0, 2, 0, 0, 0}}), warps, 5), 384);
}

TEST(TiledSweepOwnersTest, MoreThreadBlocksThanOrbits) {
  const std::vector<int64_t> begin = Offsets({{2, 9, 4}});
  const TiledSweepOwners owners = AssignTiledSweepOwners(begin, 3, 5);
  EXPECT_EQ(owners.begin, (std::vector<int32_t>{0, 1, 2, 3, 3, 3}));
  EXPECT_EQ(owners.orbits, (std::vector<int32_t>{1, 2, 0}));
  EXPECT_EQ(owners.most_orbits, 1);
  EXPECT_EQ(owners.critical_tasks, 9);
}

TEST(TiledSweepOwnersTest, RandomCountsOwnEachOrbitOnceWithinTheGreedyBound) {
  std::mt19937 random(20261129);
  for (int trial = 0; trial < 20; ++trial) {
    const int views = 1 + static_cast<int>(random() % 12);
    const int orbits = 1 + static_cast<int>(random() % 300);
    const int blocks = 1 + static_cast<int>(random() % 140);
    std::vector<std::vector<int64_t>> counts(static_cast<size_t>(views));
    std::vector<int64_t> total(static_cast<size_t>(orbits), 0);
    for (auto& view : counts) {
      for (int o = 0; o < orbits; ++o) {
        view.push_back(static_cast<int64_t>(random() % 41));
        total[static_cast<size_t>(o)] += view.back();
      }
    }
    const TiledSweepOwners owners = AssignTiledSweepOwners(Offsets(counts), orbits, blocks);
    ASSERT_EQ(owners.begin.size(), static_cast<size_t>(blocks) + 1);
    std::vector<int32_t> sorted = owners.orbits;
    std::sort(sorted.begin(), sorted.end());
    for (int o = 0; o < orbits; ++o) ASSERT_EQ(sorted[static_cast<size_t>(o)], o) << "trial " << trial;
    // Longest processing time first: no block exceeds the mean by more than the largest.
    int64_t sum = 0, largest = 0, most = 0;
    for (const int64_t t : total) sum += t, largest = std::max(largest, t);
    for (int b = 0; b < blocks; ++b) {
      int64_t load = 0;
      for (int32_t i = owners.begin[static_cast<size_t>(b)]; i < owners.begin[static_cast<size_t>(b) + 1]; ++i) {
        load += total[static_cast<size_t>(owners.orbits[static_cast<size_t>(i)])];
      }
      most = std::max(most, load);
    }
    EXPECT_LE(most, sum / blocks + largest) << "trial " << trial;
    // The critical path lies between the busiest view's share and the whole.
    EXPECT_GE(owners.critical_tasks * blocks, sum) << "trial " << trial;
    EXPECT_LE(owners.critical_tasks, sum) << "trial " << trial;
  }
}

}  // namespace
}  // namespace tomo::core::system_matrix::cuda
