// The kernels of the two blocked layouts, run on the CPU over every lane of every slab with
// host copies of the arrays: A x and A^T y of every view equal the full CSR matrix's
// (ExpandToCsr: each row restored and sorted, computed apart from the layouts).
//   dense (dense_slabs.h, dense_thread_math.h): for the whole matrix (orbit blocks) and a
//     random subset of views; its transpose (atomic adds on the device) equals the orbit
//     kernel's (no atomics);
//   interleaved runs (interleaved_runs.h): the forward lanes, with and without the image's
//     transposed copy, and the orbit transpose on its arrays, which also writes the copy;
//     every stored value at its slot once;
//   segmented runs (segmented_runs.h): the same, and every stored weight found by the
//     orbit transpose's look-up.
//
// Tolerance: float32 sums in another order, 1e-5 of the largest value of the product.
#include "core/system_matrix/cuda/dense_thread_math.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "core/system_matrix/cuda/symmetric_launch_params.h"
#include "core/system_matrix/cuda/symmetric_thread_math.h"
#include "core/system_matrix/dense_slabs.h"
#include "core/system_matrix/interleaved_runs.h"
#include "core/system_matrix/segmented_runs.h"
#include "core/system_matrix/cuda/segmented_thread_math.h"
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

struct HostDense {
  HostDense(const SymmetricSystemMatrix& a, int segments)
      : dense(DenseSlabs::Build(a, segments).value()), headers(PackRowHeaders(a).value()), runs(PackRuns(a)) {
    arrays = {dense.values().data(), dense.pixel_offsets().data(), dense.slabs().data(),
              static_cast<int32_t>(a.scan().nx()), static_cast<int32_t>(a.scan().columns()),
              dense.segments()};
    symmetric = {a.row_value_begin().data(), a.row_run_begin().data(), a.row_iy_first().data(),
                 runs.data(), a.values().data(), a.row_norms2().data(), headers.data(),
                 static_cast<int32_t>(a.scan().nx()), static_cast<int32_t>(a.scan().columns())};
  }
  DenseSlabs dense;
  std::vector<uint4> headers;
  std::vector<uint2> runs;
  DenseDeviceArrays arrays;
  SymmetricDeviceArrays symmetric;
};

// One group of views (OrbitBlock) through the dense forward launch and the combine
// (x_transposed: nullptr or x's transpose, as the kernel takes it).
void EmulateForward(const HostDense& h, const OrbitBlock& block, const float* x, float* y,
                    const float* x_transposed = nullptr) {
  const DenseDeviceArrays& d = h.arrays;
  std::vector<float> partials(static_cast<size_t>(d.segments) * 8 * d.columns, 0.0f);
  for (int64_t i = h.dense.view_begin(block.stored_view); i < h.dense.view_begin(block.stored_view + 1); ++i) {
    const DenseSlab& slab = h.dense.slabs()[static_cast<size_t>(i)];
    for (int lane = 0; lane < 32; ++lane) {
      float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      DenseForwardLane(d, slab, block, lane, x, x_transposed, sums);
      DenseWritePartials(d, slab, block, lane, sums, partials.data());
    }
  }
  for (int k = 0; k < block.count; ++k) {
    for (int c = 0; c < d.columns; ++c) {
      CombineOne(h.symmetric, block, d.segments, k, c, partials.data(), nullptr, nullptr, y);
    }
  }
}

void EmulateBack(const HostDense& h, const OrbitBlock& block, const float* z, float* x) {
  for (int64_t i = h.dense.view_begin(block.stored_view); i < h.dense.view_begin(block.stored_view + 1); ++i) {
    for (int lane = 0; lane < 32; ++lane) {
      DenseBackLane(h.arrays, h.dense.slabs()[static_cast<size_t>(i)], block, lane, z, x);
    }
  }
}

