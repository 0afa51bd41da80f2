#include "core/algorithms/iterative_common.h"
#include "core/geometry/parallel_2d_form.h"

#include <algorithm>
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
    for (ViewOrder order : {ViewOrder::kSequential, ViewOrder::kInterleaved}) {
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
