#include "core/system_matrix/square_symmetry.h"

#include <set>

#include <gtest/gtest.h>

#include "tests/core/system_matrix/fan_cases.h"

namespace tomo::core::system_matrix {
namespace {

TEST(SquareSymmetryTest, MapsArePixelPermutationsWithTheirInverses) {
  for (const int32_t n : {1, 2, 7, 10}) {
    for (int m = 0; m < 8; ++m) {
      std::set<int32_t> seen;
      for (int32_t iy = 0; iy < n; ++iy) {
        for (int32_t ix = 0; ix < n; ++ix) {
          int32_t ox, oy, bx, by;
          MapPixel(kSquareMaps[m], n, ix, iy, &ox, &oy);
          ASSERT_GE(ox, 0);
          ASSERT_LT(ox, n);
          ASSERT_GE(oy, 0);
          ASSERT_LT(oy, n);
          seen.insert(oy * n + ox);
          MapPixel(kSquareMaps[InverseSquareMap(m)], n, ox, oy, &bx, &by);
          EXPECT_EQ(bx, ix);
          EXPECT_EQ(by, iy);
        }
      }
      EXPECT_EQ(seen.size(), static_cast<size_t>(n * n)) << kSquareMaps[m].name;
    }
  }
}

TEST(SquareSymmetryTest, SymmetricScansStoreOneViewPerOrbit) {
  for (const FanCase& c : SymmetricFanCases()) {
    SCOPED_TRACE(c.name);
    const SymmetryReport report = DetectSquareSymmetry(ScanOf(c));
    ASSERT_TRUE(report.eight_fold) << report.reason;
    const int64_t views = c.geometry.num_views();
    int64_t covered = 0;
    for (const auto& orbit : report.orbits) covered += static_cast<int64_t>(orbit.size());
    EXPECT_EQ(covered, views);
    // Views at multiples of 45 degrees are their own mirror images: k + 1 stored of 8k when
    // the first view is at angle 0, k when it is half a step off.
    const bool at_zero = c.name.find("views-at-0") != std::string::npos;
    EXPECT_EQ(static_cast<int64_t>(report.stored_views.size()), views / 8 + (at_zero ? 1 : 0));
    for (int64_t v = 0; v < views; ++v) {
      const ViewSymmetry& sym = report.views[static_cast<size_t>(v)];
      ASSERT_GE(sym.stored, 0);
      if (v == report.stored_views[static_cast<size_t>(sym.stored)]) EXPECT_EQ(sym.map, 0);
    }
  }
}

TEST(SquareSymmetryTest, OtherScansSayWhyNot) {
  const std::vector<FanCase> cases = AsymmetricFanCases();
  const std::vector<std::string> reasons = {"rotation by 90", "no view is the image",
                                            "no view is the image", "no view is the image",
                                            "not square"};
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    const SymmetryReport report = DetectSquareSymmetry(ScanOf(cases[i]));
    EXPECT_FALSE(report.eight_fold);
    EXPECT_NE(report.reason.find(reasons[i]), std::string::npos) << report.reason;
  }
}

}  // namespace
}  // namespace tomo::core::system_matrix