std::vector<FanCase> Cases() {
  std::vector<FanCase> cases = SymmetricFanCases();
  FanCaseSpec wide;  // several groups of 32 rows, the last partial; odd grid
  wide.views = 16;
  wide.first_angle_rad = M_PI / 16;
  wide.n = 61;
  wide.pixel_mm = 0.3;
  wide.columns = 77;
  wide.column_spacing_mm = 0.35;
  cases.push_back(MakeFanCase("wide", wide));
  return cases;
}

TEST(DenseThreadMathTest, ProductsOfEveryViewEqualTheFullCsr) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> value(-1.0f, 2.0f);
  for (const FanCase& c : Cases()) {
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(c)).value();
    const CsrSystemMatrix csr = a.ExpandToCsr();
    std::vector<float> x(static_cast<size_t>(csr.pixels())), y(static_cast<size_t>(csr.rows()));
    for (float& f : x) f = value(random);
    for (float& f : y) f = value(random);
    std::vector<float> ax_csr(y.size()), aty_csr(x.size());
    csr.Multiply(x.data(), ax_csr.data());
    csr.MultiplyTransposed(y.data(), aty_csr.data());
    for (const int segments : {1, 3}) {
      SCOPED_TRACE(c.name + ", " + std::to_string(segments) + " segments");
      const HostDense h(a, segments);
      std::vector<float> ax(y.size(), -1e30f), aty(x.size(), 0.0f), aty_orbit(x.size(), 0.0f);
      std::vector<float> ax_dual(y.size(), -1e30f), xt(x.size());
      const int64_t side = a.scan().nx();
      for (int64_t iy = 0; iy < side; ++iy) {
        for (int64_t ix = 0; ix < side; ++ix) xt[static_cast<size_t>(ix * side + iy)] = x[static_cast<size_t>(iy * side + ix)];
      }
      const SquareMapTable maps = SquareMaps();
      const int n = static_cast<int>(a.scan().nx());
      for (int64_t b = 0; b < a.num_blocks(); ++b) {
        const OrbitBlock block = OrbitOf(a, b, 1.0f);
        EmulateForward(h, block, x.data(), ax.data());
        EmulateForward(h, block, x.data(), ax_dual.data(), xt.data());
        EmulateBack(h, block, y.data(), aty.data());
        const StoredViewGeometry g = StoredGeometry(a, b);
        for (int iy = n / 2; iy < n; ++iy) {
          for (int ix = n / 2; ix < n; ++ix) {
            if (IsOrbitRepresentative(n, ix, iy)) {
              BackOrbitRepresentative(h.symmetric, g, block, maps, y.data(), ix, iy,
                                      aty_orbit.data(), nullptr, false);
            }
          }
        }
      }
      // Every row of every view (no -1e30 left) and every pixel.
      EXPECT_LE(MaxDiff(ax, ax_csr), 1e-5 * MaxAbs(ax_csr));
      // Reading x and its transpose (each map from the copy its lanes run along).
      EXPECT_LE(MaxDiff(ax_dual, ax_csr), 1e-5 * MaxAbs(ax_csr));
      EXPECT_LE(MaxDiff(aty, aty_csr), 1e-5 * MaxAbs(aty_csr));
      // The transpose with adds that would be atomic equals the owner-computes one.
      EXPECT_LE(MaxDiff(aty, aty_orbit), 1e-5 * MaxAbs(aty_orbit));
    }
  }
}

