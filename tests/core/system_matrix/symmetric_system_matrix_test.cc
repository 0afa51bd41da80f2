// The symmetric format against the directly computed matrix: restored rows of every view
// (every zone) equal the rows computed for that view; A x and A^T y equal the CSR matrix's
// for every view; the pixel-owned (atomic-free) transpose equals the plain scatter.
//
// Tolerances: weights are float32 computed in float64; a restored row and a direct one
// differ by rounding of the geometry (1e-6 of the largest weight); products of float32
// sums over a few hundred entries agree to 1e-5 relative to the vector's largest value.
#include "core/system_matrix/symmetric_system_matrix.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "core/system_matrix/strip_weights.h"
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

std::vector<float> RandomVector(int64_t n, std::mt19937_64& random) {
  std::uniform_real_distribution<float> value(-1.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = value(random);
  return v;
}

TEST(SymmetricSystemMatrixTest, RestoredRowsOfEveryViewEqualDirectRows) {
  for (const FanCase& c : SymmetricFanCases()) {
    SCOPED_TRACE(c.name);
    const FanScan scan = ScanOf(c);
    auto a = SymmetricSystemMatrix::Build(scan);
    ASSERT_TRUE(a.ok()) << a.status();
    const CsrSystemMatrix direct = CsrSystemMatrix::Build(scan);
    const CsrSystemMatrix restored = a->ExpandToCsr();
    EXPECT_EQ(restored.nonzeros(), a->represented_nonzeros());
    const double scale = MaxAbs(direct.values());
    std::vector<float> d(static_cast<size_t>(scan.nx() * scan.ny())), r(d.size());
    for (int64_t row = 0; row < direct.rows(); ++row) {
      std::fill(d.begin(), d.end(), 0.0f);
      std::fill(r.begin(), r.end(), 0.0f);
      for (int64_t e = direct.row_offsets()[row]; e < direct.row_offsets()[row + 1]; ++e) {
        d[direct.column_indices()[e]] = direct.values()[e];
      }
      for (int64_t e = restored.row_offsets()[row]; e < restored.row_offsets()[row + 1]; ++e) {
        r[restored.column_indices()[e]] = restored.values()[e];
      }
      ASSERT_LE(MaxDiff(r, d), 1e-6 * scale)
          << "view " << row / scan.columns() << " column " << row % scan.columns();
    }
  }
}

TEST(SymmetricSystemMatrixTest, ProductsEqualTheCsrMatrixForEveryView) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (const FanCase& c : SymmetricFanCases()) {
    SCOPED_TRACE(c.name);
    const FanScan scan = ScanOf(c);
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(scan).value();
    const CsrSystemMatrix csr = CsrSystemMatrix::Build(scan);
    const std::vector<float> x = RandomVector(csr.pixels(), random);
    const std::vector<float> y = RandomVector(csr.rows(), random);
    std::vector<float> ax(static_cast<size_t>(csr.rows())), ax_csr(ax.size());
    a.Multiply(x.data(), ax.data());
    csr.Multiply(x.data(), ax_csr.data());
    const double y_scale = MaxAbs(ax_csr);
    for (int64_t v = 0; v < scan.num_views(); ++v) {
      for (int64_t col = 0; col < scan.columns(); ++col) {
        const size_t i = static_cast<size_t>(v * scan.columns() + col);
        ASSERT_NEAR(ax[i], ax_csr[i], 1e-5 * y_scale) << "view " << v << " column " << col;
      }
    }
    std::vector<float> aty(static_cast<size_t>(csr.pixels())), aty_csr(aty.size());
    a.MultiplyTransposed(y.data(), aty.data());
    csr.MultiplyTransposed(y.data(), aty_csr.data());
    EXPECT_LE(MaxDiff(aty, aty_csr), 1e-5 * MaxAbs(aty_csr));
    // Adjoint: <A x, y> = <x, A^T y>.
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < y.size(); ++i) lhs += static_cast<double>(ax[i]) * y[i];
    for (size_t j = 0; j < x.size(); ++j) rhs += static_cast<double>(x[j]) * aty[j];
    EXPECT_NEAR(lhs, rhs, 1e-5 * std::abs(lhs));
  }
}

