#include "runner/job_spec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "core/base/checked_arithmetic.h"
#include "core/base/status_macros.h"
#include "core/geometry/geometry_builders.h"
#include "core/geometry/parallel_2d_form.h"
#include "core/geometry/vector_geometry.h"
#include "runner/art_job_spec.h"
#include "runner/geometry_ranges.h"
#include "runner/icd_job_spec.h"
#include "runner/radon_job_spec.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;

constexpr double kPi = 3.14159265358979323846;
constexpr size_t kMaxNameBytes = 1024;
constexpr size_t kMaxIdempotencyKeyBytes = 256;
constexpr int32_t kMinPriority = -100;
constexpr int32_t kMaxPriority = 100;
constexpr double kMaxSpanDeg = 720.0;

absl::Status Invalid(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::Status OutOfRange(absl::string_view path, int64_t value, int64_t lo, int64_t hi,
                        absl::string_view note = "") {
  return Invalid(path, absl::StrCat(value, " is out of range [", lo, ", ", hi, "]", note));
}

// A finite value > 0.
absl::Status CheckPositive(absl::string_view path, double value) {
  if (!std::isfinite(value) || value <= 0) {
    return Invalid(path, absl::StrCat(value, " is out of range (0, inf); it must be a finite "
                                             "number > 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(absl::string_view path, double value) {
  if (!std::isfinite(value)) {
    return Invalid(path, absl::StrCat(value, " is not a finite number"));
  }
  return absl::OkStatus();
}

// Prefixes a core factory's message with the proto path of the message it checked:
// "num_detectors: 0 is ..." becomes "geometry.parallel_2d.num_detectors: 0 is ...", any
// other message "geometry.parallel_2d: ...".
absl::Status WithPath(absl::string_view path, const absl::Status& status) {
  if (status.ok()) return status;
  absl::string_view message = status.message();
  size_t colon = message.find(':');
  bool starts_with_field = colon != absl::string_view::npos && colon > 0;
  for (size_t i = 0; starts_with_field && i < colon; ++i) {
    char c = message[i];
    starts_with_field = absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' ||
                        c == '.' || c == '[' || c == ']';
  }
  return absl::Status(status.code(), starts_with_field
                                         ? absl::StrCat(path, ".", message)
                                         : absl::StrCat(path, ": ", message));
}

template <typename NameFn>
std::string EnumName(int value, NameFn name_fn) {
  std::string name = name_fn(value);
  return name.empty() ? absl::StrCat(value) : name;
}

absl::StatusOr<std::vector<double>> ValidateAngles(absl::string_view path,
                                                   const pb::Angles& angles,
                                                   const ServerLimits& limits) {
  const std::string views_note = absl::StrCat(" (the server's limit, --max_views)");
  switch (angles.kind_case()) {
    case pb::Angles::kUniform: {
      const pb::UniformAngles& u = angles.uniform();
      const std::string kPath = absl::StrCat(path, ".uniform");
      if (u.count() < 1 || u.count() > limits.max_views) {
        return OutOfRange(absl::StrCat(kPath, ".count"), u.count(), 1, limits.max_views,
                          views_note);
      }
      TOMO_RETURN_IF_ERROR(CheckFinite(absl::StrCat(kPath, ".start_deg"), u.start_deg()));
      if (!std::isfinite(u.span_deg()) || u.span_deg() <= 0 || u.span_deg() > kMaxSpanDeg) {
        return Invalid(absl::StrCat(kPath, ".span_deg"),
                       absl::StrCat(u.span_deg(), " is out of range (0, ", kMaxSpanDeg, "]"));
      }
      return core::ParallelGeometry2D::UniformAngles(
          u.count(), u.start_deg() * kPi / 180.0, u.span_deg() * kPi / 180.0);
    }
    case pb::Angles::kList: {
      const auto& degrees = angles.list().degrees();
      const std::string kPath = absl::StrCat(path, ".list.degrees");
      if (degrees.empty() || static_cast<uint64_t>(degrees.size()) > limits.max_views) {
        return Invalid(kPath, absl::StrCat(degrees.size(), " angles is out of range [1, ",
                                           limits.max_views, "]", views_note));
      }
      std::vector<double> radians;
      radians.reserve(static_cast<size_t>(degrees.size()));
      for (int i = 0; i < degrees.size(); ++i) {
        TOMO_RETURN_IF_ERROR(CheckFinite(absl::StrCat(kPath, "[", i, "]"), degrees[i]));
        radians.push_back(degrees[i] * kPi / 180.0);
      }
      return radians;
    }
    case pb::Angles::KIND_NOT_SET:
      break;
  }
  return Invalid(path, "none set; expected one of uniform, list");
}

absl::StatusOr<core::ParallelGeometry2D> ValidateParallel2D(const pb::ParallelBeam2D& p,
                                                            const ServerLimits& limits) {
  constexpr absl::string_view kPath = "geometry.parallel_2d";
  if (p.num_detectors() < 1 || p.num_detectors() > core::ParallelGeometry2D::kMaxDetectors) {
    return OutOfRange(absl::StrCat(kPath, ".num_detectors"), p.num_detectors(), 1,
                      core::ParallelGeometry2D::kMaxDetectors);
  }
  TOMO_RETURN_IF_ERROR(
      CheckPositive(absl::StrCat(kPath, ".detector_spacing_mm"), p.detector_spacing_mm()));
  TOMO_RETURN_IF_ERROR(
      CheckFinite(absl::StrCat(kPath, ".detector_offset_mm"), p.detector_offset_mm()));
  TOMO_ASSIGN_OR_RETURN(std::vector<double> angles,
                        ValidateAngles(absl::StrCat(kPath, ".angles"), p.angles(), limits));
  absl::StatusOr<core::ParallelGeometry2D> geometry = core::ParallelGeometry2D::Create(
      p.num_detectors(), p.detector_spacing_mm(), p.detector_offset_mm(), std::move(angles));
  if (!geometry.ok()) return WithPath(kPath, geometry.status());
  return geometry;
}

absl::StatusOr<core::DetectorShape> ValidateShape(absl::string_view path,
                                                  pb::DetectorShape shape) {
  switch (shape) {
    case pb::DETECTOR_SHAPE_UNSPECIFIED:
    case pb::DETECTOR_SHAPE_FLAT:
      return core::DetectorShape::kFlat;
    case pb::DETECTOR_SHAPE_CYLINDRICAL:
      return core::DetectorShape::kCylindrical;
    default:
      return OutOfRange(path, shape, pb::DetectorShape_MIN, pb::DetectorShape_MAX,
                        " (DETECTOR_SHAPE_FLAT, DETECTOR_SHAPE_CYLINDRICAL; 0 means FLAT)");
  }
}

// Range checks of the counts before anything is allocated; the builders check the rest.
absl::Status CheckDetectorCounts(absl::string_view path, uint64_t rows, uint64_t columns) {
  const int64_t max_side = core::VectorGeometry::kMaxDetectorSide;
  if (rows < 1 || rows > static_cast<uint64_t>(max_side)) {
    return OutOfRange(absl::StrCat(path, ".rows"), static_cast<int64_t>(rows), 1, max_side);
  }
  if (columns < 1 || columns > static_cast<uint64_t>(max_side)) {
    return OutOfRange(absl::StrCat(path, ".columns"), static_cast<int64_t>(columns), 1,
                      max_side);
  }
  return absl::OkStatus();
}

absl::StatusOr<core::DetectorLayout> ValidateDetector(absl::string_view path,
                                                      const pb::Detector& d) {
  TOMO_RETURN_IF_ERROR(CheckDetectorCounts(path, d.rows(), d.columns()));
  return core::DetectorLayout{d.rows(),          d.columns(),     d.row_spacing_mm(),
                              d.column_spacing_mm(), d.offset_u_mm(), d.offset_v_mm()};
}

absl::StatusOr<core::FanConeOptions> ValidateCone(absl::string_view path, const pb::ConeBeam& c,
                                                  const ServerLimits& limits) {
  core::FanConeOptions options;
  TOMO_ASSIGN_OR_RETURN(options.detector,
                        ValidateDetector(absl::StrCat(path, ".detector"), c.detector()));
  TOMO_ASSIGN_OR_RETURN(options.shape, ValidateShape(absl::StrCat(path, ".detector.shape"),
                                                     c.detector().shape()));
  options.source_origin_mm = c.source_origin_mm();
  options.origin_detector_mm = c.origin_detector_mm();
  TOMO_ASSIGN_OR_RETURN(options.angles_rad,
                        ValidateAngles(absl::StrCat(path, ".angles"), c.angles(), limits));
  return options;
}

core::Vec3 FromProto(const pb::Vec3& v) { return {v.x(), v.y(), v.z()}; }

absl::StatusOr<core::VectorGeometry> ValidateViewVectors(const pb::ViewVectorList& list,
                                                         const ServerLimits& limits) {
  constexpr absl::string_view kPath = "geometry.vectors";
  core::BeamKind beam;
  switch (list.beam()) {
    case pb::BEAM_KIND_PARALLEL:
      beam = core::BeamKind::kParallel;
      break;
    case pb::BEAM_KIND_CONE:
      beam = core::BeamKind::kCone;
      break;
    default:
      return OutOfRange(absl::StrCat(kPath, ".beam"), list.beam(), pb::BEAM_KIND_PARALLEL,
                        pb::BEAM_KIND_CONE, " (BEAM_KIND_PARALLEL, BEAM_KIND_CONE)");
  }
  TOMO_ASSIGN_OR_RETURN(core::DetectorShape shape,
                        ValidateShape(absl::StrCat(kPath, ".shape"), list.shape()));
  TOMO_RETURN_IF_ERROR(CheckDetectorCounts(kPath, list.rows(), list.columns()));
  if (list.views().empty() || static_cast<uint64_t>(list.views_size()) > limits.max_views) {
    return Invalid(absl::StrCat(kPath, ".views"),
                   absl::StrCat(list.views_size(), " views is out of range [1, ",
                                limits.max_views, "] (the server's limit, --max_views)"));
  }
  std::vector<core::ViewVectors> views;
  views.reserve(static_cast<size_t>(list.views_size()));
  for (const pb::ViewVectors& v : list.views()) {
    views.push_back({FromProto(v.source()), FromProto(v.detector_center()), FromProto(v.u()),
                     FromProto(v.v())});
  }
  return core::VectorGeometry::Create(beam, shape, list.rows(), list.columns(),
                                      std::move(views));
}

absl::StatusOr<core::VectorGeometry> ValidateVectorGeometry(const pb::Geometry& g,
                                                            const ServerLimits& limits) {
  switch (g.kind_case()) {
    case pb::Geometry::kFan2D: {
      const pb::FanBeam2D& f = g.fan_2d();
      constexpr absl::string_view kPath = "geometry.fan_2d";
      const int64_t max_side = core::VectorGeometry::kMaxDetectorSide;
      if (f.num_detectors() < 1 || f.num_detectors() > max_side) {
        return OutOfRange(absl::StrCat(kPath, ".num_detectors"), f.num_detectors(), 1, max_side);
      }
      TOMO_RETURN_IF_ERROR(
          CheckPositive(absl::StrCat(kPath, ".detector_spacing_mm"), f.detector_spacing_mm()));
      TOMO_RETURN_IF_ERROR(
          CheckFinite(absl::StrCat(kPath, ".detector_offset_mm"), f.detector_offset_mm()));
      core::FanConeOptions options;
      options.detector = {1, f.num_detectors(), 1.0, f.detector_spacing_mm(),
                          f.detector_offset_mm(), 0.0};
      TOMO_ASSIGN_OR_RETURN(options.shape,
                            ValidateShape(absl::StrCat(kPath, ".shape"), f.shape()));
      options.source_origin_mm = f.source_origin_mm();
      options.origin_detector_mm = f.origin_detector_mm();
      TOMO_ASSIGN_OR_RETURN(options.angles_rad,
                            ValidateAngles(absl::StrCat(kPath, ".angles"), f.angles(), limits));
      // The detector fields are checked above under FanBeam2D's names; what the builder
      // still refuses (distances, angles) has the same names here.
      absl::StatusOr<core::VectorGeometry> geometry = core::MakeFan2D(options);
      if (!geometry.ok()) return WithPath(kPath, geometry.status());
      return geometry;
    }
    case pb::Geometry::kParallel3D: {
      const pb::ParallelBeam3D& p = g.parallel_3d();
      constexpr absl::string_view kPath = "geometry.parallel_3d";
      TOMO_ASSIGN_OR_RETURN(core::DetectorLayout detector,
                            ValidateDetector(absl::StrCat(kPath, ".detector"), p.detector()));
      if (p.detector().shape() == pb::DETECTOR_SHAPE_CYLINDRICAL) {
        return Invalid(absl::StrCat(kPath, ".detector.shape"),
                       "DETECTOR_SHAPE_CYLINDRICAL needs a source; a parallel beam's detector "
                       "is DETECTOR_SHAPE_FLAT");
      }
      TOMO_ASSIGN_OR_RETURN(std::vector<double> angles,
                            ValidateAngles(absl::StrCat(kPath, ".angles"), p.angles(), limits));
      absl::StatusOr<core::VectorGeometry> geometry = core::MakeParallel3D(detector, angles);
      if (!geometry.ok()) return WithPath(kPath, geometry.status());
      return geometry;
    }
    case pb::Geometry::kCone: {
      constexpr absl::string_view kPath = "geometry.cone";
      TOMO_ASSIGN_OR_RETURN(core::FanConeOptions options, ValidateCone(kPath, g.cone(), limits));
      absl::StatusOr<core::VectorGeometry> geometry = core::MakeCircularCone(options);
      if (!geometry.ok()) return WithPath(kPath, geometry.status());
      return geometry;
    }
    case pb::Geometry::kHelical: {
      constexpr absl::string_view kPath = "geometry.helical";
      core::HelicalOptions options;
      TOMO_ASSIGN_OR_RETURN(options.cone, ValidateCone(absl::StrCat(kPath, ".cone"),
                                                       g.helical().cone(), limits));
      options.pitch_mm_per_turn = g.helical().pitch_mm_per_turn();
      options.z_start_mm = g.helical().z_start_mm();
      absl::StatusOr<core::VectorGeometry> geometry = core::MakeHelicalCone(options);
      if (!geometry.ok()) return WithPath(kPath, geometry.status());
      return geometry;
    }
    case pb::Geometry::kVectors: {
      absl::StatusOr<core::VectorGeometry> geometry = ValidateViewVectors(g.vectors(), limits);
      if (!geometry.ok()) return WithPath("geometry.vectors", geometry.status());
      return geometry;
    }
    default:
      break;
  }
  return Invalid("geometry", "none set; expected one of parallel_2d, fan_2d, parallel_3d, "
                             "cone, helical, vectors, from_input_files, radon_3d");
}

// The angles of a geometry that has them; null for vectors, from_input_files, radon_3d.
const pb::Angles* AnglesOf(const pb::Geometry& g) {
  switch (g.kind_case()) {
    case pb::Geometry::kParallel2D:
      return &g.parallel_2d().angles();
    case pb::Geometry::kFan2D:
      return &g.fan_2d().angles();
    case pb::Geometry::kParallel3D:
      return &g.parallel_3d().angles();
    case pb::Geometry::kCone:
      return &g.cone().angles();
    case pb::Geometry::kHelical:
      return &g.helical().cone().angles();
    default:
      return nullptr;
  }
}

pb::Angles* MutableAnglesOf(pb::Geometry& g) {
  if (AnglesOf(g) == nullptr) return nullptr;
  switch (g.kind_case()) {
    case pb::Geometry::kParallel2D:
      return g.mutable_parallel_2d()->mutable_angles();
    case pb::Geometry::kFan2D:
      return g.mutable_fan_2d()->mutable_angles();
    case pb::Geometry::kParallel3D:
      return g.mutable_parallel_3d()->mutable_angles();
    case pb::Geometry::kCone:
      return g.mutable_cone()->mutable_angles();
    default:
      return g.mutable_helical()->mutable_cone()->mutable_angles();
  }
}

// Projection files listed in input.files (role PROJECTIONS or unspecified).
int64_t ProjectionFileCount(const pb::ProjectionInput& input) {
  int64_t count = 0;
  for (const pb::InputFile& file : input.files()) {
    if (file.role() == pb::INPUT_ROLE_UNSPECIFIED || file.role() == pb::INPUT_ROLE_PROJECTIONS) {
      ++count;
    }
  }
  return count;
}

// geometry.from_input_files: the geometry is read from the files when the job runs
// (runner/job_input.h). Until then a placeholder stands in: a circular cone with one view per
// projection file (DICOM-CT-PD has one view per file), so that what depends on the view
// count (OS-SART blocks) is checked now and 3D volumes are allowed.
absl::StatusOr<core::Geometry> PlaceholderGeometryFromFiles(const pb::JobSpec& spec,
                                                            const ServerLimits& limits) {
  constexpr absl::string_view kPath = "geometry.from_input_files";
  if (spec.input().encoding() != pb::DATA_ENCODING_DICOM_CT_PD) {
    return Invalid(kPath, absl::StrCat("needs input.encoding DATA_ENCODING_DICOM_CT_PD, not ",
                                       EnumName(spec.input().encoding(), [](int e) {
                                         return pb::DataEncoding_Name(e);
                                       })));
  }
  const int64_t views = ProjectionFileCount(spec.input());
  if (views < 1 || static_cast<uint64_t>(views) > limits.max_views) {
    return Invalid("input.files",
                   absl::StrCat(views, " DICOM-CT-PD projection files (one view each) is out of "
                                       "range [1, ",
                                limits.max_views, "] (the server's limit, --max_views)"));
  }
  core::FanConeOptions cone;
  cone.detector = {2, 2, 1.0, 1.0, 0, 0};
  cone.source_origin_mm = 1e6;
  cone.origin_detector_mm = 1.0;
  cone.angles_rad = core::UniformAnglesRad(views, 0, 2 * kPi);
  return core::MakeCircularCone(cone);
}

absl::StatusOr<core::Geometry> ValidateGeometry(const pb::JobSpec& spec,
                                                const ServerLimits& limits) {
  if (spec.geometry().kind_case() == pb::Geometry::kParallel2D) {
    // Placed on the slice once the volume is known (ValidateJobSpec).
    TOMO_ASSIGN_OR_RETURN(core::ParallelGeometry2D parallel,
                          ValidateParallel2D(spec.geometry().parallel_2d(), limits));
    // Absurd finite values are named before the vectors are built from them.
    TOMO_RETURN_IF_ERROR(CheckGeometryRanges(spec.geometry()));
    TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry unit_slice,
                          core::VolumeGeometry::Create({1, 1, 1}, {1, 1, 1}, {}));
    return core::ParallelGeometry2DAsVectors(parallel, unit_slice);
  }
  if (spec.geometry().kind_case() == pb::Geometry::kFromInputFiles) {
    return PlaceholderGeometryFromFiles(spec, limits);
  }
  if (spec.geometry().kind_case() == pb::Geometry::kRadon3D) {
    TOMO_ASSIGN_OR_RETURN(core::RadonGeometry radon,
                          ValidateRadon3D(spec.geometry().radon_3d(), limits.max_views));
    return core::Geometry(std::move(radon));
  }
  return ValidateVectorGeometry(spec.geometry(), limits);
}

// One detector row of rays means a 2D problem: one slice (plane integrals are 3D).
bool IsTwoDimensional(const core::Geometry& geometry) {
  return std::holds_alternative<core::VectorGeometry>(geometry) &&
         core::ProjectionDims(geometry).d1 == 1;
}

absl::StatusOr<core::VolumeGeometry> ValidateVolume(const pb::Volume& v, bool two_dimensional,
                                                    const ServerLimits& limits) {
  const int64_t max_side = core::VolumeGeometry::kMaxSide;
  if (v.size().x() < 1 || v.size().x() > max_side) {
    return OutOfRange("volume.size.x", v.size().x(), 1, max_side);
  }
  if (v.size().y() < 1 || v.size().y() > max_side) {
    return OutOfRange("volume.size.y", v.size().y(), 1, max_side);
  }
  if (two_dimensional && v.size().z() > 1) {
    return OutOfRange("volume.size.z", v.size().z(), 0, 1,
                      " for a 2D geometry (0 means 1)");
  }
  if (v.size().z() > max_side) {
    return OutOfRange("volume.size.z", v.size().z(), 0, max_side, " (0 means 1)");
  }
  const int64_t size_z = v.size().z() == 0 ? 1 : v.size().z();
  TOMO_RETURN_IF_ERROR(CheckPositive("volume.voxel_size_mm.x", v.voxel_size_mm().x()));
  TOMO_RETURN_IF_ERROR(CheckPositive("volume.voxel_size_mm.y", v.voxel_size_mm().y()));
  // The slice thickness of a 2D geometry is not used; 0 (unset) takes the x size.
  double voxel_z = v.voxel_size_mm().z() == 0.0 ? v.voxel_size_mm().x() : v.voxel_size_mm().z();
  if (v.voxel_size_mm().z() != 0.0) {
    TOMO_RETURN_IF_ERROR(CheckPositive("volume.voxel_size_mm.z", v.voxel_size_mm().z()));
  }
  TOMO_RETURN_IF_ERROR(CheckFinite("volume.center_mm.x", v.center_mm().x()));
  TOMO_RETURN_IF_ERROR(CheckFinite("volume.center_mm.y", v.center_mm().y()));
  TOMO_RETURN_IF_ERROR(CheckFinite("volume.center_mm.z", v.center_mm().z()));

  // Each side is at most kMaxSide, so the product fits; checked as every request size is.
  const uint64_t voxels =
      core::CheckedProduct<uint64_t>(v.size().x(), v.size().y(), size_z).value_or(UINT64_MAX);
  if (voxels > limits.max_voxels) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "volume.size: ", v.size().x(), " x ", v.size().y(), " x ", size_z, " = ", voxels,
        " voxels exceeds the server's limit of ", limits.max_voxels,
        " voxels (--max_voxels)"));
  }
  absl::StatusOr<core::VolumeGeometry> volume = core::VolumeGeometry::Create(
      core::Size3{v.size().x(), v.size().y(), size_z},
      core::Vec3{v.voxel_size_mm().x(), v.voxel_size_mm().y(), voxel_z},
      core::Vec3{v.center_mm().x(), v.center_mm().y(), v.center_mm().z()});
  if (!volume.ok()) return WithPath("volume", volume.status());
  return volume;
}

