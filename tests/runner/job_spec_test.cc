#include "runner/job_spec.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/geometry/vector_geometry.h"
#include "gmock/gmock.h"
#include "core/geometry/parallel_2d_form.h"
#include "gtest/gtest.h"

namespace tomo::server {
namespace {

// The 2D parallel form of a request's geometry (a one-row vector geometry).
core::ParallelGeometry2D Parallel2DOf(const core::ReconstructionRequest& request) {
  return core::ExactParallel2DForm(std::get<core::VectorGeometry>(request.geometry),
                                   request.volume)
      .value();
}

namespace pb = ::tomoserve::v1;
using ::testing::AllOf;
using ::testing::HasSubstr;

pb::JobSpec ValidSpec() {
  pb::JobSpec spec;
  spec.set_name("phantom");
  spec.set_priority(5);
  auto* g = spec.mutable_geometry()->mutable_parallel_2d();
  g->set_num_detectors(768);
  g->set_detector_spacing_mm(0.5);
  g->set_detector_offset_mm(0.25);
  g->mutable_angles()->mutable_uniform()->set_count(720);
  g->mutable_angles()->mutable_uniform()->set_span_deg(180);
  auto* v = spec.mutable_volume();
  v->mutable_size()->set_x(512);
  v->mutable_size()->set_y(256);
  v->mutable_size()->set_z(1);
  v->mutable_voxel_size_mm()->set_x(0.5);
  v->mutable_voxel_size_mm()->set_y(0.5);
  v->mutable_voxel_size_mm()->set_z(0.5);
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(720ull * 768 * 4);
  spec.mutable_algorithm()->mutable_fbp()->set_window(pb::FILTER_WINDOW_HANN);
  spec.mutable_algorithm()->mutable_fbp()->set_cutoff(0.8);
  return spec;
}

absl::Status Validate(const pb::JobSpec& spec, const ServerLimits& limits = {}) {
  return ValidateJobSpec(spec, limits).status();
}

TEST(JobSpecTest, ValidSpecPasses) {
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(ValidSpec(), {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->input_bytes, 720ull * 768 * 4);
  EXPECT_EQ(Parallel2DOf(job->request).num_views(), 720);
  EXPECT_EQ(Parallel2DOf(job->request).num_detectors(), 768);
  EXPECT_DOUBLE_EQ(Parallel2DOf(job->request).detector_offset_mm(), 0.25);
  EXPECT_NEAR(Parallel2DOf(job->request).angles_rad()[1], M_PI / 720, 1e-12);
  EXPECT_EQ(job->request.volume.size().x, 512);
  EXPECT_EQ(job->request.volume.size().y, 256);
  EXPECT_EQ(job->request.volume.size().z, 1);
  ASSERT_TRUE(std::holds_alternative<core::FbpOptions>(job->request.algorithm));
  const auto& fbp = std::get<core::FbpOptions>(job->request.algorithm);
  EXPECT_EQ(fbp.filter.window, core::FilterWindow::kHann);
  EXPECT_DOUBLE_EQ(fbp.filter.cutoff, 0.8);
  ASSERT_EQ(job->outputs.size(), 1u);  // empty -> [RAW_FLOAT32]
  EXPECT_EQ(job->outputs[0], pb::OUTPUT_FORMAT_RAW_FLOAT32);
}

TEST(JobSpecTest, DefaultsApply) {
  pb::JobSpec spec = ValidSpec();
  spec.mutable_algorithm()->mutable_fbp()->clear_cutoff();
  spec.mutable_algorithm()->mutable_fbp()->set_window(pb::FILTER_WINDOW_UNSPECIFIED);
  spec.mutable_volume()->mutable_size()->set_z(0);            // 0 means 1
  spec.mutable_volume()->mutable_voxel_size_mm()->set_z(0);   // unused in 2D
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  const auto& fbp = std::get<core::FbpOptions>(job->request.algorithm);
  EXPECT_EQ(fbp.filter.window, core::FilterWindow::kRamLak);
  EXPECT_DOUBLE_EQ(fbp.filter.cutoff, 1.0);
  EXPECT_EQ(job->request.volume.size().z, 1);
}

TEST(JobSpecTest, MemoryBudgetIsCarried) {
  pb::JobSpec spec = ValidSpec();
  EXPECT_EQ(ValidateJobSpec(spec, {})->memory_budget_bytes, 0u);  // the device's free memory
  spec.set_memory_budget_bytes(123456789012ull);
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->memory_budget_bytes, 123456789012ull);
}

TEST(JobSpecTest, AngleListIsAccepted) {
  pb::JobSpec spec = ValidSpec();
  auto* list = spec.mutable_geometry()->mutable_parallel_2d()->mutable_angles()->mutable_list();
  for (int i = 0; i < 3; ++i) list->add_degrees(i * 60.0);
  spec.mutable_input()->set_size_bytes(3ull * 768 * 4);
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(Parallel2DOf(job->request).num_views(), 3);
  EXPECT_NEAR(Parallel2DOf(job->request).angles_rad()[2], 2 * M_PI / 3, 1e-12);
}

TEST(JobSpecTest, ZeroViews) {
  pb::JobSpec spec = ValidSpec();
  spec.mutable_geometry()->mutable_parallel_2d()->mutable_angles()->mutable_uniform()->set_count(0);
  absl::Status status = Validate(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("geometry.parallel_2d.angles.uniform.count: 0 is out of range "
                        "[1, 100000]"));
}

TEST(JobSpecTest, TooManyViewsNamesTheFlag) {
  pb::JobSpec spec = ValidSpec();
  ServerLimits limits;
  limits.max_views = 100;
  absl::Status status = Validate(spec, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("uniform.count: 720 is out of range [1, 100]"),
                                      HasSubstr("--max_views")));
}

TEST(JobSpecTest, ZeroDetectors) {
  pb::JobSpec spec = ValidSpec();
  spec.mutable_geometry()->mutable_parallel_2d()->set_num_detectors(0);
  absl::Status status = Validate(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "geometry.parallel_2d.num_detectors: 0 is out of range [1, 65536]");
}

TEST(JobSpecTest, NegativeDetectorSpacing) {
  pb::JobSpec spec = ValidSpec();
  spec.mutable_geometry()->mutable_parallel_2d()->set_detector_spacing_mm(-0.5);
  absl::Status status = Validate(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("geometry.parallel_2d.detector_spacing_mm: -0.5 is out of range (0, "));
}

TEST(JobSpecTest, NegativeVoxelSize) {
  pb::JobSpec spec = ValidSpec();
  spec.mutable_volume()->mutable_voxel_size_mm()->set_y(-1);
  absl::Status status = Validate(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("volume.voxel_size_mm.y: -1 is out of range (0, "));
}

TEST(JobSpecTest, VolumeSizeChecks) {
  pb::JobSpec spec = ValidSpec();
  spec.mutable_volume()->mutable_size()->set_x(0);
  EXPECT_EQ(Validate(spec).message(), "volume.size.x: 0 is out of range [1, 65536]");
  spec = ValidSpec();
  spec.mutable_volume()->mutable_size()->set_z(4);
  EXPECT_THAT(Validate(spec).message(),
              HasSubstr("volume.size.z: 4 is out of range [0, 1] for a 2D geometry"));
}

TEST(JobSpecTest, DataSizeMismatchShowsTheProduct) {
  pb::JobSpec spec = ValidSpec();
  spec.mutable_input()->set_size_bytes(1000);
  absl::Status status = Validate(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "input.size_bytes: 1000 does not match the geometry: 720 views x 1 row x 768 "
            "detectors x 4 bytes = 2211840");
}

TEST(JobSpecTest, EncodingMustBeFloat32) {
  pb::JobSpec spec = ValidSpec();
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_UNSPECIFIED);
  absl::Status status = Validate(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("input.encoding: DATA_ENCODING_UNSPECIFIED"),
                    HasSubstr("DATA_ENCODING_FLOAT32_LE")));
}

