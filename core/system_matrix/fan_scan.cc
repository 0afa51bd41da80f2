#include "core/system_matrix/fan_scan.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace tomo::core::system_matrix {
namespace {

double Dot(Point2 a, Point2 b) { return a.x * b.x + a.y * b.y; }
double Length(Point2 a) { return std::sqrt(Dot(a, a)); }

}  // namespace

absl::StatusOr<FanScan> FanScan::Create(const VectorGeometry& geometry,
                                        const VolumeGeometry& volume) {
  if (geometry.beam() != BeamKind::kCone) {
    return absl::InvalidArgumentError(
        "beam: parallel is not supported by the stored system matrix (2D fan beam only)");
  }
  if (geometry.rows() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "detector.rows: ", geometry.rows(), " must be 1 for the stored system matrix (2D)"));
  }
  if (volume.size().z != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "volume.size.z: ", volume.size().z, " must be 1 for the stored system matrix (2D)"));
  }
  TOMO_RETURN_IF_ERROR(geometry.CheckAgainstVolume(volume));
  FanScan scan;
  scan.columns_ = geometry.columns();
  scan.cylindrical_ = geometry.detector() == DetectorShape::kCylindrical;
  scan.views_.reserve(geometry.views().size());
  for (const ViewVectors& view : geometry.views()) {
    scan.views_.push_back({{view.source.x, view.source.y},
                           {view.detector_center.x, view.detector_center.y},
                           {view.u.x, view.u.y}});
  }
  scan.nx_ = volume.size().x;
  scan.ny_ = volume.size().y;
  scan.dx_ = volume.voxel_size_mm().x;
  scan.dy_ = volume.voxel_size_mm().y;
  scan.left_ = volume.x_mm(-0.5);
  scan.bottom_ = volume.y_mm(-0.5);
  return scan;
}

RayWedge FanScan::Wedge(int64_t view, int64_t column) const {
  const FanView& v = views_[static_cast<size_t>(view)];
  const double half = 0.5 * static_cast<double>(columns_ - 1);
  const double t0 = static_cast<double>(column) - 0.5 - half;
  const double t1 = static_cast<double>(column) + 0.5 - half;
  RayWedge wedge;
  wedge.apex = v.source;
  if (!cylindrical_) {
    wedge.edge0 = {v.detector_center.x + t0 * v.u.x - v.source.x,
                   v.detector_center.y + t0 * v.u.y - v.source.y};
    wedge.edge1 = {v.detector_center.x + t1 * v.u.x - v.source.x,
                   v.detector_center.y + t1 * v.u.y - v.source.y};
  } else {
    const Point2 radial = v.detector_center - v.source;
    const double radius = Length(radial);
    const double step = Length(v.u);
    const Point2 w = {radial.x / radius, radial.y / radius};
    const Point2 e = {v.u.x / step, v.u.y / step};
    const double g0 = t0 * step / radius, g1 = t1 * step / radius;
    wedge.edge0 = {std::cos(g0) * w.x + std::sin(g0) * e.x, std::cos(g0) * w.y + std::sin(g0) * e.y};
    wedge.edge1 = {std::cos(g1) * w.x + std::sin(g1) * e.x, std::cos(g1) * w.y + std::sin(g1) * e.y};
  }
  if (Cross(wedge.edge0, wedge.edge1) < 0) std::swap(wedge.edge0, wedge.edge1);
  wedge.angle_rad = std::atan2(Cross(wedge.edge0, wedge.edge1), Dot(wedge.edge0, wedge.edge1));
  return wedge;
}

double FanScan::ColumnCoordinate(int64_t view, double x_mm, double y_mm) const {
  const FanView& v = views_[static_cast<size_t>(view)];
  const double half = 0.5 * static_cast<double>(columns_ - 1);
  const Point2 to_point = {x_mm - v.source.x, y_mm - v.source.y};
  const Point2 to_center = v.detector_center - v.source;
  if (!cylindrical_) {
    return half - Cross(to_center, to_point) / Cross(v.u, to_point);
  }
  const double radius = Length(to_center);
  const double step = Length(v.u);
  const Point2 w = {to_center.x / radius, to_center.y / radius};
  const Point2 e = {v.u.x / step, v.u.y / step};
  return half + std::atan2(Dot(to_point, e), Dot(to_point, w)) * radius / step;
}

}  // namespace tomo::core::system_matrix
