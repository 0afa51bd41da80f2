// Threads per block of the tiled transpose (tiled_back_threads.h) for the layouts the bench
// runs, on 132 multiprocessors of 1024 threads: the shapes measured best there.
#include "core/system_matrix/cuda/tiled_back_threads.h"

#include <gtest/gtest.h>

namespace tomo::core::system_matrix::cuda {
namespace {

TEST(TiledBackThreadsTest, OrbitsJustAboveTheMultiprocessorsKeepWholeBlocks) {
  // 512^2, 16-pixel tiles: 136 orbits of up to 40 tasks: 1024 threads, two waves.
  EXPECT_EQ(TiledBackThreads(136, 40, 132, 1024), 1024);
  // Up to 32 per task: an orbit of 20 tasks gets 640.
  EXPECT_EQ(TiledBackThreads(136, 20, 132, 1024), 640);
}

TEST(TiledBackThreadsTest, WholeMultiplesShareTheMultiprocessor) {
  // 1024^2 (16-pixel tiles) and 2048^2 (32): 528 orbits, four blocks of 256 threads.
  EXPECT_EQ(TiledBackThreads(528, 40, 132, 1024), 256);
  EXPECT_EQ(TiledBackThreads(528, 120, 132, 1024), 256);
  // 1,000 orbits: 7 per multiprocessor, 146 threads rounded down to 128.
  EXPECT_EQ(TiledBackThreads(1000, 40, 132, 1024), 128);
}

TEST(TiledBackThreadsTest, StaysWithinTheLimits) {
  EXPECT_EQ(TiledBackThreads(10, 1, 132, 1024), 64);           // few tasks: at least 64
  EXPECT_EQ(TiledBackThreads(100000, 50, 132, 1024), 64);      // many orbits: at least 64
  EXPECT_EQ(TiledBackThreads(10, 500, 132, 2048), 1024);       // at most 1024
  // No multiprocessor count: taken as one (10 orbits share it: 96 threads each).
  EXPECT_EQ(TiledBackThreads(10, 40, 0, 1024), 96);
}

}  // namespace
}  // namespace tomo::core::system_matrix::cuda
