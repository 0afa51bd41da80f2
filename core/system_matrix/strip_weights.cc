#include "core/system_matrix/strip_weights.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace tomo::core::system_matrix {
namespace {

// A convex polygon of at most kMaxVertices vertices (a box clipped by four half-planes).
constexpr int kMaxVertices = 12;
struct Polygon {
  std::array<Point2, kMaxVertices> p;
  int n = 0;
};

// Keeps a x + b y + c >= 0 (Sutherland-Hodgman on one edge).
Polygon Clip(const Polygon& in, double a, double b, double c) {
  Polygon out;
  for (int i = 0; i < in.n; ++i) {
    const Point2 p = in.p[i];
    const Point2 q = in.p[(i + 1) % in.n];
    const double fp = a * p.x + b * p.y + c;
    const double fq = a * q.x + b * q.y + c;
    if (fp >= 0) out.p[out.n++] = p;
    if ((fp >= 0) != (fq >= 0)) {
      const double t = fp / (fp - fq);
      out.p[out.n++] = {p.x + t * (q.x - p.x), p.y + t * (q.y - p.y)};
    }
    if (out.n >= kMaxVertices - 1) break;
  }
  return out;
}

double Area(const Polygon& poly) {
  double twice = 0;
  for (int i = 0; i < poly.n; ++i) twice += Cross(poly.p[i], poly.p[(i + 1) % poly.n]);
  return 0.5 * std::abs(twice);
}

Polygon Box(double x0, double y0, double x1, double y1) {
  Polygon box;
  box.n = 4;
  box.p[0] = {x0, y0};
  box.p[1] = {x1, y0};
  box.p[2] = {x1, y1};
  box.p[3] = {x0, y1};
  return box;
}

// The wedge in grid units (pixel (ix, iy) is the unit square at (ix, iy)) as two
// half-planes a x + b y + c >= 0.
struct GridWedge {
  double a0, b0, c0, a1, b1, c1;
  double angle_rad;
  Point2 apex_mm;
};

GridWedge ToGrid(const FanScan& scan, const RayWedge& w) {
  const double dx = scan.pixel_x_mm(), dy = scan.pixel_y_mm();
  const Point2 s = {(w.apex.x - scan.left_mm()) / dx, (w.apex.y - scan.bottom_mm()) / dy};
  const Point2 e0 = {w.edge0.x / dx, w.edge0.y / dy};
  const Point2 e1 = {w.edge1.x / dx, w.edge1.y / dy};
  GridWedge g;
  // Cross(e0, p - s) >= 0 and Cross(p - s, e1) >= 0 (a positive scaling keeps the signs).
  g.a0 = -e0.y;
  g.b0 = e0.x;
  g.c0 = e0.y * s.x - e0.x * s.y;
  g.a1 = e1.y;
  g.b1 = -e1.x;
  g.c1 = -e1.y * s.x + e1.x * s.y;
  g.angle_rad = w.angle_rad;
  g.apex_mm = w.apex;
  return g;
}

Polygon ClipToWedge(const Polygon& poly, const GridWedge& g) {
  return Clip(Clip(poly, g.a0, g.b0, g.c0), g.a1, g.b1, g.c1);
}

// Calls band(iy, ix0, ix1) for every pixel row the wedge crosses inside the grid, in
// increasing iy, with ix0 == ix1 for a row it only touches; none when it misses the grid.
template <typename Band>
void ForEachBand(const FanScan& scan, const GridWedge& g, Band band) {
  const double nx = static_cast<double>(scan.nx()), ny = static_cast<double>(scan.ny());
  const Polygon inside = ClipToWedge(Box(0, 0, nx, ny), g);
  if (inside.n < 3 || Area(inside) <= 1e-12) return;
  double y_min = ny, y_max = 0;
  for (int i = 0; i < inside.n; ++i) {
    y_min = std::min(y_min, inside.p[i].y);
    y_max = std::max(y_max, inside.p[i].y);
  }
  const int64_t iy0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(y_min + 1e-9)));
  const int64_t iy1 = std::min<int64_t>(scan.ny(), static_cast<int64_t>(std::ceil(y_max - 1e-9)));
  for (int64_t iy = iy0; iy < iy1; ++iy) {
    const Polygon slab = Clip(Clip(inside, 0, 1, -static_cast<double>(iy)), 0, -1,
                              static_cast<double>(iy + 1));
    int64_t ix0 = 0, ix1 = 0;
    if (slab.n >= 3 && Area(slab) > 1e-9) {
      double x_min = nx, x_max = 0;
      for (int i = 0; i < slab.n; ++i) {
        x_min = std::min(x_min, slab.p[i].x);
        x_max = std::max(x_max, slab.p[i].x);
      }
      // Pixels the wedge reaches by less than 1e-9 of a pixel are left out, so that
      // rounding does not decide whether a touching pixel is an entry.
      ix0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(x_min + 1e-9)));
      ix1 = std::min<int64_t>(scan.nx(), static_cast<int64_t>(std::ceil(x_max - 1e-9)));
      if (ix1 < ix0) ix1 = ix0;
    }
    band(iy, ix0, ix1);
  }
}

}  // namespace

RowCount StripWeights::CountRow(int64_t view, int64_t column) const {
  const GridWedge g = ToGrid(scan_, scan_.Wedge(view, column));
  RowCount count;
  ForEachBand(scan_, g, [&](int64_t, int64_t ix0, int64_t ix1) {
    ++count.runs;
    count.entries += ix1 - ix0;
  });
  return count;
}

void StripWeights::ComputeRow(int64_t view, int64_t column, RowRuns* row) const {
  row->ix_first.clear();
  row->run_begin.assign(1, 0);
  row->values.clear();
  row->iy_first = 0;
  const GridWedge g = ToGrid(scan_, scan_.Wedge(view, column));
  const double dx = scan_.pixel_x_mm(), dy = scan_.pixel_y_mm();
  bool first = true;
  ForEachBand(scan_, g, [&](int64_t iy, int64_t ix0, int64_t ix1) {
    if (first) row->iy_first = static_cast<int32_t>(iy);
    first = false;
    row->ix_first.push_back(static_cast<int32_t>(ix0));
    const double y_mm = scan_.bottom_mm() + (static_cast<double>(iy) + 0.5) * dy;
    for (int64_t ix = ix0; ix < ix1; ++ix) {
      const double area = Area(ClipToWedge(
          Box(static_cast<double>(ix), static_cast<double>(iy), static_cast<double>(ix + 1),
              static_cast<double>(iy + 1)),
          g));
      const double x_mm = scan_.left_mm() + (static_cast<double>(ix) + 0.5) * dx;
      const double r = std::hypot(x_mm - g.apex_mm.x, y_mm - g.apex_mm.y);
      row->values.push_back(static_cast<float>(area * dx * dy / (r * g.angle_rad)));
    }
    row->run_begin.push_back(static_cast<int32_t>(row->values.size()));
  });
}

double StripWeights::CoveredFraction(int64_t view, int64_t column, int64_t ix,
                                     int64_t iy) const {
  const GridWedge g = ToGrid(scan_, scan_.Wedge(view, column));
  return Area(ClipToWedge(Box(static_cast<double>(ix), static_cast<double>(iy),
                              static_cast<double>(ix + 1), static_cast<double>(iy + 1)),
                          g));
}

}  // namespace tomo::core::system_matrix