TEST(SymmetricSystemMatrixTest, AtomicFreeTransposeEqualsPlainScatterPerBlock) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (const FanCase& c : SymmetricFanCases()) {
    SCOPED_TRACE(c.name);
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(c)).value();
    const int64_t pixels = a.scan().nx() * a.scan().ny();
    for (int64_t b = 0; b < a.num_blocks(); ++b) {
      const std::vector<float> z = RandomVector(
          static_cast<int64_t>(a.BlockViews(b).size()) * a.scan().columns(), random);
      std::vector<float> gather = RandomVector(pixels, random);
      std::vector<float> scatter = gather;
      a.BackBlockGather(b, z.data(), gather.data());
      a.BackBlockScatter(b, z.data(), scatter.data());
      ASSERT_LE(MaxDiff(gather, scatter), 1e-5 * MaxAbs(scatter)) << "block " << b;
    }
  }
}

TEST(SymmetricSystemMatrixTest, AnySubsetOfViewsEqualsTheCsrRows) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (const FanCase& c : SymmetricFanCases()) {
    SCOPED_TRACE(c.name);
    const FanScan scan = ScanOf(c);
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(scan).value();
    const CsrSystemMatrix csr = a.ExpandToCsr();
    // A random subset in random order, as a projector's block of views would be.
    std::vector<int64_t> views;
    for (int64_t v = 0; v < scan.num_views(); ++v) {
      if (random() % 3 == 0) views.push_back(v);
    }
    std::shuffle(views.begin(), views.end(), random);
    if (views.empty()) views.push_back(0);
    const int64_t columns = scan.columns();
    const std::vector<float> x = RandomVector(csr.pixels(), random);
    const std::vector<float> z = RandomVector(static_cast<int64_t>(views.size()) * columns, random);
    std::vector<float> y(z.size()), full(static_cast<size_t>(csr.rows()));
    a.ForwardViews(views, x.data(), y.data());
    csr.Multiply(x.data(), full.data());
    std::vector<float> z_full(full.size(), 0.0f), expected_y(y.size());
    for (size_t k = 0; k < views.size(); ++k) {
      for (int64_t col = 0; col < columns; ++col) {
        expected_y[k * columns + col] = full[views[k] * columns + col];
        z_full[views[k] * columns + col] = z[k * columns + col];
      }
    }
    EXPECT_LE(MaxDiff(y, expected_y), 1e-5 * MaxAbs(expected_y));
    std::vector<float> back = RandomVector(csr.pixels(), random);
    std::vector<float> expected_back(back.size());
    csr.MultiplyTransposed(z_full.data(), expected_back.data());
    for (size_t j = 0; j < back.size(); ++j) expected_back[j] += back[j];
    a.BackViewsAdd(views, z.data(), back.data());
    EXPECT_LE(MaxDiff(back, expected_back), 1e-5 * MaxAbs(expected_back));
  }
}

TEST(SymmetricSystemMatrixTest, ScansWithoutTheSymmetryAreRefusedWithTheReason) {
  for (const FanCase& c : AsymmetricFanCases()) {
    SCOPED_TRACE(c.name);
    auto a = SymmetricSystemMatrix::Build(ScanOf(c));
    EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(a.status().message().find("square symmetry"), std::string::npos);
  }
}

TEST(SymmetricSystemMatrixTest, StoresAnEighthAndFewerBytesPerEntry) {
  FanCaseSpec spec;
  spec.views = 64;
  spec.first_angle_rad = M_PI / 64;
  spec.n = 40;
  spec.columns = 64;
  spec.column_spacing_mm = 0.9;
  const FanScan scan = ScanOf(MakeFanCase("64 views", spec));
  const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(scan).value();
  const CsrSystemMatrix csr = CsrSystemMatrix::Build(scan);
  EXPECT_EQ(a.num_blocks(), 8);
  EXPECT_EQ(a.represented_nonzeros(), a.ExpandToCsr().nonzeros());
  EXPECT_NEAR(static_cast<double>(a.represented_nonzeros()), static_cast<double>(csr.nonzeros()),
              1e-3 * csr.nonzeros());
  // 8 x fewer rows, and 4 bytes plus a share of an 8-byte run per entry instead of 8.
  EXPECT_GT(static_cast<double>(csr.bytes()) / a.bytes(), 8.0);
}

}  // namespace
}  // namespace tomo::core::system_matrix
