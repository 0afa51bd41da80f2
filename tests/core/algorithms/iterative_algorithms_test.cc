#include "core/algorithms/iterative_algorithms.h"

#include <memory>
#include <vector>

#include "core/operators/cpu/cpu_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/algorithms/iterative_cases.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

// Each method through the registry on the 2D parallel geometry (run as its one-row vector
// geometry) improves on its start.
TEST(IterativeAlgorithmsTest, EveryMethodRunsTwoDimensionalJobsThroughTheRegistry) {
  const auto problem = testing::MakeProblem2D();
  CpuBackend backend;
  const AlgorithmRegistry registry = AlgorithmRegistry::WithBuiltins();
  IterativeOptions iterative;
  iterative.iterations = 5;
  std::vector<AlgorithmOptions> all = {SirtOptions{iterative},
                                       SartOptions{iterative, ViewOrder::kInterleaved},
                                       OsSartOptions{iterative, 6, ViewOrder::kSequential},
                                       CglsOptions{iterative}};
  for (const AlgorithmOptions& options : all) {
    const ReconstructionRequest request{problem.vector_geometry, problem.volume, options};
    auto image = registry.Run(request, problem.projections, backend, RunContext{});
    ASSERT_TRUE(image.ok()) << AlgorithmName(options) << ": " << image.status();
    EXPECT_EQ(image->dims(), problem.volume.dims());
    EXPECT_LT(testing::RelativeError(*image, problem.truth), 0.7) << AlgorithmName(options);
  }
}

TEST(IterativeAlgorithmsTest, StartsFromTheFbpOfTheSameJob) {
  const auto problem = testing::MakeProblem2D();
  CpuBackend backend;
  const AlgorithmRegistry registry = AlgorithmRegistry::WithBuiltins();
  std::vector<double> residuals;
  SirtOptions options;
  options.iterative.iterations = 1;
  options.iterative.initial_from_fbp = true;
  options.iterative.on_iteration = [&](const IterationReport& report) {
    residuals.push_back(report.relative_residual);
    return absl::OkStatus();
  };
  const ReconstructionRequest request{problem.vector_geometry, problem.volume, options};
  auto image = registry.Run(request, problem.projections, backend, RunContext{});
  ASSERT_TRUE(image.ok()) << image.status();
  ASSERT_EQ(residuals.size(), 1u);
  // From zeros the first residual is 1; the FBP start already explains the data.
  EXPECT_LT(residuals[0], 0.1);
  EXPECT_LT(testing::RelativeError(*image, problem.truth), 0.3);

  options.iterative.initial_volume = std::make_shared<Array3D>(problem.truth.Clone());
  const ReconstructionRequest both{problem.vector_geometry, problem.volume, options};
  EXPECT_THAT(registry.Run(both, problem.projections, backend, RunContext{}).status().message(),
              HasSubstr("initial_volume: given together with the FBP start"));
}

TEST(IterativeAlgorithmsTest, RefusesAnotherAlgorithmsOptions) {
  const auto problem = testing::MakeProblem2D(10);
  CpuBackend backend;
  const ReconstructionRequest request{problem.vector_geometry, problem.volume, FbpOptions{}};
  auto result = MakeSirtAlgorithm()->Run(request, problem.projections, backend, RunContext{});
  EXPECT_THAT(result.status().message(), HasSubstr("algorithm: sirt was given the options of fbp"));
}

}  // namespace
}  // namespace tomo::core
