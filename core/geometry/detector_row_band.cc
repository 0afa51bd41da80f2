#include "core/geometry/detector_row_band.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tomo::core {
namespace {

// The box of voxel centres, as its 8 corners.
std::vector<Vec3> VoxelCentreCorners(const VolumeGeometry& volume) {
  const Vec3 low{volume.x_mm(0), volume.y_mm(0), volume.z_mm(0)};
  const Vec3 high{volume.x_mm(static_cast<double>(volume.size().x - 1)),
                  volume.y_mm(static_cast<double>(volume.size().y - 1)),
                  volume.z_mm(static_cast<double>(volume.size().z - 1))};
  std::vector<Vec3> corners;
  for (int i = 0; i < 8; ++i) {
    corners.push_back({i & 1 ? high.x : low.x, i & 2 ? high.y : low.y, i & 4 ? high.z : low.z});
  }
  return corners;
}

// Row coordinate (fractional, pixel centres at integers) of the point where the ray through
// `point` meets a flat detector; false when the point is at or behind a cone source's
// detector-parallel plane.
bool FlatRow(const VectorGeometry& geometry, const ViewVectors& view, const Vec3& point,
             double* row) {
  const Vec3 normal = Cross(view.u, view.v);
  Vec3 hit;
  if (geometry.beam() == BeamKind::kParallel) {
    const double s = Dot(view.detector_center - point, normal) / Dot(view.source, normal);
    hit = point + s * view.source;
  } else {
    const double towards_detector = Dot(view.detector_center - view.source, normal);
    const double towards_point = Dot(point - view.source, normal);
    if (!(towards_point * towards_detector > 0)) return false;
    hit = view.source + (towards_detector / towards_point) * (point - view.source);
  }
  // The component along v in the basis (u, v): dot with the dual vector n x u.
  const Vec3 dual = Cross(normal, view.u);
  *row = Dot(hit - view.detector_center, dual) / Dot(view.v, dual) +
         0.5 * static_cast<double>(geometry.rows() - 1);
  return true;
}

// Bounds of the row coordinate over the box for a cylindrical detector with v along z:
// the ray from the source through a point at height s above the source and in-plane
// distance rho meets the cylinder of radius R at height s R / rho.
bool CylindricalRowRange(const VectorGeometry& geometry, const ViewVectors& view,
                         const VolumeGeometry& volume, const std::vector<Vec3>& corners,
                         double* lo, double* hi) {
  const Vec3 along_v = Normalized(view.v);
  if (std::hypot(along_v.x, along_v.y) > 1e-9) return false;
  const double sign = along_v.z > 0 ? 1.0 : -1.0;
  const Vec3 to_center = view.detector_center - view.source;
  const double radius = std::hypot(to_center.x, to_center.y);
  const double center_height = sign * to_center.z;
  double s_lo = std::numeric_limits<double>::infinity(), s_hi = -s_lo, rho_max = 0;
  for (const Vec3& corner : corners) {
    const double s = sign * (corner.z - view.source.z);
    s_lo = std::min(s_lo, s);
    s_hi = std::max(s_hi, s);
    rho_max = std::max(rho_max, std::hypot(corner.x - view.source.x, corner.y - view.source.y));
  }
  // The in-plane distance from the source to the box of voxel centres (clamp per axis).
  const double x_near = std::clamp(view.source.x, volume.x_mm(0),
                                   volume.x_mm(static_cast<double>(volume.size().x - 1)));
  const double y_near = std::clamp(view.source.y, volume.y_mm(0),
                                   volume.y_mm(static_cast<double>(volume.size().y - 1)));
  const double rho_min = std::hypot(x_near - view.source.x, y_near - view.source.y);
  if (!(rho_min > 0)) return false;
  const double row_mm = Norm(view.v);
  const double middle = 0.5 * static_cast<double>(geometry.rows() - 1);
  *lo = std::numeric_limits<double>::infinity();
  *hi = -*lo;
  for (double s : {s_lo, s_hi}) {
    for (double rho : {rho_min, rho_max}) {
      const double row = (s * radius / rho - center_height) / row_mm + middle;
      *lo = std::min(*lo, row);
      *hi = std::max(*hi, row);
    }
  }
  return true;
}

}  // namespace

RowBand DetectorRowBand(const VectorGeometry& geometry, const VolumeGeometry& volume) {
  const int64_t rows = geometry.rows();
  const RowBand all{0, rows};
  const std::vector<Vec3> corners = VoxelCentreCorners(volume);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const ViewVectors& view : geometry.views()) {
    if (geometry.detector() == DetectorShape::kCylindrical) {
      double view_lo = 0, view_hi = 0;
      if (!CylindricalRowRange(geometry, view, volume, corners, &view_lo, &view_hi)) return all;
      lo = std::min(lo, view_lo);
      hi = std::max(hi, view_hi);
      continue;
    }
    for (const Vec3& corner : corners) {
      double row = 0;
      if (!FlatRow(geometry, view, corner, &row)) return all;
      lo = std::min(lo, row);
      hi = std::max(hi, row);
    }
  }
  if (!std::isfinite(lo) || !std::isfinite(hi)) return all;
  const double last_row = static_cast<double>(rows - 1);
  const int64_t first = static_cast<int64_t>(std::clamp(std::floor(lo), 0.0, last_row));
  const int64_t last = static_cast<int64_t>(std::clamp(std::floor(hi) + 1.0, 0.0, last_row));
  // At least two rows where the detector has them: a one-row detector means a 2D geometry
  // (VectorGeometry::CheckAgainstVolume).
  const int64_t least = std::min<int64_t>(rows, 2);
  const int64_t count = std::max(last - first + 1, least);
  return {std::min(first, rows - count), count};
}

absl::StatusOr<VectorGeometry> RowBandGeometry(const VectorGeometry& geometry,
                                               const RowBand& band) {
  if (band.count < 1 || band.first < 0 || band.first + band.count > geometry.rows()) {
    return absl::InvalidArgumentError(absl::StrCat("row band [", band.first, ", ",
                                                   band.first + band.count,
                                                   ") is empty or outside the detector's ",
                                                   geometry.rows(), " rows"));
  }
  // Row r of the band is row band.first + r of the detector: its centre offset from the
  // band's middle equals the detector row's offset from the detector's middle.
  const double shift = static_cast<double>(band.first) +
                       0.5 * static_cast<double>(band.count - 1) -
                       0.5 * static_cast<double>(geometry.rows() - 1);
  std::vector<ViewVectors> views = geometry.views();
  for (ViewVectors& view : views) view.detector_center = view.detector_center + shift * view.v;
  return VectorGeometry::Create(geometry.beam(), geometry.detector(), band.count,
                                geometry.columns(), std::move(views));
}

}  // namespace tomo::core
