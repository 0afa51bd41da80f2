#include "core/algorithms/sirt.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <vector>

#include "core/geometry/parallel_2d_form.h"
#include "core/operators/cpu/cpu_backend.h"
#include "core/phantom/ellipse_phantom.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/algorithms/iterative_cases.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;
using testing::MakeCone3D;
using testing::MakeProblem2D;
using testing::RelativeError;

// The relative error against the phantom after every iteration.
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

TEST(SirtTest, NoiseFree2DErrorFallsMonotonicallyBelow0p22In100Iterations) {
  const auto problem = MakeProblem2D();
  CpuBackend backend;
  std::vector<double> errors;
  auto result = Sirt(problem.vector_geometry, problem.volume, problem.projections,
                     Observed(100, problem.truth, errors), backend, RunContext{});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(errors.size(), 100u);
  std::printf("SIRT 2D noise-free: relative error %.4f after 1, %.4f after 100 iterations\n",
              errors.front(), errors.back());
  for (size_t k = 1; k < errors.size(); ++k) {
    EXPECT_LT(errors[k], errors[k - 1]) << "iteration " << k + 1;
  }
  EXPECT_LT(errors.front(), 1.0);
  EXPECT_LT(errors.back(), 0.22);
  EXPECT_LT(RelativeError(result->volume, problem.truth), 0.22);
  // The residual falls too, and is reported once per iteration.
  ASSERT_EQ(result->relative_residuals.size(), 100u);
  EXPECT_LT(result->relative_residuals.back(), 0.1 * result->relative_residuals.front());
}

TEST(SirtTest, NoiseFreeCone3DErrorFallsMonotonicallyBelow0p33In40Iterations) {
  const auto problem = MakeCone3D();
  CpuBackend backend;
  std::vector<double> errors;
  IterativeOptions options = Observed(40, problem.truth, errors);
  auto result = Sirt(problem.geometry, problem.volume, problem.projections, options, backend,
                     RunContext{});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(errors.size(), 40u);
  std::printf("SIRT cone 3D noise-free: relative error %.4f after 1, %.4f after 40\n",
              errors.front(), errors.back());
  for (size_t k = 1; k < errors.size(); ++k) {
    EXPECT_LT(errors[k], errors[k - 1]) << "iteration " << k + 1;
  }
  EXPECT_LT(errors.back(), 0.33);
}

// The weights' guards are in the projector's units: at 10 nm pixels (the smallest voxel a
// job may ask for) one view adds 1e-5 to a voxel's column sum, and a fixed guard of 1e-3
// would zero the whole 60-view image. The phantom and the detector scaled with the pixels;
// the error must be the 1 mm problem's (measured 0.2922 after 40 iterations at both sizes;
// with the fixed guard the 10 nm image was all zeros, error 1.0).
TEST(SirtTest, TenNanometrePixelsReconstructAsOneMillimetre) {
  CpuBackend backend;
  std::vector<double> errors_by_size;
  for (double pixel_mm : {1.0, 1e-5}) {
    const EllipsePhantom phantom = EllipsePhantom::ModifiedSheppLogan(28.0 * pixel_mm);
    const VolumeGeometry volume =
        VolumeGeometry::Create({64, 64, 1}, {pixel_mm, pixel_mm, pixel_mm}, {}).value();
    const ParallelGeometry2D parallel =
        ParallelGeometry2D::Create(80, pixel_mm, 0.0,
                                   ParallelGeometry2D::UniformAngles(60, 0.0, M_PI))
            .value();
    IterativeOptions options;
    options.iterations = 40;
    auto result = Sirt(core::ParallelGeometry2DAsVectors(parallel, volume).value(), volume,
                       phantom.ParallelProjections(parallel, 4), options, backend, RunContext{});
    ASSERT_TRUE(result.ok()) << result.status();
    errors_by_size.push_back(RelativeError(result->volume, phantom.Rasterize(volume, 4)));
    std::printf("SIRT 2D, %g mm pixels: relative error %.4f\n", pixel_mm,
                errors_by_size.back());
  }
  EXPECT_LT(errors_by_size[0], 0.3);
  EXPECT_NEAR(errors_by_size[1], errors_by_size[0], 1e-3);
}

