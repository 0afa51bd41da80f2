// Tests of the CUDA backend against the CPU reference (CpuBackend), of its adjointness on
// the GPU, and of CUDA FBP against CPU FBP and the analytic Shepp-Logan phantom.
//
// Every test that needs a device skips when core::ListCudaDevices() is empty (CI has no
// GPU). Inputs are fresh random values each run (seed printed; TOMO_TEST_SEED replays);
// outputs are filled with NaN first and every element must come back finite (written).
// Measured differences are printed as "[ measure ]" lines.
//
// Tolerances, and why: the CPU reference evaluates Joseph positions and sums in float64;
// the CUDA kernels in float32 (positions to about one float ulp of the image size, sums
// in float). Differences are therefore float rounding, bounded relative to the largest
// reference value: 1e-4 for the projectors (about 1e-5 to 3e-5 expected), 2e-5 for the row
// filter (both sides are single-precision FFTs of the same length), 1e-5 relative for the
// adjoint identity on the GPU, and for FBP 2e-4 of the image's largest value.

#include "core/operators/cuda/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/algorithms/parallel_2d_fbp.h"
#include "core/devices/devices.h"
#include "core/filters/ramp_filter.h"
#include "core/operators/cpu/cpu_backend.h"
#include "core/phantom/ellipse_phantom.h"
#include "gtest/gtest.h"
#include "tests/core/operators/cuda/cuda_vs_cpu_fixture.h"
#include "tests/core/random_arrays.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Bounds on max |cuda - cpu| / max |cpu|; see the file comment.
constexpr double kProjectorTolerance = 1e-4;
constexpr double kFilterTolerance = 2e-5;
constexpr double kAdjointTolerance = 1e-5;
constexpr double kFbpTolerance = 2e-4;

struct ProjectorCase {
  std::string name;
  Size3 size;
  Vec3 voxel_mm;
  Vec3 center_mm;
  int64_t num_detectors;
  double spacing_mm;
  double offset_mm;
  std::vector<double> angles_rad;

  VolumeGeometry volume() const { return VolumeGeometry::Create(size, voxel_mm, center_mm).value(); }
  ParallelGeometry2D geometry() const {
    return ParallelGeometry2D::Create(num_detectors, spacing_mm, offset_mm, angles_rad).value();
  }
};

// Multiples of 45 degrees (the two stepping cases tie at the odd ones), appended to a set.
std::vector<double> WithDiagonals(std::vector<double> angles) {
  for (int k = -1; k <= 8; ++k) angles.push_back(k * kPi / 4);
  angles.push_back(3 * kPi / 4 + 2 * kPi);
  return angles;
}

std::vector<double> RandomAngles(int count, double span, std::mt19937_64& random) {
  std::uniform_real_distribution<double> uniform(0.0, span);
  std::vector<double> angles(static_cast<size_t>(count));
  for (double& a : angles) a = uniform(random);
  return angles;
}

