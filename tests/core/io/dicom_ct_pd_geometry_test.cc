#include "core/io/dicom_ct_pd_geometry.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "core/geometry/geometry_builders.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

constexpr double kPi = 3.14159265358979323846;

double Distance(const Vec3& a, const Vec3& b) { return Norm(a - b); }

// A Siemens-like scanner: rho0 595 mm, d0 1085.6 mm, 64 x 736 elements of 1.0 x 1.2858 mm
// (at the detector); the central element off the middle, as real data have it.
DicomCtPdDetector Scanner(DetectorShape shape) {
  DicomCtPdDetector d;
  d.rows = 64;
  d.columns = 736;
  d.row_spacing_mm = 1.0;
  d.column_spacing_mm = 1.2858;
  d.shape = shape;
  d.focal_center_to_detector_mm = 1085.6;
  d.central_column = 369.625;
  d.central_row = 32.5;
  return d;
}

// The element centre from the published definitions, written out here independently of
// the library: F = (-rho0 sin phi0, rho0 cos phi0, z0); the central element (X, Y)
// (1-based) at distance d0 from F on the line through the isocentre; columns along the arc
// (cylindrical) or the line (flat) counter-clockwise seen from +z, rows along +z.
Vec3 ExpectedElement(const DicomCtPdDetector& d, const DicomCtPdView& v, double row,
                     double column) {
  const double phi = v.focal_center_angle_rad;
  const double fx = -v.focal_center_radius_mm * std::sin(phi);
  const double fy = v.focal_center_radius_mm * std::cos(phi);
  const double dc = (column - (d.central_column - 1)) * d.column_spacing_mm;
  const double z = v.focal_center_z_mm + (row - (d.central_row - 1)) * d.row_spacing_mm;
  // Direction from F to the isocentre, rotated counter-clockwise by the fan angle.
  double gamma, along;
  if (d.shape == DetectorShape::kCylindrical) {
    gamma = dc / d.focal_center_to_detector_mm;
    along = d.focal_center_to_detector_mm;
    const double dx = std::sin(phi + gamma), dy = -std::cos(phi + gamma);
    return {fx + along * dx, fy + along * dy, z};
  }
  const double cx = fx + d.focal_center_to_detector_mm * std::sin(phi);
  const double cy = fy - d.focal_center_to_detector_mm * std::cos(phi);
  return {cx + dc * std::cos(phi), cy + dc * std::sin(phi), z};
}

std::vector<DicomCtPdView> HelicalViews(int count, std::mt19937_64& random, bool shifts) {
  std::uniform_real_distribution<double> start(-kPi, kPi), small(-1, 1);
  std::vector<DicomCtPdView> views;
  const double phi0 = start(random);
  for (int i = 0; i < count; ++i) {
    DicomCtPdView v;
    v.focal_center_angle_rad = phi0 + 2 * kPi * i / 1152.0;
    v.focal_center_z_mm = -40.0 + 0.02 * i;
    v.focal_center_radius_mm = 595.0;
    if (shifts) {
      v.source_angle_shift_rad = 0.0007 * small(random);
      v.source_z_shift_mm = 0.5 * small(random);
      v.source_radius_shift_mm = 1.0 * small(random);
    }
    views.push_back(v);
  }
  return views;
}

TEST(DicomCtPdGeometryTest, ElementsAndSourcesLieWhereTheDefinitionsPutThem) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (DetectorShape shape : {DetectorShape::kCylindrical, DetectorShape::kFlat}) {
    const DicomCtPdDetector detector = Scanner(shape);
    std::vector<DicomCtPdView> views = HelicalViews(20, random, /*shifts=*/false);
    // FFSZ (axial flying focal spot) keeps the source on F's axis: still exact.
    for (size_t i = 0; i < views.size(); i += 2) views[i].source_z_shift_mm = 0.6;
    absl::StatusOr<VectorGeometry> geometry = MakeDicomCtPdGeometry(detector, views);
    ASSERT_TRUE(geometry.ok()) << geometry.status();
    EXPECT_EQ(geometry->detector(), shape);
    EXPECT_EQ(geometry->rows(), 64);
    EXPECT_EQ(geometry->columns(), 736);
    double worst = 0;
    for (int64_t i = 0; i < geometry->num_views(); ++i) {
      const DicomCtPdView& v = views[static_cast<size_t>(i)];
      const double phi = v.focal_center_angle_rad;
      const Vec3 source = {-595.0 * std::sin(phi), 595.0 * std::cos(phi),
                           v.focal_center_z_mm + v.source_z_shift_mm};
      EXPECT_LT(Distance(geometry->views()[i].source, source), 1e-9);
      for (double row : {0.0, 31.5, 63.0, 17.25}) {
        for (double column : {0.0, 368.625, 735.0, 100.5}) {
          worst = std::max(worst, Distance(geometry->PixelPosition(i, row, column),
                                           ExpectedElement(detector, v, row, column)));
        }
      }
    }
    EXPECT_LT(worst, 1e-8) << (shape == DetectorShape::kFlat ? "flat" : "cylindrical");
  }
}