// Bytes per raw value, 0 for the file encodings (TIFF, DICOM-CT-PD).
uint64_t RawValueBytes(pb::DataEncoding encoding) {
  switch (encoding) {
    case pb::DATA_ENCODING_FLOAT32_LE:
    case pb::DATA_ENCODING_FLOAT32_BE:
      return 4;
    case pb::DATA_ENCODING_UINT16_LE:
    case pb::DATA_ENCODING_UINT16_BE:
      return 2;
    default:
      return 0;
  }
}

constexpr size_t kMaxInputFileNameBytes = 255;

// FLAT_INTERPOLATION_LINEAR_IN_VIEWS interpolates between flat fields taken at two times at
// least. Raw and TIFF flat files are grouped by the projection views listed before them
// (runner/job_input.cc, as the job will group them: raw files by their whole frames, a
// TIFF file by at least one page), so one group, or none, is refused here rather than
// when the job runs. A Data Exchange file does not say when its flats were taken; an
// NXtomo file's image keys are checked with the file's header (CheckJobInputHeaders).
absl::Status CheckFlatsAtTwoTimes(const pb::ProjectionInput& input, uint64_t frame_bytes) {
  constexpr absl::string_view kField = "input.preprocessing.flat_interpolation";
  if (input.encoding() == pb::DATA_ENCODING_HDF5) {
    if (input.hdf5().layout() == pb::HDF5_LAYOUT_DATA_EXCHANGE) {
      return Invalid(kField, "FLAT_INTERPOLATION_LINEAR_IN_VIEWS needs to know when each flat "
                             "was taken; a Data Exchange file does not say (use NXtomo image "
                             "keys, or FLAT_INTERPOLATION_MEAN)");
    }
    return absl::OkStatus();
  }
  const bool tiff = input.encoding() == pb::DATA_ENCODING_TIFF;
  int64_t flat_files = 0, groups = 0;
  uint64_t views_before = 0;
  std::optional<uint64_t> group_position;
  for (const pb::InputFile& file : input.files()) {
    if (file.role() == pb::INPUT_ROLE_PROJECTIONS || file.role() == pb::INPUT_ROLE_UNSPECIFIED) {
      views_before += tiff ? 1 : (frame_bytes > 0 ? file.size_bytes() / frame_bytes : 0);
    } else if (file.role() == pb::INPUT_ROLE_FLAT_FIELD) {
      ++flat_files;
      if (group_position != views_before) ++groups;
      group_position = views_before;
    }
  }
  if (groups >= 2) return absl::OkStatus();
  if (flat_files == 0) {
    return Invalid(kField, "FLAT_INTERPOLATION_LINEAR_IN_VIEWS interpolates between flat "
                           "fields, and input.files lists no INPUT_ROLE_FLAT_FIELD file");
  }
  return Invalid(kField, absl::StrCat(
                             "FLAT_INTERPOLATION_LINEAR_IN_VIEWS needs flat fields taken at two "
                             "times at least (flat files listed before and after projection "
                             "files); input.files has ", flat_files, " flat file",
                             flat_files == 1 ? "" : "s", ", all in one place (after ",
                             *group_position, " views): one group, nothing to interpolate (use "
                             "FLAT_INTERPOLATION_MEAN)"));
}