TEST(SirtTest, BoxConstraintHoldsEverywhere) {
  const auto problem = MakeProblem2D();
  CpuBackend backend;
  IterativeOptions options;
  options.iterations = 10;
  options.relaxation = 1.9;
  options.lower_bound = 0.0;
  options.upper_bound = 0.25;
  auto result = Sirt(problem.vector_geometry, problem.volume, problem.projections, options,
                     backend, RunContext{});
  ASSERT_TRUE(result.ok()) << result.status();
  float low = std::numeric_limits<float>::infinity(), high = -low;
  for (int64_t i = 0; i < result->volume.size(); ++i) {
    low = std::min(low, result->volume.data()[i]);
    high = std::max(high, result->volume.data()[i]);
  }
  EXPECT_GE(low, 0.0f);
  EXPECT_LE(high, 0.25f);
  EXPECT_EQ(high, 0.25f);  // the skull (density 1 per mm) is cut at the bound
  // Without the box the same run leaves it: the test can fail.
  options.lower_bound = -std::numeric_limits<double>::infinity();
  options.upper_bound = std::numeric_limits<double>::infinity();
  auto free = Sirt(problem.vector_geometry, problem.volume, problem.projections, options, backend,
                   RunContext{});
  ASSERT_TRUE(free.ok());
  float free_low = 0, free_high = 0;
  for (int64_t i = 0; i < free->volume.size(); ++i) {
    free_low = std::min(free_low, free->volume.data()[i]);
    free_high = std::max(free_high, free->volume.data()[i]);
  }
  EXPECT_LT(free_low, 0.0f);
  EXPECT_GT(free_high, 0.25f);
}

TEST(SirtTest, StartsFromTheInitialVolume) {
  const auto problem = MakeProblem2D();
  CpuBackend backend;
  IterativeOptions options;
  options.iterations = 1;
  auto from_zero = Sirt(problem.vector_geometry, problem.volume, problem.projections, options,
                        backend, RunContext{});
  options.initial_volume = std::make_shared<Array3D>(problem.truth.Clone());
  auto from_truth = Sirt(problem.vector_geometry, problem.volume, problem.projections, options,
                         backend, RunContext{});
  ASSERT_TRUE(from_zero.ok() && from_truth.ok());
  // The residual of the start: 1 for zeros, the discretisation error for the phantom.
  EXPECT_NEAR(from_zero->relative_residuals[0], 1.0, 1e-9);
  EXPECT_LT(from_truth->relative_residuals[0], 0.05);
  EXPECT_LT(RelativeError(from_truth->volume, problem.truth), 0.1);
}

TEST(SirtTest, StopsAtTheRelativeResidual) {
  const auto problem = MakeProblem2D();
  CpuBackend backend;
  IterativeOptions options;
  options.iterations = 200;
  options.stop_relative_residual = 0.05;
  auto result = Sirt(problem.vector_geometry, problem.volume, problem.projections, options,
                     backend, RunContext{});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->stopped_by_residual);
  ASSERT_LT(result->relative_residuals.size(), 200u);
  ASSERT_GE(result->relative_residuals.size(), 2u);
  EXPECT_LE(result->relative_residuals.back(), 0.05);
  EXPECT_GT(result->relative_residuals[result->relative_residuals.size() - 2], 0.05);
}

TEST(SirtTest, ReportsEveryIterationWithItsResidual) {
  const auto problem = MakeProblem2D(20);
  CpuBackend backend;
  std::vector<ProgressUpdate> updates;
  RunContext context;
  context.on_progress = [&](const ProgressUpdate& u) { updates.push_back(u); };
  IterativeOptions options;
  options.iterations = 5;
  auto result = Sirt(problem.vector_geometry, problem.volume, problem.projections, options,
                     backend, context);
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(updates.size(), 5u);
  for (uint32_t k = 0; k < 5; ++k) {
    EXPECT_EQ(updates[k].iteration, k + 1);
    EXPECT_EQ(updates[k].iterations_total, 5u);
    EXPECT_DOUBLE_EQ(updates[k].fraction, (k + 1) / 5.0);
    EXPECT_THAT(updates[k].stage, HasSubstr("sirt: relative residual"));
  }
}

