#include "core/io/dicom_ct_pd_geometry.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tomo::core {
namespace {

constexpr Vec3 kAxisZ = {0, 0, 1};

Vec3 FocalCenter(const DicomCtPdView& view) {
  const double phi = view.focal_center_angle_rad;
  const double rho = view.focal_center_radius_mm;
  return {-rho * std::sin(phi), rho * std::cos(phi), view.focal_center_z_mm};
}
// From F towards the isocentre, and the counter-clockwise tangent.
Vec3 TowardsIsocenter(const DicomCtPdView& view) {
  return {std::sin(view.focal_center_angle_rad), -std::cos(view.focal_center_angle_rad), 0};
}
Vec3 Tangent(const DicomCtPdView& view) {
  return {std::cos(view.focal_center_angle_rad), std::sin(view.focal_center_angle_rad), 0};
}

absl::Status CheckPositive(const char* attribute, double value) {
  if (!std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(attribute, ": ", value, " must be a finite value > 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckCount(const char* attribute, int64_t value) {
  if (value < 1 || value > VectorGeometry::kMaxDetectorSide) {
    return absl::InvalidArgumentError(absl::StrCat(attribute, ": ", value,
                                                   " is out of range [1, ",
                                                   VectorGeometry::kMaxDetectorSide, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

Vec3 DicomCtPdSourcePosition(const DicomCtPdView& view) {
  const double phi = view.focal_center_angle_rad + view.source_angle_shift_rad;
  const double rho = view.focal_center_radius_mm + view.source_radius_shift_mm;
  return {-rho * std::sin(phi), rho * std::cos(phi),
          view.focal_center_z_mm + view.source_z_shift_mm};
}

Vec3 DicomCtPdElementPosition(const DicomCtPdDetector& detector, const DicomCtPdView& view,
                              double row, double column) {
  const double d0 = detector.focal_center_to_detector_mm;
  const double column_steps = column - (detector.central_column - 1.0);
  const double row_steps = row - (detector.central_row - 1.0);
  const Vec3 f = FocalCenter(view);
  const Vec3 w0 = TowardsIsocenter(view);
  const Vec3 e0 = Tangent(view);
  const Vec3 along_z = row_steps * detector.row_spacing_mm * kAxisZ;
  if (detector.shape == DetectorShape::kFlat) {
    return f + d0 * w0 + column_steps * detector.column_spacing_mm * e0 + along_z;
  }
  const double g = column_steps * detector.column_spacing_mm / d0;
  return f + d0 * (std::cos(g) * w0 + std::sin(g) * e0) + along_z;
}

absl::StatusOr<VectorGeometry> MakeDicomCtPdGeometry(const DicomCtPdDetector& detector,
                                                     const std::vector<DicomCtPdView>& views) {
  if (absl::Status s = CheckCount("NumberofDetectorRows (7029,1010)", detector.rows); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckCount("NumberofDetectorColumns (7029,1011)", detector.columns);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckPositive("DetectorElementAxialSpacing (7029,1006)", detector.row_spacing_mm);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckPositive("DetectorElementTransverseSpacing (7029,1002)",
                                     detector.column_spacing_mm);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckPositive("ConstantRadialDistance (7031,1031)",
                                     detector.focal_center_to_detector_mm);
      !s.ok()) {
    return s;
  }
  if (!std::isfinite(detector.central_column) || !std::isfinite(detector.central_row)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DetectorCentralElement (7031,1033): (", detector.central_column, ", ",
        detector.central_row, ") must be finite"));
  }
  if (views.empty() || static_cast<int64_t>(views.size()) > VectorGeometry::kMaxViews) {
    return absl::InvalidArgumentError(absl::StrCat("views: ", views.size(),
                                                   " files is out of range [1, ",
                                                   VectorGeometry::kMaxViews, "]"));
  }
  const double middle_column = 0.5 * static_cast<double>(detector.columns - 1);
  const double middle_row = 0.5 * static_cast<double>(detector.rows - 1);
  const double d0 = detector.focal_center_to_detector_mm;
  std::vector<ViewVectors> vectors;
  vectors.reserve(views.size());
  for (size_t i = 0; i < views.size(); ++i) {
    const DicomCtPdView& view = views[i];
    const double values[] = {view.focal_center_angle_rad, view.focal_center_z_mm,
                             view.focal_center_radius_mm, view.source_angle_shift_rad,
                             view.source_z_shift_mm, view.source_radius_shift_mm};
    for (double value : values) {
      if (!std::isfinite(value)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "view ", i, ": focal centre or source shift (7031,1001-1003, 7033,100B-100D) ",
            value, " is not finite"));
      }
    }
    if (!(view.focal_center_radius_mm > 0) || !(d0 > view.focal_center_radius_mm)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "view ", i, ": DetectorFocalCenterRadialDistance (7031,1003) ",
          view.focal_center_radius_mm, " must be > 0 and below ConstantRadialDistance "
          "(7031,1031) ", d0, " (the detector lies beyond the isocentre)"));
    }
    const Vec3 source = DicomCtPdSourcePosition(view);
    const Vec3 center = DicomCtPdElementPosition(detector, view, middle_row, middle_column);
    const Vec3 v = detector.row_spacing_mm * kAxisZ;
    Vec3 u;
    if (detector.shape == DetectorShape::kFlat) {
      u = detector.column_spacing_mm * Tangent(view);
    } else {
      // The arc about the source through the centre pixel, with the same arc length per
      // column: a source moved towards the detector by delta sees the true arc's columns
      // at angular steps dc / (d0 - delta) near the centre, which is dc / R for our arc
      // (R = |centre - source| = d0 - delta to first order).
      Vec3 radial = center - source;
      radial.z = 0;
      const Vec3 w = Normalized(radial);
      const Vec3 tangent = Cross(kAxisZ, w);  // counter-clockwise, as e0 for an unshifted source
      u = detector.column_spacing_mm * tangent;
    }
    vectors.push_back({source, center, u, v});
  }
  return VectorGeometry::Create(BeamKind::kCone, detector.shape, detector.rows, detector.columns,
                                std::move(vectors));
}

}  // namespace tomo::core
