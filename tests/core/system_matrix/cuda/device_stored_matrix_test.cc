// The stored system matrix on CUDA against the CPU reference: whole products of the
// symmetric and CSR formats for every view, block ART step for step, and ART against the
// analytic phantom. Skips without a device.
//
// Tolerances: float32 sums in another order: products agree to 1e-5 of the largest value;
// ART after 30 sweeps to 1e-3 (relative L2) of the CPU's image.
#include "core/system_matrix/cuda/device_stored_matrix.h"
#include "core/system_matrix/cuda/device_matrix_build.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "core/devices/devices.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "tests/core/random_seed.h"
#include "tests/core/system_matrix/fan_cases.h"

namespace tomo::core::system_matrix {
namespace {

double MaxAbs(const std::vector<float>& v) {
  double m = 0;
  for (float f : v) m = std::max(m, static_cast<double>(std::abs(f)));
  return m;
}

double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

double RelativeL2(const Array3D& a, const Array3D& b) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    diff += std::pow(static_cast<double>(a.data()[i]) - b.data()[i], 2);
    norm += std::pow(static_cast<double>(b.data()[i]), 2);
  }
  return std::sqrt(diff / norm);
}

// 48 views over 2 pi on an n^2 grid of 0.12 mm pixels, `columns` rays 0.15 mm apart.
FanCaseSpec LargeFanCaseSpec(int64_t n, int64_t columns) {
  FanCaseSpec large;
  large.views = 48;
  large.first_angle_rad = M_PI / 48;
  large.n = n;
  large.pixel_mm = 0.12;
  large.columns = columns;
  large.column_spacing_mm = 0.15;
  return large;
}

class DeviceStoredMatrixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ListCudaDevices().empty()) GTEST_SKIP() << "no CUDA device";
    seed_ = testing::TestSeed();
    random_.seed(seed_);
  }
  std::vector<float> RandomVector(int64_t n) {
    std::uniform_real_distribution<float> value(-1.0f, 2.0f);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = value(random_);
    return v;
  }
  // OneLaunchSweeps...: once per count in slot_buffer_counts, the sweep holding at most that
  // many blocks' slots in shared memory, and x for the whole sweep where it fits when
  // allow_resident_x.
  void CheckOneLaunchSweeps(const std::vector<int>& slot_buffer_counts, bool allow_resident_x);
  uint64_t seed_ = 0;
  std::mt19937_64 random_;
};

void CompareProducts(DeviceStoredMatrix& device, const CsrSystemMatrix& reference,
                     const std::vector<float>& x, const std::vector<float>& y) {
  std::vector<float> ax(static_cast<size_t>(reference.rows())), ax_cpu(ax.size());
  ASSERT_TRUE(device.Forward(x.data(), ax.data()).ok());
  reference.Multiply(x.data(), ax_cpu.data());
  EXPECT_LE(MaxDiff(ax, ax_cpu), 1e-5 * MaxAbs(ax_cpu));
  std::vector<float> aty(static_cast<size_t>(reference.pixels())), aty_cpu(aty.size());
  ASSERT_TRUE(device.Back(y.data(), aty.data()).ok());
  reference.MultiplyTransposed(y.data(), aty_cpu.data());
  EXPECT_LE(MaxDiff(aty, aty_cpu), 1e-5 * MaxAbs(aty_cpu));
}

TEST_F(DeviceStoredMatrixTest, SymmetricProductsEqualTheCpu) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  std::vector<FanCase> cases = SymmetricFanCases();
  // More rows than one segment and a grid above 64 pixels.
  cases.push_back(MakeFanCase("large", LargeFanCaseSpec(151, 203)));
  for (const FanCase& c : cases) {
    SCOPED_TRACE(c.name);
    const FanScan scan = ScanOf(c);
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(scan).value();
    const CsrSystemMatrix reference = a.ExpandToCsr();
    const std::vector<float> x = RandomVector(reference.pixels());
    const std::vector<float> y = RandomVector(reference.rows());
    // The atomic transpose: plain CSR on the device (atomicAdd per entry).
    auto atomic = UploadCsrMatrix(reference, 0, 0);
    ASSERT_TRUE(atomic.ok()) << atomic.status();
    std::vector<float> aty_atomic(static_cast<size_t>(reference.pixels()));
    ASSERT_TRUE((*atomic)->Back(y.data(), aty_atomic.data()).ok());
    for (const SymmetricKernels kernels : AllSymmetricKernels()) {
      SCOPED_TRACE(SymmetricKernelsName(kernels));
      auto device = UploadSymmetricMatrix(a, 0, kernels);
      ASSERT_TRUE(device.ok()) << device.status();
      CompareProducts(**device, reference, x, y);
      std::vector<float> aty(aty_atomic.size());
      ASSERT_TRUE((*device)->Back(y.data(), aty.data()).ok());
      EXPECT_LE(MaxDiff(aty, aty_atomic), 1e-5 * MaxAbs(aty_atomic));
    }
  }
}

