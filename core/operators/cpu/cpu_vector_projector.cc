// CpuBackend's projectors for any VectorGeometry (backend.h defines the operators). What
// follows is the exact definition the CUDA kernels must reproduce.
//
// Volume index coordinates: a point p (mm) has fractional voxel index
//   i_x(p) = (p.x - center.x) / voxel.x + (size.x - 1) / 2     (same for y and z),
// so voxel centres sit at integer indices and the volume's box is [-0.5, size - 0.5] per axis.
//
// ForwardProject (ray-driven, Joseph in 3D). For every view, row and column, the ray is
// VectorGeometry::PixelRay(view, row, column) (origin o, unit direction d; for cylindrical
// detectors the pixel lies on the arc). In index coordinates P = i(o), D = (d.x / voxel.x,
// d.y / voxel.y, d.z / voxel.z). The main axis a is the one with the largest |D_a|; ties go
// to y, then x, then z (y first as in the 2D projector: it steps rows when
// |cos t| >= |sin t|). The other two axes b, c are the remaining ones in z, y, x order.
// The ray visits every plane k = 0 .. size_a - 1 of the main axis at parameter
// t_k = (k - P_a) / D_a, where it sits at in-plane indices (P_b + t_k D_b, P_c + t_k D_c);
// cone beams only count planes with t_k >= 0 (in front of the source), parallel beams the
// whole line. The value at that point is the bilinear interpolation of the plane's voxels,
// voxels outside the volume counting as zero. The projection is
//   sum over planes of that value, times voxel_a / |d_a|   (mm of ray per plane).
// Clipping the ray to the box, extended by one voxel in b and c where the interpolation
// still has support, only skips planes that would add exactly zero.
//
// BackProject (voxel-driven). For every voxel centre p and view, the detector position
// (column, row) of p, both fractional, with (0, 0) the centre of pixel (row 0, column 0):
//  - flat, cone (source s): the line from s through p meets the detector plane (point c,
//    normal n = u x v) at q = s + t (p - s), t = ((c - s) . n) / ((p - s) . n), counted only
//    when t > 0; parallel (ray direction r): q = p + t r, t = ((c - p) . n) / (r . n).
//    q - c = column' u + row' v is solved with the dual basis
//      u* = (v x n) / (u . (v x n)),   v* = (n x u) / (v . (n x u)),
//    column = (q - c) . u* + (columns - 1) / 2, row = (q - c) . v* + (rows - 1) / 2.
//    kFdk weight (D / U)^2 = t^2 (D = (c - s) . n^, U = (p - s) . n^).
//  - cylindrical (cone only): with v^ = v / |v|, w the unit vector from s towards c with
//    its v component removed, e = u / |u| with its v and w components removed (the tangent),
//    R = |(c - s) - ((c - s) . v^) v^| and h_c = (c - s) . v^ (the detector centre's height
//    above the source): for x = p - s, a = x . w, b = x . e, h = x . v^, rho = sqrt(a^2 + b^2),
//    counted only when a > 0:
//      column = atan2(b, a) R / |u| + (columns - 1) / 2,
//      row = (h R / rho - h_c) / |v| + (rows - 1) / 2.
//    kFdk weight (R / rho)^2.
// The value is the bilinear interpolation of the view's projection at (row, column), pixels
// outside the detector counting as zero, times the weight (1 for kNone; kMatched: a
// per-view scale times (D / U)^p, matched_back_projection.h); views are summed
// in view order in float64, so results do not depend on the thread count. (The code
// evaluates the dot products above as start values plus ix times a step along each volume
// row: the same numbers up to float64 rounding.) This is the exact
// transpose of the pixel-driven projector that splats each voxel's value onto its
// (row, column) with the same bilinear weights.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/operators/cpu/cpu_vector_projector.h"
#include "core/operators/matched_back_projection.h"
#include "core/operators/vector_operands.h"

