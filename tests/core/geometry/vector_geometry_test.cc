#include "core/geometry/vector_geometry.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

void ExpectNear(const Vec3& actual, const Vec3& expected, double tolerance = 1e-9) {
  EXPECT_NEAR(actual.x, expected.x, tolerance);
  EXPECT_NEAR(actual.y, expected.y, tolerance);
  EXPECT_NEAR(actual.z, expected.z, tolerance);
}

// A cone view: source on -y, detector centre on +y, columns along +x, rows along +z.
ViewVectors ConeView() { return {{0, -100, 0}, {0, 50, 0}, {0.5, 0, 0}, {0, 0, 0.25}}; }
ViewVectors ParallelView() { return {{0, 1, 0}, {0, 0, 0}, {1, 0, 0}, {0, 0, 1}}; }

absl::Status CreateCone(std::vector<ViewVectors> views, int64_t rows = 4, int64_t columns = 6) {
  return VectorGeometry::Create(BeamKind::kCone, DetectorShape::kFlat, rows, columns,
                                std::move(views))
      .status();
}
absl::Status CreateParallel(std::vector<ViewVectors> views) {
  return VectorGeometry::Create(BeamKind::kParallel, DetectorShape::kFlat, 4, 6,
                                std::move(views))
      .status();
}

TEST(VectorGeometryTest, AcceptsValidConeAndParallel) {
  auto cone = VectorGeometry::Create(BeamKind::kCone, DetectorShape::kFlat, 4, 6,
                                     {ConeView(), ConeView(), ConeView()});
  ASSERT_TRUE(cone.ok()) << cone.status();
  EXPECT_EQ(cone->projection_dims(), (Dims3{3, 4, 6}));
  EXPECT_EQ(cone->beam(), BeamKind::kCone);
  EXPECT_EQ(cone->detector(), DetectorShape::kFlat);
  EXPECT_TRUE(CreateParallel({ParallelView()}).ok());
}