TEST(JobSpecTest, UnsetGeometry) {
  pb::JobSpec spec = ValidSpec();
  spec.clear_geometry();
  EXPECT_EQ(Validate(spec).message(),
            "geometry: none set; expected one of parallel_2d, fan_2d, parallel_3d, cone, "
            "helical, vectors, from_input_files, radon_3d");
}

TEST(JobSpecTest, UnsetAngles) {
  pb::JobSpec spec = ValidSpec();
  spec.mutable_geometry()->mutable_parallel_2d()->clear_angles();
  EXPECT_EQ(Validate(spec).message(),
            "geometry.parallel_2d.angles: none set; expected one of uniform, list");
}

TEST(JobSpecTest, UnsetAlgorithm) {
  pb::JobSpec spec = ValidSpec();
  spec.clear_algorithm();
  absl::Status status = Validate(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "algorithm: none set; expected one of fbp, sirt, sart, os_sart, cgls, art, icd");
}

TEST(JobSpecTest, UnknownAlgorithmFromANewerClient) {
  // Algorithm field 99 (unknown to this server) arrives as an unknown field: no kind set.
  pb::JobSpec spec = ValidSpec();
  spec.clear_algorithm();
  std::string wire = spec.SerializeAsString();
  // field 7 (algorithm), length-delimited, containing field 99 as an empty message.
  wire += std::string("\x3a\x03\x9a\x06\x00", 5);
  pb::JobSpec parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  ASSERT_TRUE(parsed.has_algorithm());
  EXPECT_EQ(Validate(parsed).message(), "algorithm: none set; expected one of fbp, sirt, sart, os_sart, cgls, art, icd");
}