// input: the encoding, the file list against the total, the raw sizes against the geometry
// (from_input: the geometry is a placeholder and the resolver checks the files against it),
// the preprocessing; then the upload limit.
absl::Status ValidateInput(const pb::ProjectionInput& input, const core::Geometry& geometry,
                           const pb::Geometry& geometry_spec, bool from_input,
                           const ServerLimits& limits) {
  const pb::DataEncoding encoding = input.encoding();
  const bool dicom = encoding == pb::DATA_ENCODING_DICOM_CT_PD;
  const bool hdf5 = encoding == pb::DATA_ENCODING_HDF5;
  // TIFF and HDF5 are files whose sizes say nothing of the geometry, as DICOM-CT-PD's.
  const bool tiff = encoding == pb::DATA_ENCODING_TIFF || hdf5;
  const uint64_t value_bytes = RawValueBytes(encoding);
  if (value_bytes == 0 && !dicom && !tiff) {
    return Invalid("input.encoding",
                   absl::StrCat(EnumName(encoding, [](int e) { return pb::DataEncoding_Name(e); }),
                                " is not supported; expected DATA_ENCODING_FLOAT32_LE, "
                                "_FLOAT32_BE, _UINT16_LE, _UINT16_BE, _TIFF, _DICOM_CT_PD or "
                                "_HDF5"));
  }
  if (input.tiff_layout() != pb::TIFF_LAYOUT_UNSPECIFIED &&
      encoding != pb::DATA_ENCODING_TIFF) {
    return Invalid("input.tiff_layout", "applies to DATA_ENCODING_TIFF only");
  }
  if (input.tiff_layout() < pb::TIFF_LAYOUT_UNSPECIFIED ||
      input.tiff_layout() > pb::TIFF_LAYOUT_SINOGRAMS) {
    return OutOfRange("input.tiff_layout", input.tiff_layout(), pb::TiffLayout_MIN,
                      pb::TiffLayout_MAX, " (TIFF_LAYOUT_PROJECTIONS, _SINOGRAMS)");
  }
  if (input.has_hdf5() && !hdf5) {
    return Invalid("input.hdf5", "applies to DATA_ENCODING_HDF5 only");
  }
  if (hdf5) {
    const pb::Hdf5Layout layout = input.hdf5().layout();
    if (layout < pb::HDF5_LAYOUT_UNSPECIFIED || layout > pb::HDF5_LAYOUT_NXTOMO) {
      return OutOfRange("input.hdf5.layout", layout, pb::Hdf5Layout_MIN, pb::Hdf5Layout_MAX,
                        " (HDF5_LAYOUT_AUTOMATIC, _DATA_EXCHANGE, _NXTOMO; 0 means AUTOMATIC)");
    }
    if (from_input) {
      return Invalid("geometry.from_input_files",
                     "DATA_ENCODING_HDF5 takes the detector and distances from the spec's "
                     "geometry (the angles too, unless input.hdf5.angles_from_file)");
    }
    if (input.files_size() > 0 &&
        (input.files(0).role() != pb::INPUT_ROLE_PROJECTIONS &&
         input.files(0).role() != pb::INPUT_ROLE_UNSPECIFIED)) {
      return Invalid("input.files[0].role", "the HDF5 file comes first, as INPUT_ROLE_PROJECTIONS");
    }
    if (input.hdf5().negate_angles() && !input.hdf5().angles_from_file()) {
      return Invalid("input.hdf5.negate_angles",
                     "applies to the file's angles; set input.hdf5.angles_from_file too");
    }
    if (input.hdf5().angles_from_file() && AnglesOf(geometry_spec) == nullptr) {
      return Invalid("input.hdf5.angles_from_file",
                     "true needs a geometry with angles (parallel_2d, fan_2d, parallel_3d, cone, "
                     "helical)");
    }
    for (int i = 1; i < input.files_size(); ++i) {
      if (input.files(i).role() != pb::INPUT_ROLE_BAD_PIXEL_MASK) {
        return Invalid(absl::StrCat("input.files[", i, "].role"),
                       "DATA_ENCODING_HDF5 takes one HDF5 file (its flat and dark fields are "
                       "inside it), then at most a bad-pixel mask");
      }
    }
  }
  if (dicom && !from_input) {
    return Invalid("geometry", "DATA_ENCODING_DICOM_CT_PD takes its geometry from the files; "
                               "set geometry.from_input_files");
  }
  if (input.order() != pb::AXIS_ORDER_UNSPECIFIED &&
      input.order() != pb::AXIS_ORDER_VIEW_ROW_COLUMN &&
      input.order() != pb::AXIS_ORDER_ROW_VIEW_COLUMN) {
    return OutOfRange("input.order", input.order(), pb::AxisOrder_MIN, pb::AxisOrder_MAX,
                      " (AXIS_ORDER_VIEW_ROW_COLUMN, _ROW_VIEW_COLUMN; 0 means VIEW_ROW_COLUMN)");
  }
  const pb::Preprocessing& pre = input.preprocessing();
  if (pre.has_min_transmission() &&
      !(pre.min_transmission() > 0 && pre.min_transmission() <= 1)) {
    return Invalid("input.preprocessing.min_transmission",
                   absl::StrCat(pre.min_transmission(), " is out of range (0, 1]"));
  }
  const pb::BadPixelOptions& bad = pre.bad_pixels();
  if (bad.has_gain_outlier_ratio() &&
      !(std::isfinite(bad.gain_outlier_ratio()) && bad.gain_outlier_ratio() > 1)) {
    return Invalid("input.preprocessing.bad_pixels.gain_outlier_ratio",
                   absl::StrCat(bad.gain_outlier_ratio(), " is out of range (1, inf)"));
  }
  if (bad.has_max_bad_fraction() &&
      !(bad.max_bad_fraction() > 0 && bad.max_bad_fraction() <= 1)) {
    return Invalid("input.preprocessing.bad_pixels.max_bad_fraction",
                   absl::StrCat(bad.max_bad_fraction(), " is out of range (0, 1]"));
  }
  if (pre.ring_filter().enabled()) {
    const uint64_t window = pre.ring_filter().window() == 0 ? 5 : pre.ring_filter().window();
    const uint64_t columns = static_cast<uint64_t>(core::ProjectionDims(geometry).d2);
    if (window % 2 == 0 || window < 3 || window > std::max<uint64_t>(3, columns)) {
      return Invalid("input.preprocessing.ring_filter.window",
                     absl::StrCat(window, " is out of range; an odd number in [3, ",
                                  std::max<uint64_t>(3, columns), "] (the detector's columns)"));
    }
  }
  if (pre.flat_interpolation() < pb::FLAT_INTERPOLATION_UNSPECIFIED ||
      pre.flat_interpolation() > pb::FLAT_INTERPOLATION_LINEAR_IN_VIEWS) {
    return OutOfRange("input.preprocessing.flat_interpolation", pre.flat_interpolation(),
                      pb::FlatInterpolation_MIN, pb::FlatInterpolation_MAX,
                      " (FLAT_INTERPOLATION_MEAN, _LINEAR_IN_VIEWS)");
  }
  if (pre.flat_interpolation() == pb::FLAT_INTERPOLATION_LINEAR_IN_VIEWS &&
      input.order() == pb::AXIS_ORDER_ROW_VIEW_COLUMN) {
    return Invalid("input.preprocessing.flat_interpolation",
                   "FLAT_INTERPOLATION_LINEAR_IN_VIEWS places flat files among projection "
                   "views; AXIS_ORDER_ROW_VIEW_COLUMN files hold no views one after another");
  }
  if (dicom && (pre.ring_filter().enabled() || pre.has_bad_pixels())) {
    return Invalid(pre.ring_filter().enabled() ? "input.preprocessing.ring_filter"
                                               : "input.preprocessing.bad_pixels",
                   "does not apply to DICOM-CT-PD input (its values come corrected)");
  }
  if (dicom && pre.negative_log()) {
    return Invalid("input.preprocessing.negative_log",
                   "DICOM-CT-PD files say themselves whether they hold line integrals "
                   "(LogFlag (7039,1009)); leave it unset");
  }
  const core::Dims3 dims = core::ProjectionDims(geometry);
  // The geometry's counts are bounded, so these fit; checked all the same, as every size
  // formed from a request is.
  const std::optional<uint64_t> frame_bytes_or =
      core::CheckedProduct<uint64_t>(dims.d1, dims.d2, value_bytes);
  const std::optional<uint64_t> expected_or =
      frame_bytes_or ? core::CheckedMul<uint64_t>(dims.d0, *frame_bytes_or) : std::nullopt;
  if (!expected_or) {
    return Invalid("geometry", absl::StrCat(dims.d0, " views x ", dims.d1, " rows x ", dims.d2,
                                            " detectors x ", value_bytes,
                                            " bytes does not fit 64 bits"));
  }
  const uint64_t frame_bytes = *frame_bytes_or, expected = *expected_or;
  if (input.files().empty()) {
    if (dicom || tiff) {
      return Invalid("input.files", absl::StrCat("empty; ", pb::DataEncoding_Name(encoding),
                                                 " needs the list of uploaded files"));
    }
    if (input.size_bytes() != expected) {
      return Invalid("input.size_bytes",
                     absl::StrCat(input.size_bytes(), " does not match the geometry: ", dims.d0,
                                  " views x ", dims.d1, dims.d1 == 1 ? " row x " : " rows x ",
                                  dims.d2, " detectors x ", value_bytes, " bytes = ", expected));
    }
  } else {
    // Sums of sizes from the request: a sum past 2^64 must be refused, never wrap to a
    // small total that then matches input.size_bytes.
    core::CheckedSum<uint64_t> total, projection_bytes;
    bool dark = false, flat = false, mask = false;
    for (int i = 0; i < input.files_size(); ++i) {
      const pb::InputFile& file = input.files(i);
      const std::string path = absl::StrCat("input.files[", i, "]");
      if (file.name().empty() || file.name().size() > kMaxInputFileNameBytes ||
          file.name().find('\0') != std::string::npos) {
        return Invalid(absl::StrCat(path, ".name"),
                       absl::StrCat("length ", file.name().size(), " bytes is out of range [1, ",
                                    kMaxInputFileNameBytes, "] (and no NUL)"));
      }
      if (file.size_bytes() == 0) {
        return Invalid(absl::StrCat(path, ".size_bytes"),
                       absl::StrCat("0 for ", file.name(), "; every file has bytes"));
      }
      if (!total.Add(file.size_bytes())) {
        return Invalid(absl::StrCat(path, ".size_bytes"),
                       absl::StrCat(file.size_bytes(), " (", file.name(),
                                    ") brings the sum of input.files[].size_bytes past 2^64 - 1"));
      }
      switch (file.role()) {
        case pb::INPUT_ROLE_UNSPECIFIED:
        case pb::INPUT_ROLE_PROJECTIONS:
          projection_bytes.Add(file.size_bytes());  // at most total, so it fits too
          break;
        case pb::INPUT_ROLE_DARK_FIELD:
        case pb::INPUT_ROLE_FLAT_FIELD:
          if (dicom) {
            return Invalid(absl::StrCat(path, ".role"),
                           "dark and flat fields do not apply to DICOM-CT-PD files");
          }
          (file.role() == pb::INPUT_ROLE_DARK_FIELD ? dark : flat) = true;
          if (value_bytes > 0 && file.size_bytes() % frame_bytes != 0) {
            return Invalid(absl::StrCat(path, ".size_bytes"),
                           absl::StrCat(file.size_bytes(), " (", file.name(),
                                        ") is not a whole number of frames of ", dims.d1,
                                        " x ", dims.d2, " x ", value_bytes, " bytes"));
          }
          break;
        case pb::INPUT_ROLE_BAD_PIXEL_MASK:
          if (dicom) {
            return Invalid(absl::StrCat(path, ".role"),
                           "a bad-pixel mask does not apply to DICOM-CT-PD files");
          }
          if (mask) {
            return Invalid(absl::StrCat(path, ".role"),
                           "a second INPUT_ROLE_BAD_PIXEL_MASK file; at most one");
          }
          mask = true;
          if (file.size_bytes() != static_cast<uint64_t>(dims.d1 * dims.d2)) {
            return Invalid(absl::StrCat(path, ".size_bytes"),
                           absl::StrCat(file.size_bytes(), " (", file.name(),
                                        ") is not one byte per detector pixel, ", dims.d1,
                                        " x ", dims.d2, " = ", dims.d1 * dims.d2));
          }
          break;
        default:
          return OutOfRange(absl::StrCat(path, ".role"), file.role(), pb::InputRole_MIN,
                            pb::InputRole_MAX,
                            " (INPUT_ROLE_PROJECTIONS, _DARK_FIELD, _FLAT_FIELD, "
                            "_BAD_PIXEL_MASK; 0 means PROJECTIONS)");
      }
    }
    if (projection_bytes.value() == 0) {
      return Invalid("input.files", "no file has the role INPUT_ROLE_PROJECTIONS");
    }
    if (dark && !flat) {
      return Invalid("input.files",
                     "a dark field needs a flat field too (T = (I - dark) / (flat - dark))");
    }
    if (input.size_bytes() != total.value()) {
      return Invalid("input.size_bytes",
                     absl::StrCat(input.size_bytes(), " does not match the sum of "
                                  "input.files[].size_bytes, ", total.value()));
    }
    if (value_bytes > 0 && projection_bytes.value() != expected) {
      return Invalid("input.files",
                     absl::StrCat("projection files total ", projection_bytes.value(),
                                  " bytes; the geometry needs ", dims.d0, " views x ", dims.d1,
                                  dims.d1 == 1 ? " row x " : " rows x ", dims.d2,
                                  " detectors x ", value_bytes, " bytes = ", expected));
    }
  }
  if (pre.flat_interpolation() == pb::FLAT_INTERPOLATION_LINEAR_IN_VIEWS) {
    TOMO_RETURN_IF_ERROR(CheckFlatsAtTwoTimes(input, frame_bytes));
  }
  if (input.size_bytes() > limits.max_upload_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("input.size_bytes: ", input.size_bytes(),
                     " exceeds the server's limit of ", limits.max_upload_bytes,
                     " bytes per upload (--max_upload_bytes)"));
  }
  return absl::OkStatus();
}