std::vector<ProjectorCase> ProjectorCases(std::mt19937_64& random) {
  std::vector<ProjectorCase> cases;
  cases.push_back({"square_centred", {64, 64, 1}, {1.0, 1.0, 1.0}, {0, 0, 0}, 96, 1.0, 0.0,
                   WithDiagonals(ParallelGeometry2D::UniformAngles(90, 0.0, kPi))});
  cases.push_back({"odd_offsets_nonsquare", {37, 53, 1}, {0.7, 1.3, 1.0}, {2.5, -3.1, 0}, 71,
                   0.9, 1.7, WithDiagonals(RandomAngles(41, 2 * kPi, random))});
  // Many detector elements per pixel: long ranges in the back projection's gather.
  cases.push_back({"fine_detector", {50, 40, 1}, {1.0, 1.0, 1.0}, {-4.0, 6.0, 0}, 301, 0.25,
                   -3.3, WithDiagonals(RandomAngles(30, kPi, random))});
  // Detector elements wider than pixels: most pixels see one or two rays per view.
  cases.push_back({"coarse_detector", {65, 65, 1}, {0.5, 0.5, 0.5}, {0, 0, 0}, 33, 2.5, 0.4,
                   WithDiagonals(RandomAngles(25, kPi, random))});
  // Rays that miss the image entirely (detector far wider than the volume).
  cases.push_back({"wide_detector_offset", {31, 17, 1}, {1.0, 2.0, 1.0}, {10.0, 0, 0}, 257,
                   1.0, -20.0, WithDiagonals(RandomAngles(20, 2 * kPi, random))});
  // Degenerate shapes: one pixel, one row of pixels, one detector element.
  cases.push_back({"single_pixel", {1, 1, 1}, {1.5, 1.5, 1.5}, {0.2, -0.1, 0}, 3, 1.0, 0.0,
                   WithDiagonals(RandomAngles(7, 2 * kPi, random))});
  cases.push_back({"one_row_one_detector", {7, 1, 1}, {1.0, 0.6, 1.0}, {0, 0, 0}, 1, 2.0, 0.3,
                   WithDiagonals(RandomAngles(9, kPi, random))});
  cases.push_back({"larger", {300, 280, 1}, {0.8, 0.8, 0.8}, {1.0, -2.0, 0}, 421, 0.75, 0.3,
                   ParallelGeometry2D::UniformAngles(180, 0.1, kPi)});
  return cases;
}

// Signed values: the CUDA kernels must handle both signs as the CPU does.
Array3D RandomArray(Dims3 dims, std::mt19937_64& random) {
  return testing::RandomArray(dims, random, -1.0f, 1.0f);
}

Array3D Poisoned(Dims3 dims) { return Array3D(dims, std::numeric_limits<float>::quiet_NaN()); }

struct Difference {
  double max_abs = 0;        // over finite elements
  double reference_max = 0;  // max |want|
  int64_t not_finite = 0;    // elements of `got` left NaN (unwritten) or not finite
  double relative() const { return reference_max > 0 ? max_abs / reference_max : max_abs; }
};

Difference Compare(const Array3D& got, const Array3D& want) {
  Difference d;
  EXPECT_EQ(got.dims(), want.dims());
  for (int64_t i = 0; i < want.size(); ++i) {
    const double g = got.data()[i];
    const double w = want.data()[i];
    d.reference_max = std::max(d.reference_max, std::abs(w));
    if (!std::isfinite(g)) {
      ++d.not_finite;
      continue;
    }
    d.max_abs = std::max(d.max_abs, std::abs(g - w));
  }
  return d;
}

void Report(const std::string& what, const Difference& d) {
  std::printf("[ measure ] %-48s max abs diff %.3e  max |ref| %.3e  relative %.3e\n",
              what.c_str(), d.max_abs, d.reference_max, d.relative());
}

double Dot(const Array3D& a, const Array3D& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    sum += static_cast<double>(a.data()[i]) * static_cast<double>(b.data()[i]);
  }
  return sum;
}

double Rmse(const Array3D& a, const Array3D& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a.data()[i]) - static_cast<double>(b.data()[i]);
    sum += d * d;
  }
  return std::sqrt(sum / static_cast<double>(a.size()));
}

// Tests that need no device: listing and the factory's refusals work everywhere.
TEST(CudaDevicesTest, ListDevicesNeverFailsAndNamesDevices) {
  const std::vector<DeviceInfo> devices = cuda::ListDevices();
  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(devices[i].kind, DeviceKind::kCuda);
    EXPECT_EQ(devices[i].index, static_cast<int>(i));
    EXPECT_EQ(devices[i].id, "cuda:" + std::to_string(i));
    EXPECT_FALSE(devices[i].name.empty());
    EXPECT_GT(devices[i].memory_total_bytes, 0u);
    EXPECT_LE(devices[i].memory_free_bytes, devices[i].memory_total_bytes);
    std::printf("[ measure ] device %s: %s, %.1f GiB free of %.1f GiB\n", devices[i].id.c_str(),
                devices[i].name.c_str(), devices[i].memory_free_bytes / 1073741824.0,
                devices[i].memory_total_bytes / 1073741824.0);
  }
  EXPECT_EQ(ListCudaDevices().size(), devices.size());
}

