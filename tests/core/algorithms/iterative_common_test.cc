#include "core/algorithms/iterative_common.h"
#include "core/geometry/parallel_2d_form.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/operators/cpu/cpu_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/algorithms/iterative_cases.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PartitionViewsTest, SequentialBlocksAreConsecutiveAndDifferByAtMostOne) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t views = std::uniform_int_distribution<int64_t>(1, 400)(random);
    const int64_t blocks = std::uniform_int_distribution<int64_t>(1, views)(random);
    for (ViewOrder order : {ViewOrder::kSequential, ViewOrder::kInterleaved,
                            ViewOrder::kGoldenRatio, ViewOrder::kRandom}) {
      auto partition = PartitionViews(views, blocks, order);
      ASSERT_TRUE(partition.ok());
      ASSERT_EQ(static_cast<int64_t>(partition->size()), blocks);
      size_t smallest = views, largest = 0;
      std::vector<int64_t> all;
      for (const auto& block : *partition) {
        smallest = std::min(smallest, block.size());
        largest = std::max(largest, block.size());
        all.insert(all.end(), block.begin(), block.end());
      }
      EXPECT_LE(largest - smallest, 1u);
      EXPECT_GE(smallest, 1u);
      // Every view exactly once.
      std::sort(all.begin(), all.end());
      ASSERT_EQ(static_cast<int64_t>(all.size()), views);
      for (int64_t v = 0; v < views; ++v) EXPECT_EQ(all[static_cast<size_t>(v)], v);
    }
  }
}

TEST(PartitionViewsTest, OrdersDealViewsAsDocumented) {
  EXPECT_THAT(*PartitionViews(7, 3, ViewOrder::kSequential),
              ElementsAre(ElementsAre(0, 1, 2), ElementsAre(3, 4), ElementsAre(5, 6)));
  EXPECT_THAT(*PartitionViews(7, 3, ViewOrder::kInterleaved),
              ElementsAre(ElementsAre(0, 3, 6), ElementsAre(1, 4), ElementsAre(2, 5)));
  EXPECT_THAT(*PartitionViews(3, 3, ViewOrder::kSequential),
              ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(2)));
  // Interleaved one-view blocks (SART): a stride of 3 (nearest 0.382 x 10 coprime with 10).
  std::vector<int64_t> visits;
  const auto sart = PartitionViews(10, 10, ViewOrder::kInterleaved);
  ASSERT_TRUE(sart.ok());
  for (const auto& block : *sart) {
    ASSERT_EQ(block.size(), 1u);
    visits.push_back(block[0]);
  }
  EXPECT_THAT(visits, ElementsAre(0, 3, 6, 9, 2, 5, 8, 1, 4, 7));
  // 8 blocks of 16 views: stride 3; block 3 (visited second) holds views 3, 11.
  const auto eight = PartitionViews(16, 8, ViewOrder::kInterleaved);
  ASSERT_TRUE(eight.ok());
  EXPECT_THAT((*eight)[1], ElementsAre(3, 11));
}

TEST(ViewSequenceTest, EveryOrderIsAPermutation) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::vector<int64_t> sizes = {1, 2, 3, 5, 180, 295, 1000};
  for (int trial = 0; trial < 20; ++trial) {
    sizes.push_back(std::uniform_int_distribution<int64_t>(1, 3000)(random));
  }
  for (const int64_t views : sizes) {
    for (ViewOrder order : {ViewOrder::kSequential, ViewOrder::kInterleaved,
                            ViewOrder::kGoldenRatio, ViewOrder::kRandom}) {
      std::vector<int64_t> sequence = ViewSequence(views, order);
      ASSERT_EQ(static_cast<int64_t>(sequence.size()), views);
      std::sort(sequence.begin(), sequence.end());
      for (int64_t v = 0; v < views; ++v) {
        ASSERT_EQ(sequence[static_cast<size_t>(v)], v)
            << "views " << views << " order " << static_cast<int>(order);
      }
    }
  }
}