TEST(JobSpecTest, NanAndInfinityAreRefusedNamingTheField) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  pb::JobSpec spec = ValidSpec();
  spec.mutable_geometry()->mutable_parallel_2d()->set_detector_offset_mm(nan);
  EXPECT_EQ(Validate(spec).message(),
            "geometry.parallel_2d.detector_offset_mm: nan is not a finite number");

  spec = ValidSpec();
  spec.mutable_geometry()->mutable_parallel_2d()->set_detector_spacing_mm(nan);
  EXPECT_THAT(Validate(spec).message(), HasSubstr("detector_spacing_mm: nan"));

  spec = ValidSpec();
  spec.mutable_volume()->mutable_center_mm()->set_y(-inf);
  EXPECT_EQ(Validate(spec).message(), "volume.center_mm.y: -inf is not a finite number");

  spec = ValidSpec();
  spec.mutable_geometry()->mutable_parallel_2d()->mutable_angles()->mutable_uniform()
      ->set_start_deg(inf);
  EXPECT_THAT(Validate(spec).message(), HasSubstr("angles.uniform.start_deg: inf"));

  spec = ValidSpec();
  auto* list = spec.mutable_geometry()->mutable_parallel_2d()->mutable_angles()->mutable_list();
  list->add_degrees(0);
  list->add_degrees(nan);
  spec.mutable_input()->set_size_bytes(2ull * 768 * 4);
  EXPECT_EQ(Validate(spec).message(),
            "geometry.parallel_2d.angles.list.degrees[1]: nan is not a finite number");

  spec = ValidSpec();
  spec.mutable_algorithm()->mutable_fbp()->set_cutoff(nan);
  EXPECT_THAT(Validate(spec).message(), HasSubstr("algorithm.fbp.cutoff: nan"));
}

TEST(JobSpecTest, AngularSpan) {
  pb::JobSpec spec = ValidSpec();
  auto* uniform =
      spec.mutable_geometry()->mutable_parallel_2d()->mutable_angles()->mutable_uniform();
  uniform->set_span_deg(0);
  EXPECT_EQ(Validate(spec).message(),
            "geometry.parallel_2d.angles.uniform.span_deg: 0 is out of range (0, 720]");
  uniform->set_span_deg(721);
  EXPECT_THAT(Validate(spec).message(), HasSubstr("span_deg: 721 is out of range (0, 720]"));
  uniform->set_span_deg(360);
  EXPECT_TRUE(Validate(spec).ok());
}

TEST(JobSpecTest, CutoffZero) {
  pb::JobSpec spec = ValidSpec();
  spec.mutable_algorithm()->mutable_fbp()->set_cutoff(0);
  absl::Status status = Validate(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "algorithm.fbp.cutoff: 0 is out of range (0, 1]");
  spec.mutable_algorithm()->mutable_fbp()->set_cutoff(1.5);
  EXPECT_EQ(Validate(spec).message(), "algorithm.fbp.cutoff: 1.5 is out of range (0, 1]");
}