TEST(CudaDevicesTest, MakeBackendRefusesIndicesThatAreNotDevices) {
  const int count = static_cast<int>(cuda::ListDevices().size());
  for (int index : {-1, count, count + 7}) {
    auto backend = cuda::MakeBackend(index);
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument) << index;
  }
}

class CudaBackendTest : public CudaVsCpuTest {};

TEST_F(CudaBackendTest, NameIsTheDeviceId) { EXPECT_EQ(cuda_->name(), "cuda:0"); }

TEST_F(CudaBackendTest, ForwardProjectMatchesCpu) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  for (const ProjectorCase& c : ProjectorCases(random_)) {
    SCOPED_TRACE(c.name);
    const ParallelGeometry2D geometry = c.geometry();
    const VolumeGeometry volume = c.volume();
    const Array3D image = RandomArray(volume.dims(), random_);
    Array3D want = Poisoned(geometry.projection_dims());
    Array3D got = Poisoned(geometry.projection_dims());
    ASSERT_TRUE(cpu_.ForwardProject(geometry, volume, image, want).ok());
    const absl::Status status = cuda_->ForwardProject(geometry, volume, image, got);
    ASSERT_TRUE(status.ok()) << status;
    const Difference d = Compare(got, want);
    Report("forward " + c.name, d);
    EXPECT_EQ(d.not_finite, 0);
    EXPECT_GT(d.reference_max, 0);
    EXPECT_LE(d.relative(), kProjectorTolerance);
  }
}

TEST_F(CudaBackendTest, BackProjectMatchesCpu) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  for (const ProjectorCase& c : ProjectorCases(random_)) {
    SCOPED_TRACE(c.name);
    const ParallelGeometry2D geometry = c.geometry();
    const VolumeGeometry volume = c.volume();
    const Array3D projections = RandomArray(geometry.projection_dims(), random_);
    Array3D want = Poisoned(volume.dims());
    Array3D got = Poisoned(volume.dims());
    ASSERT_TRUE(cpu_.BackProject(geometry, volume, projections, want).ok());
    const absl::Status status = cuda_->BackProject(geometry, volume, projections, got);
    ASSERT_TRUE(status.ok()) << status;
    const Difference d = Compare(got, want);
    Report("back " + c.name, d);
    EXPECT_EQ(d.not_finite, 0);
    EXPECT_GT(d.reference_max, 0);
    EXPECT_LE(d.relative(), kProjectorTolerance);
  }
}

// <A x, y> = <x, A^T y> with both operators on the GPU.
TEST_F(CudaBackendTest, BackProjectIsTheAdjointOfForwardProjectOnTheGpu) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  for (const ProjectorCase& c : ProjectorCases(random_)) {
    SCOPED_TRACE(c.name);
    const ParallelGeometry2D geometry = c.geometry();
    const VolumeGeometry volume = c.volume();
    const Array3D x = RandomArray(volume.dims(), random_);
    const Array3D y = RandomArray(geometry.projection_dims(), random_);
    Array3D ax = Poisoned(geometry.projection_dims());
    Array3D aty = Poisoned(volume.dims());
    ASSERT_TRUE(cuda_->ForwardProject(geometry, volume, x, ax).ok());
    ASSERT_TRUE(cuda_->BackProject(geometry, volume, y, aty).ok());
    const double left = Dot(ax, y);
    const double right = Dot(x, aty);
    // Scale: the sum of |terms|, so that cancellation in a random dot product does not
    // make the bound meaningless.
    double scale = 0;
    for (int64_t i = 0; i < ax.size(); ++i) scale += std::abs(ax.data()[i] * y.data()[i]);
    const double relative = std::abs(left - right) / scale;
    std::printf("[ measure ] %-48s <Ax,y> %.9e  <x,A^T y> %.9e  |diff|/sum|terms| %.3e\n",
                ("adjoint " + c.name).c_str(), left, right, relative);
    EXPECT_LE(relative, kAdjointTolerance);
  }
}

