// The separable-footprint system model as inline functions shared by the CPU reference and
// the CUDA kernels (templated on the real type: double on the CPU, float on the device).
//
// Model (trapezoid transaxial, rectangle axial, amplitude method A1), for a flat detector
// whose rows are parallel to the z axis (u horizontal, v along +-z): the contribution of a
// voxel of value 1 /mm to detector pixel (row, column) of a view is
//   a = chord * sec(psi) * F_u(column) * F_v(row)
// where
//  - F_u is the mean over the column's width of the trapezoid whose four corners are the
//    detector column coordinates of the voxel's four (x +- dx/2, y +- dy/2) edges seen
//    from the source, of height 1 between the inner two: it depends on (x, y) only, so one
//    SfColumn serves a whole column of voxels along z;
//  - F_v is the overlap, in rows, of the row with the projection of (z - dz/2, z + dz/2)
//    magnified as at the voxel's (x, y) (the voxel's depth from the source does not
//    depend on z, because the detector normal is horizontal);
//  - chord is the in-plane length of the line from the source through the voxel centre
//    inside the voxel (min(dx / |cos phi|, dy / |sin phi|)), and sec(psi) the axial
//    stretch of that ray (|r| / |r_xy|, r from the source to the voxel centre).
// Volume values are per mm, so a projection is a dimensionless line integral (mm times
// 1/mm), as in the other projectors. Coordinates: column c covers column coordinates
// [c - 1/2, c + 1/2], row r covers [r - 1/2, r + 1/2] (docs/geometry.md's pixel centres).
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define TOMO_SF_HD __host__ __device__ __forceinline__
#else
#define TOMO_SF_HD inline
#endif

