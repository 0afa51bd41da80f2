// Tests of the CUDA Radon plane-integral projectors (core/operators/cuda/radon_back.cu,
// radon_forward.cu, CudaRadonProjector and its host-array helpers) against the CPU
// reference (core/operators/cpu/cpu_radon_projector.cc), on odd, anisotropic, off-centre
// volumes; the CUDA pair's own adjointness; every back projector launch shape and its
// global-memory path (samples much finer than voxels).
//
// Every test skips when core::ListCudaDevices() is empty (CI has no GPU). Inputs are fresh
// random values each run (seed printed; TOMO_TEST_SEED replays); outputs are filled with NaN
// first and must come back finite. Measured differences are printed as "[ measure ]" lines.
//
// Tolerances, on max |cuda - cpu| / max |cpu|, and why: the CPU evaluates sample positions
// and sums in float64, the kernels in float32 (positions of up to a few hundred samples,
// sums of a few hundred terms of data in [0.25, 1.25]): kProjectorTolerance = 1e-4 (about
// 1e-5 expected).
#include "core/operators/cuda/cuda_radon_projector.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/devices/devices.h"
#include "core/geometry/radon_geometry.h"
#include "core/operators/cpu/cpu_radon_projector.h"
#include "core/operators/cuda/cuda_resources.h"
#include "gtest/gtest.h"
#include "tests/core/operators/cuda/cuda_vs_cpu_fixture.h"
#include "tests/core/random_arrays.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

constexpr double kProjectorTolerance = 1e-4;

double Dot(const Array3D& a, const Array3D& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.size(); ++i) sum += static_cast<double>(a.data()[i]) * b.data()[i];
  return sum;
}

void Measure(const std::string& what, double value) {
  std::printf("[ measure ] %s: %.3g\n", what.c_str(), value);
}

RadonGeometry RandomDirections(int count, int64_t samples, double spacing,
                               std::mt19937_64& random) {
  std::uniform_real_distribution<double> phi(-M_PI, M_PI), cos_theta(-1, 1), weight(0.05, 0.5);
  RadonGeometry g;
  g.num_samples = samples;
  g.sample_spacing_mm = spacing;
  for (int i = 0; i < count; ++i) {
    g.directions.push_back({phi(random), std::acos(cos_theta(random)), weight(random)});
  }
  return g;
}

struct Case {
  std::string name;
  Size3 size;
  Vec3 voxel_mm, centre_mm;
  RadonGeometry geometry;
};

class CudaRadonProjectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<DeviceInfo> devices = ListCudaDevices();
    if (devices.empty()) GTEST_SKIP() << "no CUDA device";
    device_ = devices[0].index;
    seed_ = testing::TestSeed();
    random_.seed(seed_);
  }

  std::vector<Case> Cases() {
    std::vector<Case> cases;
    // Odd sizes, 0.3 x 0.45 x 0.7 mm voxels off centre, random directions; 40 samples of
    // 0.27 mm do not reach the corners (voxels off the ends read and give 0).
    cases.push_back({"random-anisotropic",
                     {37, 29, 23},
                     {0.3, 0.45, 0.7},
                     {0.8, -1.1, 0.35},
                     RandomDirections(57, 40, 0.27, random_)});
    // The benchmark's scheme: 208 uniform-solid-angle directions, samples reaching the
    // corners, more than one chunk of staged directions.
    cases.push_back({"uniform-208",
                     {45, 50, 41},
                     {0.5, 0.5, 0.5},
                     {0.2, 0.1, -0.3},
                     MakeUniformSolidAngleRadon(208, 81, 0.55).value()});
    // Equal linear angles (directions along the axes' planes), coarse samples.
    cases.push_back({"equal-linear-angle",
                     {33, 20, 47},
                     {0.6, 0.9, 0.4},
                     {0, 0, 0},
                     MakeEqualLinearAngleRadon(16, 9, 36, 1.1).value()});
    return cases;
  }

  int device_ = 0;
  uint64_t seed_ = 0;
  std::mt19937_64 random_;
};

