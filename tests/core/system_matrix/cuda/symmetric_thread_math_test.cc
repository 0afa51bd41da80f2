// The per-thread code of the symmetric format's CUDA kernels (symmetric_thread_math.h), run
// on the CPU over every thread of each launch with host copies of the arrays, against the
// CPU products: checks the kernels' indexing (runs, maps, reversed columns, segments, the
// ray window in float32) without a GPU. Runs in CI (label core).
#include "core/system_matrix/cuda/symmetric_thread_math.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "core/system_matrix/cuda/symmetric_launch_params.h"
#include "core/system_matrix/view_blocks.h"
#include "tests/core/random_seed.h"
#include "tests/core/system_matrix/fan_cases.h"

namespace tomo::core::system_matrix::cuda {
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

struct HostLaunch {
  explicit HostLaunch(const SymmetricSystemMatrix& a)
      : runs(PackRuns(a)), headers(PackRowHeaders(a).value()) {
    arrays = {a.row_value_begin().data(), a.row_run_begin().data(), a.row_iy_first().data(),
              runs.data(), a.values().data(), a.row_norms2().data(), headers.data(),
              static_cast<int32_t>(a.scan().nx()), static_cast<int32_t>(a.scan().columns())};
  }
  std::vector<uint2> runs;
  std::vector<uint4> headers;
  SymmetricDeviceArrays arrays;
};

// The forward launch and its combine, thread by thread (the warp's shuffle sum as a plain
// sum over lanes).
void EmulateForward(const HostLaunch& launch, const OrbitBlock& block, int segments,
                    const float* x, const float* projections, float* residual, float* out) {
  const SymmetricDeviceArrays& a = launch.arrays;
  std::vector<float> partials(static_cast<size_t>(segments) * 8 * a.columns, 0.0f);
  for (int c = 0; c < a.columns; ++c) {
    for (int segment = 0; segment < segments; ++segment) {
      float warp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int lane = 0; lane < 32; ++lane) {
        float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        ForwardLaneSums(a, block, segments, c, segment, lane, x, sums);
        for (int k = 0; k < 8; ++k) warp[k] += sums[k];
      }
      for (int k = 0; k < block.count; ++k) {
        partials[(static_cast<size_t>(segment) * 8 + k) * a.columns + c] = warp[k];
      }
    }
  }
  for (int k = 0; k < block.count; ++k) {
    for (int c = 0; c < a.columns; ++c) {
      CombineOne(a, block, segments, k, c, partials.data(), projections, residual, out);
    }
  }
}

std::vector<FanCase> Cases() {
  std::vector<FanCase> cases = SymmetricFanCases();
  FanCaseSpec large;  // more than one segment per row, grid above 64 pixels
  large.views = 16;
  large.first_angle_rad = M_PI / 16;
  large.n = 141;
  large.pixel_mm = 0.13;
  large.columns = 150;
  large.column_spacing_mm = 0.2;
  cases.push_back(MakeFanCase("large", large));
  return cases;
}

TEST(SymmetricThreadMathTest, KernelThreadsReproduceTheCpuProductsOfAnySubset) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> value(-1.0f, 2.0f);
  for (const FanCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(c)).value();
    const HostLaunch launch(a);
    const int64_t columns = a.scan().columns();
    const int n = static_cast<int>(a.scan().nx());
    std::vector<int64_t> views;
    for (int64_t v = 0; v < a.scan().num_views(); ++v) {
      if (random() % 2 == 0) views.push_back(v);
    }
    std::shuffle(views.begin(), views.end(), random);
    if (views.empty()) views.push_back(0);
    std::vector<float> x(static_cast<size_t>(n) * n), z(views.size() * columns);
    for (float& f : x) f = value(random);
    for (float& f : z) f = value(random);
    std::vector<float> y_cpu(z.size()), back_cpu(x.size(), 0.0f);
    a.ForwardViews(views, x.data(), y_cpu.data());
    a.BackViewsAdd(views, z.data(), back_cpu.data());

    const std::vector<OrbitBlock> groups = GroupViews(a, views).value();
    const int segments = n > 64 ? 3 : 1;  // as SymmetricForwardSegments would split rows
    std::vector<float> y(z.size(), -1e30f), back(x.size(), 0.0f);
    for (const OrbitBlock& group : groups) {
      EmulateForward(launch, group, segments, x.data(), nullptr, nullptr, y.data());
      const StoredViewGeometry g = StoredGeometry(a, group.stored_view);
      for (int py = 0; py < n; ++py) {
        for (int px = 0; px < n; ++px) {
          back[static_cast<size_t>(py) * n + px] +=
              BackGatherPixel(launch.arrays, g, group, z.data(), px, py);
        }
      }
    }
    EXPECT_LE(MaxDiff(y, y_cpu), 1e-5 * MaxAbs(y_cpu));
    EXPECT_LE(MaxDiff(back, back_cpu), 1e-5 * MaxAbs(back_cpu));
  }
}