TEST(JobSpecTest, WindowOutOfRange) {
  pb::JobSpec spec = ValidSpec();
  spec.mutable_algorithm()->mutable_fbp()->set_window(static_cast<pb::FilterWindow>(9));
  EXPECT_THAT(Validate(spec).message(),
              HasSubstr("algorithm.fbp.window: 9 is out of range [0, 5]"));
}

TEST(JobSpecTest, Priority) {
  pb::JobSpec spec = ValidSpec();
  spec.set_priority(1000);
  absl::Status status = Validate(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "priority: 1000 is out of range [-100, 100]");
  spec.set_priority(-100);
  EXPECT_TRUE(Validate(spec).ok());
}

TEST(JobSpecTest, Outputs) {
  pb::JobSpec spec = ValidSpec();
  spec.add_outputs(pb::OUTPUT_FORMAT_UNSPECIFIED);
  EXPECT_THAT(Validate(spec).message(),
              HasSubstr("outputs[0]: OUTPUT_FORMAT_UNSPECIFIED is not an output format"));
  spec.clear_outputs();
  spec.add_outputs(pb::OUTPUT_FORMAT_RAW_FLOAT32);
  spec.add_outputs(pb::OUTPUT_FORMAT_RAW_FLOAT32);
  EXPECT_THAT(Validate(spec).message(), HasSubstr("outputs[1]: OUTPUT_FORMAT_RAW_FLOAT32 is "
                                                  "listed twice"));
  spec.clear_outputs();
  spec.add_outputs(static_cast<pb::OutputFormat>(42));
  EXPECT_THAT(Validate(spec).message(), HasSubstr("outputs[0]: 42 is not an output format"));
}

TEST(JobSpecTest, EveryOutputFormatAndItsOptions) {
  pb::JobSpec spec = ValidSpec();
  for (pb::OutputFormat format :
       {pb::OUTPUT_FORMAT_RAW_FLOAT32, pb::OUTPUT_FORMAT_NIFTI, pb::OUTPUT_FORMAT_NIFTI_GZ,
        pb::OUTPUT_FORMAT_METAIMAGE, pb::OUTPUT_FORMAT_DICOM_CT_SERIES,
        pb::OUTPUT_FORMAT_PNG_PREVIEW}) {
    spec.add_outputs(format);
  }
  // A DICOM series from raw input needs the water attenuation in the spec.
  EXPECT_THAT(Validate(spec).message(),
              HasSubstr("output_options.water_attenuation_per_mm: is unset; "
                        "OUTPUT_FORMAT_DICOM_CT_SERIES needs it"));
  spec.mutable_output_options()->set_water_attenuation_per_mm(0.0192);
  spec.mutable_output_options()->mutable_window()->set_lower(-0.01);
  spec.mutable_output_options()->mutable_window()->set_upper(0.04);
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->outputs.size(), 6u);
  EXPECT_EQ(job->output_settings.water_attenuation_per_mm, 0.0192);
  ASSERT_TRUE(job->output_settings.window.has_value());
  EXPECT_EQ(job->output_settings.window->lower, -0.01);
  EXPECT_EQ(job->output_settings.window->upper, 0.04);

  for (double bad : {0.0, -0.02, std::nan(""), std::numeric_limits<double>::infinity()}) {
    spec.mutable_output_options()->set_water_attenuation_per_mm(bad);
    EXPECT_THAT(Validate(spec).message(),
                HasSubstr("output_options.water_attenuation_per_mm: "))
        << bad;
  }
  spec.mutable_output_options()->set_water_attenuation_per_mm(0.0192);
  spec.mutable_output_options()->mutable_window()->set_upper(-0.01);
  EXPECT_THAT(Validate(spec).message(),
              HasSubstr("output_options.window: [-0.01, -0.01] is not a window"));
  // Without a window and without a DICOM series, no option is needed.
  spec.mutable_output_options()->clear_window();
  spec.mutable_output_options()->clear_water_attenuation_per_mm();
  spec.clear_outputs();
  spec.add_outputs(pb::OUTPUT_FORMAT_NIFTI_GZ);
  job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->output_settings.water_attenuation_per_mm.has_value());
  EXPECT_FALSE(job->output_settings.window.has_value());
}

TEST(JobSpecTest, TooManyVoxelsIsResourceExhausted) {
  ServerLimits limits;
  limits.max_voxels = 1000;
  absl::Status status = Validate(ValidSpec(), limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("512 x 256 x 1 = 131072 voxels"),
                                      HasSubstr("1000"), HasSubstr("--max_voxels")));
}