// The tiled kernels on an odd grid that no tile side divides (tiles of other sizes on the
// centre lines, orbits of 1, 4 and 8 tiles), with tile sides from 5 to 64 (64: shared
// memory above 48 KB), float and fixed-point accumulators, and ART against the CPU's (the
// fused residual, the two ray-sum buffers, and the overlapped launches).
TEST_F(DeviceStoredMatrixTest, TiledProductsOnAnOddGridEqualTheCpu) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  const FanCase c = MakeFanCase("odd-97", OddFanCaseSpec());
  const FanScan scan = ScanOf(c);
  const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(scan).value();
  const CsrSystemMatrix reference = a.ExpandToCsr();
  const std::vector<float> x = RandomVector(reference.pixels());
  const std::vector<float> y = RandomVector(reference.rows());
  for (const SymmetricKernels kernels : {SymmetricKernels::kTiled, SymmetricKernels::kTiledFixed}) {
    for (const int side : {5, 16, 32, 64}) {
      SCOPED_TRACE(std::string(SymmetricKernelsName(kernels)) + ", tile side " +
                   std::to_string(side));
      auto device = UploadSymmetricMatrix(a, 0, kernels, side);
      ASSERT_TRUE(device.ok()) << device.status();
      CompareProducts(**device, reference, x, y);
    }
  }
  const EllipsePhantom phantom = EllipsePhantom::ModifiedSheppLogan(30);
  const Array3D sinogram = EllipsoidPhantom::ExtrudedFrom(phantom).Project(c.geometry, 2);
  ArtOptions options;
  options.iterations = 5;
  auto cpu = RunBlockArt(SymmetricViewBlocks(a), sinogram, options, true, {});
  ASSERT_TRUE(cpu.ok());
  for (const SymmetricKernels kernels : {SymmetricKernels::kTiled, SymmetricKernels::kTiledOverlap,
                                         SymmetricKernels::kTiledFixed}) {
    SCOPED_TRACE(SymmetricKernelsName(kernels));
    auto device = UploadSymmetricMatrix(a, 0, kernels, 16);
    ASSERT_TRUE(device.ok()) << device.status();
    auto gpu = (*device)->RunArt(sinogram, options, {});
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_LT(RelativeL2(gpu->image, cpu->image), 1e-3);
    for (size_t i = 0; i < cpu->relative_residuals.size(); ++i) {
      EXPECT_NEAR(gpu->relative_residuals[i], cpu->relative_residuals[i], 1e-4);
    }
    EXPECT_FALSE((*device)->one_launch_sweeps());
  }
}