TEST_F(CudaBackendTest, FilterRowsMatchesCpu) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  struct FilterCase {
    int64_t views, detectors;
    double spacing;
    FilterOptions options;
  };
  // More than kMaxCachedPlans shapes, so the plan cache also evicts.
  const std::vector<FilterCase> cases = {
      {90, 96, 1.0, {FilterWindow::kRamLak, 1.0}},
      {41, 71, 0.9, {FilterWindow::kSheppLogan, 1.0}},
      {7, 1, 0.5, {FilterWindow::kRamLak, 1.0}},
      {13, 33, 2.5, {FilterWindow::kHann, 0.8}},
      {180, 421, 0.75, {FilterWindow::kHamming, 0.6}},
      {5, 257, 1.0, {FilterWindow::kCosine, 1.0}},
      {1, 1000, 0.2, {FilterWindow::kSheppLogan, 0.9}},
      {33, 129, 1.1, {FilterWindow::kRamLak, 1.0}},
      {360, 512, 0.5, {FilterWindow::kSheppLogan, 1.0}},
      {90, 96, 1.0, {FilterWindow::kRamLak, 1.0}},  // the first shape again: cached plan
  };
  for (const FilterCase& c : cases) {
    const std::string name = "filter " + std::to_string(c.views) + "x" + std::to_string(c.detectors);
    SCOPED_TRACE(name);
    auto filter = RampFilter::Create(c.options, c.detectors, c.spacing);
    ASSERT_TRUE(filter.ok()) << filter.status();
    const Array3D input = RandomArray({c.views, 1, c.detectors}, random_);
    Array3D want = input.Clone();
    Array3D got = input.Clone();
    ASSERT_TRUE(cpu_.FilterRows(*filter, want).ok());
    const absl::Status status = cuda_->FilterRows(*filter, got);
    ASSERT_TRUE(status.ok()) << status;
    const Difference d = Compare(got, want);
    Report(name, d);
    EXPECT_EQ(d.not_finite, 0);
    EXPECT_LE(d.relative(), kFilterTolerance);
  }
}

// A sinogram larger than one cuFFT batch (2^26 padded samples) goes in chunks, the last
// one with its own plan.
TEST_F(CudaBackendTest, FilterRowsInSeveralBatchesMatchesCpu) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  const int64_t detectors = 1000;  // padded to 2048
  const int64_t views = (int64_t{1} << 26) / 2048 + 77;
  auto filter = RampFilter::Create({FilterWindow::kSheppLogan, 1.0}, detectors, 0.5);
  ASSERT_TRUE(filter.ok());
  ASSERT_EQ(filter->padded_length(), 2048);
  const Array3D input = RandomArray({views, 1, detectors}, random_);
  Array3D want = input.Clone();
  Array3D got = input.Clone();
  ASSERT_TRUE(cpu_.FilterRows(*filter, want).ok());
  const absl::Status status = cuda_->FilterRows(*filter, got);
  ASSERT_TRUE(status.ok()) << status;
  const Difference d = Compare(got, want);
  Report("filter in batches " + std::to_string(views) + "x1000", d);
  EXPECT_EQ(d.not_finite, 0);
  EXPECT_LE(d.relative(), kFilterTolerance);
}

TEST_F(CudaBackendTest, RefusesArraysThatDoNotMatchTheGeometry) {
  const ProjectorCase c = ProjectorCases(random_)[1];
  const ParallelGeometry2D geometry = c.geometry();
  const VolumeGeometry volume = c.volume();
  Array3D image(volume.dims());
  Array3D projections(geometry.projection_dims());
  Array3D wrong_image({1, c.size.y, c.size.x + 1});
  Array3D wrong_projections({geometry.num_views(), 1, geometry.num_detectors() - 1});
  EXPECT_EQ(cuda_->ForwardProject(geometry, volume, wrong_image, projections).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda_->ForwardProject(geometry, volume, image, wrong_projections).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda_->BackProject(geometry, volume, wrong_projections, image).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda_->BackProject(geometry, volume, projections, wrong_image).code(),
            absl::StatusCode::kInvalidArgument);
  auto filter = RampFilter::Create({}, geometry.num_detectors() + 1, 1.0);
  ASSERT_TRUE(filter.ok());
  EXPECT_EQ(cuda_->FilterRows(*filter, projections).code(), absl::StatusCode::kInvalidArgument);
  // Still serving after the refusals.
  EXPECT_TRUE(cuda_->ForwardProject(geometry, volume, image, projections).ok());
}