TEST(DenseThreadMathTest, AnySubsetOfViewsEqualsTheCpu) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> value(-1.0f, 2.0f);
  const FanCase c = Cases().back();
  const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(c)).value();
  const HostDense h(a, DenseSlabs::SegmentsFor(a));
  std::vector<int64_t> views;
  for (int64_t v = 0; v < a.scan().num_views(); ++v) {
    if (random() % 3 == 0) views.push_back(v);
  }
  std::shuffle(views.begin(), views.end(), random);
  if (views.empty()) views.push_back(2);
  const int64_t columns = a.scan().columns();
  std::vector<float> x(static_cast<size_t>(a.scan().nx() * a.scan().ny())), z(views.size() * columns);
  for (float& f : x) f = value(random);
  for (float& f : z) f = value(random);
  std::vector<float> y_cpu(z.size()), back_cpu(x.size(), 0.0f);
  a.ForwardViews(views, x.data(), y_cpu.data());
  a.BackViewsAdd(views, z.data(), back_cpu.data());
  std::vector<float> y(z.size(), -1e30f), back(x.size(), 0.0f);
  const std::vector<OrbitBlock> groups = GroupViews(a, views).value();
  for (const OrbitBlock& group : groups) {
    EmulateForward(h, group, x.data(), y.data());
    EmulateBack(h, group, z.data(), back.data());
  }
  EXPECT_LE(MaxDiff(y, y_cpu), 1e-5 * MaxAbs(y_cpu));
  EXPECT_LE(MaxDiff(back, back_cpu), 1e-5 * MaxAbs(back_cpu));
}

// The interleaved-runs layout on the host: its forward lanes and the orbit transpose on its
// arrays (32 slots apart).
struct HostInterleaved {
  HostInterleaved(const SymmetricSystemMatrix& a, int segments)
      : blocked(InterleavedRuns::Build(a, segments).value()) {
    const uint2* runs = reinterpret_cast<const uint2*>(blocked.runs().data());
    const uint4* headers = reinterpret_cast<const uint4*>(blocked.row_headers().data());
    const int32_t n = static_cast<int32_t>(a.scan().nx());
    const int32_t columns = static_cast<int32_t>(a.scan().columns());
    arrays = {blocked.values().data(), runs, headers, blocked.slabs().data(),
              blocked.cursors().data(), n, columns, blocked.segments()};
    symmetric = {nullptr, nullptr, nullptr, runs, blocked.values().data(), a.row_norms2().data(),
                 headers, n, columns, InterleavedRuns::kLanes};
  }
  InterleavedRuns blocked;
  InterleavedDeviceArrays arrays;
  SymmetricDeviceArrays symmetric;
};

void EmulateInterleavedForward(const HostInterleaved& h, const OrbitBlock& block, const float* x,
                               const float* x_transposed, float* y) {
  const InterleavedDeviceArrays& d = h.arrays;
  std::vector<float> partials(static_cast<size_t>(d.segments) * 8 * d.columns, 0.0f);
  for (int64_t i = h.blocked.view_begin(block.stored_view); i < h.blocked.view_begin(block.stored_view + 1); ++i) {
    const InterleavedSlab& slab = h.blocked.slabs()[static_cast<size_t>(i)];
    for (int lane = 0; lane < 32; ++lane) {
      float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      InterleavedForwardLane(d, slab, block, lane, x, x_transposed, sums);
      const int row = slab.first_row + lane;
      if (row >= d.columns) continue;
      for (int k = 0; k < block.count; ++k) {
        partials[(static_cast<size_t>(slab.segment) * 8 + k) * d.columns + row] = sums[k];
      }
    }
  }
  for (int k = 0; k < block.count; ++k) {
    for (int c = 0; c < d.columns; ++c) {
      CombineOne(h.symmetric, block, d.segments, k, c, partials.data(), nullptr, nullptr, y);
    }
  }
}