// ART as one launch per sweep (kTiledSweep) against the CPU's block ART: the odd grid with
// tile sides 5 to 64 (one orbit per thread block; x resident in shared memory up to side
// 32, through device memory at 64), a 201^2 grid in 4- and 6-pixel tiles (about 340 and 150
// orbits: on a device of up to 150 multiprocessors, thread blocks own several), and a
// 530^2 grid in 16-pixel tiles (about 150 orbits through the place table: some thread
// blocks own two), with and without the clamp; and its products (kTiledFixed's). The
// sweep as it runs (each block's slots copied into shared memory, two blocks' worth), as
// it runs where fewer fit (one block's, none: read from device memory), and with x through
// device memory at each block where it would have stayed in shared memory (every orbit
// table's write-back leaving x in the planes for the next forward, and a 256^2 grid whose
// 32-pixel tiles move x 16 bytes at a time); three tests, so that a sanitizer can take one
// at a time.
TEST_F(DeviceStoredMatrixTest, OneLaunchSweepsEqualTheCpu) { CheckOneLaunchSweeps({2}, true); }
TEST_F(DeviceStoredMatrixTest, OneLaunchSweepsWithFewerSlotBuffersEqualTheCpu) {
  CheckOneLaunchSweeps({1, 0}, true);
}
TEST_F(DeviceStoredMatrixTest, OneLaunchSweepsWithXThroughDeviceMemoryEqualTheCpu) {
  CheckOneLaunchSweeps({2}, false);
}
void DeviceStoredMatrixTest::CheckOneLaunchSweeps(const std::vector<int>& slot_buffer_counts,
                                                  bool allow_resident_x) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  const FanCaseSpec large = LargeFanCaseSpec(201, 263);
  // 16-pixel tiles (the compiled plane size and its place table) in about 150 orbits.
  FanCaseSpec fine = LargeFanCaseSpec(530, 300);
  fine.pixel_mm = 0.05;
  struct Case {
    FanCase fan;
    FanCaseSpec spec;
    std::vector<int> sides;
    // Whether the slot buffers the sweep holds are checked (below): false where thread
    // blocks own a few large orbits, whose slots need not fit, which is not the case's
    // subject.
    bool checks_slot_buffers = true;
  };
  std::vector<Case> cases = {
      {MakeFanCase("odd-97", OddFanCaseSpec()), OddFanCaseSpec(), {5, 16, 32, 64}},
      {MakeFanCase("large-201", large), large, {4, 6}},
      {MakeFanCase("fine-530", fine), fine, {16}}};
  // x through device memory: a grid whose rows and tile corners fall on 16-byte boundaries,
  // where the 32-pixel tables' write-back moves x 4 pixels at a time.
  const FanCaseSpec even = LargeFanCaseSpec(256, 300);
  if (!allow_resident_x) {
    cases.push_back({MakeFanCase("even-256", even), even, {16, 32}, /*checks_slot_buffers=*/false});
  }
  for (const Case& c : cases) {
    const FanScan scan = ScanOf(c.fan);
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(scan).value();
    const CsrSystemMatrix reference = a.ExpandToCsr();
    const double size_mm = static_cast<double>(c.spec.n) * c.spec.pixel_mm;
    const EllipsePhantom phantom = EllipsePhantom::ModifiedSheppLogan(0.45 * size_mm);
    const Array3D sinogram = EllipsoidPhantom::ExtrudedFrom(phantom).Project(c.fan.geometry, 2);
    for (const bool nonnegative : {false, true}) {
      ArtOptions options;
      options.iterations = 4;
      options.nonnegative = nonnegative;
      auto cpu = RunBlockArt(SymmetricViewBlocks(a), sinogram, options, true, {});
      ASSERT_TRUE(cpu.ok());
      for (const int side : c.sides) {
        for (const int slot_buffers : slot_buffer_counts) {
          SCOPED_TRACE(c.fan.name + ", tile side " + std::to_string(side) +
                       (nonnegative ? ", clamped" : "") + ", at most " +
                       std::to_string(slot_buffers) + " blocks' slots in shared memory" +
                       (allow_resident_x ? "" : ", x through device memory"));
          auto device = UploadSymmetricMatrix(a, 0, SymmetricKernels::kTiledSweep, side,
                                              slot_buffers, allow_resident_x);
          ASSERT_TRUE(device.ok()) << device.status();
          EXPECT_TRUE((*device)->one_launch_sweeps());
          // On an sm_90 multiprocessor (227 KB of shared memory) every case holds two blocks'
          // slots, but for the 64-pixel tiles, whose accumulators alone take 133 KB: one,
          // and x stays in shared memory in every case but those.
          const bool wide = c.spec.n == 97 && side == 64;
          if (c.checks_slot_buffers) {
            EXPECT_EQ((*device)->sweep_slot_buffers(), std::min(slot_buffers, wide ? 1 : 2));
          }
          EXPECT_EQ((*device)->sweep_resident_x(), allow_resident_x && !wide);
          if (!nonnegative) {
            CompareProducts(**device, reference, RandomVector(reference.pixels()),
                            RandomVector(reference.rows()));
          }
          auto gpu = (*device)->RunArt(sinogram, options, {});
          ASSERT_TRUE(gpu.ok()) << gpu.status();
          EXPECT_LT(RelativeL2(gpu->image, cpu->image), 1e-3);
          ASSERT_EQ(gpu->relative_residuals.size(), cpu->relative_residuals.size());
          for (size_t i = 0; i < cpu->relative_residuals.size(); ++i) {
            EXPECT_NEAR(gpu->relative_residuals[i], cpu->relative_residuals[i], 1e-4);
          }
        }
      }
    }
  }
}

