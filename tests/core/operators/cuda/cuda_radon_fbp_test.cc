// Tests of Radon FBP on CUDA (core/operators/cuda/cuda_radon_fbp.h, the device-resident
// pipeline, and cuda_radon_operators.h, RadonFbp bound to CUDA) against the CPU reference
// (RadonFbp with CpuRadonOperators) and the analytic 3D Shepp-Logan head.
//
// Every test skips when core::ListCudaDevices() is empty (CI has no GPU). Inputs are the
// head's exact plane integrals; outputs are filled with NaN first and must come back
// finite. Measured differences are printed as "[ measure ]" lines.
//
// Tolerance, on max |cuda - cpu| / max |cpu|, and why: the CPU back projects in float64, the
// kernel in float32, and Radon FBP sums 1600 filtered values of both signs that cancel to
// the volume: kFbpTolerance = 2e-3 (about 2e-4 expected).
#include "core/operators/cuda/cuda_radon_fbp.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/algorithms/radon_fbp.h"
#include "core/devices/devices.h"
#include "core/geometry/radon_geometry.h"
#include "core/operators/cpu/cpu_radon_operators.h"
#include "core/operators/cuda/cuda_radon_operators.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "core/phantom/ellipsoid_radon.h"
#include "gtest/gtest.h"
#include "tests/core/operators/cuda/cuda_vs_cpu_fixture.h"

namespace tomo::core {
namespace {

constexpr double kFbpTolerance = 2e-3;

void Measure(const std::string& what, double value) {
  std::printf("[ measure ] %s: %.3g\n", what.c_str(), value);
}

class CudaRadonFbpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<DeviceInfo> devices = ListCudaDevices();
    if (devices.empty()) GTEST_SKIP() << "no CUDA device";
    device_ = devices[0].index;
  }

  int device_ = 0;
};

TEST_F(CudaRadonFbpTest, FbpMatchesTheCpuAndReconstructsTheHead) {
  auto volume_geometry = VolumeGeometry::Create({48, 50, 46}, {0.65, 0.62, 0.7}, {0.3, -0.2, 0.4});
  ASSERT_TRUE(volume_geometry.ok());
  auto geometry = MakeUniformSolidAngleRadon(1600, 96, 0.6);
  ASSERT_TRUE(geometry.ok());
  const EllipsoidPhantom head = EllipsoidPhantom::SheppLogan3D(14.0);
  const Array3D projections = EllipsoidRadonTransform(head, *geometry, 3);
  CpuRadonOperators cpu_operators(0);
  auto cpu = RadonFbp(*geometry, *volume_geometry, projections, {}, cpu_operators);
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  auto fbp = cuda::CudaRadonFbp::Create(device_, *geometry, *volume_geometry, {});
  ASSERT_TRUE(fbp.ok()) << fbp.status();
  Array3D fused(volume_geometry->dims(), NAN);
  ASSERT_TRUE((*fbp)->Run(projections, fused).ok());
  EXPECT_TRUE(AllFinite(fused));
  Measure("fbp fused vs cpu", RelativeMaxDifference(fused, *cpu));
  EXPECT_LT(RelativeMaxDifference(fused, *cpu), kFbpTolerance);

  cuda::CudaRadonOperators cuda_operators(device_);
  auto bound = RadonFbp(*geometry, *volume_geometry, projections, {}, cuda_operators);
  ASSERT_TRUE(bound.ok()) << bound.status();
  Measure("fbp operators vs cpu", RelativeMaxDifference(*bound, *cpu));
  EXPECT_LT(RelativeMaxDifference(*bound, *cpu), kFbpTolerance);

  // Against the phantom, as the CPU test (radon_fbp_test.cc: RMSE 0.0449 measured).
  const Array3D truth = head.Rasterize(*volume_geometry, 2);
  double sum2 = 0;
  for (int64_t i = 0; i < truth.size(); ++i) {
    const double d = fused.data()[i] - truth.data()[i];
    sum2 += d * d;
  }
  const double rmse = std::sqrt(sum2 / static_cast<double>(truth.size()));
  Measure("fbp fused rmse vs phantom", rmse);
  EXPECT_LT(rmse, 0.05);

  // Dims that are not the geometry's are refused.
  Array3D wrong({46, 50, 47});
  EXPECT_EQ((*fbp)->Run(projections, wrong).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CudaRadonFbpTest, WindowedFbpFromEqualLinearAnglesMatchesTheCpu) {
  // Few directions, a window and a cut-off, a volume whose corners the samples do not reach.
  auto volume_geometry = VolumeGeometry::Create({31, 40, 27}, {0.9, 0.7, 1.1}, {-0.4, 0.6, 0.2});
  ASSERT_TRUE(volume_geometry.ok());
  auto geometry = MakeEqualLinearAngleRadon(24, 12, 45, 0.8);
  ASSERT_TRUE(geometry.ok());
  const Array3D projections =
      EllipsoidRadonTransform(EllipsoidPhantom::SheppLogan3D(13.0), *geometry, 2);
  const RadonFbpOptions options{{FilterWindow::kHann, 0.7}};
  CpuRadonOperators cpu_operators(0);
  auto cpu = RadonFbp(*geometry, *volume_geometry, projections, options, cpu_operators);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto fbp = cuda::CudaRadonFbp::Create(device_, *geometry, *volume_geometry, options.filter);
  ASSERT_TRUE(fbp.ok()) << fbp.status();
  Array3D fused(volume_geometry->dims(), NAN);
  ASSERT_TRUE((*fbp)->Run(projections, fused).ok());
  EXPECT_TRUE(AllFinite(fused));
  Measure("windowed fbp fused vs cpu", RelativeMaxDifference(fused, *cpu));
  EXPECT_LT(RelativeMaxDifference(fused, *cpu), kFbpTolerance);
  // A second run on the same object gives the same volume (plans and buffers reused).
  Array3D again(volume_geometry->dims(), NAN);
  ASSERT_TRUE((*fbp)->Run(projections, again).ok());
  EXPECT_EQ(RelativeMaxDifference(again, fused), 0.0);
}

}  // namespace
}  // namespace tomo::core
