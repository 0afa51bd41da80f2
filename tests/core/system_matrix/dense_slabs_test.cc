// The dense layout of the symmetric format (dense_slabs.h): every stored row's weighted
// entries appear exactly once (the permutation is a permutation), padding carries weight 0,
// the slabs tile the arrays, and at every step the weighted lanes of a slab touch pixels of
// different orbits of the square maps (the property the transposed product relies on),
// checked with orbits found here from MapPixel, not with the layout's own key.
#include "core/system_matrix/dense_slabs.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include <gtest/gtest.h>

#include "tests/core/system_matrix/fan_cases.h"

namespace tomo::core::system_matrix {
namespace {

// The smallest pixel index of (ix, iy)'s orbit under the eight maps.
int32_t OrbitOf(int32_t n, int32_t ix, int32_t iy) {
  int32_t least = n * n;
  for (const SquareMap& m : kSquareMaps) {
    int32_t ox, oy;
    MapPixel(m, n, ix, iy, &ox, &oy);
    least = std::min(least, oy * n + ox);
  }
  return least;
}

std::vector<FanCase> Cases() {
  std::vector<FanCase> cases = SymmetricFanCases();
  FanCaseSpec wide;  // more than one group of 32 rows, the last one partial
  wide.views = 16;
  wide.first_angle_rad = M_PI / 16;
  wide.n = 61;
  wide.pixel_mm = 0.3;
  wide.columns = 77;
  wide.column_spacing_mm = 0.35;
  cases.push_back(MakeFanCase("wide", wide));
  return cases;
}

TEST(DenseSlabsTest, EveryStoredEntryOnceAndStepsConflictFree) {
  for (const FanCase& c : Cases()) {
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(c)).value();
    const int32_t n = static_cast<int32_t>(a.scan().nx());
    const int64_t columns = a.scan().columns();
    for (const int segments : {1, 3, DenseSlabs::SegmentsFor(a)}) {
      SCOPED_TRACE(c.name + ", " + std::to_string(segments) + " segments");
      const DenseSlabs d = DenseSlabs::Build(a, segments).value();
      ASSERT_EQ(d.segments(), segments);
      // The slabs tile the arrays in order.
      int64_t offset = 0;
      for (const DenseSlab& slab : d.slabs()) {
        ASSERT_EQ(slab.offset, offset);
        offset += 32 * static_cast<int64_t>(slab.width);
      }
      ASSERT_EQ(offset, d.slots());
      int64_t weighted = 0;
      for (int64_t b = 0; b < a.num_blocks(); ++b) {
        const int64_t view = a.symmetry().stored_views[static_cast<size_t>(b)];
        // (pixel, weight) of each row, from the slabs.
        std::vector<std::vector<std::pair<int32_t, float>>> rows(static_cast<size_t>(columns));
        std::set<std::pair<int32_t, int32_t>> group_segments;
        for (int64_t i = d.view_begin(b); i < d.view_begin(b + 1); ++i) {
          const DenseSlab& slab = d.slabs()[static_cast<size_t>(i)];
          ASSERT_EQ(slab.stored_view, b);
          ASSERT_TRUE(group_segments.insert({slab.first_row, slab.segment}).second);
          for (int32_t j = 0; j < slab.width; ++j) {
            std::set<int32_t> orbits;
            for (int lane = 0; lane < 32; ++lane) {
              const size_t e = static_cast<size_t>(slab.offset + 32 * j + lane);
              const float w = d.values()[e];
              if (w == 0.0f) continue;
              ASSERT_LT(slab.first_row + lane, columns) << "a weight past the last column";
              int32_t ix, iy;
              DenseSlabs::Pixel(slab, d.pixel_offsets()[e], &ix, &iy);
              ASSERT_TRUE(ix < n && iy < n);
              EXPECT_TRUE(orbits.insert(OrbitOf(n, ix, iy)).second)
                  << "two lanes on one orbit: view " << b << ", slab " << i << ", step " << j;
              rows[static_cast<size_t>(slab.first_row + lane)].push_back({iy * n + ix, w});
              ++weighted;
            }
          }
        }
        // Every group has each of its segments once.
        EXPECT_EQ(static_cast<int64_t>(group_segments.size()),
                  (columns + 31) / 32 * static_cast<int64_t>(segments));
        // The same weighted entries as the row restored for the stored view itself.
        std::vector<int32_t> pixels;
        std::vector<float> weights;
        for (int64_t col = 0; col < columns; ++col) {
          a.RestoreRow(view, col, &pixels, &weights);
          std::vector<std::pair<int32_t, float>> expected;
          for (size_t e = 0; e < pixels.size(); ++e) {
            if (weights[e] != 0.0f) expected.push_back({pixels[e], weights[e]});
          }
          std::vector<std::pair<int32_t, float>>& got = rows[static_cast<size_t>(col)];
          std::sort(expected.begin(), expected.end());
          std::sort(got.begin(), got.end());
          ASSERT_EQ(got, expected) << "stored view " << b << ", column " << col;
        }
      }
      EXPECT_EQ(weighted, d.entries());
    }
  }
}

TEST(DenseSlabsTest, SegmentsFollowTheRowLength) {
  const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(Cases().back())).value();
  const int s = DenseSlabs::SegmentsFor(a);
  const double mean = static_cast<double>(a.stored_nonzeros()) / static_cast<double>(a.stored_rows());
  EXPECT_GE(s, 1);
  EXPECT_NEAR(mean / s, DenseSlabs::kStepsWanted, DenseSlabs::kStepsWanted);
}

}  // namespace
}  // namespace tomo::core::system_matrix