TEST(JobSpecTest, TooLargeUploadIsResourceExhausted) {
  ServerLimits limits;
  limits.max_upload_bytes = 1 << 20;
  absl::Status status = Validate(ValidSpec(), limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("input.size_bytes: 2211840"),
                                      HasSubstr("1048576"), HasSubstr("--max_upload_bytes")));
}

TEST(JobSpecTest, LongNameIsRefused) {
  pb::JobSpec spec = ValidSpec();
  spec.set_name(std::string(2000, 'a'));
  EXPECT_THAT(Validate(spec).message(), HasSubstr("name: length 2000 bytes is out of range"));
}

// A 64^3 cone-beam job: 90 views of 48 x 64 pixels of 1.5 mm, source-origin 200 mm.
pb::JobSpec ValidConeSpec() {
  pb::JobSpec spec = ValidSpec();
  pb::ConeBeam* cone = spec.mutable_geometry()->mutable_cone();
  pb::Detector* detector = cone->mutable_detector();
  detector->set_rows(48);
  detector->set_columns(64);
  detector->set_row_spacing_mm(1.5);
  detector->set_column_spacing_mm(1.5);
  cone->set_source_origin_mm(200);
  cone->set_origin_detector_mm(100);
  cone->mutable_angles()->mutable_uniform()->set_count(90);
  cone->mutable_angles()->mutable_uniform()->set_span_deg(360);
  spec.mutable_volume()->mutable_size()->set_x(64);
  spec.mutable_volume()->mutable_size()->set_y(64);
  spec.mutable_volume()->mutable_size()->set_z(64);
  spec.mutable_input()->set_size_bytes(90ull * 48 * 64 * 4);
  return spec;
}

TEST(JobSpecTest, ConeSpecBecomesAVectorGeometry) {
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(ValidConeSpec(), {});
  ASSERT_TRUE(job.ok()) << job.status();
  const auto* geometry = std::get_if<core::VectorGeometry>(&job->request.geometry);
  ASSERT_NE(geometry, nullptr);
  EXPECT_EQ(geometry->beam(), core::BeamKind::kCone);
  EXPECT_EQ(geometry->num_views(), 90);
  EXPECT_EQ(geometry->rows(), 48);
  EXPECT_EQ(geometry->columns(), 64);
  // At 0 degrees the source sits on +y at source_origin_mm (docs/geometry.md).
  EXPECT_NEAR(geometry->views()[0].source.y, 200.0, 1e-9);
  EXPECT_EQ(job->request.volume.size().z, 64);
  EXPECT_EQ(job->input_bytes, 90ull * 48 * 64 * 4);
}

TEST(JobSpecTest, OtherGeometriesAreAccepted) {
  pb::JobSpec fan = ValidSpec();
  pb::FanBeam2D* f = fan.mutable_geometry()->mutable_fan_2d();
  f->set_num_detectors(768);
  f->set_detector_spacing_mm(0.75);
  f->set_source_origin_mm(500);
  f->set_origin_detector_mm(250);
  f->set_shape(pb::DETECTOR_SHAPE_CYLINDRICAL);
  f->mutable_angles()->mutable_uniform()->set_count(720);
  f->mutable_angles()->mutable_uniform()->set_span_deg(360);
  EXPECT_TRUE(Validate(fan).ok()) << Validate(fan);

  pb::JobSpec parallel = ValidConeSpec();
  pb::ParallelBeam3D* p = parallel.mutable_geometry()->mutable_parallel_3d();
  *p->mutable_detector() = ValidConeSpec().geometry().cone().detector();
  *p->mutable_angles() = ValidConeSpec().geometry().cone().angles();
  EXPECT_TRUE(Validate(parallel).ok()) << Validate(parallel);

  // The same cone as explicit vectors, view by view.
  pb::JobSpec vectors = ValidConeSpec();
  absl::StatusOr<ValidatedJob> cone = ValidateJobSpec(ValidConeSpec(), {});
  ASSERT_TRUE(cone.ok());
  const auto& cone_geometry = std::get<core::VectorGeometry>(cone->request.geometry);
  pb::ViewVectorList* list = vectors.mutable_geometry()->mutable_vectors();
  list->set_beam(pb::BEAM_KIND_CONE);
  list->set_rows(48);
  list->set_columns(64);
  auto set = [](pb::Vec3* to, const core::Vec3& from) {
    to->set_x(from.x);
    to->set_y(from.y);
    to->set_z(from.z);
  };
  for (const core::ViewVectors& view : cone_geometry.views()) {
    pb::ViewVectors* added = list->add_views();
    set(added->mutable_source(), view.source);
    set(added->mutable_detector_center(), view.detector_center);
    set(added->mutable_u(), view.u);
    set(added->mutable_v(), view.v);
  }
  EXPECT_TRUE(Validate(vectors).ok()) << Validate(vectors);
}