// Iterations the algorithm asks for, with the field that sets them; 0 for direct methods.
// An iterative algorithm added to the proto adds its case here.
struct Iterations {
  absl::string_view field;
  uint64_t count = 0;
};
Iterations AlgorithmIterations(const pb::Algorithm& algorithm) {
  switch (algorithm.kind_case()) {
    case pb::Algorithm::kSirt:
      return {"algorithm.sirt.iterations", algorithm.sirt().iterations()};
    case pb::Algorithm::kSart:
      return {"algorithm.sart.iterative.iterations", algorithm.sart().iterative().iterations()};
    case pb::Algorithm::kOsSart:
      return {"algorithm.os_sart.iterative.iterations",
              algorithm.os_sart().iterative().iterations()};
    case pb::Algorithm::kCgls:
      return {"algorithm.cgls.iterations", algorithm.cgls().iterations()};
    case pb::Algorithm::kArt:
      return {"algorithm.art.iterations", algorithm.art().iterations()};
    case pb::Algorithm::kIcd:
      return {"algorithm.icd.iterations", algorithm.icd().iterations()};
    case pb::Algorithm::kFbp:
    case pb::Algorithm::KIND_NOT_SET:
      return {};
  }
  return {};
}

// tomoserve.v1.IterativeOptions at `path` -> core::IterativeOptions, checked with
// core::ValidateIterativeOptions (its field names prefixed with path). constrained: the
// SIRT family (CGLS takes no relaxation and no bounds).
absl::StatusOr<core::IterativeOptions> ValidateIterative(absl::string_view path,
                                                        const pb::IterativeOptions& given,
                                                        const core::VolumeGeometry& volume,
                                                        bool constrained) {
  core::IterativeOptions options;
  if (given.iterations() == 0) {
    return Invalid(absl::StrCat(path, ".iterations"),
                   "0 is out of range [1, --max_iterations]; an iterative method needs at least "
                   "one iteration");
  }
  options.iterations = given.iterations();
  if (given.has_relaxation()) options.relaxation = given.relaxation();
  if (given.non_negative()) {
    if (!constrained) {
      return Invalid(absl::StrCat(path, ".non_negative"),
                     "true is not supported by CGLS (an unconstrained method); use SIRT, SART "
                     "or OS-SART for constraints");
    }
    options.lower_bound = 0;
  }
  if (given.has_lower_bound()) {
    if (given.non_negative() && given.lower_bound() < 0) {
      return Invalid(absl::StrCat(path, ".lower_bound"),
                     absl::StrCat(given.lower_bound(), " is below 0 while non_negative is set"));
    }
    options.lower_bound = given.lower_bound();
  }
  if (given.has_upper_bound()) options.upper_bound = given.upper_bound();
  options.stop_relative_residual = given.stop_relative_residual();
  switch (given.initial()) {
    case pb::INITIAL_VOLUME_UNSPECIFIED:
    case pb::INITIAL_VOLUME_ZERO:
      break;
    case pb::INITIAL_VOLUME_FBP:
      options.initial_from_fbp = true;
      break;
    case pb::INITIAL_VOLUME_GIVEN: {
      const std::string& bytes = given.initial_volume_float32();
      const uint64_t expected =
          core::CheckedMul<uint64_t>(volume.voxel_count(), sizeof(float)).value_or(UINT64_MAX);
      if (bytes.size() != expected) {
        return Invalid(absl::StrCat(path, ".initial_volume_float32"),
                       absl::StrCat(bytes.size(), " bytes do not match the volume: ",
                                    volume.size().x, " x ", volume.size().y, " x ",
                                    volume.size().z, " voxels x 4 bytes = ", expected));
      }
      auto initial = std::make_shared<core::Array3D>(core::Array3D::Uninitialized(volume.dims()));
      for (int64_t i = 0; i < initial->size(); ++i) {
        const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + 4 * i;
        const uint32_t word = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                              (static_cast<uint32_t>(p[2]) << 16) |
                              (static_cast<uint32_t>(p[3]) << 24);
        float value;
        std::memcpy(&value, &word, sizeof(value));
        if (!std::isfinite(value)) {
          return Invalid(absl::StrCat(path, ".initial_volume_float32"),
                         absl::StrCat("value ", i, " is not a finite number"));
        }
        initial->data()[i] = value;
      }
      options.initial_volume = std::move(initial);
      break;
    }
    default:
      return OutOfRange(absl::StrCat(path, ".initial"), given.initial(), pb::InitialVolume_MIN,
                        pb::InitialVolume_MAX,
                        " (INITIAL_VOLUME_ZERO, _FBP, _GIVEN; 0 means ZERO)");
  }
  if (given.initial() != pb::INITIAL_VOLUME_GIVEN && !given.initial_volume_float32().empty()) {
    return Invalid(absl::StrCat(path, ".initial_volume_float32"),
                   "is set but initial is not INITIAL_VOLUME_GIVEN");
  }
  absl::Status valid = core::ValidateIterativeOptions(options, volume, constrained);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".", valid.message()));
  }
  return options;
}