TEST(InterleavedThreadMathTest, ProductsOfEveryViewEqualTheFullCsr) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> value(-1.0f, 2.0f);
  for (const FanCase& c : Cases()) {
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(c)).value();
    const CsrSystemMatrix csr = a.ExpandToCsr();
    const int n = static_cast<int>(a.scan().nx());
    std::vector<float> x(static_cast<size_t>(csr.pixels())), y(static_cast<size_t>(csr.rows()));
    for (float& f : x) f = value(random);
    for (float& f : y) f = value(random);
    std::vector<float> xt(x.size());
    for (int iy = 0; iy < n; ++iy) {
      for (int ix = 0; ix < n; ++ix) xt[static_cast<size_t>(ix) * n + iy] = x[static_cast<size_t>(iy) * n + ix];
    }
    std::vector<float> ax_csr(y.size()), aty_csr(x.size());
    csr.Multiply(x.data(), ax_csr.data());
    csr.MultiplyTransposed(y.data(), aty_csr.data());
    for (const int segments : {1, 4, InterleavedRuns::SegmentsFor(a)}) {
      SCOPED_TRACE(c.name + ", " + std::to_string(segments) + " segments");
      const HostInterleaved h(a, segments);
      std::vector<float> ax(y.size(), -1e30f), ax_dual(y.size(), -1e30f), aty(x.size(), 0.0f);
      std::vector<float> aty_t(x.size(), -7.0f);
      const SquareMapTable maps = SquareMaps();
      for (int64_t b = 0; b < a.num_blocks(); ++b) {
        const OrbitBlock block = OrbitOf(a, b, 1.0f);
        EmulateInterleavedForward(h, block, x.data(), nullptr, ax.data());
        EmulateInterleavedForward(h, block, x.data(), xt.data(), ax_dual.data());
        const StoredViewGeometry g = StoredGeometry(a, b);
        for (int iy = n / 2; iy < n; ++iy) {
          for (int ix = n / 2; ix < n; ++ix) {
            if (IsOrbitRepresentative(n, ix, iy)) {
              BackOrbitRepresentative(h.symmetric, g, block, maps, y.data(), ix, iy, aty.data(),
                                      aty_t.data(), false);
            }
          }
        }
      }
      EXPECT_LE(MaxDiff(ax, ax_csr), 1e-5 * MaxAbs(ax_csr));
      EXPECT_LE(MaxDiff(ax_dual, ax_csr), 1e-5 * MaxAbs(ax_csr));
      EXPECT_LE(MaxDiff(aty, aty_csr), 1e-5 * MaxAbs(aty_csr));
      for (int iy = 0; iy < n; ++iy) {
        for (int ix = 0; ix < n; ++ix) {
          ASSERT_EQ(aty_t[static_cast<size_t>(ix) * n + iy], aty[static_cast<size_t>(iy) * n + ix]);
        }
      }
    }
  }
}

// Every stored value sits once at its slot (value_base + 32 e + lane), the padding is 0,
// and each run slot holds the row's run (as SymmetricSystemMatrix has it).
TEST(InterleavedThreadMathTest, LayoutHoldsEveryStoredValueOnce) {
  for (const FanCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(c)).value();
    const InterleavedRuns r = InterleavedRuns::Build(a, 3).value();
    std::vector<int> hits(r.values().size(), 0);
    const int64_t columns = a.scan().columns();
    for (int64_t row = 0; row < a.stored_rows(); ++row) {
      const RowHeader& h = r.row_headers()[static_cast<size_t>(row)];
      const uint64_t value_slot = h.value_slot_low | (static_cast<uint64_t>(h.value_slot_high) << 32);
      const int64_t entries = a.row_value_begin()[static_cast<size_t>(row) + 1] - a.row_value_begin()[static_cast<size_t>(row)];
      for (int64_t e = 0; e < entries; ++e) {
        const size_t at = static_cast<size_t>(value_slot + 32 * static_cast<uint64_t>(e));
        ASSERT_LT(at, r.values().size());
        EXPECT_EQ(r.values()[at], a.values()[static_cast<size_t>(a.row_value_begin()[static_cast<size_t>(row)] + e)]);
        ++hits[at];
      }
      EXPECT_EQ(static_cast<int32_t>(h.iy_first_and_runs & 0xffffu), a.row_iy_first()[static_cast<size_t>(row)]);
      const int64_t runs = a.row_run_begin()[static_cast<size_t>(row) + 1] - a.row_run_begin()[static_cast<size_t>(row)];
      EXPECT_EQ(static_cast<int64_t>(h.iy_first_and_runs >> 16), runs);
      for (int64_t j = 0; j < runs; ++j) {
        const RunSlot& slot = r.runs()[h.run_slot + 32 * static_cast<size_t>(j)];
        const size_t k = static_cast<size_t>(a.row_run_begin()[static_cast<size_t>(row)] + j);
        EXPECT_EQ(slot.first_entry, static_cast<uint32_t>(a.run_offset()[k]));
        EXPECT_EQ(slot.ix_first_and_length & 0xffffu, a.run_ix_first()[k]);
        EXPECT_EQ(slot.ix_first_and_length >> 16, a.run_length()[k]);
      }
    }
    for (size_t i = 0; i < hits.size(); ++i) {
      ASSERT_LE(hits[i], 1);
      if (hits[i] == 0) {
        ASSERT_EQ(r.values()[i], 0.0f) << "padding slot " << i;
      }
    }
    EXPECT_EQ(r.slabs().size(), static_cast<size_t>(a.num_blocks() * ((columns + 31) / 32) * 3));
  }
}