TEST(JobSpecTest, BadConeFieldsAreNamed) {
  pb::JobSpec spec = ValidConeSpec();
  spec.mutable_geometry()->mutable_cone()->set_source_origin_mm(-5);
  EXPECT_EQ(Validate(spec).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Validate(spec).message(), HasSubstr("geometry.cone.source_origin_mm: -5"));

  spec = ValidConeSpec();
  spec.mutable_geometry()->mutable_cone()->mutable_detector()->set_columns(0);
  EXPECT_THAT(Validate(spec).message(),
              HasSubstr("geometry.cone.detector.columns: 0 is out of range [1, 65536]"));

  spec = ValidConeSpec();
  spec.mutable_geometry()->mutable_cone()->mutable_detector()->set_row_spacing_mm(
      std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(Validate(spec).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Validate(spec).message(), HasSubstr("geometry.cone.detector.row_spacing_mm"));

  // A source 10 mm from the axis is inside the 32 mm wide volume (64 voxels of 0.5 mm).
  spec = ValidConeSpec();
  spec.mutable_geometry()->mutable_cone()->set_source_origin_mm(10);
  EXPECT_EQ(Validate(spec).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(Validate(spec).message()),
              AllOf(HasSubstr("geometry.views[0].source"), HasSubstr("inside the volume")));

  // The projections of a cone are views x rows x columns.
  spec = ValidConeSpec();
  spec.mutable_input()->set_size_bytes(90ull * 64 * 4);
  EXPECT_THAT(Validate(spec).message(),
              HasSubstr("90 views x 48 rows x 64 detectors x 4 bytes = 1105920"));
}

TEST(JobSpecTest, DegenerateVectorsAreNamed) {
  pb::JobSpec spec = ValidConeSpec();
  pb::ViewVectorList* list = spec.mutable_geometry()->mutable_vectors();
  list->set_beam(pb::BEAM_KIND_CONE);
  list->set_rows(48);
  list->set_columns(64);
  pb::ViewVectors* view = list->add_views();
  view->mutable_source()->set_y(200);
  view->mutable_detector_center()->set_y(-100);
  view->mutable_u()->set_x(1.5);
  view->mutable_v()->set_x(1.5);  // parallel to u
  spec.mutable_input()->set_size_bytes(48ull * 64 * 4);
  EXPECT_EQ(Validate(spec).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Validate(spec).message(), HasSubstr("geometry.vectors.views[0]"));

  view->mutable_v()->set_x(0);
  view->mutable_v()->set_z(1.5);
  view->mutable_u()->set_x(std::numeric_limits<double>::infinity());
  EXPECT_THAT(Validate(spec).message(), HasSubstr("geometry.vectors.views[0].u"));

  list->clear_views();
  spec.mutable_input()->set_size_bytes(0);
  EXPECT_THAT(Validate(spec).message(), HasSubstr("geometry.vectors.views: 0 views"));
}

TEST(JobSpecTest, ThreeDimensionalVolumesOnlyForThreeDimensionalGeometries) {
  pb::JobSpec spec = ValidSpec();
  spec.mutable_volume()->mutable_size()->set_z(8);
  EXPECT_THAT(Validate(spec).message(),
              HasSubstr("volume.size.z: 8 is out of range [0, 1] for a 2D geometry"));
  spec = ValidConeSpec();
  spec.mutable_volume()->mutable_size()->set_z(4096);
  ServerLimits limits;
  limits.max_voxels = 1u << 20;
  absl::Status status = Validate(spec, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("64 x 64 x 4096 = 16777216 voxels"));
}

TEST(JobSpecTest, HelicalWithFbpIsRefused) {
  pb::JobSpec spec = ValidConeSpec();
  pb::HelicalConeBeam* helical = spec.mutable_geometry()->mutable_helical();
  *helical->mutable_cone() = ValidConeSpec().geometry().cone();
  helical->set_pitch_mm_per_turn(20);
  absl::Status status = Validate(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("algorithm.fbp: FBP/FDK needs a circular orbit"));
}

TEST(JobSpecTest, IterationLimitNamesFieldValueAndFlag) {
  ServerLimits limits;
  limits.max_iterations = 200;
  EXPECT_TRUE(CheckIterations("algorithm.sirt.iterations", 200, limits).ok());
  absl::Status status = CheckIterations("algorithm.sirt.iterations", 201, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "algorithm.sirt.iterations: 201 iterations exceed the server's limit of 200 "
            "(--max_iterations)");
  // FBP is direct: it has no iterations, so even the smallest limit lets it through.
  limits.max_iterations = 1;
  EXPECT_TRUE(ValidateJobSpec(ValidSpec(), limits).ok());
}


// ---------------------------------------------------------------- input kinds (issue 5)

pb::InputFile* AddFile(pb::JobSpec& spec, const std::string& name, uint64_t size,
                       pb::InputRole role = pb::INPUT_ROLE_PROJECTIONS) {
  pb::InputFile* file = spec.mutable_input()->add_files();
  file->set_name(name);
  file->set_size_bytes(size);
  file->set_role(role);
  spec.mutable_input()->set_size_bytes(spec.input().size_bytes() + size);
  return file;
}

TEST(JobSpecInputTest, RawEncodingsWithFilesDarkAndFlat) {
  pb::JobSpec spec = ValidSpec();
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_UINT16_BE);
  spec.mutable_input()->set_order(pb::AXIS_ORDER_ROW_VIEW_COLUMN);
  spec.mutable_input()->set_size_bytes(0);
  spec.mutable_input()->mutable_preprocessing()->set_negative_log(true);
  AddFile(spec, "a.raw", 700ull * 768 * 2);
  AddFile(spec, "b.raw", 20ull * 768 * 2);
  AddFile(spec, "dark.raw", 3ull * 768 * 2, pb::INPUT_ROLE_DARK_FIELD);
  AddFile(spec, "flat.raw", 2ull * 768 * 2, pb::INPUT_ROLE_FLAT_FIELD);
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->input_bytes, 725ull * 768 * 2);
  EXPECT_EQ(job->input.files_size(), 4);
  EXPECT_FALSE(job->geometry_from_input_files);

  pb::JobSpec odd = spec;
  odd.mutable_input()->mutable_files(2)->set_size_bytes(3ull * 768 * 2 + 1);
  odd.mutable_input()->set_size_bytes(spec.input().size_bytes() + 1);
  EXPECT_THAT(Validate(odd).message(),
              HasSubstr("input.files[2].size_bytes: 4609 (dark.raw) is not a whole number of "
                        "frames"));
  pb::JobSpec short_views = spec;
  short_views.mutable_input()->mutable_files(1)->set_size_bytes(19ull * 768 * 2);
  short_views.mutable_input()->set_size_bytes(spec.input().size_bytes() - 768 * 2);
  EXPECT_THAT(Validate(short_views).message(),
              HasSubstr("input.files: projection files total 1104384 bytes; the geometry needs "
                        "720 views"));
  pb::JobSpec wrong_total = spec;
  wrong_total.mutable_input()->set_size_bytes(5);
  EXPECT_THAT(Validate(wrong_total).message(),
              HasSubstr("input.size_bytes: 5 does not match the sum of input.files[].size_bytes"));
  pb::JobSpec dark_only = spec;
  dark_only.mutable_input()->mutable_files()->RemoveLast();
  dark_only.mutable_input()->set_size_bytes(spec.input().size_bytes() - 2ull * 768 * 2);
  EXPECT_THAT(Validate(dark_only).message(), HasSubstr("a dark field needs a flat field too"));
  pb::JobSpec bad_floor = spec;
  bad_floor.mutable_input()->mutable_preprocessing()->set_min_transmission(0);
  EXPECT_THAT(Validate(bad_floor).message(),
              HasSubstr("input.preprocessing.min_transmission: 0 is out of range (0, 1]"));
}

