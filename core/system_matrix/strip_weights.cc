#include "core/system_matrix/strip_weights.h"

namespace tomo::core::system_matrix {

using strip_geometry::GridFrame;
using strip_geometry::Polygon;
using strip_geometry::RowWedge;

GridFrame StripWeights::Frame() const {
  return {scan_.nx(), scan_.ny(), scan_.pixel_x_mm(), scan_.pixel_y_mm(), scan_.left_mm(),
          scan_.bottom_mm()};
}

RowWedge StripWeights::Wedge(int64_t view, int64_t column) const {
  const RayWedge w = scan_.Wedge(view, column);
  const double dx = scan_.pixel_x_mm(), dy = scan_.pixel_y_mm();
  const Point2 s = {(w.apex.x - scan_.left_mm()) / dx, (w.apex.y - scan_.bottom_mm()) / dy};
  const Point2 e0 = {w.edge0.x / dx, w.edge0.y / dy};
  const Point2 e1 = {w.edge1.x / dx, w.edge1.y / dy};
  // Cross(e0, p - s) >= 0 and Cross(p - s, e1) >= 0 (a positive scaling keeps the signs).
  RowWedge g;
  g.a0 = -e0.y;
  g.b0 = e0.x;
  g.c0 = e0.y * s.x - e0.x * s.y;
  g.a1 = e1.y;
  g.b1 = -e1.x;
  g.c1 = -e1.y * s.x + e1.x * s.y;
  g.apex_x_mm = w.apex.x;
  g.apex_y_mm = w.apex.y;
  g.angle_rad = w.angle_rad;
  return g;
}

RowCount StripWeights::CountRow(int64_t view, int64_t column) const {
  const RowWedge w = Wedge(view, column);
  const GridFrame frame = Frame();
  RowCount count;
  Polygon inside;
  int64_t iy0, iy1;
  if (!strip_geometry::WedgeInGrid(w, frame, &inside, &iy0, &iy1)) return count;
  for (int64_t iy = iy0; iy < iy1; ++iy) {
    int64_t ix0, ix1;
    strip_geometry::BandExtent(inside, iy, frame, &ix0, &ix1);
    ++count.runs;
    count.entries += ix1 - ix0;
  }
  return count;
}

void StripWeights::ComputeRow(int64_t view, int64_t column, RowRuns* row) const {
  row->ix_first.clear();
  row->run_begin.assign(1, 0);
  row->values.clear();
  row->iy_first = 0;
  const RowWedge w = Wedge(view, column);
  const GridFrame frame = Frame();
  Polygon inside;
  int64_t iy0, iy1;
  if (!strip_geometry::WedgeInGrid(w, frame, &inside, &iy0, &iy1)) return;
  row->iy_first = static_cast<int32_t>(iy0);
  for (int64_t iy = iy0; iy < iy1; ++iy) {
    int64_t ix0, ix1;
    strip_geometry::BandExtent(inside, iy, frame, &ix0, &ix1);
    row->ix_first.push_back(static_cast<int32_t>(ix0));
    for (int64_t ix = ix0; ix < ix1; ++ix) {
      row->values.push_back(strip_geometry::Weight(w, frame, ix, iy));
    }
    row->run_begin.push_back(static_cast<int32_t>(row->values.size()));
  }
}

double StripWeights::CoveredFraction(int64_t view, int64_t column, int64_t ix,
                                     int64_t iy) const {
  return strip_geometry::CoveredArea(Wedge(view, column), ix, iy);
}

}  // namespace tomo::core::system_matrix
