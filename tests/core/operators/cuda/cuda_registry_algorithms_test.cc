// The registry entries added for EPR and the stored-matrix and statistical methods, run on
// the CUDA backend and on the CPU reference from the same analytic data: SIRT and CGLS on
// a RadonGeometry (plane-integral projector), "art" (the device stored matrix) and "icd"
// (the CUDA runner). Label gpu: skips without a CUDA device.
#include <cmath>
#include <string>
#include <vector>

#include "core/algorithms/reconstruction.h"
#include "core/geometry/geometry_builders.h"
#include "core/geometry/radon_geometry.h"
#include "core/phantom/ellipse_phantom.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "core/phantom/ellipsoid_radon.h"
#include "core/statistical/qggmrf_prior.h"
#include "core/system_matrix/stored_matrix.h"
#include "core/system_matrix/tiled_runs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/operators/cuda/cuda_vs_cpu_fixture.h"

namespace tomo::core {
namespace {

double Rmse(const Array3D& a, const Array3D& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a.data()[i]) - b.data()[i];
    sum += d * d;
  }
  return std::sqrt(sum / static_cast<double>(a.size()));
}

double MaxAbs(const Array3D& a) {
  double m = 0;
  for (int64_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a.data()[i])));
  return m;
}

class CudaRegistryAlgorithmsTest : public CudaVsCpuTest {
 protected:
  // Runs the request on both backends; expects the CUDA image within `tolerance` (RMSE of
  // the difference over the CPU image's maximum) of the CPU one; prints both RMSEs against
  // the truth. cuda_stages (if given) receives the CUDA run's progress stages.
  void Compare(const ReconstructionRequest& request, const Array3D& projections,
               const Array3D& truth, double tolerance,
               std::vector<std::string>* cuda_stages = nullptr) {
    const AlgorithmRegistry registry = AlgorithmRegistry::WithBuiltins();
    RunContext context;
    context.on_progress = [&](const ProgressUpdate& update) {
      if (cuda_stages != nullptr) cuda_stages->push_back(update.stage);
    };
    auto gpu = registry.Run(request, projections, *cuda_, context);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    auto cpu = registry.Run(request, projections, cpu_, {});
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    const double difference = Rmse(*gpu, *cpu) / MaxAbs(*cpu);
    std::printf("%s: CUDA vs CPU %.3g of the maximum; RMSE against the phantom CUDA %.4f, "
                "CPU %.4f\n",
                AlgorithmName(request.algorithm).c_str(), difference, Rmse(*gpu, truth),
                Rmse(*cpu, truth));
    EXPECT_LT(difference, tolerance);
  }
};

TEST_F(CudaRegistryAlgorithmsTest, SirtAndCglsOnPlaneIntegrals) {
  const VolumeGeometry volume =
      VolumeGeometry::Create({23, 25, 21}, {0.7, 0.65, 0.75}, {0.4, -0.3, 0.2}).value();
  const RadonGeometry geometry = MakeUniformSolidAngleRadon(150, 45, 0.6).value();
  const EllipsoidPhantom head = EllipsoidPhantom::SheppLogan3D(7.0);
  const Array3D projections = EllipsoidRadonTransform(head, geometry, 3);
  const Array3D truth = head.Rasterize(volume, 2);
  SirtOptions sirt;
  sirt.iterative.iterations = 10;
  sirt.iterative.projector = ProjectorModel::kRadonPlaneIntegral;
  Compare({geometry, volume, sirt}, projections, truth, 1e-3);
  CglsOptions cgls;
  cgls.iterative = sirt.iterative;
  Compare({geometry, volume, cgls}, projections, truth, 1e-3);
}

TEST_F(CudaRegistryAlgorithmsTest, ArtOnTheDeviceStoredMatrix) {
  const double voxel = 0.6, side = 48 * voxel;
  FanConeOptions fan;
  fan.source_origin_mm = 2 * side;
  fan.origin_detector_mm = side;
  fan.detector = {1, 77, 1.0, 0.9, 0.0, 0.0};
  fan.angles_rad = UniformAnglesRad(64, 0.0, 2 * M_PI);
  const VectorGeometry geometry = MakeFan2D(fan).value();
  const VolumeGeometry volume = VolumeGeometry::Create({48, 48, 1}, {voxel, voxel, voxel}, {}).value();
  const auto phantom =
      EllipsoidPhantom::ExtrudedFrom(EllipsePhantom::ModifiedSheppLogan(side / 2.0));
  const Array3D projections = phantom.Project(geometry, 2);
  const Array3D truth = phantom.Rasterize(volume, 2);
  for (auto format : {system_matrix::MatrixFormat::kSymmetric, system_matrix::MatrixFormat::kCsr}) {
    StoredArtOptions art;
    art.art.iterations = 5;
    art.format = format;
    Compare({geometry, volume, art}, projections, truth, 1e-3);
  }
  // The tiled kernels (the JobSpec's ART_KERNELS_TILED) on the symmetric format: the same
  // image as the CPU's, and the job's first event says they ran.
  StoredArtOptions tiled;
  tiled.art.iterations = 5;
  tiled.format = system_matrix::MatrixFormat::kSymmetric;
  tiled.kernels = StoredArtKernels::kTiled;
  std::vector<std::string> stages;
  Compare({geometry, volume, tiled}, projections, truth, 1e-3, &stages);
  ASSERT_FALSE(stages.empty());
  EXPECT_THAT(stages.front(), ::testing::HasSubstr("symmetric format"));
  EXPECT_THAT(stages.front(), ::testing::HasSubstr(", tiled kernels"));

  // A budget that holds the matrix but not the tiled layout: the tiled kernels are refused
  // before the upload, naming the field; the orbit kernels run under the same budget.
  const system_matrix::StoredMatrix matrix =
      system_matrix::BuildStoredMatrix(geometry, volume, tiled.format, 0).value();
  const uint64_t layout_bytes = matrix.symmetric()->TiledLayout().value()->bytes();
  const uint64_t budget = layout_bytes - 1;
  ASSERT_LE(matrix.counted().bytes, budget) << "the case needs a layout larger than its matrix";
  RunContext tight;
  tight.memory_budget_bytes = budget;
  const AlgorithmRegistry registry = AlgorithmRegistry::WithBuiltins();
  auto refused = registry.Run({geometry, volume, tiled}, projections, *cuda_, tight);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              ::testing::HasSubstr("algorithm.art.kernels: ART_KERNELS_TILED needs"));
  StoredArtOptions orbit = tiled;
  orbit.kernels = StoredArtKernels::kOrbit;
  EXPECT_TRUE(registry.Run({geometry, volume, orbit}, projections, *cuda_, tight).ok());
}

TEST_F(CudaRegistryAlgorithmsTest, IcdOnTheCudaRunner) {
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
  icd.icd.iterations = 3;
  icd.icd.prior = statistical::DefaultQggmrfPrior(volume);
  icd.flat_field_photons = 1e5;
  // The FDK starts differ by the backends' interpolation (8-bit texture weights on CUDA).
  Compare({geometry, volume, icd}, head.Project(geometry, 2), head.Rasterize(volume, 2), 1e-2);
}

}  // namespace
}  // namespace tomo::core