// CUDA FBP of the exact Shepp-Logan sinogram equals CPU FBP and approximates the phantom
// as well. The RMSE bound 0.020 is a little above what the CPU reference reaches on both
// cases (0.0185, measured on the development machine; the test prints both). Wall times
// are printed for information only (first calls include cuFFT planning).
TEST_F(CudaBackendTest, FbpMatchesCpuAndThePhantom) {
  struct FbpCase {
    std::string name;
    VolumeGeometry volume;
    ParallelGeometry2D geometry;
    double radius_mm;
    FilterOptions filter;
    double rmse_bound;
  };
  const std::vector<FbpCase> cases = {
      {"256 centred ram-lak",
       VolumeGeometry::Create({256, 256, 1}, {1.0, 1.0, 1.0}, {}).value(),
       ParallelGeometry2D::Create(367, 1.0, 0.0, ParallelGeometry2D::UniformAngles(360, 0, kPi))
           .value(),
       120.0, {FilterWindow::kRamLak, 1.0}, 0.020},
      {"201x173 offsets non-square shepp-logan 360deg",
       VolumeGeometry::Create({201, 173, 1}, {1.1, 0.9, 1.0}, {3.0, -2.0, 0}).value(),
       ParallelGeometry2D::Create(301, 0.8, 1.3,
                                  ParallelGeometry2D::UniformAngles(400, 0.3, 2 * kPi))
           .value(),
       90.0, {FilterWindow::kSheppLogan, 1.0}, 0.020},
  };
  for (const FbpCase& c : cases) {
    SCOPED_TRACE(c.name);
    const EllipsePhantom phantom = EllipsePhantom::ModifiedSheppLogan(c.radius_mm);
    const Array3D sinogram = phantom.ParallelProjections(c.geometry, 4);
    const Array3D truth = phantom.Rasterize(c.volume, 4);
    FbpOptions options;
    options.filter = c.filter;
    const auto t0 = std::chrono::steady_clock::now();
    auto cpu_image = Fbp(c.geometry, c.volume, sinogram, options, cpu_, RunContext{});
    const auto t1 = std::chrono::steady_clock::now();
    ASSERT_TRUE(cpu_image.ok()) << cpu_image.status();
    auto gpu_image = Fbp(c.geometry, c.volume, sinogram, options, *cuda_, RunContext{});
    const auto t2 = std::chrono::steady_clock::now();
    ASSERT_TRUE(gpu_image.ok()) << gpu_image.status();
    std::printf("[ measure ] fbp wall time %-36s cpu %.1f ms  cuda %.1f ms\n", c.name.c_str(),
                std::chrono::duration<double, std::milli>(t1 - t0).count(),
                std::chrono::duration<double, std::milli>(t2 - t1).count());
    const Difference d = Compare(*gpu_image, *cpu_image);
    Report("fbp cuda vs cpu " + c.name, d);
    const double cpu_rmse = Rmse(*cpu_image, truth);
    const double gpu_rmse = Rmse(*gpu_image, truth);
    std::printf("[ measure ] fbp rmse vs phantom %-32s cpu %.6f  cuda %.6f\n", c.name.c_str(),
                cpu_rmse, gpu_rmse);
    EXPECT_EQ(d.not_finite, 0);
    EXPECT_LE(d.relative(), kFbpTolerance);
    EXPECT_LE(cpu_rmse, c.rmse_bound);
    EXPECT_LE(gpu_rmse, c.rmse_bound);
    EXPECT_NEAR(gpu_rmse, cpu_rmse, 1e-4 * c.rmse_bound + 1e-6);
  }
}

}  // namespace
}  // namespace tomo::core