TEST(JobSpecInputTest, DicomCtPdTakesItsGeometryFromTheFiles) {
  pb::JobSpec spec = ValidSpec();
  spec.mutable_geometry()->mutable_from_input_files();
  spec.mutable_volume()->mutable_size()->set_z(16);
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_DICOM_CT_PD);
  spec.mutable_input()->set_size_bytes(0);
  for (int i = 0; i < 5; ++i) AddFile(spec, "proj_" + std::to_string(i) + ".dcm", 1000 + i);
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->geometry_from_input_files);
  EXPECT_EQ(core::ProjectionDims(job->request.geometry).d0, 5);  // one placeholder view per file
  EXPECT_EQ(job->request.volume.size().z, 16);

  pb::JobSpec raw_geometry = spec;
  raw_geometry.mutable_input()->set_encoding(pb::DATA_ENCODING_FLOAT32_LE);
  EXPECT_THAT(Validate(raw_geometry).message(),
              HasSubstr("geometry.from_input_files: needs input.encoding DATA_ENCODING_DICOM_CT_PD"));
  pb::JobSpec given_geometry = ValidSpec();
  given_geometry.mutable_input()->set_encoding(pb::DATA_ENCODING_DICOM_CT_PD);
  EXPECT_THAT(Validate(given_geometry).message(), HasSubstr("set geometry.from_input_files"));
  pb::JobSpec no_files = spec;
  no_files.mutable_input()->clear_files();
  EXPECT_THAT(Validate(no_files).message(), HasSubstr("input.files: 0 DICOM-CT-PD projection"));
  pb::JobSpec with_flat = spec;
  AddFile(with_flat, "flat.dcm", 10, pb::INPUT_ROLE_FLAT_FIELD);
  EXPECT_THAT(Validate(with_flat).message(),
              HasSubstr("input.files[5].role: dark and flat fields do not apply"));
  pb::JobSpec unnamed = spec;
  unnamed.mutable_input()->mutable_files(3)->clear_name();
  EXPECT_THAT(Validate(unnamed).message(), HasSubstr("input.files[3].name: length 0 bytes"));
  pb::JobSpec tiff_without_files = ValidSpec();
  tiff_without_files.mutable_input()->set_encoding(pb::DATA_ENCODING_TIFF);
  EXPECT_THAT(Validate(tiff_without_files).message(),
              HasSubstr("input.files: empty; DATA_ENCODING_TIFF needs the list"));
}