TEST_F(CudaRadonProjectorTest, BackAndForwardMatchTheCpuReference) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  for (Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    auto volume_geometry = VolumeGeometry::Create(c.size, c.voxel_mm, c.centre_mm);
    ASSERT_TRUE(volume_geometry.ok());
    const Array3D x = testing::RandomArray(volume_geometry->dims(), random_);
    const Array3D y = testing::RandomArray(c.geometry.projection_dims(), random_);
    Array3D cpu_back(volume_geometry->dims()), cuda_back(volume_geometry->dims(), NAN);
    ASSERT_TRUE(RadonBackCpu(c.geometry, *volume_geometry, y, cpu_back, 0).ok());
    absl::Status status = cuda::RadonBackCuda(device_, c.geometry, *volume_geometry, y, cuda_back);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_TRUE(AllFinite(cuda_back));
    const double back_difference = RelativeMaxDifference(cuda_back, cpu_back);
    Measure(c.name + " back", back_difference);
    EXPECT_LT(back_difference, kProjectorTolerance);

    Array3D cpu_forward(c.geometry.projection_dims()),
        cuda_forward(c.geometry.projection_dims(), NAN);
    ASSERT_TRUE(RadonForwardCpu(c.geometry, *volume_geometry, x, cpu_forward, 0).ok());
    status = cuda::RadonForwardCuda(device_, c.geometry, *volume_geometry, x, cuda_forward);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_TRUE(AllFinite(cuda_forward));
    const double forward_difference = RelativeMaxDifference(cuda_forward, cpu_forward);
    Measure(c.name + " forward", forward_difference);
    EXPECT_LT(forward_difference, kProjectorTolerance);

    // The CUDA pair is adjoint in itself.
    const double lhs = Dot(cuda_forward, y), rhs = Dot(x, cuda_back);
    Measure(c.name + " adjoint mismatch", std::abs(lhs - rhs) / std::abs(lhs));
    EXPECT_NEAR(lhs, rhs, kProjectorTolerance * std::abs(lhs));
  }
}