// unspecified: what UNSPECIFIED means for this method (docs/iterative.md has the
// measurements: SART golden ratio, OS-SART sequential).
absl::StatusOr<core::ViewOrder> ValidateViewOrder(absl::string_view path, pb::ViewOrder order,
                                                  core::ViewOrder unspecified) {
  switch (order) {
    case pb::VIEW_ORDER_UNSPECIFIED:
      return unspecified;
    case pb::VIEW_ORDER_SEQUENTIAL:
      return core::ViewOrder::kSequential;
    case pb::VIEW_ORDER_INTERLEAVED:
      return core::ViewOrder::kInterleaved;
    case pb::VIEW_ORDER_GOLDEN_RATIO:
      return core::ViewOrder::kGoldenRatio;
    case pb::VIEW_ORDER_RANDOM:
      return core::ViewOrder::kRandom;
    default:
      return OutOfRange(path, order, pb::ViewOrder_MIN, pb::ViewOrder_MAX,
                        " (VIEW_ORDER_SEQUENTIAL, _INTERLEAVED, _GOLDEN_RATIO, _RANDOM)");
  }
}

absl::StatusOr<core::AlgorithmOptions> ValidateAlgorithm(const pb::Algorithm& algorithm,
                                                         const pb::JobSpec& spec,
                                                         const core::Geometry& geometry,
                                                         const core::VolumeGeometry& volume) {
  switch (algorithm.kind_case()) {
    case pb::Algorithm::kSirt: {
      core::SirtOptions options;
      TOMO_ASSIGN_OR_RETURN(options.iterative, ValidateIterative("algorithm.sirt",
                                                                 algorithm.sirt(), volume, true));
      return core::AlgorithmOptions(options);
    }
    case pb::Algorithm::kSart: {
      core::SartOptions options;
      TOMO_ASSIGN_OR_RETURN(options.iterative,
                            ValidateIterative("algorithm.sart.iterative",
                                              algorithm.sart().iterative(), volume, true));
      TOMO_ASSIGN_OR_RETURN(options.order,
                            ValidateViewOrder("algorithm.sart.order", algorithm.sart().order(),
                                              core::kDefaultSartViewOrder));
      return core::AlgorithmOptions(options);
    }
    case pb::Algorithm::kOsSart: {
      const pb::OsSartOptions& given = algorithm.os_sart();
      core::OsSartOptions options;
      TOMO_ASSIGN_OR_RETURN(options.iterative, ValidateIterative("algorithm.os_sart.iterative",
                                                                 given.iterative(), volume, true));
      TOMO_ASSIGN_OR_RETURN(options.order,
                            ValidateViewOrder("algorithm.os_sart.order", given.order(),
                                              core::kDefaultOsSartViewOrder));
      const int64_t views = core::ProjectionDims(geometry).d0;
      if (given.blocks() < 1 || given.blocks() > views) {
        return OutOfRange("algorithm.os_sart.blocks", given.blocks(), 1, views,
                          " (1 block is SIRT; one per view, the number of views, is SART)");
      }
      options.blocks = given.blocks();
      return core::AlgorithmOptions(options);
    }
    case pb::Algorithm::kCgls: {
      core::CglsOptions options;
      TOMO_ASSIGN_OR_RETURN(options.iterative, ValidateIterative("algorithm.cgls",
                                                                 algorithm.cgls(), volume, false));
      return core::AlgorithmOptions(options);
    }
    case pb::Algorithm::kArt: {
      TOMO_ASSIGN_OR_RETURN(core::StoredArtOptions options,
                            ValidateStoredMatrixArt(algorithm.art(), spec.geometry(),
                                                    core::ProjectionDims(geometry).d0));
      return core::AlgorithmOptions(options);
    }
    case pb::Algorithm::kIcd: {
      TOMO_ASSIGN_OR_RETURN(core::IcdAlgorithmOptions options,
                            ValidateStatisticalIcd(algorithm.icd(), spec, volume));
      return core::AlgorithmOptions(std::move(options));
    }
    case pb::Algorithm::kFbp: {
      const pb::FbpOptions& fbp = algorithm.fbp();
      core::FbpOptions options;
      switch (fbp.window()) {
        case pb::FILTER_WINDOW_UNSPECIFIED:
        case pb::FILTER_WINDOW_RAM_LAK:
          options.filter.window = core::FilterWindow::kRamLak;
          break;
        case pb::FILTER_WINDOW_SHEPP_LOGAN:
          options.filter.window = core::FilterWindow::kSheppLogan;
          break;
        case pb::FILTER_WINDOW_COSINE:
          options.filter.window = core::FilterWindow::kCosine;
          break;
        case pb::FILTER_WINDOW_HAMMING:
          options.filter.window = core::FilterWindow::kHamming;
          break;
        case pb::FILTER_WINDOW_HANN:
          options.filter.window = core::FilterWindow::kHann;
          break;
        default:
          return OutOfRange("algorithm.fbp.window", fbp.window(), pb::FilterWindow_MIN,
                            pb::FilterWindow_MAX,
                            " (FILTER_WINDOW_RAM_LAK, _SHEPP_LOGAN, _COSINE, _HAMMING, "
                            "_HANN; 0 means RAM_LAK)");
      }
      options.filter.cutoff = fbp.has_cutoff() ? fbp.cutoff() : 1.0;
      if (!std::isfinite(options.filter.cutoff) || options.filter.cutoff <= 0 ||
          options.filter.cutoff > 1) {
        return Invalid("algorithm.fbp.cutoff",
                       absl::StrCat(options.filter.cutoff, " is out of range (0, 1]"));
      }
      return core::AlgorithmOptions(options);
    }
    case pb::Algorithm::KIND_NOT_SET:
      break;
  }
  return Invalid("algorithm", "none set; expected one of fbp, sirt, sart, os_sart, cgls, art, icd");
}

