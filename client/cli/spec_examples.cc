#include "client/cli/spec_examples.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/phantom_cases.h"
#include "client/job_spec_sizes.h"
#include "core/base/status_macros.h"
#include "core/geometry/geometry_builders.h"
#include "core/geometry/vector_geometry.h"

namespace tomo::cli {
namespace {

namespace v1 = ::tomoserve::v1;

// Photons per unattenuated pixel that the icd example states for its weights (raw inputs
// need it; DICOM-CT-PD files carry their own statistics).
constexpr double kExampleFlatFieldPhotons = 1e5;

v1::Volume GridVolume(int64_t size_xy, int64_t size_z, double voxel_mm) {
  v1::Volume volume;
  volume.mutable_size()->set_x(static_cast<uint32_t>(size_xy));
  volume.mutable_size()->set_y(static_cast<uint32_t>(size_xy));
  volume.mutable_size()->set_z(static_cast<uint32_t>(size_z));
  volume.mutable_voxel_size_mm()->set_x(voxel_mm);
  volume.mutable_voxel_size_mm()->set_y(voxel_mm);
  volume.mutable_voxel_size_mm()->set_z(voxel_mm);
  volume.mutable_center_mm();
  return volume;
}

void SetUniform(v1::Angles* angles, int64_t views, double span_deg) {
  angles->mutable_uniform()->set_count(static_cast<uint32_t>(views));
  angles->mutable_uniform()->set_start_deg(0);
  angles->mutable_uniform()->set_span_deg(span_deg);
}

v1::Vec3 ToProto(const core::Vec3& v) {
  v1::Vec3 out;
  out.set_x(v.x);
  out.set_y(v.y);
  out.set_z(v.z);
  return out;
}

// Geometry and volume of the cases `tomo phantom` has.
absl::Status FromPhantomCase(PhantomGeometry kind, const ExampleSpecOptions& o,
                             v1::JobSpec* spec) {
  PhantomCaseOptions phantom;
  phantom.geometry = kind;
  phantom.size = o.size;
  phantom.views = o.views;
  phantom.voxel_size_mm = o.voxel_size_mm;
  phantom.with_projections = false;
  TOMO_ASSIGN_OR_RETURN(PhantomCase c, MakePhantomCase(phantom));
  *spec->mutable_geometry() = c.geometry;
  *spec->mutable_volume() = c.volume;
  return absl::OkStatus();
}

absl::Status Geometry(const ExampleSpecOptions& o, v1::JobSpec* spec) {
  const double side_mm = static_cast<double>(o.size) * o.voxel_size_mm;
  if (o.geometry == "parallel-2d") return FromPhantomCase(PhantomGeometry::kParallel2D, o, spec);
  if (o.geometry == "fan-2d") return FromPhantomCase(PhantomGeometry::kFan2D, o, spec);
  if (o.geometry == "cone") return FromPhantomCase(PhantomGeometry::kCone, o, spec);
  if (o.geometry == "radon-3d") return FromPhantomCase(PhantomGeometry::kRadon3D, o, spec);
  if (o.geometry == "parallel-3d") {
    v1::ParallelBeam3D* p = spec->mutable_geometry()->mutable_parallel_3d();
    v1::Detector* d = p->mutable_detector();
    d->set_rows(static_cast<uint32_t>(CoveringCount(side_mm / 2, o.voxel_size_mm)));
    d->set_columns(
        static_cast<uint32_t>(CoveringCount(std::sqrt(0.5) * side_mm, o.voxel_size_mm)));
    d->set_row_spacing_mm(o.voxel_size_mm);
    d->set_column_spacing_mm(o.voxel_size_mm);
    d->set_shape(v1::DETECTOR_SHAPE_FLAT);
    SetUniform(p->mutable_angles(), o.views, 180);
    *spec->mutable_volume() = GridVolume(o.size, o.size, o.voxel_size_mm);
    return absl::OkStatus();
  }
  if (o.geometry == "helical") {
    // The cone's distances; a shorter detector that advances half its height at the axis
    // per turn, from below the grid to above it.
    TOMO_RETURN_IF_ERROR(FromPhantomCase(PhantomGeometry::kCone, o, spec));
    v1::ConeBeam cone = spec->geometry().cone();
    const int64_t rows = std::max<int64_t>(8, o.size / 4);
    cone.mutable_detector()->set_rows(static_cast<uint32_t>(rows));
    const double magnification =
        (cone.source_origin_mm() + cone.origin_detector_mm()) / cone.source_origin_mm();
    const double height_at_axis_mm = rows * cone.detector().row_spacing_mm() / magnification;
    const double pitch_mm = height_at_axis_mm / 2;
    const double travel_mm = side_mm + height_at_axis_mm;
    const int64_t turns = static_cast<int64_t>(std::ceil(travel_mm / pitch_mm));
    // A list: uniform angles span at most 720 degrees (two turns).
    cone.mutable_angles()->clear_uniform();
    v1::AngleList* list = cone.mutable_angles()->mutable_list();
    for (int64_t k = 0; k < turns * o.views; ++k) {
      list->add_degrees(360.0 * static_cast<double>(k) / static_cast<double>(o.views));
    }
    v1::HelicalConeBeam* helical = spec->mutable_geometry()->mutable_helical();
    *helical->mutable_cone() = cone;
    helical->set_pitch_mm_per_turn(pitch_mm);
    helical->set_z_start_mm(-pitch_mm * static_cast<double>(turns) / 2);
    return absl::OkStatus();
  }
  if (o.geometry == "vectors") {
    // The circular cone, view by view, as core builds it.
    TOMO_RETURN_IF_ERROR(FromPhantomCase(PhantomGeometry::kCone, o, spec));
    const v1::ConeBeam cone = spec->geometry().cone();
    core::FanConeOptions options;
    options.detector = {cone.detector().rows(), cone.detector().columns(),
                        cone.detector().row_spacing_mm(), cone.detector().column_spacing_mm(),
                        0.0, 0.0};
    options.source_origin_mm = cone.source_origin_mm();
    options.origin_detector_mm = cone.origin_detector_mm();
    options.angles_rad = core::UniformAnglesRad(o.views, 0.0, 2.0 * M_PI);
    TOMO_ASSIGN_OR_RETURN(core::VectorGeometry built, core::MakeCircularCone(options));
    v1::ViewVectorList* vectors = spec->mutable_geometry()->mutable_vectors();
    vectors->set_beam(v1::BEAM_KIND_CONE);
    vectors->set_shape(v1::DETECTOR_SHAPE_FLAT);
    vectors->set_rows(cone.detector().rows());
    vectors->set_columns(cone.detector().columns());
    for (const core::ViewVectors& view : built.views()) {
      v1::ViewVectors* out = vectors->add_views();
      *out->mutable_source() = ToProto(view.source);
      *out->mutable_detector_center() = ToProto(view.detector_center);
      *out->mutable_u() = ToProto(view.u);
      *out->mutable_v() = ToProto(view.v);
    }
    return absl::OkStatus();
  }
  if (o.geometry == "dicom-ct-pd") {
    spec->mutable_geometry()->mutable_from_input_files();
    *spec->mutable_volume() = GridVolume(o.size, o.size, o.voxel_size_mm);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("--geometry ", o.geometry, ": one of ",
                                                 absl::StrJoin(ExampleGeometryNames(), ", ")));
}

absl::Status Algorithm(const ExampleSpecOptions& o, v1::JobSpec* spec) {
  v1::Algorithm* algorithm = spec->mutable_algorithm();
  auto iterations = [&o](uint32_t example) { return o.iterations > 0 ? o.iterations : example; };
  if (o.algorithm == "fbp") {
    algorithm->mutable_fbp()->set_window(v1::FILTER_WINDOW_RAM_LAK);
  } else if (o.algorithm == "sirt") {
    algorithm->mutable_sirt()->set_iterations(iterations(50));
  } else if (o.algorithm == "sart") {
    algorithm->mutable_sart()->mutable_iterative()->set_iterations(iterations(10));
    algorithm->mutable_sart()->set_order(v1::VIEW_ORDER_GOLDEN_RATIO);
  } else if (o.algorithm == "os-sart") {
    v1::OsSartOptions* os_sart = algorithm->mutable_os_sart();
    os_sart->mutable_iterative()->set_iterations(iterations(20));
    os_sart->set_blocks(static_cast<uint32_t>(std::min<int64_t>(10, o.views)));
    os_sart->set_order(v1::VIEW_ORDER_INTERLEAVED);
  } else if (o.algorithm == "cgls") {
    algorithm->mutable_cgls()->set_iterations(iterations(20));
  } else if (o.algorithm == "art") {
    algorithm->mutable_art()->set_iterations(iterations(10));
    algorithm->mutable_art()->set_matrix_format(v1::MATRIX_FORMAT_AUTOMATIC);
  } else if (o.algorithm == "icd") {
    v1::StatisticalIcdOptions* icd = algorithm->mutable_icd();
    icd->set_iterations(iterations(4));
    // FDK, the better start, needs a circular orbit.
    icd->set_start(o.geometry == "helical" ? v1::ICD_START_ZERO : v1::ICD_START_FDK);
    if (o.geometry != "dicom-ct-pd") {
      icd->mutable_weights()->set_flat_field_photons(kExampleFlatFieldPhotons);
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--algorithm ", o.algorithm, ": one of ",
                                                   absl::StrJoin(ExampleAlgorithmNames(), ", ")));
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& ExampleGeometryNames() {
  static const auto* names =
      new std::vector<std::string>{"parallel-2d", "parallel-3d", "fan-2d",   "cone",
                                   "helical",     "vectors",     "radon-3d", "dicom-ct-pd"};
  return *names;
}

const std::vector<std::string>& ExampleAlgorithmNames() {
  static const auto* names =
      new std::vector<std::string>{"fbp", "sirt", "sart", "os-sart", "cgls", "art", "icd"};
  return *names;
}

absl::StatusOr<v1::JobSpec> ExampleSpec(const ExampleSpecOptions& o) {
  v1::JobSpec spec;
  spec.set_name(absl::StrCat(o.geometry, " ", o.algorithm, " example"));
  TOMO_RETURN_IF_ERROR(Geometry(o, &spec));
  TOMO_RETURN_IF_ERROR(Algorithm(o, &spec));
  v1::ProjectionInput* input = spec.mutable_input();
  if (o.geometry == "dicom-ct-pd") {
    input->set_encoding(v1::DATA_ENCODING_DICOM_CT_PD);
  } else {
    input->set_encoding(v1::DATA_ENCODING_FLOAT32_LE);
    input->set_order(v1::AXIS_ORDER_VIEW_ROW_COLUMN);
    client::FillImpliedInputSize(&spec);
  }
  spec.add_outputs(v1::OUTPUT_FORMAT_RAW_FLOAT32);
  return spec;
}

}  // namespace tomo::cli
