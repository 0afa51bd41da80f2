#include "runner/geometry_ranges.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;

// value in [lo, hi] (and finite: NaN fails every comparison).
absl::Status CheckRange(absl::string_view path, double value, double lo, double hi,
                        absl::string_view what) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", value, " is out of range [", lo,
                                                 ", ", hi, "] mm", what));
}

absl::Status CheckPixelSize(absl::string_view path, double value) {
  return CheckRange(path, value, kMinPixelSizeMm, kMaxPixelSizeMm,
                    " (pixel and voxel sizes from 10 nm to 1 m)");
}

absl::Status CheckPosition(absl::string_view path, double value) {
  return CheckRange(path, value, -kMaxDistanceMm, kMaxDistanceMm, " (positions within 100 m)");
}

// An offset along an axis of `count` pixels of `spacing` mm: at most
// kMaxOffsetInDetectorExtents detector extents either way.
absl::Status CheckOffset(absl::string_view path, double value, double spacing, uint64_t count) {
  const double bound = kMaxOffsetInDetectorExtents * spacing * static_cast<double>(count);
  if (std::fabs(value) <= bound) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": ", value, " is out of range [", -bound, ", ", bound, "] mm (at most ",
      kMaxOffsetInDetectorExtents, " detector extents of ", count, " x ", spacing, " mm)"));
}

