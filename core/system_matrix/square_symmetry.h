// Square symmetry of a fan-beam scan: which views are images of which under the eight
// maps of a square grid onto itself (the rotations by 0, 90, 180, 270 degrees and the four
// reflections, about the grid centre), so that only the rows of one view per orbit need be
// stored and the others are restored by mapping pixel and detector indices.
//
// The scan has the symmetry when every one of the eight maps takes every view's source,
// detector centre and column step u onto those of some view (u onto +u or -u: -u reverses
// the detector's columns), within 1e-9 of the scan's size, and the grid is square (nx == ny)
// with square pixels. That holds for an equiangular full scan whose view count is a
// multiple of 4 and whose first angle is a multiple of half the angular step, on a grid
// centred on the rotation axis, with a detector symmetric about the central ray (no
// offset). With 8k views offset by half a step every orbit has eight views and k views are
// stored; with the first view at angle 0, the views at multiples of 45 degrees are their
// own mirror images and k + 1 views are stored.
//
//   SymmetryReport report = DetectSquareSymmetry(scan);
//   if (!report.eight_fold) LOG << report.reason;
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/system_matrix/fan_scan.h"

namespace tomo::core::system_matrix {

// p' = centre + M (p - centre), M = [[xx, xy], [yx, yy]] with entries in {-1, 0, 1}.
struct SquareMap {
  int xx, xy, yx, yy;
  const char* name;
};
inline constexpr std::array<SquareMap, 8> kSquareMaps = {{
    {1, 0, 0, 1, "identity"},
    {0, -1, 1, 0, "rotation by 90 degrees"},
    {-1, 0, 0, -1, "rotation by 180 degrees"},
    {0, 1, -1, 0, "rotation by 270 degrees"},
    {-1, 0, 0, 1, "reflection x -> -x"},
    {1, 0, 0, -1, "reflection y -> -y"},
    {0, 1, 1, 0, "reflection about the diagonal x = y"},
    {0, -1, -1, 0, "reflection about the diagonal x = -y"},
}};

// Pixel (ix, iy) of an n x n grid under map m (integer arithmetic on doubled centred
// coordinates, exact for odd and even n).
inline void MapPixel(const SquareMap& m, int32_t n, int32_t ix, int32_t iy, int32_t* ox,
                     int32_t* oy) {
  const int32_t cx = 2 * ix - (n - 1), cy = 2 * iy - (n - 1);
  *ox = (m.xx * cx + m.xy * cy + (n - 1)) / 2;
  *oy = (m.yx * cx + m.yy * cy + (n - 1)) / 2;
}
// The index of the inverse map.
int InverseSquareMap(int map);
// The index in kSquareMaps of M_a M_b (maps compose as matrices: M_b first).
int ComposeSquareMaps(int a, int b);

// View v's rows are those of stored view `stored` mapped by kSquareMaps[map]: row (v, c)
// equals stored row (stored, columns_reversed ? columns - 1 - c : c) with every pixel q
// moved to MapPixel(map, q).
struct ViewSymmetry {
  int64_t stored = 0;  // index into SymmetryReport::stored_views
  int map = 0;
  bool columns_reversed = false;
};

struct SymmetryReport {
  bool eight_fold = false;
  std::string reason;                       // why not, when !eight_fold
  std::vector<int64_t> stored_views;        // one view per orbit (the first in view order)
  std::vector<ViewSymmetry> views;          // for every view
  std::vector<std::vector<int64_t>> orbits; // the views of each stored view's orbit
};

SymmetryReport DetectSquareSymmetry(const FanScan& scan);

}  // namespace tomo::core::system_matrix