// The orbit kernel's launch, thread by thread: every representative of the quadrant.
void EmulateBackOrbit(const HostLaunch& launch, const StoredViewGeometry& g,
                      const OrbitBlock& block, const float* z, float* x, bool clamp,
                      float* x_transposed = nullptr) {
  const int n = launch.arrays.n;
  const SquareMapTable maps = SquareMaps();
  for (int iy = n / 2; iy < n; ++iy) {
    for (int ix = n / 2; ix < n; ++ix) {
      if (IsOrbitRepresentative(n, ix, iy)) {
        BackOrbitRepresentative(launch.arrays, g, block, maps, z, ix, iy, x, x_transposed, clamp);
      }
    }
  }
}

TEST(SymmetricThreadMathTest, OrbitTransposeReproducesTheCpuForAnySubset) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> value(-1.0f, 2.0f);
  for (const FanCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(c)).value();
    const HostLaunch launch(a);
    const int64_t columns = a.scan().columns();
    const int n = static_cast<int>(a.scan().nx());
    std::vector<int64_t> views;
    for (int64_t v = 0; v < a.scan().num_views(); ++v) {
      if (random() % 2 == 0) views.push_back(v);
    }
    std::shuffle(views.begin(), views.end(), random);
    if (views.empty()) views.push_back(0);
    std::vector<float> x0(static_cast<size_t>(n) * n), z(views.size() * columns);
    for (float& f : x0) f = value(random);
    for (float& f : z) f = value(random);
    std::vector<float> back_cpu = x0;
    a.BackViewsAdd(views, z.data(), back_cpu.data());
    std::vector<float> back = x0;
    const std::vector<OrbitBlock> groups = GroupViews(a, views).value();
    for (const OrbitBlock& group : groups) {
      EmulateBackOrbit(launch, StoredGeometry(a, group.stored_view), group, z.data(),
                       back.data(), /*clamp=*/false);
    }
    EXPECT_LE(MaxDiff(back, back_cpu), 1e-5 * MaxAbs(back_cpu));
    // One whole orbit block with the clamp: the CPU's block step, then max(x, 0).
    const int64_t blk = static_cast<int64_t>(random() % static_cast<uint64_t>(a.num_blocks()));
    std::vector<float> z_full(static_cast<size_t>(a.scan().rows()));
    for (float& f : z_full) f = value(random);
    std::vector<float> z_block;
    for (const int64_t v : a.BlockViews(blk)) {
      z_block.insert(z_block.end(), z_full.begin() + v * columns, z_full.begin() + (v + 1) * columns);
    }
    std::vector<float> clamped_cpu = x0, clamped = x0;
    a.BackBlockGather(blk, z_block.data(), clamped_cpu.data());
    for (float& f : clamped_cpu) f = std::max(f, 0.0f);
    // With the transposed copy written too (it starts as garbage: every entry is written).
    std::vector<float> transposed(x0.size(), -7.0f);
    EmulateBackOrbit(launch, StoredGeometry(a, blk), OrbitOf(a, blk, 1.0f), z_full.data(),
                     clamped.data(), /*clamp=*/true, transposed.data());
    EXPECT_LE(MaxDiff(clamped, clamped_cpu), 1e-5 * MaxAbs(clamped_cpu));
    for (int iy = 0; iy < n; ++iy) {
      for (int ix = 0; ix < n; ++ix) {
        ASSERT_EQ(transposed[static_cast<size_t>(ix) * n + iy], clamped[static_cast<size_t>(iy) * n + ix]);
      }
    }
  }
}