absl::StatusOr<std::vector<pb::OutputFormat>> ValidateOutputs(const pb::JobSpec& spec) {
  std::vector<pb::OutputFormat> outputs;
  if (spec.outputs().empty()) {
    outputs.push_back(pb::OUTPUT_FORMAT_RAW_FLOAT32);
    return outputs;
  }
  for (int i = 0; i < spec.outputs().size(); ++i) {
    const int format = spec.outputs(i);
    const std::string path = absl::StrCat("outputs[", i, "]");
    if (format == pb::OUTPUT_FORMAT_UNSPECIFIED || !pb::OutputFormat_IsValid(format)) {
      return Invalid(path, absl::StrCat(EnumName(format,
                                                 [](int f) { return pb::OutputFormat_Name(f); }),
                                        " is not an output format; expected one of "
                                        "OUTPUT_FORMAT_RAW_FLOAT32, OUTPUT_FORMAT_NIFTI, "
                                        "OUTPUT_FORMAT_NIFTI_GZ, OUTPUT_FORMAT_METAIMAGE, "
                                        "OUTPUT_FORMAT_DICOM_CT_SERIES, "
                                        "OUTPUT_FORMAT_PNG_PREVIEW"));
    }
    for (pb::OutputFormat seen : outputs) {
      if (seen == format) {
        return Invalid(path, absl::StrCat(pb::OutputFormat_Name(format), " is listed twice"));
      }
    }
    outputs.push_back(static_cast<pb::OutputFormat>(format));
  }
  return outputs;
}