namespace tomo::core {
namespace {

// floor() as an integer, for values well inside int64 range.
inline int64_t FloorToInt(double value) {
  const int64_t truncated = static_cast<int64_t>(value);
  return value < static_cast<double>(truncated) ? truncated - 1 : truncated;
}

// Index coordinates of the volume (see the top of the file).
struct IndexFrame {
  double size[3];     // x, y, z
  double voxel[3];    // mm
  double origin[3];   // index = (p - center) / voxel + (size - 1) / 2 = p / voxel + origin
  int64_t stride[3];  // x, y, z strides in the (z, y, x) array
  int64_t count[3];
};

IndexFrame MakeIndexFrame(const VolumeGeometry& volume) {
  IndexFrame frame;
  const Size3& size = volume.size();
  const Vec3& voxel = volume.voxel_size_mm();
  const Vec3& center = volume.center_mm();
  const int64_t counts[3] = {size.x, size.y, size.z};
  const double voxels[3] = {voxel.x, voxel.y, voxel.z};
  const double centers[3] = {center.x, center.y, center.z};
  for (int axis = 0; axis < 3; ++axis) {
    frame.count[axis] = counts[axis];
    frame.size[axis] = static_cast<double>(counts[axis]);
    frame.voxel[axis] = voxels[axis];
    frame.origin[axis] = -centers[axis] / voxels[axis] + 0.5 * (frame.size[axis] - 1.0);
  }
  frame.stride[0] = 1;
  frame.stride[1] = size.x;
  frame.stride[2] = size.x * size.y;
  return frame;
}

// Joseph's sum along one ray (see the top of the file), before the path-length weight.
double JosephRaySum(const IndexFrame& frame, const float* volume, const Ray& ray,
                    bool cone, double& path_length) {
  const double o[3] = {ray.origin.x, ray.origin.y, ray.origin.z};
  const double d[3] = {ray.direction.x, ray.direction.y, ray.direction.z};
  double P[3], D[3];
  for (int axis = 0; axis < 3; ++axis) {
    P[axis] = o[axis] / frame.voxel[axis] + frame.origin[axis];
    D[axis] = d[axis] / frame.voxel[axis];
  }
  // Main axis: y, then x, then z on ties.
  int a = 1;
  if (std::abs(D[0]) > std::abs(D[a])) a = 0;
  if (std::abs(D[2]) > std::abs(D[a])) a = 2;
  // The other two, slower (b) then faster (c) in memory.
  const int b = a == 2 ? 1 : 2;
  const int c = a == 0 ? 1 : 0;
  path_length = frame.voxel[a] / std::abs(d[a]);

  // Parameter range where the in-plane indices have interpolation support, (-1, size).
  double t_low = cone ? 0.0 : -INFINITY;
  double t_high = INFINITY;
  for (int axis : {b, c}) {
    if (D[axis] == 0) {
      if (!(P[axis] > -1.0 && P[axis] < frame.size[axis])) return 0;
      continue;
    }
    const double t0 = (-1.0 - P[axis]) / D[axis];
    const double t1 = (frame.size[axis] - P[axis]) / D[axis];
    t_low = std::max(t_low, std::min(t0, t1));
    t_high = std::min(t_high, std::max(t0, t1));
  }
  if (!(t_low <= t_high)) return 0;
  // Planes whose t lies in that range (one plane of slack on each side against rounding:
  // the per-plane checks below decide).
  const double k0 = P[a] + t_low * D[a];
  const double k1 = P[a] + t_high * D[a];
  const double last_plane = frame.size[a] - 1.0;
  const int64_t k_first = FloorToInt(std::clamp(std::min(k0, k1), -1.0, last_plane + 1.0));
  const int64_t k_last = FloorToInt(std::clamp(std::max(k0, k1), -1.0, last_plane + 1.0)) + 1;
  const int64_t first = std::max<int64_t>(k_first, 0);
  const int64_t last = std::min<int64_t>(k_last, frame.count[a] - 1);

  const int64_t nb = frame.count[b], nc = frame.count[c];
  const double size_b = frame.size[b], size_c = frame.size[c];
  const int64_t stride_a = frame.stride[a], stride_b = frame.stride[b], stride_c = frame.stride[c];
  double sum = 0;
  for (int64_t k = first; k <= last; ++k) {
    const double t = (static_cast<double>(k) - P[a]) / D[a];
    if (cone && t < 0) continue;
    const double pb = P[b] + t * D[b];
    const double pc = P[c] + t * D[c];
    if (!(pb > -1.0 && pb < size_b && pc > -1.0 && pc < size_c)) continue;
    const int64_t ib = FloorToInt(pb);
    const int64_t ic = FloorToInt(pc);
    const double fb = pb - static_cast<double>(ib);
    const double fc = pc - static_cast<double>(ic);
    const float* plane = volume + k * stride_a;
    double low_b = 0, high_b = 0;  // interpolated along c on rows ib and ib + 1
    if (ib >= 0) {
      const float* line = plane + ib * stride_b;
      if (ic >= 0) low_b += (1.0 - fc) * line[ic * stride_c];
      if (ic + 1 < nc) low_b += fc * line[(ic + 1) * stride_c];
    }
    if (ib + 1 < nb) {
      const float* line = plane + (ib + 1) * stride_b;
      if (ic >= 0) high_b += (1.0 - fc) * line[ic * stride_c];
      if (ic + 1 < nc) high_b += fc * line[(ic + 1) * stride_c];
    }
    sum += (1.0 - fb) * low_b + fb * high_b;
  }
  return sum;
}

// Per view: what BackProject needs to map a voxel centre to (column, row) and weight.
struct BackView {
  // Flat detector.
  Vec3 s;       // cone: source; parallel: unused
  Vec3 r;       // parallel: ray direction
  Vec3 c;       // detector centre
  Vec3 n;       // u x v
  Vec3 u_dual;  // u*
  Vec3 v_dual;  // v*
  double c_minus_s_dot_n = 0;
  // Cylindrical detector.
  Vec3 w, e, v_unit;
  double radius = 0, height_center = 0, u_norm = 0, v_norm = 0;
};

BackView MakeBackView(const VectorGeometry& geometry, const ViewVectors& vectors) {
  BackView view;
  view.c = vectors.detector_center;
  if (geometry.detector() == DetectorShape::kCylindrical) {
    view.s = vectors.source;
    const CylindricalDetectorFrame frame = MakeCylindricalDetectorFrame(vectors);
    view.u_norm = frame.u_norm_mm;
    view.v_norm = frame.v_norm_mm;
    view.v_unit = frame.v_unit;
    view.height_center = frame.height_center_mm;
    view.radius = frame.radius_mm;
    view.w = frame.w;
    view.e = frame.e;
    return view;
  }
  view.n = Cross(vectors.u, vectors.v);
  const Vec3 v_cross_n = Cross(vectors.v, view.n);
  const Vec3 n_cross_u = Cross(view.n, vectors.u);
  view.u_dual = (1.0 / Dot(vectors.u, v_cross_n)) * v_cross_n;
  view.v_dual = (1.0 / Dot(vectors.v, n_cross_u)) * n_cross_u;
  if (geometry.beam() == BeamKind::kCone) {
    view.s = vectors.source;
    view.c_minus_s_dot_n = Dot(vectors.detector_center - vectors.source, view.n);
  } else {
    view.r = vectors.source;
  }
  return view;
}

// Bilinear interpolation of one view's projection at (row, column); zero outside.
inline double Bilinear(const float* image, int64_t rows, int64_t columns, double row,
                       double column) {
  if (!(row > -1.0 && row < static_cast<double>(rows) && column > -1.0 &&
        column < static_cast<double>(columns))) {
    return 0;
  }
  const int64_t r0 = FloorToInt(row);
  const int64_t c0 = FloorToInt(column);
  const double fr = row - static_cast<double>(r0);
  const double fc = column - static_cast<double>(c0);
  double low = 0, high = 0;
  if (r0 >= 0) {
    const float* line = image + r0 * columns;
    if (c0 >= 0) low += (1.0 - fc) * line[c0];
    if (c0 + 1 < columns) low += fc * line[c0 + 1];
  }
  if (r0 + 1 < rows) {
    const float* line = image + (r0 + 1) * columns;
    if (c0 >= 0) high += (1.0 - fc) * line[c0];
    if (c0 + 1 < columns) high += fc * line[c0 + 1];
  }
  return (1.0 - fr) * low + fr * high;
}

// (D / U)^power for power 0, 1 or 2.
inline double DistanceWeight(double ratio, int power) {
  return power == 2 ? ratio * ratio : power == 1 ? ratio : 1.0;
}

}  // namespace

absl::Status CpuVectorForward(const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
                              const Array3D& volume, Array3D& projections, int threads) {
  TOMO_RETURN_IF_ERROR(CheckVectorOperands(geometry, volume_geometry, volume, projections));
  const IndexFrame frame = MakeIndexFrame(volume_geometry);
  const bool cone = geometry.beam() == BeamKind::kCone;
  const int64_t rows = geometry.rows();
  const int64_t columns = geometry.columns();
  const float* input = volume.data();
  float* output = projections.data();
  // One detector row of one view per work item.
  ParallelFor(
      geometry.num_views() * rows,
      [&](int64_t line_begin, int64_t line_end) {
        for (int64_t line = line_begin; line < line_end; ++line) {
          const int64_t view = line / rows;
          const int64_t row = line % rows;
          float* out = output + line * columns;
          for (int64_t column = 0; column < columns; ++column) {
            const Ray ray = geometry.PixelRay(view, static_cast<double>(row),
                                              static_cast<double>(column));
            double path_length = 0;
            const double sum = JosephRaySum(frame, input, ray, cone, path_length);
            out[column] = static_cast<float>(sum * path_length);
          }
        }
      },
      threads);
  return absl::OkStatus();
}

absl::Status CpuVectorBack(const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
                           const Array3D& projections, BackProjectionWeighting weighting,
                           Array3D& volume, int threads) {
  TOMO_RETURN_IF_ERROR(CheckVectorOperands(geometry, volume_geometry, volume, projections));
  const bool cone = geometry.beam() == BeamKind::kCone;
  const bool fdk = weighting == BackProjectionWeighting::kFdk;
  if (fdk && !cone) {
    return absl::InvalidArgumentError(
        "weighting: kFdk (the FDK distance weight) needs a cone beam; this geometry is a "
        "parallel beam");
  }
  const bool cylindrical = geometry.detector() == DetectorShape::kCylindrical;
  // Per view: scale * (distance weight)^power; kNone: 1 * ^0, kFdk: 1 * ^2, kMatched:
  // matched_back_projection.h.
  MatchedWeights matched;
  if (weighting == BackProjectionWeighting::kMatched) {
    matched = MakeMatchedWeights(geometry, volume_geometry);
  } else {
    matched.view_scale.assign(static_cast<size_t>(geometry.num_views()), 1.0);
    matched.distance_power = fdk ? 2 : 0;
  }
  const int power = matched.distance_power;
  std::vector<BackView> views;
  views.reserve(static_cast<size_t>(geometry.num_views()));
  for (const ViewVectors& vectors : geometry.views()) {
    views.push_back(MakeBackView(geometry, vectors));
  }
  const int64_t nx = volume_geometry.size().x;
  const int64_t ny = volume_geometry.size().y;
  const int64_t nz = volume_geometry.size().z;
  const int64_t rows = geometry.rows();
  const int64_t columns = geometry.columns();
  const double row_center = 0.5 * static_cast<double>(rows - 1);
  const double column_center = 0.5 * static_cast<double>(columns - 1);
  const int64_t view_size = rows * columns;
  const double x_first = volume_geometry.x_mm(0.0);
  const double voxel_x = volume_geometry.voxel_size_mm().x;
  const float* input = projections.data();
  float* output = volume.data();

  // One volume row (z, y) per work item: all views, the inner loop along x.
  ParallelFor(
      nz * ny,
      [&](int64_t line_begin, int64_t line_end) {
        std::vector<double> sums(static_cast<size_t>(nx));
        for (int64_t line = line_begin; line < line_end; ++line) {
          const int64_t iz = line / ny;
          const int64_t iy = line % ny;
          std::fill(sums.begin(), sums.end(), 0.0);
          const double y = volume_geometry.y_mm(static_cast<double>(iy));
          const double z = volume_geometry.z_mm(static_cast<double>(iz));
          for (size_t v = 0; v < views.size(); ++v) {
            const BackView& view = views[v];
            const double scale = matched.view_scale[v];
            const float* image = input + static_cast<int64_t>(v) * view_size;
            // Everything below is affine in ix along the row: start values at ix = 0
            // plus ix times the step of one voxel along x.
            const Vec3 x0 = Vec3{x_first, y, z} - view.s;
            double* row_sums = sums.data();
            if (cylindrical) {
              const double a0 = Dot(x0, view.w), da = voxel_x * view.w.x;
              const double b0 = Dot(x0, view.e), db = voxel_x * view.e.x;
              const double h0 = Dot(x0, view.v_unit), dh = voxel_x * view.v_unit.x;
              const double column_scale = view.radius / view.u_norm;
              for (int64_t ix = 0; ix < nx; ++ix) {
                const double i = static_cast<double>(ix);
                const double a = a0 + i * da;
                if (!(a > 0)) continue;
                const double b = b0 + i * db;
                const double h = h0 + i * dh;
                const double rho = std::sqrt(a * a + b * b);
                const double column = std::atan2(b, a) * column_scale + column_center;
                const double row =
                    (h * view.radius / rho - view.height_center) / view.v_norm + row_center;
                const double weight = scale * DistanceWeight(view.radius / rho, power);
                row_sums[ix] += weight * Bilinear(image, rows, columns, row, column);
              }
            } else if (cone) {
              const double n0 = Dot(x0, view.n), dn = voxel_x * view.n.x;
              const double u0 = Dot(x0, view.u_dual), du = voxel_x * view.u_dual.x;
              const double v0 = Dot(x0, view.v_dual), dv = voxel_x * view.v_dual.x;
              const double column_base = Dot(view.s - view.c, view.u_dual) + column_center;
              const double row_base = Dot(view.s - view.c, view.v_dual) + row_center;
              for (int64_t ix = 0; ix < nx; ++ix) {
                const double i = static_cast<double>(ix);
                const double t = view.c_minus_s_dot_n / (n0 + i * dn);
                if (!(t > 0) || !std::isfinite(t)) continue;
                const double column = column_base + t * (u0 + i * du);
                const double row = row_base + t * (v0 + i * dv);
                const double weight = scale * DistanceWeight(t, power);
                row_sums[ix] += weight * Bilinear(image, rows, columns, row, column);
              }
            } else {
              // q - c = (p - c) + t r with t = ((c - p) . n) / (r . n): affine in p.
              const Vec3 p0{x_first, y, z};
              const double r_dot_n = Dot(view.r, view.n);
              const double t0 = Dot(view.c - p0, view.n) / r_dot_n;
              const double dt = -voxel_x * view.n.x / r_dot_n;
              const Vec3 q0 = (p0 - view.c) + t0 * view.r;
              const Vec3 dq = Vec3{voxel_x, 0, 0} + dt * view.r;
              const double column0 = Dot(q0, view.u_dual) + column_center;
              const double row0 = Dot(q0, view.v_dual) + row_center;
              const double dcolumn = Dot(dq, view.u_dual), drow = Dot(dq, view.v_dual);
              for (int64_t ix = 0; ix < nx; ++ix) {
                const double i = static_cast<double>(ix);
                row_sums[ix] += scale * Bilinear(image, rows, columns, row0 + i * drow,
                                                 column0 + i * dcolumn);
              }
            }
          }
          float* out = output + line * nx;
          for (int64_t ix = 0; ix < nx; ++ix) out[ix] = static_cast<float>(sums[static_cast<size_t>(ix)]);
        }
      },
      threads);
  return absl::OkStatus();
}

}  // namespace tomo::core
