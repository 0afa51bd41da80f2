#include "core/geometry/geometry_builders.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/geometry/parallel_geometry_2d.h"

namespace tomo::core {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;
constexpr Vec3 kAxisZ = {0, 0, 1};

// r(theta): the direction the rays travel at view angle theta.
Vec3 RayDirection(double theta) { return {std::sin(theta), -std::cos(theta), 0}; }
// e_u(theta): the direction detector columns advance.
Vec3 ColumnDirection(double theta) { return {std::cos(theta), std::sin(theta), 0}; }

absl::Status CheckPositive(const char* field, double value) {
  if (!std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", value, " must be a finite value > 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(const char* field, double value) {
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", value, " must be finite"));
  }
  return absl::OkStatus();
}

absl::Status CheckDetector(const DetectorLayout& detector, bool two_dimensional) {
  const int64_t max_side = VectorGeometry::kMaxDetectorSide;
  if (detector.columns < 1 || detector.columns > max_side) {
    return absl::InvalidArgumentError(absl::StrCat(
        "detector.columns: ", detector.columns, " is out of range [1, ", max_side, "]"));
  }
  if (two_dimensional && detector.rows != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("detector.rows: ", detector.rows, " must be 1 for a 2D geometry"));
  }
  if (detector.rows < 1 || detector.rows > max_side) {
    return absl::InvalidArgumentError(
        absl::StrCat("detector.rows: ", detector.rows, " is out of range [1, ", max_side, "]"));
  }
  if (absl::Status s = CheckPositive("detector.row_spacing_mm", detector.row_spacing_mm);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckPositive("detector.column_spacing_mm", detector.column_spacing_mm);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckFinite("detector.offset_u_mm", detector.offset_u_mm); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckFinite("detector.offset_v_mm", detector.offset_v_mm); !s.ok()) {
    return s;
  }
  // A 2D geometry reconstructs the slice z = 0; a row shifted off it would see nothing.
  if (two_dimensional && detector.offset_v_mm != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "detector.offset_v_mm: ", detector.offset_v_mm, " must be 0 for a 2D geometry"));
  }
  return absl::OkStatus();
}