TEST_F(CudaRadonProjectorTest, EveryBackLaunchShapeAndScaledAccumulationMatch) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  auto volume_geometry = VolumeGeometry::Create({41, 19, 35}, {0.4, 0.6, 0.5}, {-0.5, 0.3, 0.9});
  ASSERT_TRUE(volume_geometry.ok());
  const RadonGeometry g = RandomDirections(131, 70, 0.4, random_);
  const Array3D y = testing::RandomArray(g.projection_dims(), random_);
  std::vector<double> scales;
  std::uniform_real_distribution<double> scale(-1, 2);
  for (int i = 0; i < 131; ++i) scales.push_back(scale(random_));
  Array3D cpu(volume_geometry->dims());
  ASSERT_TRUE(RadonBackScaledCpu(g, *volume_geometry, y, scales, cpu, 0).ok());

  auto device = cuda::ScopedDevice::Enter(device_);
  ASSERT_TRUE(device.ok());
  auto stream = cuda::Stream::Create();
  ASSERT_TRUE(stream.ok());
  const cudaStream_t s = stream->get();
  auto projector = cuda::CudaRadonProjector::Create(g, *volume_geometry, s);
  ASSERT_TRUE(projector.ok()) << projector.status();
  auto d_y = cuda::DeviceBuffer<float>::Allocate(y.size(), s);
  auto d_volume = cuda::DeviceBuffer<float>::Allocate(cpu.size(), s);
  auto d_scales = cuda::DeviceBuffer<float>::Allocate(scales.size(), s);
  ASSERT_TRUE(d_y.ok() && d_volume.ok() && d_scales.ok());
  std::vector<float> float_scales(scales.begin(), scales.end());
  ASSERT_EQ(cudaMemcpy(d_y->get(), y.data(), y.size_bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_scales->get(), float_scales.data(), float_scales.size() * sizeof(float),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  for (int voxels : {0, 1, 2, 4, 8, 16}) {
    SCOPED_TRACE(voxels);
    projector->set_back_voxels_per_thread(voxels);
    // Half the scales, twice (the second accumulating), is the whole.
    ASSERT_TRUE(cudaMemsetAsync(d_volume->get(), 0xff, cpu.size_bytes(), s) == cudaSuccess);
    std::vector<float> half(float_scales);
    for (float& h : half) h *= 0.5f;
    auto d_half = cuda::DeviceBuffer<float>::Allocate(half.size(), s);
    ASSERT_TRUE(d_half.ok());
    ASSERT_EQ(cudaMemcpyAsync(d_half->get(), half.data(), half.size() * sizeof(float),
                              cudaMemcpyHostToDevice, s),
              cudaSuccess);
    ASSERT_TRUE(projector->BackScaled(d_y->get(), d_half->get(), d_volume->get(), false).ok());
    ASSERT_TRUE(projector->BackScaled(d_y->get(), d_half->get(), d_volume->get(), true).ok());
    Array3D out(volume_geometry->dims(), NAN);
    ASSERT_EQ(
        cudaMemcpyAsync(out.data(), d_volume->get(), out.size_bytes(), cudaMemcpyDeviceToHost, s),
        cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_TRUE(AllFinite(out));
    const double difference = RelativeMaxDifference(out, cpu);
    Measure("back shape " + std::to_string(voxels), difference);
    EXPECT_LT(difference, kProjectorTolerance);
  }
  projector->set_back_voxels_per_thread(3);
  EXPECT_EQ(projector->Back(d_y->get(), d_volume->get()).code(), absl::StatusCode::kInternal);
  cudaGetLastError();
}

TEST_F(CudaRadonProjectorTest, SamplesMuchFinerThanVoxelsTakeTheGlobalPath) {
  // 1/120 mm samples under 1 mm voxels: a block's window (31 x 120 samples) exceeds shared
  // memory, so the back projector reads global memory; the forward bins still fit.
  SCOPED_TRACE(testing::SeedTrace(seed_));
  auto volume_geometry = VolumeGeometry::Create({33, 9, 5}, {1.0, 1.0, 1.0}, {0.5, 0, 0});
  ASSERT_TRUE(volume_geometry.ok());
  RadonGeometry g = RandomDirections(7, 4400, 1.0 / 120, random_);
  g.directions[0] = {0.0, M_PI / 2, 0.3};  // along x: the widest window
  const Array3D x = testing::RandomArray(volume_geometry->dims(), random_);
  const Array3D y = testing::RandomArray(g.projection_dims(), random_);
  Array3D cpu_back(volume_geometry->dims()), cuda_back(volume_geometry->dims(), NAN);
  ASSERT_TRUE(RadonBackCpu(g, *volume_geometry, y, cpu_back, 0).ok());
  ASSERT_TRUE(cuda::RadonBackCuda(device_, g, *volume_geometry, y, cuda_back).ok());
  Measure("fine samples back", RelativeMaxDifference(cuda_back, cpu_back));
  EXPECT_LT(RelativeMaxDifference(cuda_back, cpu_back), kProjectorTolerance);
  Array3D cpu_forward(g.projection_dims()), cuda_forward(g.projection_dims(), NAN);
  ASSERT_TRUE(RadonForwardCpu(g, *volume_geometry, x, cpu_forward, 0).ok());
  ASSERT_TRUE(cuda::RadonForwardCuda(device_, g, *volume_geometry, x, cuda_forward).ok());
  Measure("fine samples forward", RelativeMaxDifference(cuda_forward, cpu_forward));
  EXPECT_LT(RelativeMaxDifference(cuda_forward, cpu_forward), kProjectorTolerance);
}

}  // namespace
}  // namespace tomo::core