// Every pixel belongs to the orbit of exactly one representative the launch visits, so the
// orbit kernel writes each pixel once (its race-freedom), on odd and even grids.
TEST(SymmetricThreadMathTest, OrbitRepresentativesOwnEveryPixelOnce) {
  const SquareMapTable maps = SquareMaps();
  for (const int n : {1, 2, 7, 24, 25, 64}) {
    SCOPED_TRACE(n);
    std::vector<int> owners(static_cast<size_t>(n) * n, 0);
    for (int iy = n / 2; iy < n; ++iy) {
      for (int ix = n / 2; ix < n; ++ix) {
        if (!IsOrbitRepresentative(n, ix, iy)) continue;
        std::vector<int> orbit;
        for (int h = 0; h < 8; ++h) {
          int ox, oy;
          MapGridPixel(maps, h, n, ix, iy, &ox, &oy);
          ASSERT_TRUE(ox >= 0 && ox < n && oy >= 0 && oy < n);
          orbit.push_back(oy * n + ox);
        }
        std::sort(orbit.begin(), orbit.end());
        orbit.erase(std::unique(orbit.begin(), orbit.end()), orbit.end());
        for (const int p : orbit) ++owners[static_cast<size_t>(p)];
      }
    }
    for (size_t p = 0; p < owners.size(); ++p) ASSERT_EQ(owners[p], 1) << "pixel " << p;
  }
}

// slot_for against the maps themselves: view k's stored pixel for output M_h q0 is M_g q0
// with M_k M_g = M_h.
TEST(SymmetricThreadMathTest, OrbitSlotsComposeTheMaps) {
  const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(SymmetricFanCases()[0])).value();
  const int n = static_cast<int>(a.scan().nx());
  for (int64_t blk = 0; blk < a.num_blocks(); ++blk) {
    const OrbitBlock block = OrbitOf(a, blk, 1.0f);
    for (int h = 0; h < 8; ++h) {
      int used = 0;
      for (int g = 0; g < 8; ++g) {
        const int k = block.slot_for[h][g];
        if (k < 0) continue;
        ++used;
        // A pixel off every symmetry line: M_k (M_g q0) must be M_h q0.
        int gx, gy, kx, ky, hx, hy;
        MapPixel(kSquareMaps[static_cast<size_t>(g)], n, n - 2, n / 2 + 1, &gx, &gy);
        MapPixel(kSquareMaps[static_cast<size_t>(block.map_index[k])], n, gx, gy, &kx, &ky);
        MapPixel(kSquareMaps[static_cast<size_t>(h)], n, n - 2, n / 2 + 1, &hx, &hy);
        EXPECT_EQ(kx, hx);
        EXPECT_EQ(ky, hy);
      }
      EXPECT_EQ(used, block.count);  // each view once per output pixel
    }
  }
}

TEST(SymmetricThreadMathTest, CombineGivesTheArtStepOfTheCpu) {
  const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(SymmetricFanCases()[1])).value();
  const HostLaunch launch(a);
  const SymmetricViewBlocks blocks(a);
  const int64_t columns = a.scan().columns();
  const int64_t n = a.scan().nx();
  std::vector<float> x(static_cast<size_t>(n * n), 0.25f);
  std::vector<float> b(static_cast<size_t>(a.scan().rows()));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 7) * 0.5f;
  const double relaxation = 1.3;
  for (int64_t blk = 0; blk < a.num_blocks(); ++blk) {
    const double bound = static_cast<double>(blocks.MaxRowsPerPixel(blk));
    const OrbitBlock orbit = OrbitOf(a, blk, static_cast<float>(relaxation / bound));
    std::vector<float> residual(b.size(), 0.0f), out(b.size(), 0.0f);
    EmulateForward(launch, orbit, 1, x.data(), b.data(), residual.data(), out.data());
    std::vector<float> y(blocks.BlockViews(blk).size() * columns);
    blocks.ForwardBlock(blk, x.data(), y.data());
    for (size_t k = 0; k < blocks.BlockViews(blk).size(); ++k) {
      const int64_t view = blocks.BlockViews(blk)[k];
      for (int64_t c = 0; c < columns; ++c) {
        const size_t at = static_cast<size_t>(view * columns + c);
        const double r = b[at] - y[k * columns + c];
        const double norm2 = blocks.RowNorm2(view, c);
        const double step = norm2 > 1e-20 ? relaxation / (bound * norm2) * r : 0.0;
        ASSERT_NEAR(residual[at], r, 1e-5);
        ASSERT_NEAR(out[at], step, 1e-4 * std::max(1.0, std::abs(step)));
      }
    }
  }
}

}  // namespace
}  // namespace tomo::core::system_matrix::cuda
