// SIRT, OS-SART and CGLS on the 3D Radon transform (RadonGeometry with the
// kRadonPlaneIntegral projector), against the analytic plane integrals of an ellipsoid
// phantom: the error must fall from the zero start, and a projector model that cannot take
// the kind is refused naming both.
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/algorithms/block_iterative.h"
#include "core/algorithms/cgls.h"
#include "core/algorithms/reconstruction.h"
#include "core/algorithms/sirt.h"
#include "core/geometry/radon_geometry.h"
#include "core/operators/cpu/cpu_backend.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "core/phantom/ellipsoid_radon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

// Relative errors measured on this problem (most of it the 0.3 mm skull, thinner than a
// voxel): SIRT 0.526 after 30 iterations, CGLS 0.397 after 12, OS-SART (10 blocks) 0.503
// after 4; the bounds are 15% above.
constexpr double kSirtErrorBound = 0.61;
constexpr double kCglsErrorBound = 0.46;
constexpr double kOsSartErrorBound = 0.58;

double RelativeError(const Array3D& image, const Array3D& truth) {
  double difference = 0, norm = 0;
  for (int64_t i = 0; i < truth.size(); ++i) {
    const double d = static_cast<double>(image.data()[i]) - truth.data()[i];
    difference += d * d;
    norm += static_cast<double>(truth.data()[i]) * truth.data()[i];
  }
  return std::sqrt(difference / norm);
}

// The 3D Shepp-Logan head of radius 7 mm on a 23 x 25 x 21 grid of anisotropic voxels
// (0.7, 0.65, 0.75 mm) off the origin; 150 uniform directions, samples of 0.6 mm reaching
// the grid's farthest corner, each sample the mean plane integral over its interval.
struct RadonProblem {
  RadonGeometry geometry;
  VolumeGeometry volume;
  Array3D projections;
  Array3D truth;
};

RadonProblem MakeRadonProblem() {
  const VolumeGeometry volume =
      VolumeGeometry::Create({23, 25, 21}, {0.7, 0.65, 0.75}, {0.4, -0.3, 0.2}).value();
  const double reach = std::sqrt(std::pow(0.4 + 23 * 0.35, 2) + std::pow(0.3 + 25 * 0.325, 2) +
                                 std::pow(0.2 + 21 * 0.375, 2));
  const double spacing = 0.6;
  const int64_t samples = 2 * static_cast<int64_t>(std::ceil(reach / spacing)) + 3;
  RadonGeometry geometry = MakeUniformSolidAngleRadon(150, samples, spacing).value();
  const EllipsoidPhantom head = EllipsoidPhantom::SheppLogan3D(7.0);
  Array3D projections = EllipsoidRadonTransform(head, geometry, 3);
  Array3D truth = head.Rasterize(volume, 2);
  return {std::move(geometry), volume, std::move(projections), std::move(truth)};
}

IterativeOptions Observed(int64_t iterations, const Array3D& truth, std::vector<double>& errors) {
  IterativeOptions options;
  options.iterations = iterations;
  options.projector = ProjectorModel::kRadonPlaneIntegral;
  options.observe_volume = true;
  options.on_iteration = [&truth, &errors](const IterationReport& report) {
    errors.push_back(RelativeError(*report.volume, truth));
    return absl::OkStatus();
  };
  return options;
}

TEST(RadonIterativeTest, SirtReducesTheErrorOnAnalyticPlaneIntegrals) {
  const RadonProblem problem = MakeRadonProblem();
  CpuBackend backend;
  std::vector<double> errors;
  auto result = Sirt(problem.geometry, problem.volume, problem.projections,
                     Observed(30, problem.truth, errors), backend, {});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(errors.size(), 30u);
  std::printf("SIRT Radon: relative error %.4f after 1, %.4f after 30 iterations; "
              "relative residual %.4g\n",
              errors.front(), errors.back(), result->relative_residuals.back());
  EXPECT_LT(errors.back(), 0.8 * errors.front());
  EXPECT_LT(errors.back(), kSirtErrorBound);
  EXPECT_LT(result->relative_residuals.back(), result->relative_residuals.front());
}

TEST(RadonIterativeTest, CglsReducesTheErrorOnAnalyticPlaneIntegrals) {
  const RadonProblem problem = MakeRadonProblem();
  CpuBackend backend;
  std::vector<double> errors;
  auto result = Cgls(problem.geometry, problem.volume, problem.projections,
                     Observed(12, problem.truth, errors), backend, {});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(errors.empty());
  std::printf("CGLS Radon: relative error %.4f after 1, %.4f after %zu iterations\n",
              errors.front(), errors.back(), errors.size());
  EXPECT_LT(errors.back(), 0.8 * errors.front());
  EXPECT_LT(errors.back(), kCglsErrorBound);
}

TEST(RadonIterativeTest, OsSartBlocksAreSubsetsOfTheDirections) {
  const RadonProblem problem = MakeRadonProblem();
  CpuBackend backend;
  std::vector<double> errors;
  IterativeOptions options = Observed(4, problem.truth, errors);
  auto result = BlockIterative(problem.geometry, problem.volume, problem.projections, options, 10,
                               ViewOrder::kInterleaved, backend, {});
  ASSERT_TRUE(result.ok()) << result.status();
  std::printf("OS-SART Radon (10 blocks): relative error %.4f after 1, %.4f after 4\n",
              errors.front(), errors.back());
  EXPECT_LT(errors.back(), kOsSartErrorBound);
}

TEST(RadonIterativeTest, AWrongProjectorModelForTheKindIsRefusedNamingBoth) {
  const RadonProblem problem = MakeRadonProblem();
  CpuBackend backend;
  IterativeOptions options;
  options.iterations = 2;
  options.projector = ProjectorModel::kJoseph;
  auto result = Sirt(problem.geometry, problem.volume, problem.projections, options, backend, {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("joseph"));
  EXPECT_THAT(result.status().message(), HasSubstr("radon_3d"));
  // Through the registry, CGLS with the FBP start: the same refusal.
  CglsOptions cgls;
  cgls.iterative = options;
  cgls.iterative.initial_from_fbp = true;
  auto registry = AlgorithmRegistry::WithBuiltins().Run(
      {problem.geometry, problem.volume, cgls}, problem.projections, backend, {});
  EXPECT_EQ(registry.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(registry.status().message(), HasSubstr("radon_3d"));
}

TEST(RadonIterativeTest, RegistrySirtFromTheRadonFbpStartBeatsTheStart) {
  const RadonProblem problem = MakeRadonProblem();
  CpuBackend backend;
  SirtOptions sirt;
  sirt.iterative.iterations = 10;
  sirt.iterative.projector = ProjectorModel::kRadonPlaneIntegral;
  sirt.iterative.initial_from_fbp = true;
  auto refined = AlgorithmRegistry::WithBuiltins().Run(
      {problem.geometry, problem.volume, sirt}, problem.projections, backend, {});
  ASSERT_TRUE(refined.ok()) << refined.status();
  auto start = AlgorithmRegistry::WithBuiltins().Run(
      {problem.geometry, problem.volume, FbpOptions{}}, problem.projections, backend, {});
  ASSERT_TRUE(start.ok()) << start.status();
  const double start_error = RelativeError(*start, problem.truth);
  const double refined_error = RelativeError(*refined, problem.truth);
  std::printf("Radon FBP start %.4f, after 10 SIRT iterations %.4f\n", start_error,
              refined_error);
  EXPECT_LT(refined_error, start_error);
}

}  // namespace
}  // namespace tomo::core
