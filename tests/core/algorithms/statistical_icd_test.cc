// The "icd" registry entry on a small cone beam of the 3D Shepp-Logan head scaled to CT
// attenuation (line integrals up to about 1): the cost reported every iteration falls, the
// FDK start is improved on, the weights come from the photon statistics per view and
// column, cancellation stops it, a budget too small is refused before anything runs.
#include "core/algorithms/statistical_icd.h"

#include <cmath>
#include <vector>

#include "core/algorithms/reconstruction.h"
#include "core/geometry/geometry_builders.h"
#include "core/operators/cpu/cpu_backend.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "core/statistical/qggmrf_prior.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

struct ConeCase {
  ReconstructionRequest request;
  Array3D projections;
  Array3D truth;
};

// A 20 x 22 x 18 grid of 0.06 x 0.06 x 0.07 mm voxels off the axis (so the head, radius
// 0.55 mm, has line integrals of about 1), 40 views, flat detector.
ConeCase MakeConeCase(int64_t iterations) {
  const VolumeGeometry volume =
      VolumeGeometry::Create({20, 22, 18}, {0.06, 0.06, 0.07}, {0.02, -0.01, 0.03}).value();
  FanConeOptions cone;
  cone.detector = {30, 34, 0.09, 0.09, 0, 0};
  cone.source_origin_mm = 4.0;
  cone.origin_detector_mm = 2.0;
  cone.angles_rad = UniformAnglesRad(40, 0, 2 * M_PI);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const EllipsoidPhantom head = EllipsoidPhantom::SheppLogan3D(0.55);
  IcdAlgorithmOptions icd;
  icd.icd.iterations = iterations;
  icd.icd.prior = statistical::DefaultQggmrfPrior(volume);
  icd.flat_field_photons = 1e5;
  return {{geometry, volume, icd}, head.Project(geometry, 2), head.Rasterize(volume, 2)};
}

double Rmse(const Array3D& a, const Array3D& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a.data()[i]) - b.data()[i];
    sum += d * d;
  }
  return std::sqrt(sum / static_cast<double>(a.size()));
}

TEST(StatisticalIcdTest, TheCostFallsEveryIterationAndTheFdkStartIsImproved) {
  const ConeCase c = MakeConeCase(4);
  CpuBackend backend;
  std::vector<double> costs;
  RunContext context;
  context.on_progress = [&costs](const ProgressUpdate& update) {
    if (update.cost >= 0) costs.push_back(update.cost);
  };
  const AlgorithmRegistry registry = AlgorithmRegistry::WithBuiltins();
  auto icd = registry.Run(c.request, c.projections, backend, context);
  ASSERT_TRUE(icd.ok()) << icd.status();
  ASSERT_EQ(costs.size(), 4u);
  for (size_t i = 1; i < costs.size(); ++i) EXPECT_LT(costs[i], costs[i - 1]) << i;
  auto fdk = registry.Run({c.request.geometry, c.request.volume, FbpOptions{}}, c.projections,
                          backend, {});
  ASSERT_TRUE(fdk.ok()) << fdk.status();
  const double icd_rmse = Rmse(*icd, c.truth), fdk_rmse = Rmse(*fdk, c.truth);
  std::printf("ICD 4 iterations RMSE %.4f, FDK %.4f; cost %.5g -> %.5g\n", icd_rmse, fdk_rmse,
              costs.front(), costs.back());
  EXPECT_LT(icd_rmse, fdk_rmse);
  for (int64_t i = 0; i < icd->size(); ++i) ASSERT_GE(icd->data()[i], 0.0f);
}

TEST(StatisticalIcdTest, PhotonStatisticsPerColumnWeighTheRays) {
  ConeCase c = MakeConeCase(2);
  const Dims3 dims = c.projections.dims();
  // One photon count per view and column, the same everywhere: the run equals the one
  // with that flat-field count; another count changes the weights' scale against the prior.
  auto stats = std::make_shared<Array3D>(Dims3{dims.d0, 1, dims.d2}, 1e5f);
  CpuBackend backend;
  const AlgorithmRegistry registry = AlgorithmRegistry::WithBuiltins();
  auto flat = registry.Run(c.request, c.projections, backend, {});
  ASSERT_TRUE(flat.ok()) << flat.status();
  auto& options = std::get<IcdAlgorithmOptions>(c.request.algorithm);
  options.flat_field_photons = 0;
  options.photon_statistics = stats;
  auto per_column = registry.Run(c.request, c.projections, backend, {});
  ASSERT_TRUE(per_column.ok()) << per_column.status();
  EXPECT_LT(Rmse(*flat, *per_column), 1e-6);
  for (int64_t v = 0; v < dims.d0; ++v) stats->at(v, 0, 3) = 1e2f;
  auto changed = registry.Run(c.request, c.projections, backend, {});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_GT(Rmse(*flat, *changed), 1e-6);
  options.photon_statistics = nullptr;
  EXPECT_THAT(registry.Run(c.request, c.projections, backend, {}).status().message(),
              HasSubstr("flat_field_photons: 0 must be a finite value > 0"));
}

TEST(StatisticalIcdTest, CancellationAndTheBudgetStopIt) {
  const ConeCase c = MakeConeCase(3);
  CpuBackend backend;
  const AlgorithmRegistry registry = AlgorithmRegistry::WithBuiltins();
  int iterations_seen = 0;
  RunContext context;
  context.on_progress = [&](const ProgressUpdate& update) {
    if (update.cost >= 0) ++iterations_seen;
  };
  context.is_cancelled = [&] { return iterations_seen >= 1; };
  auto cancelled = registry.Run(c.request, c.projections, backend, context);
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled) << cancelled.status();
  EXPECT_EQ(iterations_seen, 1);

  RunContext small;
  small.memory_budget_bytes = 1000;
  auto refused = registry.Run(c.request, c.projections, backend, small);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("memory budget is 1000 bytes"));
  EXPECT_GT(registry.MinimumDeviceBytes(c.request), 1000u);
}

}  // namespace
}  // namespace tomo::core