absl::Status CheckAngles(absl::string_view path, const pb::Angles& angles) {
  if (angles.has_uniform()) {
    return CheckRange(absl::StrCat(path, ".uniform.start_deg"), angles.uniform().start_deg(),
                      -kMaxAngleDeg, kMaxAngleDeg, "");
  }
  for (int i = 0; i < angles.list().degrees_size(); ++i) {
    absl::Status status = CheckRange(absl::StrCat(path, ".list.degrees[", i, "]"),
                                     angles.list().degrees(i), -kMaxAngleDeg, kMaxAngleDeg, "");
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status CheckDetector(absl::string_view path, const pb::Detector& d) {
  TOMO_RETURN_IF_ERROR(CheckPixelSize(absl::StrCat(path, ".row_spacing_mm"), d.row_spacing_mm()));
  TOMO_RETURN_IF_ERROR(
      CheckPixelSize(absl::StrCat(path, ".column_spacing_mm"), d.column_spacing_mm()));
  TOMO_RETURN_IF_ERROR(CheckOffset(absl::StrCat(path, ".offset_u_mm"), d.offset_u_mm(),
                                   d.column_spacing_mm(), d.columns()));
  return CheckOffset(absl::StrCat(path, ".offset_v_mm"), d.offset_v_mm(), d.row_spacing_mm(),
                     d.rows());
}

absl::Status CheckSourceAndDetectorDistances(absl::string_view path, double source_origin_mm,
                                             double origin_detector_mm) {
  TOMO_RETURN_IF_ERROR(CheckRange(absl::StrCat(path, ".source_origin_mm"), source_origin_mm,
                                  kMinSourceOriginMm, kMaxDistanceMm, ""));
  return CheckRange(absl::StrCat(path, ".origin_detector_mm"), origin_detector_mm,
                    -kMaxDistanceMm, kMaxDistanceMm, "");
}

absl::Status CheckCone(absl::string_view path, const pb::ConeBeam& c) {
  TOMO_RETURN_IF_ERROR(CheckDetector(absl::StrCat(path, ".detector"), c.detector()));
  TOMO_RETURN_IF_ERROR(
      CheckSourceAndDetectorDistances(path, c.source_origin_mm(), c.origin_detector_mm()));
  return CheckAngles(absl::StrCat(path, ".angles"), c.angles());
}

absl::Status CheckVec3(absl::string_view path, const pb::Vec3& v) {
  TOMO_RETURN_IF_ERROR(CheckPosition(absl::StrCat(path, ".x"), v.x()));
  TOMO_RETURN_IF_ERROR(CheckPosition(absl::StrCat(path, ".y"), v.y()));
  return CheckPosition(absl::StrCat(path, ".z"), v.z());
}

// |v| of a pixel step in the pixel size range.
absl::Status CheckStep(absl::string_view path, const pb::Vec3& v) {
  TOMO_RETURN_IF_ERROR(CheckVec3(path, v));
  return CheckPixelSize(absl::StrCat("|", path, "|"), std::hypot(v.x(), v.y(), v.z()));
}

absl::Status CheckViewVectors(const pb::ViewVectorList& list) {
  for (int i = 0; i < list.views_size(); ++i) {
    const pb::ViewVectors& view = list.views(i);
    const std::string path = absl::StrCat("geometry.vectors.views[", i, "]");
    TOMO_RETURN_IF_ERROR(CheckVec3(absl::StrCat(path, ".source"), view.source()));
    TOMO_RETURN_IF_ERROR(
        CheckVec3(absl::StrCat(path, ".detector_center"), view.detector_center()));
    TOMO_RETURN_IF_ERROR(CheckStep(absl::StrCat(path, ".u"), view.u()));
    TOMO_RETURN_IF_ERROR(CheckStep(absl::StrCat(path, ".v"), view.v()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckGeometryRanges(const pb::Geometry& geometry) {
  switch (geometry.kind_case()) {
    case pb::Geometry::kParallel2D: {
      const pb::ParallelBeam2D& p = geometry.parallel_2d();
      constexpr absl::string_view kPath = "geometry.parallel_2d";
      TOMO_RETURN_IF_ERROR(
          CheckPixelSize(absl::StrCat(kPath, ".detector_spacing_mm"), p.detector_spacing_mm()));
      TOMO_RETURN_IF_ERROR(CheckOffset(absl::StrCat(kPath, ".detector_offset_mm"),
                                       p.detector_offset_mm(), p.detector_spacing_mm(),
                                       p.num_detectors()));
      return CheckAngles(absl::StrCat(kPath, ".angles"), p.angles());
    }
    case pb::Geometry::kFan2D: {
      const pb::FanBeam2D& f = geometry.fan_2d();
      constexpr absl::string_view kPath = "geometry.fan_2d";
      TOMO_RETURN_IF_ERROR(
          CheckPixelSize(absl::StrCat(kPath, ".detector_spacing_mm"), f.detector_spacing_mm()));
      TOMO_RETURN_IF_ERROR(CheckOffset(absl::StrCat(kPath, ".detector_offset_mm"),
                                       f.detector_offset_mm(), f.detector_spacing_mm(),
                                       f.num_detectors()));
      TOMO_RETURN_IF_ERROR(
          CheckSourceAndDetectorDistances(kPath, f.source_origin_mm(), f.origin_detector_mm()));
      return CheckAngles(absl::StrCat(kPath, ".angles"), f.angles());
    }
    case pb::Geometry::kParallel3D: {
      constexpr absl::string_view kPath = "geometry.parallel_3d";
      TOMO_RETURN_IF_ERROR(
          CheckDetector(absl::StrCat(kPath, ".detector"), geometry.parallel_3d().detector()));
      return CheckAngles(absl::StrCat(kPath, ".angles"), geometry.parallel_3d().angles());
    }
    case pb::Geometry::kCone:
      return CheckCone("geometry.cone", geometry.cone());
    case pb::Geometry::kHelical: {
      const pb::HelicalConeBeam& h = geometry.helical();
      TOMO_RETURN_IF_ERROR(CheckCone("geometry.helical.cone", h.cone()));
      TOMO_RETURN_IF_ERROR(
          CheckPosition("geometry.helical.pitch_mm_per_turn", h.pitch_mm_per_turn()));
      return CheckPosition("geometry.helical.z_start_mm", h.z_start_mm());
    }
    case pb::Geometry::kVectors:
      return CheckViewVectors(geometry.vectors());
    case pb::Geometry::kRadon3D:
      // Its angles are bounded by the core's checks (radon_job_spec.h).
      return CheckPixelSize("geometry.radon_3d.sample_spacing_mm",
                            geometry.radon_3d().sample_spacing_mm());
    case pb::Geometry::kFromInputFiles:
    case pb::Geometry::KIND_NOT_SET:
      break;
  }
  return absl::OkStatus();
}

absl::Status CheckVolumeRanges(const pb::Volume& volume) {
  TOMO_RETURN_IF_ERROR(CheckPixelSize("volume.voxel_size_mm.x", volume.voxel_size_mm().x()));
  TOMO_RETURN_IF_ERROR(CheckPixelSize("volume.voxel_size_mm.y", volume.voxel_size_mm().y()));
  if (volume.voxel_size_mm().z() != 0.0) {
    TOMO_RETURN_IF_ERROR(CheckPixelSize("volume.voxel_size_mm.z", volume.voxel_size_mm().z()));
  }
  return CheckVec3("volume.center_mm", volume.center_mm());
}

absl::Status CheckVectorGeometryRanges(const core::VectorGeometry& geometry) {
  const std::vector<core::ViewVectors>& views = geometry.views();
  for (size_t i = 0; i < views.size(); ++i) {
    const std::string path = absl::StrCat("geometry (from the input files).views[", i, "]");
    const auto as_proto = [](const core::Vec3& v) {
      pb::Vec3 out;
      out.set_x(v.x);
      out.set_y(v.y);
      out.set_z(v.z);
      return out;
    };
    TOMO_RETURN_IF_ERROR(CheckVec3(absl::StrCat(path, ".source"), as_proto(views[i].source)));
    TOMO_RETURN_IF_ERROR(
        CheckVec3(absl::StrCat(path, ".detector_center"), as_proto(views[i].detector_center)));
    TOMO_RETURN_IF_ERROR(CheckStep(absl::StrCat(path, ".u"), as_proto(views[i].u)));
    TOMO_RETURN_IF_ERROR(CheckStep(absl::StrCat(path, ".v"), as_proto(views[i].v)));
  }
  return absl::OkStatus();
}

}  // namespace tomo::server