// Sizes from the request whose sum passes 2^64 must be refused, not wrap to a small total
// that matches input.size_bytes (which crashed tomod in the header check and the worker).
TEST(JobSpecInputTest, FileSizesSummingPast64BitsAreRefused) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  pb::JobSpec dicom = ValidSpec();
  dicom.mutable_geometry()->mutable_from_input_files();
  dicom.mutable_input()->set_encoding(pb::DATA_ENCODING_DICOM_CT_PD);
  dicom.mutable_input()->set_size_bytes(0);
  AddFile(dicom, "a.dcm", 1000);
  AddFile(dicom, "b.dcm", kMax - 499);  // the sum wraps to 500
  EXPECT_EQ(dicom.input().size_bytes(), 500u);
  absl::Status status = Validate(dicom);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("input.files[1].size_bytes: 18446744073709551116 (b.dcm) brings the sum "
                        "of input.files[].size_bytes past 2^64 - 1"));

  // Raw float32, 9 views of one detector (36 bytes), and a flat field of 2^64 - 36 bytes.
  pb::JobSpec raw = ValidSpec();
  raw.mutable_geometry()->mutable_parallel_2d()->set_num_detectors(1);
  raw.mutable_geometry()->mutable_parallel_2d()->mutable_angles()->mutable_uniform()->set_count(9);
  raw.mutable_input()->set_size_bytes(0);
  AddFile(raw, "projections.raw", 36);
  AddFile(raw, "flat.raw", kMax - 35, pb::INPUT_ROLE_FLAT_FIELD);
  EXPECT_EQ(raw.input().size_bytes(), 0u);
  status = Validate(raw);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input.files[1].size_bytes: 18446744073709551580 "
                                          "(flat.raw) brings the sum"));
}

}  // namespace
}  // namespace tomo::server
