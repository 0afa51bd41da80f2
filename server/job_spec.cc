#include "server/job_spec.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"
#include "core/geometry/geometry_builders.h"
#include "core/geometry/vector_geometry.h"

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
                             "cone, helical, vectors");
}

absl::StatusOr<core::Geometry> ValidateGeometry(const pb::JobSpec& spec,
                                                const ServerLimits& limits) {
  if (spec.geometry().kind_case() == pb::Geometry::kParallel2D) {
    return ValidateParallel2D(spec.geometry().parallel_2d(), limits);
  }
  return ValidateVectorGeometry(spec.geometry(), limits);
}

// One detector row means a 2D problem: one slice.
bool IsTwoDimensional(const core::Geometry& geometry) {
  return core::ProjectionDims(geometry).d1 == 1;
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

  const uint64_t voxels =
      uint64_t{v.size().x()} * uint64_t{v.size().y()} * static_cast<uint64_t>(size_z);
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

absl::Status ValidateInput(const pb::ProjectionInput& input, const core::Geometry& geometry,
                           const ServerLimits& limits) {
  if (input.encoding() != pb::DATA_ENCODING_FLOAT32_LE) {
    return Invalid("input.encoding",
                   absl::StrCat(EnumName(input.encoding(),
                                         [](int e) { return pb::DataEncoding_Name(e); }),
                                " is not supported; expected DATA_ENCODING_FLOAT32_LE"));
  }
  const core::Dims3 dims = core::ProjectionDims(geometry);
  const uint64_t expected = static_cast<uint64_t>(dims.count()) * sizeof(float);
  if (input.size_bytes() != expected) {
    return Invalid("input.size_bytes",
                   absl::StrCat(input.size_bytes(), " does not match the geometry: ", dims.d0,
                                " views x ", dims.d1, dims.d1 == 1 ? " row x " : " rows x ",
                                dims.d2, " detectors x 4 bytes = ", expected));
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
    case pb::Algorithm::kFbp:
    case pb::Algorithm::KIND_NOT_SET:
      return {};
  }
  return {};
}

absl::StatusOr<core::AlgorithmOptions> ValidateAlgorithm(const pb::Algorithm& algorithm) {
  switch (algorithm.kind_case()) {
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
  return Invalid("algorithm", "none set; expected one of fbp");
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
    if (format != pb::OUTPUT_FORMAT_RAW_FLOAT32) {
      return Invalid(path, absl::StrCat(EnumName(format,
                                                 [](int f) { return pb::OutputFormat_Name(f); }),
                                        " is not an output format; expected one of "
                                        "OUTPUT_FORMAT_RAW_FLOAT32"));
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

}  // namespace

absl::StatusOr<ValidatedJob> ValidateJobSpec(const tomoserve::v1::JobSpec& spec,
                                             const ServerLimits& limits) {
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
  TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry volume,
                        ValidateVolume(spec.volume(), IsTwoDimensional(geometry), limits));
  if (const auto* vectors = std::get_if<core::VectorGeometry>(&geometry)) {
    absl::Status fits = vectors->CheckAgainstVolume(volume);
    if (!fits.ok()) return WithPath("geometry", fits);
  }
  TOMO_RETURN_IF_ERROR(ValidateInput(spec.input(), geometry, limits));
  TOMO_ASSIGN_OR_RETURN(core::AlgorithmOptions algorithm, ValidateAlgorithm(spec.algorithm()));
  const Iterations iterations = AlgorithmIterations(spec.algorithm());
  if (iterations.count > 0) {
    TOMO_RETURN_IF_ERROR(CheckIterations(iterations.field, iterations.count, limits));
  }
  if (spec.geometry().has_helical() && std::holds_alternative<core::FbpOptions>(algorithm)) {
    return Invalid("algorithm.fbp",
                   "FBP/FDK needs a circular orbit or parallel rays; geometry.helical needs an "
                   "iterative method");
  }
  TOMO_ASSIGN_OR_RETURN(std::vector<pb::OutputFormat> outputs, ValidateOutputs(spec));
  return ValidatedJob{
      core::ReconstructionRequest{std::move(geometry), std::move(volume), std::move(algorithm)},
      spec.input().size_bytes(), std::move(outputs),
      // Any value is valid (0: the device's free memory); too small for the job is
      // RESOURCE_EXHAUSTED when it runs, from the slab plan.
      spec.memory_budget_bytes()};
}

absl::Status CheckIterations(absl::string_view field, uint64_t iterations,
                             const ServerLimits& limits) {
  if (iterations <= limits.max_iterations) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(field, ": ", iterations,
                                                   " iterations exceed the server's limit of ",
                                                   limits.max_iterations, " (--max_iterations)"));
}

}  // namespace tomo::server