// The golden-angle walk: visit i lands within one view of frac(i / phi) x views while
// few views are taken, so the first visits sit where the golden angle puts them, and
// every prefix stays spread: its largest gap between visited views (cyclically) is at
// most phi^2 times the even spacing views / prefix (the three-gap bound, plus a view).
TEST(ViewSequenceTest, GoldenRatioFollowsTheGoldenAngleAndStaysSpread) {
  const double inverse_phi = (std::sqrt(5.0) - 1) / 2;
  for (const int64_t views : {180, 295, 1024}) {
    const std::vector<int64_t> sequence = ViewSequence(views, ViewOrder::kGoldenRatio);
    for (int64_t i = 0; i < 8; ++i) {
      double fraction = static_cast<double>(i) * inverse_phi;
      fraction -= std::floor(fraction);
      const double d = std::fabs(static_cast<double>(sequence[static_cast<size_t>(i)]) -
                                 fraction * static_cast<double>(views));
      EXPECT_LE(std::min(d, static_cast<double>(views) - d), 1.0) << "visit " << i;
    }
    std::vector<int64_t> visited;
    for (int64_t prefix = 1; prefix <= views; ++prefix) {
      visited.insert(std::upper_bound(visited.begin(), visited.end(),
                                      sequence[static_cast<size_t>(prefix - 1)]),
                     sequence[static_cast<size_t>(prefix - 1)]);
      if (prefix < 3) continue;
      int64_t largest = visited.front() + views - visited.back();
      for (size_t k = 1; k < visited.size(); ++k) {
        largest = std::max(largest, visited[k] - visited[k - 1]);
      }
      const double even = static_cast<double>(views) / static_cast<double>(prefix);
      EXPECT_LE(static_cast<double>(largest), 2.62 * even + 2.0)
          << "views " << views << " after " << prefix << " visits";
    }
  }
}

TEST(ViewSequenceTest, RandomIsFixedAndNotTheIdentity) {
  const std::vector<int64_t> first = ViewSequence(180, ViewOrder::kRandom);
  EXPECT_EQ(first, ViewSequence(180, ViewOrder::kRandom));
  int64_t in_place = 0;
  for (int64_t v = 0; v < 180; ++v) in_place += first[static_cast<size_t>(v)] == v ? 1 : 0;
  EXPECT_LT(in_place, 10);  // a shuffle fixes about one element
}

TEST(PartitionViewsTest, GoldenAndRandomBlocksAreConsecutiveRunsOfTheirSequence) {
  for (ViewOrder order : {ViewOrder::kGoldenRatio, ViewOrder::kRandom}) {
    const std::vector<int64_t> sequence = ViewSequence(23, order);
    const auto partition = PartitionViews(23, 5, order);
    ASSERT_TRUE(partition.ok());
    std::vector<int64_t> joined;
    for (const auto& block : *partition) joined.insert(joined.end(), block.begin(), block.end());
    EXPECT_EQ(joined, sequence);
    EXPECT_EQ((*partition)[0].size(), 5u);  // 23 = 5 + 5 + 5 + 4 + 4
    EXPECT_EQ((*partition)[4].size(), 4u);
  }
}

TEST(PartitionViewsTest, RefusesBlocksOutsideOneToViews) {
  EXPECT_THAT(PartitionViews(10, 11, ViewOrder::kSequential).status().message(),
              HasSubstr("blocks: 11 is out of range [1, 10]"));
  EXPECT_THAT(PartitionViews(10, 0, ViewOrder::kInterleaved).status().message(),
              HasSubstr("blocks: 0 is out of range [1, 10]"));
}

TEST(SubsetGeometryTest, ProjectsAsTheFullGeometryOnItsViews) {
  const auto problem = testing::MakeCone3D(12);
  CpuBackend backend;
  const std::vector<int64_t> views = {7, 2, 11};
  auto subset = SubsetGeometry(problem.geometry, views);
  ASSERT_TRUE(subset.ok());
  Array3D full(problem.geometry.projection_dims(), std::nanf(""));
  Array3D part(subset->projection_dims(), std::nanf(""));
  ASSERT_TRUE(backend.ForwardProject(problem.geometry, problem.volume, problem.truth, full).ok());
  ASSERT_TRUE(backend.ForwardProject(*subset, problem.volume, problem.truth, part).ok());
  const Array3D gathered = GatherViews(full, views);
  EXPECT_EQ(testing::MaxAbsDifference(gathered, part), 0.0);
  EXPECT_GT(testing::MaxAbsDifference(gathered, Array3D(part.dims())), 1.0);
}

TEST(AsVectorGeometryTest, ProjectsAsTheTwoDimensionalGeometry) {
  const auto problem = testing::MakeProblem2D(30);
  CpuBackend backend;
  auto vectors = ParallelGeometry2DAsVectors(problem.geometry, problem.volume);
  ASSERT_TRUE(vectors.ok());
  Array3D exact(problem.geometry.projection_dims(), std::nanf(""));
  Array3D through_vectors(vectors->projection_dims(), std::nanf(""));
  ASSERT_TRUE(
      backend.ForwardProject(problem.geometry, problem.volume, problem.truth, exact).ok());
  ASSERT_TRUE(
      backend.ForwardProject(*vectors, problem.volume, problem.truth, through_vectors).ok());
  // Both are Joseph's method on the same grid and rays.
  EXPECT_LT(testing::MaxAbsDifference(exact, through_vectors), 1e-4);
}

}  // namespace
}  // namespace tomo::core