TEST(VectorGeometryTest, DetectorSizeAndViewCountOutOfRange) {
  EXPECT_EQ(CreateCone({ConeView()}, 0, 6).message(), "rows: 0 is out of range [1, 65536]");
  EXPECT_EQ(CreateCone({ConeView()}, 4, 65537).message(),
            "columns: 65537 is out of range [1, 65536]");
  EXPECT_EQ(CreateCone({}).message(), "views: 0 views is out of range [1, 1048576]");
  EXPECT_EQ(CreateCone({}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(VectorGeometryTest, NonFiniteVectorNamesViewAndMember) {
  std::vector<ViewVectors> views(13, ConeView());
  views[12].u.y = kNaN;
  EXPECT_EQ(CreateCone(views).message(), "views[12].u: (0.5, nan, 0) must be finite");
  views[12] = ConeView();
  views[12].source.z = kInf;
  EXPECT_EQ(CreateCone(views).message(), "views[12].source: (0, -100, inf) must be finite");
  views[12] = ConeView();
  views[12].detector_center.x = -kInf;
  EXPECT_THAT(CreateCone(views).message(), HasSubstr("views[12].detector_center: (-inf"));
  views[12] = ConeView();
  views[12].v.x = kNaN;
  EXPECT_EQ(CreateCone(views).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(CreateCone(views).message(), HasSubstr("views[12].v:"));
}

TEST(VectorGeometryTest, ZeroLengthDetectorVectors) {
  std::vector<ViewVectors> views(2, ConeView());
  views[1].u = {0, 0, 0};
  EXPECT_THAT(CreateCone(views).message(),
              HasSubstr("views[1].u: (0, 0, 0) has zero length"));
  views[1] = ConeView();
  views[1].v = {0, 0, 1e-12};
  EXPECT_THAT(CreateCone(views).message(), HasSubstr("views[1].v: (0, 0, 1e-12) has zero length"));
}

TEST(VectorGeometryTest, UParallelToV) {
  ViewVectors view = ConeView();
  view.v = {-2, 0, 0};
  const absl::Status status = CreateCone({view});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("views[0].v: (-2, 0, 0) is parallel to u (0.5, 0, 0)"));
}

TEST(VectorGeometryTest, RaysParallelToDetector) {
  // Detector plane spanned by x and y; the central ray runs along y, inside that plane
  // direction-wise, while the source is off the plane.
  ViewVectors cone = {{0, -100, 5}, {0, 50, 5 + 1e-8}, {0.5, 0, 0}, {0, 0.25, 0}};
  EXPECT_THAT(CreateCone({cone}).message(),
              HasSubstr("views[0].detector_center: the ray through the detector centre runs at"));
  ViewVectors parallel = ParallelView();
  parallel.source = {1, 0, 0};  // along u
  EXPECT_THAT(CreateParallel({parallel}).message(),
              HasSubstr("views[0].detector_center: the ray through the detector centre"));
}

TEST(VectorGeometryTest, SourceOnDetector) {
  ViewVectors view = ConeView();
  view.source = {30, 50, -7};  // in the plane y = 50 of the detector
  EXPECT_EQ(CreateCone({ConeView(), view}).message(),
            "views[1].source: (30, 50, -7) lies on the detector (the plane through "
            "detector_center (0, 50, 0) spanned by u and v)");
}

TEST(VectorGeometryTest, ParallelDirectionMustBeUnit) {
  ViewVectors view = ParallelView();
  view.source = {0, 2, 0};
  EXPECT_EQ(CreateParallel({view}).message(),
            "views[0].source: parallel ray direction (0, 2, 0) has length 2, must be 1 "
            "(within 1e-09)");
  view.source = {0, 1 + 1e-12, 0};
  EXPECT_TRUE(CreateParallel({view}).ok());
}

TEST(VectorGeometryTest, CylindricalNeedsConeAndTangentU) {
  auto parallel = VectorGeometry::Create(BeamKind::kParallel, DetectorShape::kCylindrical, 1, 4,
                                         {ParallelView()});
  EXPECT_THAT(parallel.status().message(),
              HasSubstr("views[0].source: a cylindrical detector needs a cone beam"));
  ViewVectors tilted = ConeView();
  tilted.u = {0.5, 0.1, 0};
  auto cylinder = VectorGeometry::Create(BeamKind::kCone, DetectorShape::kCylindrical, 1, 4,
                                         {tilted});
  EXPECT_THAT(cylinder.status().message(), HasSubstr("views[0].u: (0.5, 0.1, 0) must be "
                                                     "perpendicular to v"));
}

TEST(VectorGeometryTest, FlatPixelPositionsAndRays) {
  auto geometry = VectorGeometry::Create(BeamKind::kCone, DetectorShape::kFlat, 4, 6,
                                         {ConeView()});
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  // Centre between columns 2 and 3 and rows 1 and 2.
  ExpectNear(geometry->PixelPosition(0, 1.5, 2.5), {0, 50, 0});
  ExpectNear(geometry->PixelPosition(0, 0, 0), {-1.25, 50, -0.375});
  ExpectNear(geometry->PixelPosition(0, 3, 5), {1.25, 50, 0.375});
  const Ray ray = geometry->PixelRay(0, 3, 5);
  ExpectNear(ray.origin, {0, -100, 0});
  ExpectNear(ray.direction, Normalized(Vec3{1.25, 150, 0.375}));

  auto parallel = VectorGeometry::Create(BeamKind::kParallel, DetectorShape::kFlat, 4, 6,
                                         {ParallelView()});
  ASSERT_TRUE(parallel.ok());
  const Ray parallel_ray = parallel->PixelRay(0, 0, 5);
  ExpectNear(parallel_ray.direction, {0, 1, 0});
  ExpectNear(parallel_ray.origin, {2.5, -VectorGeometry::kParallelRayBackoffMm, -1.5}, 1e-6);
}

TEST(VectorGeometryTest, CylindricalPixelsLieOnTheArcAtTheirFanAngle) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> angle(-M_PI, M_PI);
  // Source-detector distance R = 1000, columns 1 mm of arc, rows 2 mm along z, the
  // detector centre 3 mm above the source.
  const double theta = angle(random);
  const Vec3 ray = {std::sin(theta), -std::cos(theta), 0};
  const Vec3 column_direction = {std::cos(theta), std::sin(theta), 0};
  const Vec3 source = -600.0 * ray;
  const ViewVectors view = {source, source + 1000.0 * ray + Vec3{0, 0, 3},
                            1.0 * column_direction, {0, 0, 2}};
  const int64_t columns = 101;
  auto geometry = VectorGeometry::Create(BeamKind::kCone, DetectorShape::kCylindrical, 3,
                                         columns, {view});
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  for (const double column : {0.0, 17.0, 50.0, 73.5, 100.0}) {
    for (const double row : {0.0, 1.0, 2.0}) {
      const Vec3 pixel = geometry->PixelPosition(0, row, column);
      const double gamma = (column - 50.0) * 1.0 / 1000.0;
      const Vec3 expected = source + 1000.0 * (std::cos(gamma) * ray +
                                               std::sin(gamma) * column_direction) +
                            Vec3{0, 0, 3 + (row - 1.0) * 2.0};
      ExpectNear(pixel, expected, 1e-9);
      // On the cylinder of radius R about the source's vertical axis.
      const Vec3 from_source = pixel - source;
      EXPECT_NEAR(std::hypot(from_source.x, from_source.y), 1000.0, 1e-9);
      // At fan angle gamma from the central ray.
      EXPECT_NEAR(std::atan2(Dot(from_source, column_direction), Dot(from_source, ray)), gamma,
                  1e-12);
    }
  }
  // Neighbouring columns are one arc step apart (chord 2 R sin(step / 2R)).
  const double chord = Norm(geometry->PixelPosition(0, 1, 10) - geometry->PixelPosition(0, 1, 11));
  EXPECT_NEAR(chord, 2000.0 * std::sin(0.5 / 1000.0), 1e-12);
}

TEST(VectorGeometryTest, CheckAgainstVolumeFindsSourceInside) {
  auto volume = VolumeGeometry::Create({100, 100, 50}, {1, 1, 1}, {10, 0, 0});
  ASSERT_TRUE(volume.ok());
  std::vector<ViewVectors> views(8, ConeView());
  auto outside = VectorGeometry::Create(BeamKind::kCone, DetectorShape::kFlat, 4, 6, views);
  ASSERT_TRUE(outside.ok());
  EXPECT_TRUE(outside->CheckAgainstVolume(*volume).ok());
  // Box x in [-40, 60], y in [-50, 50], z in [-25, 25].
  views[7].source = {55, -49, 24};
  auto inside = VectorGeometry::Create(BeamKind::kCone, DetectorShape::kFlat, 4, 6, views);
  ASSERT_TRUE(inside.ok()) << inside.status();
  const absl::Status status = inside->CheckAgainstVolume(*volume);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "views[7].source: (55, -49, 24) lies inside the volume [-40, 60] x [-50, 50] x "
            "[-25, 25] mm");
  // A parallel beam has no source to collide with.
  auto parallel = VectorGeometry::Create(BeamKind::kParallel, DetectorShape::kFlat, 4, 6,
                                         {ParallelView()});
  EXPECT_TRUE(parallel->CheckAgainstVolume(*volume).ok());
}

TEST(VectorGeometryTest, CheckAgainstVolumeOneRowNeedsOneSlice) {
  auto geometry = VectorGeometry::Create(BeamKind::kParallel, DetectorShape::kFlat, 1, 6,
                                         {ParallelView()});
  ASSERT_TRUE(geometry.ok());
  auto thick = VolumeGeometry::Create({8, 8, 3}, {1, 1, 1}, {});
  auto slice = VolumeGeometry::Create({8, 8, 1}, {1, 1, 1}, {});
  EXPECT_THAT(geometry->CheckAgainstVolume(*thick).message(), HasSubstr("volume.size.z: 3"));
  EXPECT_TRUE(geometry->CheckAgainstVolume(*slice).ok());
}

}  // namespace
}  // namespace tomo::core