struct HostSegmented {
  HostSegmented(const SymmetricSystemMatrix& a, int segments)
      : layout(SegmentedRuns::Build(a, segments).value()) {
    arrays = {layout.values().data(), layout.runs().data(), layout.slabs().data(),
              layout.segment_of_column().data(), layout.n(),
              static_cast<int32_t>(a.scan().columns()), layout.segments(),
              layout.groups_per_view()};
    norms = {nullptr, nullptr, nullptr, nullptr, nullptr, a.row_norms2().data(), nullptr,
             layout.n(), static_cast<int32_t>(a.scan().columns())};
  }
  SegmentedRuns layout;
  SegmentedDeviceArrays arrays;
  SymmetricDeviceArrays norms;  // for CombineOne
};

void EmulateSegmentedForward(const HostSegmented& h, const OrbitBlock& block, const float* x,
                             const float* x_transposed, float* y) {
  const SegmentedDeviceArrays& d = h.arrays;
  std::vector<float> partials(static_cast<size_t>(d.segments) * 8 * d.columns, 0.0f);
  for (int64_t i = h.layout.view_begin(block.stored_view); i < h.layout.view_begin(block.stored_view + 1); ++i) {
    const SegmentedSlab& slab = h.layout.slabs()[static_cast<size_t>(i)];
    for (int lane = 0; lane < 32; ++lane) {
      float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      SegmentedForwardLane(d, slab, block, lane, x, x_transposed, sums);
      const int row = slab.first_row + lane;
      if (row >= d.columns) continue;
      for (int k = 0; k < block.count; ++k) {
        partials[(static_cast<size_t>(slab.segment) * 8 + k) * d.columns + row] = sums[k];
      }
    }
  }
  for (int k = 0; k < block.count; ++k) {
    for (int c = 0; c < d.columns; ++c) {
      CombineOne(h.norms, block, d.segments, k, c, partials.data(), nullptr, nullptr, y);
    }
  }
}

void EmulateSegmentedBack(const HostSegmented& h, const SymmetricSystemMatrix& a,
                          const OrbitBlock& block, const float* z, float* x, float* xt) {
  const int n = h.layout.n();
  const SquareMapTable maps = SquareMaps();
  const StoredViewGeometry g = StoredGeometry(a, block.stored_view);
  const SegmentedWeightAt weight_at{h.arrays, block.stored_view};
  for (int iy = n / 2; iy < n; ++iy) {
    for (int ix = n / 2; ix < n; ++ix) {
      if (!IsOrbitRepresentative(n, ix, iy)) continue;
      BackOrbitThread(n, h.arrays.columns, g, block, maps, z, ix, iy, weight_at, x, xt, false);
    }
  }
}

