#include "core/geometry/vector_geometry.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tomo::core {
namespace {

// Below this length a vector carries no direction we could trust (mm; detector pixels are
// at least micrometres wide, so this is far below any real spacing).
constexpr double kMinVectorLengthMm = 1e-9;
// Two directions closer than this (radians) are treated as parallel: u and v spanning no
// plane, or rays grazing the detector, make the projection of a point ill-conditioned.
constexpr double kMinAngleRad = 1e-6;
// How far from unit length a parallel-beam ray direction may be; a rounding error, not a
// scale, because a scaled direction would silently scale every line integral.
constexpr double kUnitLengthTolerance = 1e-9;

std::string Format(const Vec3& a) { return absl::StrCat("(", a.x, ", ", a.y, ", ", a.z, ")"); }

std::string ViewField(size_t view, const char* member) {
  return absl::StrCat("views[", view, "].", member);
}

// Sine of the angle between a and b, both nonzero.
double SineBetween(const Vec3& a, const Vec3& b) {
  return Norm(Cross(a, b)) / (Norm(a) * Norm(b));
}

absl::Status CheckView(BeamKind beam, DetectorShape detector, size_t index,
                       const ViewVectors& view) {
  const std::pair<const char*, const Vec3*> members[] = {
      {"source", &view.source}, {"detector_center", &view.detector_center},
      {"u", &view.u}, {"v", &view.v}};
  for (const auto& [name, vector] : members) {
    if (!IsFinite(*vector)) {
      return absl::InvalidArgumentError(
          absl::StrCat(ViewField(index, name), ": ", Format(*vector), " must be finite"));
    }
  }
  for (const auto& [name, vector] : {members[2], members[3]}) {
    if (Norm(*vector) < kMinVectorLengthMm) {
      return absl::InvalidArgumentError(absl::StrCat(ViewField(index, name), ": ",
                                                     Format(*vector), " has zero length (below ",
                                                     kMinVectorLengthMm, " mm)"));
    }
  }
  if (SineBetween(view.u, view.v) < std::sin(kMinAngleRad)) {
    return absl::InvalidArgumentError(absl::StrCat(
        ViewField(index, "v"), ": ", Format(view.v), " is parallel to u ", Format(view.u),
        " (less than ", kMinAngleRad, " rad apart), so the detector spans no plane"));
  }
  const Vec3 normal = Normalized(Cross(view.u, view.v));
  Vec3 central_ray;
  if (beam == BeamKind::kParallel) {
    if (detector == DetectorShape::kCylindrical) {
      return absl::InvalidArgumentError(
          absl::StrCat(ViewField(index, "source"),
                       ": a cylindrical detector needs a cone beam (it is curved about the "
                       "source), not a parallel one"));
    }
    const double length = Norm(view.source);
    if (std::fabs(length - 1.0) > kUnitLengthTolerance) {
      return absl::InvalidArgumentError(absl::StrCat(
          ViewField(index, "source"), ": parallel ray direction ", Format(view.source),
          " has length ", length, ", must be 1 (within ", kUnitLengthTolerance, ")"));
    }
    central_ray = view.source;
  } else {
    central_ray = view.detector_center - view.source;
    const double source_to_plane_mm = std::fabs(Dot(central_ray, normal));
    if (source_to_plane_mm < kMinVectorLengthMm) {
      return absl::InvalidArgumentError(
          absl::StrCat(ViewField(index, "source"), ": ", Format(view.source),
                       " lies on the detector (the plane through detector_center ",
                       Format(view.detector_center), " spanned by u and v)"));
    }
  }
  const double ray_to_plane_rad = std::asin(std::fabs(Dot(Normalized(central_ray), normal)));
  if (ray_to_plane_rad < kMinAngleRad) {
    return absl::InvalidArgumentError(absl::StrCat(
        ViewField(index, "detector_center"), ": the ray through the detector centre runs at ",
        ray_to_plane_rad, " rad to the detector plane spanned by u and v, at least ",
        kMinAngleRad, " rad needed"));
  }
  if (detector == DetectorShape::kCylindrical) {
    // The arc formula only describes a cylinder about the source when u is the tangent
    // at the centre: perpendicular to the axis (v) and to the radius.
    const Vec3 along_v = Normalized(view.v);
    const Vec3 radius = central_ray - Dot(central_ray, along_v) * along_v;
    const double cosine_u_v = std::fabs(Dot(Normalized(view.u), along_v));
    const double cosine_u_radius = std::fabs(Dot(Normalized(view.u), Normalized(radius)));
    if (cosine_u_v > std::sin(kMinAngleRad) || cosine_u_radius > std::sin(kMinAngleRad)) {
      return absl::InvalidArgumentError(absl::StrCat(
          ViewField(index, "u"), ": ", Format(view.u),
          " must be perpendicular to v and to the source-to-centre direction for a "
          "cylindrical detector (it is the arc's tangent at the centre)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<VectorGeometry> VectorGeometry::Create(BeamKind beam, DetectorShape detector,
                                                      int64_t rows, int64_t columns,
                                                      std::vector<ViewVectors> views) {
  if (rows < 1 || rows > kMaxDetectorSide) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows: ", rows, " is out of range [1, ", kMaxDetectorSide, "]"));
  }
  if (columns < 1 || columns > kMaxDetectorSide) {
    return absl::InvalidArgumentError(
        absl::StrCat("columns: ", columns, " is out of range [1, ", kMaxDetectorSide, "]"));
  }
  const int64_t count = static_cast<int64_t>(views.size());
  if (count < 1 || count > kMaxViews) {
    return absl::InvalidArgumentError(
        absl::StrCat("views: ", count, " views is out of range [1, ", kMaxViews, "]"));
  }
  for (size_t i = 0; i < views.size(); ++i) {
    if (absl::Status status = CheckView(beam, detector, i, views[i]); !status.ok()) {
      return status;
    }
  }
  return VectorGeometry(beam, detector, rows, columns, std::move(views));
}

Vec3 VectorGeometry::PixelPosition(int64_t view, double row, double column) const {
  const ViewVectors& vectors = views_[static_cast<size_t>(view)];
  const double column_steps = column - 0.5 * static_cast<double>(columns_ - 1);
  const double row_steps = row - 0.5 * static_cast<double>(rows_ - 1);
  if (detector_ == DetectorShape::kFlat) {
    return vectors.detector_center + column_steps * vectors.u + row_steps * vectors.v;
  }
  // Cylinder about the axis through the source along v; the centre pixel is the detector
  // centre itself, wherever it sits along v.
  const Vec3 along_v = Normalized(vectors.v);
  const Vec3 to_center = vectors.detector_center - vectors.source;
  const Vec3 radial = to_center - Dot(to_center, along_v) * along_v;
  const double radius_mm = Norm(radial);
  const Vec3 towards_center = (1.0 / radius_mm) * radial;
  const double column_step_mm = Norm(vectors.u);
  const double fan_angle_rad = column_steps * column_step_mm / radius_mm;
  return vectors.detector_center +
         radius_mm * ((std::cos(fan_angle_rad) - 1.0) * towards_center +
                      std::sin(fan_angle_rad) / column_step_mm * vectors.u) +
         row_steps * vectors.v;
}

Ray VectorGeometry::PixelRay(int64_t view, double row, double column) const {
  const Vec3 pixel = PixelPosition(view, row, column);
  const ViewVectors& vectors = views_[static_cast<size_t>(view)];
  if (beam_ == BeamKind::kParallel) {
    return {pixel - kParallelRayBackoffMm * vectors.source, vectors.source};
  }
  return {vectors.source, Normalized(pixel - vectors.source)};
}

absl::Status VectorGeometry::CheckAgainstVolume(const VolumeGeometry& volume) const {
  if (rows_ == 1 && volume.size().z != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "volume.size.z: ", volume.size().z,
        " slices, but a one-row (2D) detector reconstructs exactly 1 slice"));
  }
  if (beam_ != BeamKind::kCone) return absl::OkStatus();
  const Vec3 half_extent = {0.5 * static_cast<double>(volume.size().x) * volume.voxel_size_mm().x,
                            0.5 * static_cast<double>(volume.size().y) * volume.voxel_size_mm().y,
                            0.5 * static_cast<double>(volume.size().z) * volume.voxel_size_mm().z};
  const Vec3 low = volume.center_mm() - half_extent;
  const Vec3 high = volume.center_mm() + half_extent;
  for (size_t i = 0; i < views_.size(); ++i) {
    const Vec3& source = views_[i].source;
    // The closed box: a source on a face is as singular for the cone-beam weights as one
    // inside.
    if (source.x >= low.x && source.x <= high.x && source.y >= low.y && source.y <= high.y &&
        source.z >= low.z && source.z <= high.z) {
      return absl::InvalidArgumentError(absl::StrCat(
          ViewField(i, "source"), ": ", Format(source), " lies inside the volume [", low.x, ", ",
          high.x, "] x [", low.y, ", ", high.y, "] x [", low.z, ", ", high.z, "] mm"));
    }
  }
  return absl::OkStatus();
}

CylindricalDetectorFrame MakeCylindricalDetectorFrame(const ViewVectors& view) {
  CylindricalDetectorFrame frame;
  frame.u_norm_mm = Norm(view.u);
  frame.v_norm_mm = Norm(view.v);
  frame.v_unit = (1.0 / frame.v_norm_mm) * view.v;
  const Vec3 to_center = view.detector_center - view.source;
  frame.height_center_mm = Dot(to_center, frame.v_unit);
  const Vec3 in_plane = to_center - frame.height_center_mm * frame.v_unit;
  frame.radius_mm = Norm(in_plane);
  frame.w = (1.0 / frame.radius_mm) * in_plane;
  const Vec3 u_unit = (1.0 / frame.u_norm_mm) * view.u;
  frame.e = Normalized(u_unit - Dot(u_unit, frame.v_unit) * frame.v_unit -
                       Dot(u_unit, frame.w) * frame.w);
  return frame;
}

}  // namespace tomo::core