namespace tomo::core::statistical {

// One view as the footprint needs it; made by SeparableFootprintProjector from the view's
// vectors. A point p maps to
//   column coordinate = column_origin + (distance / depth) * dot(p - s, u) * inv_column_mm
//   row coordinate    = row_origin + (distance / depth) * (p.z - s.z) * row_scale
// with depth = dot(p - s, n) > 0 (s the source, u and n unit and horizontal).
template <typename Real>
struct SfViewT {
  Real source_x, source_y, source_z;
  Real u_x, u_y;          // the detector's column direction, unit
  Real n_x, n_y;          // from the source towards the detector plane, unit
  Real distance;          // source to detector plane along n, mm
  Real column_origin;     // column coordinate of the foot of the source on the detector
  Real inv_column_mm;     // 1 / column spacing
  Real row_origin;        // row coordinate at the source's height
  Real row_scale;         // +-1 / row spacing (sign of v along z)
};

// The transaxial part of one voxel column (x, y) in one view.
template <typename Real>
struct SfColumnT {
  Real tau0, tau1, tau2, tau3;  // trapezoid corners, column coordinates, ascending
  Real rows_per_mm;             // row coordinate change per mm of z (signed)
  Real row_at_source_height;    // row coordinate of height z = source z
  Real source_z;
  Real chord;                   // mm, in-plane chord through the voxel centre
  Real inv_planar_distance2;    // 1 / |p_xy - s_xy|^2, for sec(psi)
  int first_column, last_column;  // clipped to the detector; first > last: none
};

// Integral of the unit-height trapezoid (t0 <= t1 <= t2 <= t3) from -infinity to t.
template <typename Real>
TOMO_SF_HD Real TrapezoidCumulative(Real t0, Real t1, Real t2, Real t3, Real t) {
  if (t <= t0) return Real(0);
  const Real rise = t1 - t0, fall = t3 - t2;
  if (t < t1) return (t - t0) * (t - t0) / (Real(2) * rise);  // t1 > t > t0: rise > 0
  const Real after_rise = Real(0.5) * rise;
  if (t < t2) return after_rise + (t - t1);
  const Real after_top = after_rise + (t2 - t1);
  if (t < t3) return after_top + Real(0.5) * fall - (t3 - t) * (t3 - t) / (Real(2) * fall);
  return after_top + Real(0.5) * fall;
}

// Mean of the trapezoid over column c's width (one unit).
template <typename Real>
TOMO_SF_HD Real ColumnWeight(const SfColumnT<Real>& col, int c) {
  const Real lo = Real(c) - Real(0.5), hi = Real(c) + Real(0.5);
  return TrapezoidCumulative(col.tau0, col.tau1, col.tau2, col.tau3, hi) -
         TrapezoidCumulative(col.tau0, col.tau1, col.tau2, col.tau3, lo);
}

template <typename Real>
TOMO_SF_HD void SortFour(Real& a, Real& b, Real& c, Real& d) {
  Real t;
  if (a > b) { t = a; a = b; b = t; }
  if (c > d) { t = c; c = d; d = t; }
  if (a > c) { t = a; a = c; c = t; }
  if (b > d) { t = b; b = d; d = t; }
  if (b > c) { t = b; b = c; c = t; }
}

// The transaxial footprint of the voxel column centred at (x, y), of widths (dx, dy).
template <typename Real>
TOMO_SF_HD SfColumnT<Real> MakeColumn(const SfViewT<Real>& view, Real x, Real y, Real dx,
                                      Real dy, int columns) {
  SfColumnT<Real> col;
  const Real rx = x - view.source_x, ry = y - view.source_y;
  const Real depth = rx * view.n_x + ry * view.n_y;
  const Real along = rx * view.u_x + ry * view.u_y;
  // Corners (x +- dx/2, y +- dy/2): depth and along change by +-hx n_x +- hy n_y etc.
  const Real hx = Real(0.5) * dx, hy = Real(0.5) * dy;
  const Real scale = view.distance * view.inv_column_mm;
  Real t[4];
  for (int k = 0; k < 4; ++k) {
    const Real sx = (k & 1) ? hx : -hx, sy = (k & 2) ? hy : -hy;
    const Real corner_depth = depth + sx * view.n_x + sy * view.n_y;
    const Real corner_along = along + sx * view.u_x + sy * view.u_y;
    t[k] = view.column_origin + scale * corner_along / corner_depth;
  }
  SortFour(t[0], t[1], t[2], t[3]);
  col.tau0 = t[0];
  col.tau1 = t[1];
  col.tau2 = t[2];
  col.tau3 = t[3];
  col.rows_per_mm = view.distance / depth * view.row_scale;
  col.row_at_source_height = view.row_origin;
  col.source_z = view.source_z;
  const Real planar2 = rx * rx + ry * ry;
  const Real inv_planar = Real(1) / sqrt(planar2);
  const Real cx = fabs(rx) * inv_planar, cy = fabs(ry) * inv_planar;
  // min(dx / cx, dy / cy) without dividing by zero.
  col.chord = (dx * cy < dy * cx) ? dx / cx : dy / cy;
  col.inv_planar_distance2 = Real(1) / planar2;
  int first = static_cast<int>(floor(t[0] - Real(0.5))) + 1;
  int last = static_cast<int>(ceil(t[3] + Real(0.5))) - 1;
  col.first_column = first < 0 ? 0 : first;
  col.last_column = last > columns - 1 ? columns - 1 : last;
  return col;
}

// The axial part of voxel height z (centre, mm) of thickness dz in a column: the rows it
// touches (clipped to the detector; first > last: none), the row coordinates of its
// projected ends (lo < hi) and the amplitude chord * sec(psi).
template <typename Real>
struct SfAxialT {
  Real lo, hi, amplitude;
  int first_row, last_row;
};

template <typename Real>
TOMO_SF_HD SfAxialT<Real> MakeAxial(const SfColumnT<Real>& col, Real z, Real dz, int rows) {
  SfAxialT<Real> ax;
  const Real a = col.row_at_source_height + col.rows_per_mm * (z - Real(0.5) * dz - col.source_z);
  const Real b = col.row_at_source_height + col.rows_per_mm * (z + Real(0.5) * dz - col.source_z);
  ax.lo = a < b ? a : b;
  ax.hi = a < b ? b : a;
  const Real height = z - col.source_z;
  ax.amplitude = col.chord * sqrt(Real(1) + height * height * col.inv_planar_distance2);
  int first = static_cast<int>(floor(ax.lo - Real(0.5))) + 1;
  int last = static_cast<int>(ceil(ax.hi + Real(0.5))) - 1;
  ax.first_row = first < 0 ? 0 : first;
  ax.last_row = last > rows - 1 ? rows - 1 : last;
  return ax;
}

// Overlap of row r with the projected voxel, in rows.
template <typename Real>
TOMO_SF_HD Real RowWeight(const SfAxialT<Real>& ax, int r) {
  const Real lo = Real(r) - Real(0.5), hi = Real(r) + Real(0.5);
  const Real top = ax.hi < hi ? ax.hi : hi;
  const Real bottom = ax.lo > lo ? ax.lo : lo;
  return top > bottom ? top - bottom : Real(0);
}

}  // namespace tomo::core::statistical