TEST(SegmentedThreadMathTest, ProductsOfEveryViewEqualTheFullCsr) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> value(-1.0f, 2.0f);
  for (const FanCase& c : Cases()) {
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(c)).value();
    const CsrSystemMatrix csr = a.ExpandToCsr();
    const int n = static_cast<int>(a.scan().nx());
    std::vector<float> x(static_cast<size_t>(csr.pixels())), y(static_cast<size_t>(csr.rows()));
    for (float& f : x) f = value(random);
    for (float& f : y) f = value(random);
    std::vector<float> xt(x.size());
    for (int iy = 0; iy < n; ++iy) {
      for (int ix = 0; ix < n; ++ix) xt[static_cast<size_t>(ix) * n + iy] = x[static_cast<size_t>(iy) * n + ix];
    }
    std::vector<float> ax_csr(y.size()), aty_csr(x.size());
    csr.Multiply(x.data(), ax_csr.data());
    csr.MultiplyTransposed(y.data(), aty_csr.data());
    for (const int segments : {1, 4, SegmentedRuns::SegmentsFor(a)}) {
      SCOPED_TRACE(c.name + ", " + std::to_string(segments) + " segments");
      const HostSegmented h(a, segments);
      std::vector<float> ax(y.size(), -1e30f), ax_dual(y.size(), -1e30f), aty(x.size(), 0.0f);
      std::vector<float> aty_t(x.size(), -7.0f);
      for (int64_t b = 0; b < a.num_blocks(); ++b) {
        const OrbitBlock block = OrbitOf(a, b, 1.0f);
        EmulateSegmentedForward(h, block, x.data(), nullptr, ax.data());
        EmulateSegmentedForward(h, block, x.data(), xt.data(), ax_dual.data());
        EmulateSegmentedBack(h, a, block, y.data(), aty.data(), aty_t.data());
      }
      EXPECT_LE(MaxDiff(ax, ax_csr), 1e-5 * MaxAbs(ax_csr));
      EXPECT_LE(MaxDiff(ax_dual, ax_csr), 1e-5 * MaxAbs(ax_csr));
      EXPECT_LE(MaxDiff(aty, aty_csr), 1e-5 * MaxAbs(aty_csr));
      for (int iy = 0; iy < n; ++iy) {
        for (int ix = 0; ix < n; ++ix) {
          ASSERT_EQ(aty_t[static_cast<size_t>(ix) * n + iy], aty[static_cast<size_t>(iy) * n + ix]);
        }
      }
    }
  }
}

// Every stored value sits in exactly one slot, the look-up finds every stored weight of
// every row (and 0 off the row), and the padding is 0.
TEST(SegmentedThreadMathTest, LookupFindsEveryStoredWeight) {
  for (const FanCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(c)).value();
    const HostSegmented h(a, 3);
    const int n = static_cast<int>(a.scan().nx());
    const int64_t columns = a.scan().columns();
    EXPECT_EQ(h.layout.entries(), a.stored_nonzeros());
    int64_t found = 0;
    for (int64_t b = 0; b < a.num_blocks(); ++b) {
      const SegmentedWeightAt weight_at{h.arrays, static_cast<int32_t>(b)};
      for (int64_t col = 0; col < columns; ++col) {
        for (int qy = 0; qy < n; ++qy) {
          for (int qx = 0; qx < n; ++qx) {
            const float expected = StoredWeight(a, b * columns + col, qx, qy);
            ASSERT_EQ(weight_at(static_cast<int>(col), qx, qy), expected)
                << "view " << b << " row " << col << " pixel " << qx << ", " << qy;
            found += expected != 0.0f;
          }
        }
      }
    }
    int64_t stored = 0;
    for (const float v : a.values()) stored += v != 0.0f;
    int64_t slots = 0;
    for (const float v : h.layout.values()) slots += v != 0.0f;
    EXPECT_EQ(found, stored);
    EXPECT_EQ(slots, stored);  // so every other slot, the padding, is 0
  }
}

}  // namespace
}  // namespace tomo::core::system_matrix::cuda
