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
  explicit HostLaunch(const SymmetricSystemMatrix& a) : runs(PackRuns(a)) {
    arrays = {a.row_value_begin().data(), a.row_run_begin().data(), a.row_iy_first().data(),
              runs.data(), a.values().data(), a.row_norms2().data(),
              static_cast<int32_t>(a.scan().nx()), static_cast<int32_t>(a.scan().columns())};
  }
  std::vector<uint2> runs;
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