// The central element's ray runs from the focal centre through the isocentre, and phi0 is
// our view angle: a centred cylindrical DICOM-CT-PD scan is MakeCircularCone's geometry.
TEST(DicomCtPdGeometryTest, PhiIsOurViewAngle) {
  DicomCtPdDetector detector = Scanner(DetectorShape::kCylindrical);
  detector.central_column = (detector.columns + 1) / 2.0;  // the middle, 1-based
  detector.central_row = (detector.rows + 1) / 2.0;
  FanConeOptions cone;
  cone.detector = {64, 736, 1.0, 1.2858, 0, 0};
  cone.shape = DetectorShape::kCylindrical;
  cone.source_origin_mm = 595.0;
  cone.origin_detector_mm = 1085.6 - 595.0;
  cone.angles_rad = UniformAnglesRad(16, 0.3, 2 * kPi);
  std::vector<DicomCtPdView> views;
  for (double theta : cone.angles_rad) {
    DicomCtPdView v;
    v.focal_center_angle_rad = theta;
    v.focal_center_radius_mm = 595.0;
    views.push_back(v);
  }
  const VectorGeometry ours = MakeCircularCone(cone).value();
  const VectorGeometry dicom = MakeDicomCtPdGeometry(detector, views).value();
  for (int64_t i = 0; i < ours.num_views(); ++i) {
    EXPECT_LT(Distance(ours.views()[i].source, dicom.views()[i].source), 1e-9);
    EXPECT_LT(Distance(ours.views()[i].detector_center, dicom.views()[i].detector_center), 1e-9);
    EXPECT_LT(Distance(ours.views()[i].u, dicom.views()[i].u), 1e-12);
    EXPECT_LT(Distance(ours.views()[i].v, dicom.views()[i].v), 1e-12);
    // The ray through the middle pixel passes the isocentre.
    const Ray ray = dicom.PixelRay(i, 31.5, 367.5);
    const Vec3 to_origin = Vec3{} - ray.origin;
    const double off_axis = Norm(to_origin - Dot(to_origin, ray.direction) * ray.direction);
    EXPECT_LT(off_axis, 1e-9);
  }
}

// With an in-plane flying focal spot our arc about the source approximates the true arc
// about F: measure how far pixels move for Siemens-sized shifts (<= 1 mm radial,
// 0.0007 rad angular) and bound it well below the 1.29 mm detector pitch.
TEST(DicomCtPdGeometryTest, InPlaneFlyingFocalSpotMovesPixelsByLittle) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const DicomCtPdDetector detector = Scanner(DetectorShape::kCylindrical);
  const std::vector<DicomCtPdView> views = HelicalViews(12, random, /*shifts=*/true);
  const VectorGeometry geometry = MakeDicomCtPdGeometry(detector, views).value();
  double worst = 0;
  for (int64_t i = 0; i < geometry.num_views(); ++i) {
    const DicomCtPdView& v = views[static_cast<size_t>(i)];
    const double phi = v.focal_center_angle_rad + v.source_angle_shift_rad;
    const double rho = 595.0 + v.source_radius_shift_mm;
    EXPECT_LT(Distance(geometry.views()[i].source,
                       {-rho * std::sin(phi), rho * std::cos(phi),
                        v.focal_center_z_mm + v.source_z_shift_mm}),
              1e-9);
    // What matters is the ray from the source: the displacement across it, at the pixel
    // (a move along the ray changes no line integral).
    const Vec3 source = geometry.views()[i].source;
    for (double column = 0; column < 736; column += 5) {
      const Vec3 truth = ExpectedElement(detector, v, 10.0, column);
      const Vec3 ours = geometry.PixelPosition(i, 10.0, column);
      const Vec3 ray = Normalized(truth - source);
      const Vec3 moved = ours - truth;
      const double across = Norm(moved - Dot(moved, ray) * ray) / Norm(ours - source) *
                            Norm(truth - source);
      worst = std::max(worst, across);
    }
  }
  std::printf("in-plane flying focal spot: largest pixel displacement across the ray %.4f mm\n", worst);
  EXPECT_LT(worst, 0.08);  // measured 0.035 to 0.049 over random shifts
  EXPECT_GT(worst, 0.0);  // the approximation is real, and measured
}

TEST(DicomCtPdGeometryTest, RefusesImpossibleHeadersNamingTheAttribute) {
  DicomCtPdDetector detector = Scanner(DetectorShape::kCylindrical);
  DicomCtPdView view;
  view.focal_center_radius_mm = 1200.0;  // beyond d0
  absl::Status s = MakeDicomCtPdGeometry(detector, {view}).status();
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("DetectorFocalCenterRadialDistance (7031,1003)"));
  view.focal_center_radius_mm = 595.0;
  detector.column_spacing_mm = 0;
  s = MakeDicomCtPdGeometry(detector, {view}).status();
  EXPECT_THAT(s.message(), HasSubstr("DetectorElementTransverseSpacing (7029,1002)"));
  detector = Scanner(DetectorShape::kCylindrical);
  detector.rows = 0;
  s = MakeDicomCtPdGeometry(detector, {view}).status();
  EXPECT_THAT(s.message(), HasSubstr("NumberofDetectorRows (7029,1010)"));
  detector = Scanner(DetectorShape::kCylindrical);
  view.focal_center_angle_rad = std::nan("");
  s = MakeDicomCtPdGeometry(detector, {view}).status();
  EXPECT_THAT(s.message(), HasSubstr("not finite"));
  EXPECT_EQ(MakeDicomCtPdGeometry(detector, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tomo::core