// JobSpec.output_options: a water attenuation > 0 when set, a window with upper > lower;
// a DICOM series needs the water attenuation from here unless the input may carry it
// (DICOM-CT-PD files give it).
absl::StatusOr<OutputSettings> ValidateOutputOptions(const pb::JobSpec& spec,
                                                     const std::vector<pb::OutputFormat>& outputs) {
  OutputSettings settings;
  const pb::OutputOptions& options = spec.output_options();
  if (options.has_water_attenuation_per_mm()) {
    const double water = options.water_attenuation_per_mm();
    if (!std::isfinite(water) || !(water > 0)) {
      return Invalid("output_options.water_attenuation_per_mm",
                     absl::StrCat(water, " is out of range (0, inf); it must be a finite "
                                         "attenuation in 1/mm (water is about 0.019 at 70 keV)"));
    }
    settings.water_attenuation_per_mm = water;
  }
  if (options.has_window()) {
    const double lower = options.window().lower(), upper = options.window().upper();
    if (!std::isfinite(lower) || !std::isfinite(upper) || !(upper > lower)) {
      return Invalid("output_options.window",
                     absl::StrCat("[", lower, ", ", upper,
                                  "] is not a window; lower and upper must be finite and "
                                  "upper above lower"));
    }
    settings.window = core::DisplayWindow{lower, upper};
  }
  const bool dicom_series = std::find(outputs.begin(), outputs.end(),
                                      pb::OUTPUT_FORMAT_DICOM_CT_SERIES) != outputs.end();
  const bool input_may_give_water = spec.input().encoding() == pb::DATA_ENCODING_DICOM_CT_PD;
  if (dicom_series && !settings.water_attenuation_per_mm.has_value() && !input_may_give_water) {
    return Invalid("output_options.water_attenuation_per_mm",
                   "is unset; OUTPUT_FORMAT_DICOM_CT_SERIES needs it for the Hounsfield scale "
                   "(only DICOM-CT-PD input gives it)");
  }
  return settings;
}

// The centre of rotation of a geometry that can have one, with the detector's columns,
// column spacing, rows and the offset the centre replaces.
struct CenterPlace {
  pb::CenterOfRotation* center = nullptr;
  std::string path;  // e.g. "geometry.cone"
  uint64_t columns = 0, rows = 1;
  double spacing_mm = 0;
  std::function<void(double)> set_offset = nullptr;
  double current_offset = 0;
  std::string offset_field = {};
};

std::optional<CenterPlace> CenterPlaceOf(pb::Geometry& g) {
  CenterPlace place;
  switch (g.kind_case()) {
    case pb::Geometry::kParallel2D: {
      pb::ParallelBeam2D* p = g.mutable_parallel_2d();
      if (!p->has_center_of_rotation()) return std::nullopt;
      place = {p->mutable_center_of_rotation(), "geometry.parallel_2d", p->num_detectors(), 1,
               p->detector_spacing_mm()};
      place.set_offset = [p](double o) { p->set_detector_offset_mm(o); };
      place.current_offset = p->detector_offset_mm();
      place.offset_field = "detector_offset_mm";
      return place;
    }
    case pb::Geometry::kFan2D: {
      pb::FanBeam2D* f = g.mutable_fan_2d();
      if (!f->has_center_of_rotation()) return std::nullopt;
      place = {f->mutable_center_of_rotation(), "geometry.fan_2d", f->num_detectors(), 1,
               f->detector_spacing_mm()};
      place.set_offset = [f](double o) { f->set_detector_offset_mm(o); };
      place.current_offset = f->detector_offset_mm();
      place.offset_field = "detector_offset_mm";
      return place;
    }
    case pb::Geometry::kParallel3D:
    case pb::Geometry::kCone: {
      const bool cone = g.has_cone();
      if (!(cone ? g.cone().has_center_of_rotation() : g.parallel_3d().has_center_of_rotation())) {
        return std::nullopt;
      }
      pb::CenterOfRotation* center = cone ? g.mutable_cone()->mutable_center_of_rotation()
                                          : g.mutable_parallel_3d()->mutable_center_of_rotation();
      pb::Detector* d = cone ? g.mutable_cone()->mutable_detector()
                             : g.mutable_parallel_3d()->mutable_detector();
      place = {center, cone ? "geometry.cone" : "geometry.parallel_3d", d->columns(), d->rows(),
               d->column_spacing_mm()};
      place.set_offset = [d](double o) { d->set_offset_u_mm(o); };
      place.current_offset = d->offset_u_mm();
      place.offset_field = "detector.offset_u_mm";
      return place;
    }
    default:
      return std::nullopt;
  }
}

// Moves geometry.*.center_of_rotation into the detector offset (a column) or out of the
// geometry (an estimate, returned for the runner); nullopt when there is none.
absl::StatusOr<std::optional<pb::CenterOfRotationEstimate>> MoveCenterIntoOffset(
    pb::Geometry& g) {
  if (g.has_helical() && g.helical().cone().has_center_of_rotation()) {
    return Invalid("geometry.helical.cone.center_of_rotation",
                   "a helical scan's centre cannot be set or estimated as a circular scan's; "
                   "give detector.offset_u_mm");
  }
  std::optional<CenterPlace> place = CenterPlaceOf(g);
  if (!place.has_value()) return std::optional<pb::CenterOfRotationEstimate>();
  const std::string path = absl::StrCat(place->path, ".center_of_rotation");
  if (place->current_offset != 0) {
    return Invalid(path, absl::StrCat("set with ", place->path, ".", place->offset_field, " ",
                                      place->current_offset, "; give one of them (the centre "
                                      "sets the offset)"));
  }
  const double last = static_cast<double>(place->columns) - 1;
  std::optional<pb::CenterOfRotationEstimate> estimate;
  switch (place->center->kind_case()) {
    case pb::CenterOfRotation::kColumn: {
      const double column = place->center->column();
      if (!std::isfinite(column) || column < 0 || column > last) {
        return Invalid(absl::StrCat(path, ".column"),
                       absl::StrCat(column, " is out of range [0, ", last, "] (the detector's ",
                                    place->columns, " columns)"));
      }
      // Checked as the offset itself later; a spacing of 0 is refused there.
      place->set_offset((0.5 * last - column) * place->spacing_mm);
      break;
    }
    case pb::CenterOfRotation::kEstimate: {
      const pb::CenterOfRotationEstimate& e = place->center->estimate();
      if (e.method() < pb::CENTER_OF_ROTATION_METHOD_UNSPECIFIED ||
          e.method() > pb::CENTER_OF_ROTATION_METHOD_SHARPNESS) {
        return OutOfRange(absl::StrCat(path, ".estimate.method"), e.method(),
                          pb::CenterOfRotationMethod_MIN, pb::CenterOfRotationMethod_MAX,
                          " (CENTER_OF_ROTATION_METHOD_AUTOMATIC, _OPPOSING_RAYS, _SHARPNESS)");
      }
      const double half = 0.5 * static_cast<double>(place->columns + 1);
      if (!std::isfinite(e.search_radius_columns()) || e.search_radius_columns() < 0 ||
          e.search_radius_columns() >= half) {
        return Invalid(absl::StrCat(path, ".estimate.search_radius_columns"),
                       absl::StrCat(e.search_radius_columns(), " is out of range [0, ", half,
                                    "); 0 means a quarter of the columns"));
      }
      if (e.has_row() && e.row() >= place->rows) {
        return OutOfRange(absl::StrCat(path, ".estimate.row"), e.row(), 0,
                          static_cast<int64_t>(place->rows) - 1);
      }
      if (place->columns < 2) {
        return Invalid(path, "an estimate needs at least 2 detector columns");
      }
      estimate = e;
      break;
    }
    default:
      return Invalid(path, "neither column nor estimate set");
  }
  place->center->Clear();
  // Cleared, the field is still present; remove the message itself.
  switch (g.kind_case()) {
    case pb::Geometry::kParallel2D: g.mutable_parallel_2d()->clear_center_of_rotation(); break;
    case pb::Geometry::kFan2D: g.mutable_fan_2d()->clear_center_of_rotation(); break;
    case pb::Geometry::kParallel3D: g.mutable_parallel_3d()->clear_center_of_rotation(); break;
    case pb::Geometry::kCone: g.mutable_cone()->clear_center_of_rotation(); break;
    default: break;
  }
  return estimate;
}

}  // namespace

