#include "runner/geometry_ranges.h"

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
using ::testing::HasSubstr;

pb::Geometry Cone() {
  pb::Geometry geometry;
  pb::ConeBeam* cone = geometry.mutable_cone();
  cone->mutable_detector()->set_rows(48);
  cone->mutable_detector()->set_columns(96);
  cone->mutable_detector()->set_row_spacing_mm(0.139);
  cone->mutable_detector()->set_column_spacing_mm(0.127);
  cone->mutable_detector()->set_offset_u_mm(-3.3);
  cone->mutable_detector()->set_offset_v_mm(0.7);
  cone->set_source_origin_mm(57.5);
  cone->set_origin_detector_mm(131);
  cone->mutable_angles()->mutable_uniform()->set_count(90);
  cone->mutable_angles()->mutable_uniform()->set_span_deg(360);
  return geometry;
}

pb::Volume Volume() {
  pb::Volume volume;
  volume.mutable_size()->set_x(33);
  volume.mutable_size()->set_y(40);
  volume.mutable_size()->set_z(17);
  volume.mutable_voxel_size_mm()->set_x(0.031);
  volume.mutable_voxel_size_mm()->set_y(0.029);
  volume.mutable_center_mm()->set_z(-1.5);
  return volume;
}

TEST(GeometryRangesTest, ScannerValuesPass) {
  EXPECT_TRUE(CheckGeometryRanges(Cone()).ok());
  EXPECT_TRUE(CheckVolumeRanges(Volume()).ok());
  pb::Geometry nano = Cone();
  nano.mutable_cone()->mutable_detector()->set_column_spacing_mm(2e-5);  // 20 nm
  nano.mutable_cone()->mutable_detector()->set_offset_u_mm(-0.015);  // 7.5 pixels
  EXPECT_TRUE(CheckGeometryRanges(nano).ok());
  EXPECT_TRUE(CheckGeometryRanges(pb::Geometry()).ok());  // kind unset: named elsewhere
}

TEST(GeometryRangesTest, AbsurdFiniteValuesAreNamedWithTheirRange) {
  struct Case {
    std::function<void(pb::Geometry&)> set;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](pb::Geometry& g) { g.mutable_cone()->mutable_detector()->set_column_spacing_mm(1e308); },
       "geometry.cone.detector.column_spacing_mm: 1e+308 is out of range [1e-05, 1000] mm"},
      {[](pb::Geometry& g) {
         g.mutable_cone()->mutable_detector()->set_row_spacing_mm(
             std::numeric_limits<double>::denorm_min());
       },
       "geometry.cone.detector.row_spacing_mm: 4.94066e-324 is out of range [1e-05, 1000] mm"},
      {[](pb::Geometry& g) { g.mutable_cone()->mutable_detector()->set_offset_u_mm(1e300); },
       "geometry.cone.detector.offset_u_mm: 1e+300 is out of range [-121.92, 121.92] mm (at "
       "most 10 detector extents of 96 x 0.127 mm)"},
      {[](pb::Geometry& g) { g.mutable_cone()->mutable_detector()->set_offset_v_mm(-67); },
       "geometry.cone.detector.offset_v_mm: -67 is out of range [-66.72, 66.72] mm"},
      {[](pb::Geometry& g) { g.mutable_cone()->set_source_origin_mm(2e5); },
       "geometry.cone.source_origin_mm: 200000 is out of range [0.001, 100000] mm"},
      {[](pb::Geometry& g) { g.mutable_cone()->set_origin_detector_mm(-1e300); },
       "geometry.cone.origin_detector_mm: -1e+300 is out of range [-100000, 100000] mm"},
      {[](pb::Geometry& g) { g.mutable_cone()->mutable_angles()->mutable_uniform()->set_start_deg(1e300); },
       "geometry.cone.angles.uniform.start_deg: 1e+300 is out of range [-1e+07, 1e+07]"},
  };
  for (const Case& c : cases) {
    pb::Geometry geometry = Cone();
    c.set(geometry);
    const absl::Status status = CheckGeometryRanges(geometry);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(status.message(), HasSubstr(c.message));
  }
}

TEST(GeometryRangesTest, OtherKindsAreChecked) {
  pb::Geometry parallel;
  parallel.mutable_parallel_2d()->set_num_detectors(7);
  parallel.mutable_parallel_2d()->set_detector_spacing_mm(1e308);
  EXPECT_THAT(CheckGeometryRanges(parallel).message(),
              HasSubstr("geometry.parallel_2d.detector_spacing_mm: 1e+308 is out of range"));
  pb::Geometry helical;
  *helical.mutable_helical()->mutable_cone() = Cone().cone();
  helical.mutable_helical()->set_pitch_mm_per_turn(1e300);
  EXPECT_THAT(CheckGeometryRanges(helical).message(),
              HasSubstr("geometry.helical.pitch_mm_per_turn: 1e+300 is out of range"));
  pb::Geometry vectors;
  pb::ViewVectors* view = vectors.mutable_vectors()->add_views();
  view->mutable_source()->set_y(-500);
  view->mutable_u()->set_x(0.2);
  view->mutable_v()->set_z(1e-7);
  EXPECT_THAT(CheckGeometryRanges(vectors).message(),
              HasSubstr("|geometry.vectors.views[0].v|: 1e-07 is out of range [1e-05, 1000]"));
  view->mutable_v()->set_z(0.2);
  view->mutable_detector_center()->set_x(1e300);
  EXPECT_THAT(CheckGeometryRanges(vectors).message(),
              HasSubstr("geometry.vectors.views[0].detector_center.x: 1e+300 is out of range"));
}

TEST(GeometryRangesTest, VolumeValues) {
  pb::Volume volume = Volume();
  volume.mutable_voxel_size_mm()->set_z(1e300);
  EXPECT_THAT(CheckVolumeRanges(volume).message(),
              HasSubstr("volume.voxel_size_mm.z: 1e+300 is out of range [1e-05, 1000] mm"));
  volume = Volume();
  volume.mutable_center_mm()->set_y(1e300);
  EXPECT_THAT(CheckVolumeRanges(volume).message(),
              HasSubstr("volume.center_mm.y: 1e+300 is out of range [-100000, 100000] mm"));
}

TEST(GeometryRangesTest, GeometriesFromInputFilesAreChecked) {
  core::ViewVectors view{{0, -500, 0}, {0, 400, 0}, {0.7, 0, 0}, {0, 0, 1.2}};
  absl::StatusOr<core::VectorGeometry> fine = core::VectorGeometry::Create(
      core::BeamKind::kCone, core::DetectorShape::kFlat, 4, 8, {view});
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_TRUE(CheckVectorGeometryRanges(*fine).ok());
  view.source.y = -3e5;  // 300 m from the axis
  absl::StatusOr<core::VectorGeometry> far = core::VectorGeometry::Create(
      core::BeamKind::kCone, core::DetectorShape::kFlat, 4, 8, {view});
  ASSERT_TRUE(far.ok()) << far.status();
  EXPECT_THAT(CheckVectorGeometryRanges(*far).message(),
              HasSubstr("geometry (from the input files).views[0].source.y: -300000 is out of "
                        "range [-100000, 100000] mm"));
}

}  // namespace
}  // namespace tomo::server
