#include "core/algorithms/block_iterative.h"

#include <cstdio>
#include <limits>
#include <vector>

#include "core/algorithms/sirt.h"
#include "core/operators/cpu/cpu_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/algorithms/iterative_cases.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;
using testing::MakeCone3D;
using testing::MakeProblem2D;
using testing::MaxAbsDifference;
using testing::RelativeError;

IterativeOptions Observed(int64_t iterations, const Array3D& truth, std::vector<double>& errors) {
  IterativeOptions options;
  options.iterations = iterations;
  options.observe_volume = true;
  options.on_iteration = [&truth, &errors](const IterationReport& report) {
    errors.push_back(RelativeError(*report.volume, truth));
    return absl::OkStatus();
  };
  return options;
}

TEST(BlockIterativeTest, OneBlockIsSirt) {
  const auto problem = MakeCone3D(24);
  CpuBackend backend;
  IterativeOptions options;
  options.iterations = 4;
  options.relaxation = 1.5;
  options.lower_bound = 0;
  auto sirt = Sirt(problem.geometry, problem.volume, problem.projections, options, backend,
                   RunContext{});
  for (ViewOrder order : {ViewOrder::kSequential, ViewOrder::kInterleaved}) {
    auto blocks = BlockIterative(problem.geometry, problem.volume, problem.projections, options,
                                 1, order, backend, RunContext{});
    ASSERT_TRUE(sirt.ok() && blocks.ok());
    // The same operations on the same data in the same order: the same numbers.
    EXPECT_EQ(MaxAbsDifference(blocks->volume, sirt->volume), 0.0);
    EXPECT_EQ(blocks->relative_residuals, sirt->relative_residuals);
  }
  // And not trivially so: two blocks differ.
  auto two = BlockIterative(problem.geometry, problem.volume, problem.projections, options, 2,
                            ViewOrder::kSequential, backend, RunContext{});
  ASSERT_TRUE(two.ok());
  EXPECT_GT(MaxAbsDifference(two->volume, sirt->volume), 1e-3);
}

TEST(BlockIterativeTest, SartNoiseFree2DErrorFallsMonotonicallyBelow0p26In8Iterations) {
  const auto problem = MakeProblem2D();
  CpuBackend backend;
  std::vector<double> errors;
  // Sequential order: views along the arc, the slow classic sweep.
  auto result = BlockIterative(problem.vector_geometry, problem.volume, problem.projections,
                               Observed(8, problem.truth, errors), 60, ViewOrder::kSequential,
                               backend, RunContext{});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(errors.size(), 8u);
  std::printf("SART 2D noise-free, sequential: relative error %.4f after 1, %.4f after 8\n",
              errors.front(), errors.back());
  for (size_t k = 1; k < errors.size(); ++k) {
    EXPECT_LT(errors[k], errors[k - 1]) << "iteration " << k + 1;
  }
  EXPECT_LT(errors.back(), 0.26);
  // The spread order of interleaved blocks gets there in one sweep.
  std::vector<double> spread;
  ASSERT_TRUE(BlockIterative(problem.vector_geometry, problem.volume, problem.projections,
                             Observed(1, problem.truth, spread), 60, ViewOrder::kInterleaved,
                             backend, RunContext{})
                  .ok());
  std::printf("SART 2D noise-free, interleaved: relative error %.4f after 1\n", spread[0]);
  EXPECT_LT(spread[0], 0.23);
  EXPECT_LT(spread[0], errors[0]);
}

TEST(BlockIterativeTest, MoreBlocksConvergeFasterPerIteration) {
  const auto problem = MakeProblem2D();
  CpuBackend backend;
  std::vector<double> previous;
  for (int64_t blocks : {1, 6, 60}) {
    std::vector<double> errors;
    auto result = BlockIterative(problem.vector_geometry, problem.volume, problem.projections,
                                 Observed(3, problem.truth, errors), blocks,
                                 ViewOrder::kInterleaved, backend, RunContext{});
    ASSERT_TRUE(result.ok()) << result.status();
    std::printf("%lld blocks: relative error after 3 iterations %.4f\n",
                static_cast<long long>(blocks), errors.back());
    if (!previous.empty()) {
      EXPECT_LT(errors.back(), previous.back()) << blocks << " blocks";
    }
    previous = errors;
  }
}

TEST(BlockIterativeTest, OsSartCone3DConvergesInBothOrders) {
  const auto problem = MakeCone3D();
  CpuBackend backend;
  for (ViewOrder order : {ViewOrder::kSequential, ViewOrder::kInterleaved}) {
    std::vector<double> errors;
    // 12 blocks: beyond kMaxKeptColumnWeights, so the column weights are recomputed per visit.
    auto result = BlockIterative(problem.geometry, problem.volume, problem.projections,
                                 Observed(6, problem.truth, errors), 12, order, backend,
                                 RunContext{});
    ASSERT_TRUE(result.ok()) << result.status();
    std::printf("OS-SART cone 3D, 12 blocks, %s: relative error %.4f after 6 iterations\n",
                order == ViewOrder::kSequential ? "sequential" : "interleaved", errors.back());
    for (size_t k = 1; k < errors.size(); ++k) EXPECT_LT(errors[k], errors[k - 1]);
    EXPECT_LT(errors.back(), 0.33);
  }
}

TEST(BlockIterativeTest, NonNegativityHolds) {
  const auto problem = MakeProblem2D();
  CpuBackend backend;
  IterativeOptions options;
  options.iterations = 3;
  options.relaxation = 1.8;
  options.lower_bound = 0;
  auto result = BlockIterative(problem.vector_geometry, problem.volume, problem.projections,
                               options, 60, ViewOrder::kSequential, backend, RunContext{});
  ASSERT_TRUE(result.ok());
  float low = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < result->volume.size(); ++i) low = std::min(low, result->volume.data()[i]);
  EXPECT_GE(low, 0.0f);
}

TEST(BlockIterativeTest, CancellationStopsBetweenBlocks) {
  const auto problem = MakeProblem2D(20);
  CpuBackend backend;
  int checks = 0;
  RunContext context;
  context.is_cancelled = [&] { return ++checks > 20 + 5; };  // setup checks 20, then 5 blocks
  IterativeOptions options;
  options.iterations = 10;
  auto result = BlockIterative(problem.vector_geometry, problem.volume, problem.projections,
                               options, 20, ViewOrder::kSequential, backend, context);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(result.status().message(), HasSubstr("sart / iteration 1"));
}

TEST(BlockIterativeTest, RefusesMoreBlocksThanViews) {
  const auto problem = MakeProblem2D(20);
  CpuBackend backend;
  IterativeOptions options;
  options.iterations = 1;
  for (int64_t blocks : {0, 21}) {
    auto result = BlockIterative(problem.vector_geometry, problem.volume, problem.projections,
                                 options, blocks, ViewOrder::kSequential, backend, RunContext{});
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(), HasSubstr("blocks: "));
    EXPECT_THAT(result.status().message(), HasSubstr("out of range [1, 20]"));
  }
  options.relaxation = 2;
  EXPECT_THAT(BlockIterative(problem.vector_geometry, problem.volume, problem.projections,
                             options, 2, ViewOrder::kSequential, backend, RunContext{})
                  .status()
                  .message(),
              HasSubstr("relaxation: 2 is out of range (0, 2)"));
}

}  // namespace
}  // namespace tomo::core
