// Strip weights: the entries of one row of the 2D fan-beam system matrix.
//
// Row (view, column) belongs to the ray wedge of that detector element (fan_scan.h). Its
// weight for pixel j is the area of the wedge inside the pixel divided by the wedge's width
// at the pixel centre (r_j * angle, r_j the distance from the source to the pixel centre):
//
//   a_ij = area(wedge_i ∩ pixel_j) / (r_j * angle_i)      [mm]
//
// This is the area-integral weight (intersection area over pixel area) rescaled per pixel by
// pixel_area / (r_j angle_i), so that A x is the mean line integral across the element, in
// the units of the analytic phantom's projections. The scaling depends only on the distance
// to the source and on the wedge's angle, both kept by the reflections and rotations that
// map one view onto another, so the symmetries of the area weights hold exactly.
//
// The polygon arithmetic is strip_geometry.h, shared with the CUDA build of the rows.
// A row is kept as runs along pixel rows: the wedge crosses each pixel row (fixed iy) in one
// contiguous range of ix (wedge and box are convex). Every pixel of a run's range is stored,
// including the rare one the wedge only touches (weight 0), so that the count of entries
// comes from the ranges alone (CountRow), without areas.
//
//   StripWeights weights(scan);
//   RowRuns row;
//   weights.ComputeRow(view, column, &row);
#pragma once

#include <cstdint>
#include <vector>

#include "core/system_matrix/fan_scan.h"
#include "core/system_matrix/strip_geometry.h"

namespace tomo::core::system_matrix {

// Pixel row iy_first + k holds pixels ix_first[k] ... ix_first[k] + (run_begin[k + 1] -
// run_begin[k]) - 1, whose weights are values[run_begin[k] ...].
struct RowRuns {
  int32_t iy_first = 0;
  std::vector<int32_t> ix_first;
  std::vector<int32_t> run_begin;  // runs + 1 offsets into values
  std::vector<float> values;
  int64_t runs() const { return static_cast<int64_t>(ix_first.size()); }
};

struct RowCount {
  int64_t runs = 0;
  int64_t entries = 0;
};

class StripWeights {
 public:
  explicit StripWeights(const FanScan& scan) : scan_(scan) {}
  RowCount CountRow(int64_t view, int64_t column) const;
  void ComputeRow(int64_t view, int64_t column, RowRuns* row) const;
  // area(wedge ∩ pixel) / pixel area, by polygon clipping (exposed for tests).
  double CoveredFraction(int64_t view, int64_t column, int64_t ix, int64_t iy) const;
  // The ray's wedge in grid units and the grid, as strip_geometry.h (and the device build)
  // take them.
  strip_geometry::RowWedge Wedge(int64_t view, int64_t column) const;
  strip_geometry::GridFrame Frame() const;

 private:
  const FanScan& scan_;
};

}  // namespace tomo::core::system_matrix