TEST(SirtTest, CancellationStopsBetweenIterations) {
  const auto problem = MakeProblem2D(20);
  CpuBackend backend;
  int reported = 0;
  RunContext context;
  context.on_progress = [&](const ProgressUpdate&) { ++reported; };
  context.is_cancelled = [&] { return reported >= 3; };
  IterativeOptions options;
  options.iterations = 50;
  auto result = Sirt(problem.vector_geometry, problem.volume, problem.projections, options,
                     backend, context);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(result.status().message(), HasSubstr("sirt / iteration 4"));
  EXPECT_EQ(reported, 3);
}

TEST(SirtTest, RefusesBadOptionsNamingTheField) {
  const auto problem = MakeProblem2D(20);
  CpuBackend backend;
  auto run = [&](IterativeOptions options) {
    return Sirt(problem.vector_geometry, problem.volume, problem.projections, options, backend,
                RunContext{})
        .status();
  };
  IterativeOptions options;
  options.iterations = 0;
  EXPECT_THAT(run(options).message(), HasSubstr("iterations: 0 is out of range [1, 1000000]"));
  options.iterations = IterativeOptions::kMaxIterations + 1;
  EXPECT_THAT(run(options).message(), HasSubstr("iterations: 1000001"));
  options.iterations = 3;
  for (double lambda : {0.0, -1.0, 2.0, 2.5, std::nan("")}) {
    options.relaxation = lambda;
    const absl::Status status = run(options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("relaxation: "));
    EXPECT_THAT(status.message(), HasSubstr("(0, 2)"));
  }
  options.relaxation = 1;
  options.lower_bound = 1;
  options.upper_bound = 0;
  EXPECT_THAT(run(options).message(), HasSubstr("lower_bound: 1"));
  options.lower_bound = 0;
  options.upper_bound = 1;
  options.stop_relative_residual = 1.5;
  EXPECT_THAT(run(options).message(), HasSubstr("stop_relative_residual: 1.5"));
  options.stop_relative_residual = 0;
  options.initial_volume = std::make_shared<Array3D>(Dims3{1, 64, 63});
  const absl::Status wrong_size = run(options);
  EXPECT_EQ(wrong_size.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_size.message(), HasSubstr("initial_volume: dims (1, 64, 63)"));
  EXPECT_THAT(wrong_size.message(), HasSubstr("(1, 64, 64)"));
  options.initial_volume = nullptr;
  Array3D short_data({19, 1, 80});
  EXPECT_THAT(Sirt(problem.vector_geometry, problem.volume, short_data, options, backend,
                   RunContext{})
                  .status()
                  .message(),
              HasSubstr("projections: dims (19, 1, 80)"));
}

TEST(SirtTest, RefusesAJobOverTheMemoryBudgetBeforeStarting) {
  const auto problem = MakeProblem2D(20);
  CpuBackend backend;
  RunContext context;
  context.memory_budget_bytes = 1000;
  bool started = false;
  context.on_progress = [&](const ProgressUpdate&) { started = true; };
  IterativeOptions options;
  options.iterations = 3;
  auto result = Sirt(problem.vector_geometry, problem.volume, problem.projections, options,
                     backend, context);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(result.status().message(), HasSubstr("memory budget is 1000 bytes"));
  EXPECT_FALSE(started);
  // 3 volumes of 64^2 and 3 projection sets of 20 x 80 floats fit in 69 KB.
  context.memory_budget_bytes = 3 * 64 * 64 * 4 + 3 * 20 * 80 * 4;
  EXPECT_TRUE(Sirt(problem.vector_geometry, problem.volume, problem.projections, options,
                   backend, context)
                  .ok());
}

}  // namespace
}  // namespace tomo::core