absl::StatusOr<ValidatedJob> ValidateJobSpec(const tomoserve::v1::JobSpec& spec,
                                             const ServerLimits& limits) {
  const pb::Geometry& given = spec.geometry();
  if ((given.has_parallel_2d() && given.parallel_2d().has_center_of_rotation()) ||
      (given.has_fan_2d() && given.fan_2d().has_center_of_rotation()) ||
      (given.has_parallel_3d() && given.parallel_3d().has_center_of_rotation()) ||
      (given.has_cone() && given.cone().has_center_of_rotation()) ||
      (given.has_helical() && given.helical().cone().has_center_of_rotation())) {
    // A centre of rotation becomes the detector offset (or an estimate for the runner); the
    // rest is validated as if the spec had given the offset (the centre removed, so this
    // runs once).
    pb::Geometry geometry = given;
    TOMO_ASSIGN_OR_RETURN(std::optional<pb::CenterOfRotationEstimate> estimate,
                          MoveCenterIntoOffset(geometry));
    {
      pb::JobSpec moved = spec;
      *moved.mutable_geometry() = std::move(geometry);
      TOMO_ASSIGN_OR_RETURN(ValidatedJob job, ValidateJobSpec(moved, limits));
      job.center_estimate = std::move(estimate);
      return job;
    }
  }
  if (spec.name().size() > kMaxNameBytes) {
    return Invalid("name", absl::StrCat("length ", spec.name().size(),
                                        " bytes is out of range [0, ", kMaxNameBytes, "]"));
  }
  if (spec.idempotency_key().size() > kMaxIdempotencyKeyBytes) {
    return Invalid("idempotency_key",
                   absl::StrCat("length ", spec.idempotency_key().size(),
                                " bytes is out of range [0, ", kMaxIdempotencyKeyBytes, "]"));
  }
  if (spec.priority() < kMinPriority || spec.priority() > kMaxPriority) {
    return OutOfRange("priority", spec.priority(), kMinPriority, kMaxPriority);
  }
  TOMO_ASSIGN_OR_RETURN(core::Geometry geometry, ValidateGeometry(spec, limits));
  // Finite but absurd lengths, positions and angles (geometry_ranges.h).
  TOMO_RETURN_IF_ERROR(CheckGeometryRanges(spec.geometry()));
  TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry volume,
                        ValidateVolume(spec.volume(), IsTwoDimensional(geometry), limits));
  TOMO_RETURN_IF_ERROR(CheckVolumeRanges(spec.volume()));
  if (spec.geometry().kind_case() == pb::Geometry::kParallel2D) {
    // A 2D parallel beam is the one-row vector geometry on the volume's slice.
    TOMO_ASSIGN_OR_RETURN(core::ParallelGeometry2D parallel,
                          ValidateParallel2D(spec.geometry().parallel_2d(), limits));
    TOMO_ASSIGN_OR_RETURN(geometry, core::ParallelGeometry2DAsVectors(parallel, volume));
  }
  const bool from_input = spec.geometry().has_from_input_files();
  // A placeholder geometry (from_input) is checked against the volume once it is read.
  if (const auto* vectors = std::get_if<core::VectorGeometry>(&geometry); !from_input && vectors) {
    absl::Status fits = vectors->CheckAgainstVolume(volume);
    if (!fits.ok()) return WithPath("geometry", fits);
  }
  const bool radon = spec.geometry().has_radon_3d();
  if (radon) TOMO_RETURN_IF_ERROR(CheckRadon3DInput(spec.input()));
  TOMO_RETURN_IF_ERROR(ValidateInput(spec.input(), geometry, spec.geometry(), from_input, limits));
  const Iterations iterations = AlgorithmIterations(spec.algorithm());
  if (iterations.count > 0) {
    TOMO_RETURN_IF_ERROR(CheckIterations(iterations.field, iterations.count, limits));
  }
  TOMO_ASSIGN_OR_RETURN(core::AlgorithmOptions algorithm,
                        ValidateAlgorithm(spec.algorithm(), spec, geometry, volume));
  if (radon) UseRadonProjector(algorithm);
  if (spec.geometry().has_helical() && std::holds_alternative<core::FbpOptions>(algorithm)) {
    return Invalid("algorithm.fbp",
                   "FBP/FDK needs a circular orbit or parallel rays; geometry.helical needs an "
                   "iterative method");
  }
  if (spec.geometry().has_helical()) {
    const bool fbp_start = std::visit(
        [](const auto& options) {
          using Options = std::decay_t<decltype(options)>;
          // ICD's FDK start on a helical orbit is refused by its own validation.
          if constexpr (std::is_same_v<Options, core::FbpOptions> ||
                        std::is_same_v<Options, core::StoredArtOptions> ||
                        std::is_same_v<Options, core::IcdAlgorithmOptions>) {
            return false;
          } else {
            return options.iterative.initial_from_fbp;
          }
        },
        algorithm);
    if (fbp_start) {
      return Invalid("algorithm",
                     "initial INITIAL_VOLUME_FBP needs a circular orbit or parallel rays; "
                     "geometry.helical needs another start");
    }
  }
  TOMO_ASSIGN_OR_RETURN(std::vector<pb::OutputFormat> outputs, ValidateOutputs(spec));
  TOMO_ASSIGN_OR_RETURN(OutputSettings output_settings, ValidateOutputOptions(spec, outputs));
  ValidatedJob job{
      core::ReconstructionRequest{std::move(geometry), std::move(volume), std::move(algorithm)},
      spec.input().size_bytes(), std::move(outputs),
      // Any value is valid (0: the device's free memory); too small for the job is
      // RESOURCE_EXHAUSTED when it runs, from the slab plan.
      spec.memory_budget_bytes(), std::move(output_settings), spec.input(), from_input,
      spec.geometry()};
  return job;
}

absl::StatusOr<core::Geometry> GeometryWith(const ValidatedJob& job,
                                            const GeometryChanges& changes) {
  pb::Geometry geometry = job.geometry_spec;
  const core::Dims3 dims = core::ProjectionDims(job.request.geometry);
  if (!changes.angles_deg.empty()) {
    pb::Angles* angles = MutableAnglesOf(geometry);
    if (angles == nullptr) {
      return Invalid("input.hdf5.angles_from_file", "the geometry has no angles to replace");
    }
    if (static_cast<int64_t>(changes.angles_deg.size()) != dims.d0) {
      return Invalid("input.hdf5.angles_from_file",
                     absl::StrCat("the file has ", changes.angles_deg.size(),
                                  " projection angles, the geometry ", dims.d0, " views"));
    }
    angles->clear_uniform();
    for (double d : changes.angles_deg) angles->mutable_list()->add_degrees(d);
  }
  if (changes.offset_u_mm.has_value()) {
    switch (geometry.kind_case()) {
      case pb::Geometry::kParallel2D:
        geometry.mutable_parallel_2d()->set_detector_offset_mm(*changes.offset_u_mm);
        break;
      case pb::Geometry::kFan2D:
        geometry.mutable_fan_2d()->set_detector_offset_mm(*changes.offset_u_mm);
        break;
      case pb::Geometry::kParallel3D:
        geometry.mutable_parallel_3d()->mutable_detector()->set_offset_u_mm(*changes.offset_u_mm);
        break;
      case pb::Geometry::kCone:
        geometry.mutable_cone()->mutable_detector()->set_offset_u_mm(*changes.offset_u_mm);
        break;
      default:
        return Invalid("geometry", "has no detector offset to set");
    }
  }
  ServerLimits limits;
  limits.max_views = static_cast<uint32_t>(std::max<int64_t>(1, dims.d0));
  pb::JobSpec spec;
  *spec.mutable_geometry() = geometry;
  TOMO_RETURN_IF_ERROR(CheckGeometryRanges(geometry));
  TOMO_ASSIGN_OR_RETURN(core::Geometry rebuilt, ValidateGeometry(spec, limits));
  if (geometry.has_parallel_2d()) {
    TOMO_ASSIGN_OR_RETURN(core::ParallelGeometry2D parallel,
                          ValidateParallel2D(geometry.parallel_2d(), limits));
    TOMO_ASSIGN_OR_RETURN(rebuilt,
                          core::ParallelGeometry2DAsVectors(parallel, job.request.volume));
  }
  if (const auto* vectors = std::get_if<core::VectorGeometry>(&rebuilt)) {
    absl::Status fits = vectors->CheckAgainstVolume(job.request.volume);
    if (!fits.ok()) return WithPath("geometry (with the file's angles)", fits);
  }
  return rebuilt;
}

absl::Status CheckIterations(absl::string_view field, uint64_t iterations,
                             const ServerLimits& limits) {
  if (iterations <= limits.max_iterations) return absl::OkStatus();
  // An absurd count is a wrong spec, not a busy server (issue 6): INVALID_ARGUMENT.
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", iterations,
                                                 " iterations exceed the server's limit of ",
                                                 limits.max_iterations, " (--max_iterations)"));
}

}  // namespace tomo::server