absl::Status CheckAngles(const std::vector<double>& angles_rad) {
  const int64_t count = static_cast<int64_t>(angles_rad.size());
  if (count < 1 || count > VectorGeometry::kMaxViews) {
    return absl::InvalidArgumentError(absl::StrCat(
        "angles_rad: ", count, " views is out of range [1, ", VectorGeometry::kMaxViews, "]"));
  }
  for (size_t i = 0; i < angles_rad.size(); ++i) {
    if (!std::isfinite(angles_rad[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("angles_rad[", i, "]: ", angles_rad[i], " must be finite"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFanCone(const FanConeOptions& options, bool two_dimensional) {
  if (absl::Status s = CheckDetector(options.detector, two_dimensional); !s.ok()) return s;
  if (absl::Status s = CheckPositive("source_origin_mm", options.source_origin_mm); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckFinite("origin_detector_mm", options.origin_detector_mm); !s.ok()) {
    return s;
  }
  // A detector between the source and the axis is unusual but valid; one at or behind
  // the source is not a projection.
  if (options.source_origin_mm + options.origin_detector_mm <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "origin_detector_mm: ", options.origin_detector_mm,
        " puts the detector at or behind the source (source_origin_mm + origin_detector_mm "
        "must be > 0)"));
  }
  return CheckAngles(options.angles_rad);
}

absl::StatusOr<VectorGeometry> MakeParallel(const DetectorLayout& detector,
                                            const std::vector<double>& angles_rad,
                                            bool two_dimensional) {
  if (absl::Status s = CheckDetector(detector, two_dimensional); !s.ok()) return s;
  if (absl::Status s = CheckAngles(angles_rad); !s.ok()) return s;
  std::vector<ViewVectors> views;
  views.reserve(angles_rad.size());
  for (const double theta : angles_rad) {
    const Vec3 column_direction = ColumnDirection(theta);
    views.push_back({RayDirection(theta),
                     detector.offset_u_mm * column_direction + detector.offset_v_mm * kAxisZ,
                     detector.column_spacing_mm * column_direction,
                     detector.row_spacing_mm * kAxisZ});
  }
  return VectorGeometry::Create(BeamKind::kParallel, DetectorShape::kFlat, detector.rows,
                                detector.columns, std::move(views));
}

// Circular (z_per_rad = 0) or helical cone/fan beam; z_start_mm is the z of source and
// detector at angles_rad[0].
absl::StatusOr<VectorGeometry> MakeRotatingSource(const FanConeOptions& options,
                                                  double z_start_mm, double z_per_rad) {
  const DetectorLayout& detector = options.detector;
  const double source_detector_mm = options.source_origin_mm + options.origin_detector_mm;
  std::vector<ViewVectors> views;
  views.reserve(options.angles_rad.size());
  const double first_angle = options.angles_rad.front();
  for (const double theta : options.angles_rad) {
    const Vec3 ray = RayDirection(theta);
    const Vec3 column_direction = ColumnDirection(theta);
    const double z_shift_mm = z_start_mm + z_per_rad * (theta - first_angle);
    const Vec3 source = -options.source_origin_mm * ray + z_shift_mm * kAxisZ;
    Vec3 center;
    Vec3 u;
    if (options.shape == DetectorShape::kCylindrical) {
      // The offset moves the detector along its own arc, so the centre stays on the
      // cylinder about the source and u stays its tangent.
      const double center_fan_angle = detector.offset_u_mm / source_detector_mm;
      const Vec3 radial = std::cos(center_fan_angle) * ray +
                          std::sin(center_fan_angle) * column_direction;
      const Vec3 tangent = -std::sin(center_fan_angle) * ray +
                           std::cos(center_fan_angle) * column_direction;
      center = source + source_detector_mm * radial + detector.offset_v_mm * kAxisZ;
      u = detector.column_spacing_mm * tangent;
    } else {
      center = options.origin_detector_mm * ray + detector.offset_u_mm * column_direction +
               (detector.offset_v_mm + z_shift_mm) * kAxisZ;
      u = detector.column_spacing_mm * column_direction;
    }
    views.push_back({source, center, u, detector.row_spacing_mm * kAxisZ});
  }
  return VectorGeometry::Create(BeamKind::kCone, options.shape, detector.rows, detector.columns,
                                std::move(views));
}

}  // namespace

std::vector<double> UniformAnglesRad(int64_t count, double start_rad, double span_rad) {
  return ParallelGeometry2D::UniformAngles(count, start_rad, span_rad);
}

absl::StatusOr<VectorGeometry> MakeParallel2D(const DetectorLayout& detector,
                                              const std::vector<double>& angles_rad) {
  return MakeParallel(detector, angles_rad, /*two_dimensional=*/true);
}

absl::StatusOr<VectorGeometry> MakeParallel3D(const DetectorLayout& detector,
                                              const std::vector<double>& angles_rad) {
  return MakeParallel(detector, angles_rad, /*two_dimensional=*/false);
}

absl::StatusOr<VectorGeometry> MakeFan2D(const FanConeOptions& options) {
  if (absl::Status s = CheckFanCone(options, /*two_dimensional=*/true); !s.ok()) return s;
  return MakeRotatingSource(options, 0.0, 0.0);
}

absl::StatusOr<VectorGeometry> MakeCircularCone(const FanConeOptions& options) {
  if (absl::Status s = CheckFanCone(options, /*two_dimensional=*/false); !s.ok()) return s;
  return MakeRotatingSource(options, 0.0, 0.0);
}

absl::StatusOr<VectorGeometry> MakeHelicalCone(const HelicalOptions& options) {
  if (absl::Status s = CheckFanCone(options.cone, /*two_dimensional=*/false); !s.ok()) return s;
  if (absl::Status s = CheckFinite("pitch_mm_per_turn", options.pitch_mm_per_turn); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckFinite("z_start_mm", options.z_start_mm); !s.ok()) return s;
  return MakeRotatingSource(options.cone, options.z_start_mm, options.pitch_mm_per_turn / kTwoPi);
}

double FanAngleRad(const FanConeOptions& options) {
  const DetectorLayout& detector = options.detector;
  const double source_detector_mm = options.source_origin_mm + options.origin_detector_mm;
  // Edge to edge, not centre to centre: Parker weights and short-scan checks must cover
  // every ray that reaches the detector.
  const double width_mm = static_cast<double>(detector.columns) * detector.column_spacing_mm;
  if (options.shape == DetectorShape::kCylindrical) return width_mm / source_detector_mm;
  return std::atan((detector.offset_u_mm + 0.5 * width_mm) / source_detector_mm) -
         std::atan((detector.offset_u_mm - 0.5 * width_mm) / source_detector_mm);
}

}  // namespace tomo::core
