// Strip geometry: the polygon arithmetic behind the strip weights (strip_weights.h), in one
// header compiled for the CPU and, inside .cu files, for the GPU, so that a matrix built on
// the device has the same entries as one built on the host. All float64.
//
// Grid units: pixel (ix, iy) is the unit square [ix, ix + 1] x [iy, iy + 1]. A ray's wedge
// is two half-planes a x + b y + c >= 0 in those units; the weight of a pixel is
//   area(wedge ∩ pixel) * dx * dy / (r * angle)     (r: source to pixel centre, mm).
//
//   RowWedge w = ...;                    // from FanScan::Wedge (host)
//   int64_t iy0, iy1; Polygon inside;
//   if (WedgeInGrid(w, frame, &inside, &iy0, &iy1)) for (iy...) BandExtent(inside, iy, ...);
#pragma once

#include <math.h>

#include <cstdint>

#if defined(__CUDACC__)
#define TOMO_HOST_DEVICE __host__ __device__
#else
#define TOMO_HOST_DEVICE
#endif

namespace tomo::core::system_matrix::strip_geometry {

struct GridPoint {
  double x, y;
};

// A convex polygon of at most kMaxVertices vertices (a box clipped by four half-planes).
constexpr int kMaxVertices = 12;
struct Polygon {
  GridPoint p[kMaxVertices];
  int n;
};

// The grid: nx x ny pixels of dx x dy mm, pixel (0, 0)'s corner at (left, bottom) mm.
struct GridFrame {
  int64_t nx, ny;
  double dx, dy, left, bottom;
};

// One ray: its two half-planes in grid units, and what the weight's scale needs.
struct RowWedge {
  double a0, b0, c0, a1, b1, c1;
  double apex_x_mm, apex_y_mm;  // the source
  double angle_rad;
};

// Keeps a x + b y + c >= 0 (Sutherland-Hodgman on one edge).
TOMO_HOST_DEVICE inline Polygon Clip(const Polygon& in, double a, double b, double c) {
  Polygon out;
  out.n = 0;
  for (int i = 0; i < in.n; ++i) {
    const GridPoint p = in.p[i];
    const GridPoint q = in.p[(i + 1) % in.n];
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

TOMO_HOST_DEVICE inline double Area(const Polygon& poly) {
  double twice = 0;
  for (int i = 0; i < poly.n; ++i) {
    const GridPoint a = poly.p[i], b = poly.p[(i + 1) % poly.n];
    twice += a.x * b.y - a.y * b.x;
  }
  return 0.5 * fabs(twice);
}

TOMO_HOST_DEVICE inline Polygon Box(double x0, double y0, double x1, double y1) {
  Polygon box;
  box.n = 4;
  box.p[0] = {x0, y0};
  box.p[1] = {x1, y0};
  box.p[2] = {x1, y1};
  box.p[3] = {x0, y1};
  return box;
}

TOMO_HOST_DEVICE inline Polygon ClipToWedge(const Polygon& poly, const RowWedge& w) {
  return Clip(Clip(poly, w.a0, w.b0, w.c0), w.a1, w.b1, w.c1);
}

// The wedge inside the grid and the pixel rows [iy0, iy1) it crosses; false when it misses.
// Rows and pixels the wedge reaches by less than 1e-9 of a pixel are left out, so that
// rounding does not decide whether a touching pixel is an entry.
TOMO_HOST_DEVICE inline bool WedgeInGrid(const RowWedge& w, const GridFrame& frame,
                                         Polygon* inside, int64_t* iy0, int64_t* iy1) {
  const double nx = static_cast<double>(frame.nx), ny = static_cast<double>(frame.ny);
  *inside = ClipToWedge(Box(0, 0, nx, ny), w);
  if (inside->n < 3 || Area(*inside) <= 1e-12) return false;
  double y_min = ny, y_max = 0;
  for (int i = 0; i < inside->n; ++i) {
    y_min = fmin(y_min, inside->p[i].y);
    y_max = fmax(y_max, inside->p[i].y);
  }
  const int64_t lo = static_cast<int64_t>(floor(y_min + 1e-9));
  const int64_t hi = static_cast<int64_t>(ceil(y_max - 1e-9));
  *iy0 = lo < 0 ? 0 : lo;
  *iy1 = hi > frame.ny ? frame.ny : hi;
  return *iy1 > *iy0;
}

// Pixels [ix0, ix1) of pixel row iy that the wedge (inside, from WedgeInGrid) meets;
// ix0 == ix1 for a row it only touches.
TOMO_HOST_DEVICE inline void BandExtent(const Polygon& inside, int64_t iy, const GridFrame& frame,
                                        int64_t* ix0, int64_t* ix1) {
  const Polygon slab = Clip(Clip(inside, 0, 1, -static_cast<double>(iy)), 0, -1,
                            static_cast<double>(iy + 1));
  *ix0 = 0;
  *ix1 = 0;
  if (slab.n < 3 || Area(slab) <= 1e-9) return;
  const double nx = static_cast<double>(frame.nx);
  double x_min = nx, x_max = 0;
  for (int i = 0; i < slab.n; ++i) {
    x_min = fmin(x_min, slab.p[i].x);
    x_max = fmax(x_max, slab.p[i].x);
  }
  const int64_t lo = static_cast<int64_t>(floor(x_min + 1e-9));
  const int64_t hi = static_cast<int64_t>(ceil(x_max - 1e-9));
  *ix0 = lo < 0 ? 0 : lo;
  *ix1 = hi > frame.nx ? frame.nx : hi;
  if (*ix1 < *ix0) *ix1 = *ix0;
}

TOMO_HOST_DEVICE inline double CoveredArea(const RowWedge& w, int64_t ix, int64_t iy) {
  return Area(ClipToWedge(Box(static_cast<double>(ix), static_cast<double>(iy),
                              static_cast<double>(ix + 1), static_cast<double>(iy + 1)),
                          w));
}

TOMO_HOST_DEVICE inline float Weight(const RowWedge& w, const GridFrame& frame, int64_t ix,
                                     int64_t iy) {
  const double x_mm = frame.left + (static_cast<double>(ix) + 0.5) * frame.dx;
  const double y_mm = frame.bottom + (static_cast<double>(iy) + 0.5) * frame.dy;
  const double r = hypot(x_mm - w.apex_x_mm, y_mm - w.apex_y_mm);
  return static_cast<float>(CoveredArea(w, ix, iy) * frame.dx * frame.dy / (r * w.angle_rad));
}

}  // namespace tomo::core::system_matrix::strip_geometry