TEST_F(DeviceStoredMatrixTest, DeviceBuildEqualsTheCpuBuild) {
  std::vector<FanCase> cases = SymmetricFanCases();
  cases.push_back(MakeFanCase("large", LargeFanCaseSpec(151, 203)));
  for (const FanCase& c : cases) {
    SCOPED_TRACE(c.name);
    const FanScan scan = ScanOf(c);
    const SymmetricSystemMatrix cpu = SymmetricSystemMatrix::Build(scan).value();
    auto gpu = BuildSymmetricMatrixOnDevice(scan, 0);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    // Extents are the same float64 arithmetic without fused multiply-adds: equal.
    EXPECT_EQ(gpu->row_value_begin(), cpu.row_value_begin());
    EXPECT_EQ(gpu->row_run_begin(), cpu.row_run_begin());
    EXPECT_EQ(gpu->row_iy_first(), cpu.row_iy_first());
    EXPECT_EQ(gpu->run_ix_first(), cpu.run_ix_first());
    EXPECT_EQ(gpu->run_length(), cpu.run_length());
    EXPECT_EQ(gpu->run_offset(), cpu.run_offset());
    // Weights: hypot may differ in its last bit; the float32 results to 1e-6.
    EXPECT_LE(MaxDiff(gpu->values(), cpu.values()), 1e-6 * MaxAbs(cpu.values()));
    EXPECT_LE(MaxDiff(gpu->row_norms2(), cpu.row_norms2()), 1e-5 * MaxAbs(cpu.row_norms2()));
    for (int64_t b = 0; b < cpu.num_blocks(); ++b) {
      EXPECT_EQ(gpu->max_rows_per_pixel(b), cpu.max_rows_per_pixel(b));
    }
  }
  EXPECT_EQ(BuildSymmetricMatrixOnDevice(ScanOf(AsymmetricFanCases()[0]), 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(DeviceStoredMatrixTest, CsrProductsEqualTheCpu) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  for (const FanCase& c : AsymmetricFanCases()) {
    SCOPED_TRACE(c.name);
    const CsrSystemMatrix a = CsrSystemMatrix::Build(ScanOf(c));
    auto device = UploadCsrMatrix(a, 0, 0);
    ASSERT_TRUE(device.ok()) << device.status();
    CompareProducts(**device, a, RandomVector(a.pixels()), RandomVector(a.rows()));
  }
}

// A projector's block of views on device arrays: a random subset in random order.
TEST_F(DeviceStoredMatrixTest, SubsetsOfViewsOnDeviceArraysEqualTheCpu) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  const FanCase c = SymmetricFanCases()[1];
  const FanScan scan = ScanOf(c);
  const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(scan).value();
  const CsrSystemMatrix csr = a.ExpandToCsr();
  std::vector<int64_t> views;
  for (int64_t v = 0; v < scan.num_views(); ++v) {
    if (random_() % 3 == 0) views.push_back(v);
  }
  std::shuffle(views.begin(), views.end(), random_);
  if (views.empty()) views.push_back(1);
  const int64_t columns = scan.columns();
  const int64_t pixels = scan.nx() * scan.ny();
  const std::vector<float> x = RandomVector(pixels);
  const std::vector<float> z = RandomVector(static_cast<int64_t>(views.size()) * columns);
  const std::vector<float> x0 = RandomVector(pixels);
  std::vector<float> y_cpu(z.size()), back_cpu = x0;
  a.ForwardViews(views, x.data(), y_cpu.data());
  a.BackViewsAdd(views, z.data(), back_cpu.data());
  const std::vector<SymmetricKernels> kernels = AllSymmetricKernels();
  for (size_t format = 0; format <= kernels.size(); ++format) {
    SCOPED_TRACE(format < kernels.size() ? SymmetricKernelsName(kernels[format]) : "csr");
    auto device = format < kernels.size() ? UploadSymmetricMatrix(a, 0, kernels[format])
                                          : UploadCsrMatrix(csr, 0, 0);
    ASSERT_TRUE(device.ok()) << device.status();
    float *dx, *dy, *dz;
    ASSERT_EQ(cudaMalloc(&dx, pixels * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dy, z.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dz, z.size() * sizeof(float)), cudaSuccess);
    std::vector<float> y(z.size()), back(x0.size());
    ASSERT_EQ(cudaMemcpy(dx, x.data(), pixels * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_TRUE((*device)->ForwardViewsOnDevice(views, dx, dy).ok());
    // The matrix's stream does not wait for the default stream's copies: finish first.
    ASSERT_EQ(cudaStreamSynchronize((*device)->stream()), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dz, z.data(), z.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dx, x0.data(), pixels * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_TRUE((*device)->BackViewsAddOnDevice(views, dz, dx).ok());
    ASSERT_EQ(cudaStreamSynchronize((*device)->stream()), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(y.data(), dy, y.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(back.data(), dx, back.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_LE(MaxDiff(y, y_cpu), 1e-5 * MaxAbs(y_cpu));
    EXPECT_LE(MaxDiff(back, back_cpu), 1e-5 * MaxAbs(back_cpu));
    std::vector<int64_t> twice = {3, 3};
    EXPECT_EQ((*device)->ForwardViewsOnDevice(twice, dx, dy).message(),
              "views[1]: view 3 appears more than once");
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dz);
  }
}

TEST_F(DeviceStoredMatrixTest, BlockArtMatchesTheCpuAndThePhantom) {
  FanCaseSpec spec;
  spec.views = 64;
  spec.first_angle_rad = M_PI / 64;
  spec.n = 47;
  spec.pixel_mm = 0.5;
  spec.columns = 96;
  spec.column_spacing_mm = 0.6;
  const FanCase c = MakeFanCase("art", spec);
  const EllipsePhantom phantom = EllipsePhantom::ModifiedSheppLogan(10.5);
  const Array3D truth = phantom.Rasterize(c.volume, 4);
  const Array3D sinogram = EllipsoidPhantom::ExtrudedFrom(phantom).Project(c.geometry, 4);
  const FanScan scan = ScanOf(c);
  const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(scan).value();
  ArtOptions options;
  options.iterations = 30;
  auto cpu = RunBlockArt(SymmetricViewBlocks(a), sinogram, options, true, {});
  ASSERT_TRUE(cpu.ok());
  for (const SymmetricKernels kernels : AllSymmetricKernels()) {
    SCOPED_TRACE(SymmetricKernelsName(kernels));
    auto device = UploadSymmetricMatrix(a, 0, kernels);
    ASSERT_TRUE(device.ok()) << device.status();
    auto gpu = (*device)->RunArt(sinogram, options, {});
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_LT(RelativeL2(gpu->image, cpu->image), 1e-3);
    for (size_t i = 0; i < cpu->relative_residuals.size(); ++i) {
      EXPECT_NEAR(gpu->relative_residuals[i], cpu->relative_residuals[i], 1e-4);
    }
    // The CPU's error after 30 sweeps is 0.113 (block_art_test).
    EXPECT_LT(RelativeL2(gpu->image, truth), 0.14);
  }
  // CSR on the device (atomic transpose), blocks of 8 views.
  const CsrSystemMatrix csr = CsrSystemMatrix::Build(scan);
  options.views_per_block = 8;
  auto cpu_csr = RunBlockArt(CsrViewBlocks(csr, 8), sinogram, options, false, {});
  auto device_csr = UploadCsrMatrix(csr, 8, 0);
  ASSERT_TRUE(device_csr.ok()) << device_csr.status();
  int sweeps_seen = 0;
  double last_seen = -1;
  options.on_sweep = [&](int64_t, const Array3D& image) {
    ++sweeps_seen;
    last_seen = RelativeL2(image, truth);
    return absl::OkStatus();
  };
  auto gpu_csr = (*device_csr)->RunArt(sinogram, options, {});
  ASSERT_TRUE(gpu_csr.ok()) << gpu_csr.status();
  EXPECT_LT(RelativeL2(gpu_csr->image, cpu_csr->image), 1e-3);
  EXPECT_EQ(sweeps_seen, 30);
  EXPECT_DOUBLE_EQ(last_seen, RelativeL2(gpu_csr->image, truth));
}

}  // namespace
}  // namespace tomo::core::system_matrix
