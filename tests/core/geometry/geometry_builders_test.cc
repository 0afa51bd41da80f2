#include "core/geometry/geometry_builders.h"

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/geometry/parallel_geometry_2d.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kPi = M_PI;

void ExpectNear(const Vec3& actual, const Vec3& expected, double tolerance = 1e-9) {
  EXPECT_NEAR(actual.x, expected.x, tolerance);
  EXPECT_NEAR(actual.y, expected.y, tolerance);
  EXPECT_NEAR(actual.z, expected.z, tolerance);
}

// 0, 90 degrees and an odd angle, plus one fresh random angle per run.
std::vector<double> TestAngles(std::mt19937_64& random) {
  std::uniform_real_distribution<double> angle(-2 * kPi, 2 * kPi);
  return {0.0, kPi / 2, 0.7321, angle(random)};
}

FanConeOptions SmallCone(std::vector<double> angles) {
  FanConeOptions options;
  options.detector = {4, 6, 0.25, 0.5, 1.5, -0.75};
  options.source_origin_mm = 100;
  options.origin_detector_mm = 50;
  options.angles_rad = std::move(angles);
  return options;
}

TEST(GeometryBuildersTest, UniformAngles) {
  const std::vector<double> angles = UniformAnglesRad(4, 0.5, kPi);
  ASSERT_EQ(angles.size(), 4u);
  EXPECT_DOUBLE_EQ(angles[0], 0.5);
  EXPECT_DOUBLE_EQ(angles[3], 0.5 + 3 * kPi / 4);
  EXPECT_TRUE(UniformAnglesRad(0, 0, 1).empty());
}

TEST(GeometryBuildersTest, CircularConeHandComputedVectors) {
  auto geometry = MakeCircularCone(SmallCone({0.0, kPi / 2}));
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  ASSERT_EQ(geometry->beam(), BeamKind::kCone);
  ASSERT_EQ(geometry->projection_dims(), (Dims3{2, 4, 6}));
  // theta = 0: rays along -y, source at +y, detector at -y, columns along +x.
  const ViewVectors& at_zero = geometry->views()[0];
  ExpectNear(at_zero.source, {0, 100, 0});
  ExpectNear(at_zero.detector_center, {1.5, -50, -0.75});
  ExpectNear(at_zero.u, {0.5, 0, 0});
  ExpectNear(at_zero.v, {0, 0, 0.25});
  // theta = 90 degrees: rays along +x, source at -x, columns along +y.
  const ViewVectors& at_ninety = geometry->views()[1];
  ExpectNear(at_ninety.source, {-100, 0, 0});
  ExpectNear(at_ninety.detector_center, {50, 1.5, -0.75});
  ExpectNear(at_ninety.u, {0, 0.5, 0});
  ExpectNear(at_ninety.v, {0, 0, 0.25});
  // Pixel (row 0, column 5) at theta = 90 degrees: 2.5 columns right, 1.5 rows down.
  ExpectNear(geometry->PixelPosition(1, 0, 5), {50, 1.5 + 2.5 * 0.5, -0.75 - 1.5 * 0.25});
}

TEST(GeometryBuildersTest, CircularConeAtAnyAngleMatchesTheConvention) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::vector<double> angles = TestAngles(random);
  auto geometry = MakeCircularCone(SmallCone(angles));
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  for (size_t i = 0; i < angles.size(); ++i) {
    const double t = angles[i];
    const ViewVectors& view = geometry->views()[i];
    ExpectNear(view.source, {-100 * std::sin(t), 100 * std::cos(t), 0});
    ExpectNear(view.detector_center, {50 * std::sin(t) + 1.5 * std::cos(t),
                                      -50 * std::cos(t) + 1.5 * std::sin(t), -0.75});
    ExpectNear(view.u, {0.5 * std::cos(t), 0.5 * std::sin(t), 0});
    // The central ray (no offsets) passes through the rotation axis.
    const Vec3 central = Normalized(view.detector_center - 1.5 / 0.5 * view.u + Vec3{0, 0, 0.75} -
                                    view.source);
    EXPECT_NEAR(Norm(Cross(central, Normalized(-1.0 * view.source))), 0, 1e-12);
  }
}

TEST(GeometryBuildersTest, Parallel3DHandComputedVectors) {
  DetectorLayout detector = {3, 5, 2.0, 0.5, -1.0, 4.0};
  auto geometry = MakeParallel3D(detector, {0.0, kPi / 2, 0.7321});
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  EXPECT_EQ(geometry->beam(), BeamKind::kParallel);
  ExpectNear(geometry->views()[0].source, {0, -1, 0});
  ExpectNear(geometry->views()[0].detector_center, {-1, 0, 4});
  ExpectNear(geometry->views()[1].source, {1, 0, 0});
  ExpectNear(geometry->views()[1].detector_center, {0, -1, 4});
  ExpectNear(geometry->views()[1].u, {0, 0.5, 0});
  ExpectNear(geometry->views()[1].v, {0, 0, 2});
  const double t = 0.7321;
  ExpectNear(geometry->views()[2].source, {std::sin(t), -std::cos(t), 0});
  ExpectNear(geometry->PixelPosition(2, 2, 0),
             {(-1 - 1.0) * std::cos(t), (-1 - 1.0) * std::sin(t), 6});
}

TEST(GeometryBuildersTest, Parallel2DRaysAgreeWithParallelGeometry2D) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::vector<double> angles = TestAngles(random);
  const int64_t detectors = 9;
  auto reference = ParallelGeometry2D::Create(detectors, 0.7, 0.3, angles);
  ASSERT_TRUE(reference.ok());
  auto geometry = MakeParallel2D({1, detectors, 1.0, 0.7, 0.3, 0.0}, angles);
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  ASSERT_EQ(geometry->projection_dims(), reference->projection_dims());
  for (int64_t view = 0; view < geometry->num_views(); ++view) {
    const double t = angles[static_cast<size_t>(view)];
    for (int64_t k = 0; k < detectors; ++k) {
      const Ray ray = geometry->PixelRay(view, 0, static_cast<double>(k));
      ExpectNear(ray.direction, {std::sin(t), -std::cos(t), 0}, 1e-12);
      // Every point of the ray satisfies x cos t + y sin t = s_k, and z = 0.
      for (const double along : {0.0, 1e6, 2e6}) {
        const Vec3 point = ray.origin + along * ray.direction;
        EXPECT_NEAR(point.x * std::cos(t) + point.y * std::sin(t),
                    reference->detector_position_mm(static_cast<double>(k)), 1e-6);
        EXPECT_EQ(point.z, 0.0);
      }
    }
  }
}

TEST(GeometryBuildersTest, Fan2DFlatAndArc) {
  FanConeOptions options = SmallCone({kPi / 2});
  options.detector = {1, 5, 1.0, 2.0, 0.0, 0.0};
  auto flat = MakeFan2D(options);
  ASSERT_TRUE(flat.ok()) << flat.status();
  ExpectNear(flat->views()[0].source, {-100, 0, 0});
  ExpectNear(flat->PixelPosition(0, 0, 4), {50, 4, 0});
  options.shape = DetectorShape::kCylindrical;
  auto arc = MakeFan2D(options);
  ASSERT_TRUE(arc.ok()) << arc.status();
  EXPECT_EQ(arc->detector(), DetectorShape::kCylindrical);
  // Column 4 is 2 columns of 2 mm arc from the centre: fan angle 4 / 150.
  const double gamma = 4.0 / 150.0;
  ExpectNear(arc->PixelPosition(0, 0, 4),
             {-100 + 150 * std::cos(gamma), 150 * std::sin(gamma), 0});
}

TEST(GeometryBuildersTest, CylindricalConeColumnsOnTheArc) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  FanConeOptions options = SmallCone(TestAngles(random));
  options.shape = DetectorShape::kCylindrical;
  options.detector = {3, 64, 1.0, 1.5, 3.0, 0.5};
  auto geometry = MakeCircularCone(options);
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  const double radius = 150;
  for (int64_t view = 0; view < geometry->num_views(); ++view) {
    const double t = options.angles_rad[static_cast<size_t>(view)];
    const Vec3 ray = {std::sin(t), -std::cos(t), 0};
    const Vec3 column_direction = {std::cos(t), std::sin(t), 0};
    const Vec3 source = geometry->views()[static_cast<size_t>(view)].source;
    for (const double column : {0.0, 20.0, 31.5, 63.0}) {
      // The 3 mm offset moves the detector along its arc: 2 more columns of 1.5 mm.
      const double gamma = ((column - 31.5) * 1.5 + 3.0) / radius;
      const Vec3 pixel = geometry->PixelPosition(view, 2, column);
      const Vec3 from_source = pixel - source;
      EXPECT_NEAR(std::hypot(from_source.x, from_source.y), radius, 1e-9);
      EXPECT_NEAR(std::atan2(Dot(from_source, column_direction), Dot(from_source, ray)), gamma,
                  1e-12);
      EXPECT_NEAR(pixel.z, 0.5 + 1.0, 1e-12);
    }
  }
}

TEST(GeometryBuildersTest, HelicalMovesSourceAndDetectorAlongZ) {
  HelicalOptions options;
  options.cone = SmallCone({0.3, 0.3 + kPi / 2, 0.3 + 2 * kPi, 0.3 + 5 * kPi});
  options.pitch_mm_per_turn = -12;
  options.z_start_mm = 7;
  auto helical = MakeHelicalCone(options);
  ASSERT_TRUE(helical.ok()) << helical.status();
  auto circular = MakeCircularCone(options.cone);
  ASSERT_TRUE(circular.ok());
  const std::array<double, 4> expected_z = {7, 7 - 3, 7 - 12, 7 - 30};
  for (size_t i = 0; i < expected_z.size(); ++i) {
    const ViewVectors& moved = helical->views()[i];
    const ViewVectors& still = circular->views()[i];
    ExpectNear(moved.source, still.source + Vec3{0, 0, expected_z[i]});
    ExpectNear(moved.detector_center, still.detector_center + Vec3{0, 0, expected_z[i]});
    ExpectNear(moved.u, still.u);
    ExpectNear(moved.v, still.v);
  }
}

TEST(GeometryBuildersTest, FanAngle) {
  FanConeOptions options = SmallCone({0.0});
  options.detector = {1, 100, 1.0, 3.0, 0.0, 0.0};  // 300 mm wide at 150 mm
  EXPECT_NEAR(FanAngleRad(options), 2 * std::atan(150.0 / 150.0), 1e-15);
  options.detector.offset_u_mm = 150;  // from the central ray to one side
  EXPECT_NEAR(FanAngleRad(options), std::atan(300.0 / 150.0), 1e-15);
  options.shape = DetectorShape::kCylindrical;
  EXPECT_NEAR(FanAngleRad(options), 2.0, 1e-15);
}

// ---- Validation: every error names its field. ----

absl::Status ConeStatus(const FanConeOptions& options) {
  return MakeCircularCone(options).status();
}

TEST(GeometryBuildersTest, RefusesBadDetector) {
  FanConeOptions options = SmallCone({0.0});
  options.detector.columns = 0;
  EXPECT_EQ(ConeStatus(options).message(), "detector.columns: 0 is out of range [1, 65536]");
  options = SmallCone({0.0});
  options.detector.rows = 70000;
  EXPECT_EQ(ConeStatus(options).message(), "detector.rows: 70000 is out of range [1, 65536]");
  options = SmallCone({0.0});
  options.detector.column_spacing_mm = 0;
  EXPECT_EQ(ConeStatus(options).message(),
            "detector.column_spacing_mm: 0 must be a finite value > 0");
  options = SmallCone({0.0});
  options.detector.row_spacing_mm = kNaN;
  EXPECT_EQ(ConeStatus(options).message(),
            "detector.row_spacing_mm: nan must be a finite value > 0");
  options = SmallCone({0.0});
  options.detector.offset_u_mm = kInf;
  EXPECT_EQ(ConeStatus(options).message(), "detector.offset_u_mm: inf must be finite");
  options = SmallCone({0.0});
  options.detector.offset_v_mm = -kInf;
  EXPECT_EQ(ConeStatus(options).message(), "detector.offset_v_mm: -inf must be finite");
  EXPECT_EQ(ConeStatus(options).code(), absl::StatusCode::kInvalidArgument);
}

TEST(GeometryBuildersTest, TwoDimensionalNeedsOneRowOnTheSlice) {
  FanConeOptions options = SmallCone({0.0});
  EXPECT_EQ(MakeFan2D(options).status().message(), "detector.rows: 4 must be 1 for a 2D geometry");
  options.detector.rows = 1;
  EXPECT_EQ(MakeFan2D(options).status().message(),
            "detector.offset_v_mm: -0.75 must be 0 for a 2D geometry");
  EXPECT_EQ(MakeParallel2D({2, 5, 1, 1, 0, 0}, {0.0}).status().message(),
            "detector.rows: 2 must be 1 for a 2D geometry");
}

TEST(GeometryBuildersTest, RefusesBadDistances) {
  FanConeOptions options = SmallCone({0.0});
  options.source_origin_mm = -5;
  EXPECT_EQ(ConeStatus(options).message(), "source_origin_mm: -5 must be a finite value > 0");
  options.source_origin_mm = kNaN;
  EXPECT_EQ(ConeStatus(options).message(), "source_origin_mm: nan must be a finite value > 0");
  options = SmallCone({0.0});
  options.origin_detector_mm = kInf;
  EXPECT_EQ(ConeStatus(options).message(), "origin_detector_mm: inf must be finite");
  options.origin_detector_mm = -100;
  EXPECT_THAT(ConeStatus(options).message(),
              HasSubstr("origin_detector_mm: -100 puts the detector at or behind the source"));
  // A detector at the rotation axis (ASTRA's common choice) is fine.
  options.origin_detector_mm = 0;
  EXPECT_TRUE(ConeStatus(options).ok());
}

TEST(GeometryBuildersTest, RefusesBadAngles) {
  EXPECT_EQ(ConeStatus(SmallCone({})).message(),
            "angles_rad: 0 views is out of range [1, 1048576]");
  EXPECT_EQ(ConeStatus(SmallCone({0.0, 1.0, 2.0, kNaN})).message(),
            "angles_rad[3]: nan must be finite");
  EXPECT_EQ(MakeParallel3D({1, 5, 1, 1, 0, 0}, {kInf}).status().message(),
            "angles_rad[0]: inf must be finite");
}

TEST(GeometryBuildersTest, RefusesBadHelix) {
  HelicalOptions options;
  options.cone = SmallCone({0.0, 1.0});
  options.pitch_mm_per_turn = kNaN;
  EXPECT_EQ(MakeHelicalCone(options).status().message(), "pitch_mm_per_turn: nan must be finite");
  options.pitch_mm_per_turn = 1;
  options.z_start_mm = -kInf;
  EXPECT_EQ(MakeHelicalCone(options).status().message(), "z_start_mm: -inf must be finite");
  options.z_start_mm = 0;
  options.cone.source_origin_mm = 0;
  EXPECT_EQ(MakeHelicalCone(options).status().message(),
            "source_origin_mm: 0 must be a finite value > 0");
}

TEST(GeometryBuildersTest, SourceInsideTheVolumeIsFoundByCheckAgainstVolume) {
  auto geometry = MakeCircularCone(SmallCone(UniformAnglesRad(8, 0, 2 * kPi)));
  ASSERT_TRUE(geometry.ok());
  auto small = VolumeGeometry::Create({64, 64, 8}, {1, 1, 1}, {});
  auto large = VolumeGeometry::Create({256, 256, 8}, {1, 1, 1}, {});
  EXPECT_TRUE(geometry->CheckAgainstVolume(*small).ok());
  const absl::Status status = geometry->CheckAgainstVolume(*large);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("views[0].source: (0, 100, 0) lies inside the volume"));
}

// ---- Conversions from other libraries (docs/geometry.md). Each peer's vectors are
// computed here from its own published formula, then compared with our builder given
// the converted parameters. ----

// ASTRA's per-view vectors (python/astra/functions.py, geom_2vec): source or ray, detector
// centre, u (column step), v (row step); pixel (r, c) at d + (c - (C-1)/2) u + (r - (R-1)/2) v.
struct AstraView {
  Vec3 source, detector, u, v;
};

AstraView AstraCone(double angle, double origin_source, double origin_detector,
                    double spacing_x, double spacing_y) {
  return {{std::sin(angle) * origin_source, -std::cos(angle) * origin_source, 0},
          {-std::sin(angle) * origin_detector, std::cos(angle) * origin_detector, 0},
          {std::cos(angle) * spacing_x, std::sin(angle) * spacing_x, 0},
          {0, 0, spacing_y}};
}

Vec3 AstraPixel(const AstraView& view, int64_t rows, int64_t columns, double row, double column) {
  return view.detector + (column - 0.5 * static_cast<double>(columns - 1)) * view.u +
         (row - 0.5 * static_cast<double>(rows - 1)) * view.v;
}

TEST(GeometryConversionTest, AstraParallel3DIsOurParallel3D) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::vector<double> angles = TestAngles(random);
  // ASTRA parallel3d: ray (sin a, -cos a, 0), d = 0, u = (cos a, sin a, 0) dX, v = (0, 0, dY).
  auto geometry = MakeParallel3D({3, 7, 0.8, 1.3, 0, 0}, angles);
  ASSERT_TRUE(geometry.ok());
  for (size_t i = 0; i < angles.size(); ++i) {
    const double a = angles[i];
    const ViewVectors& view = geometry->views()[i];
    ExpectNear(view.source, {std::sin(a), -std::cos(a), 0});
    ExpectNear(view.detector_center, {0, 0, 0});
    ExpectNear(view.u, {std::cos(a) * 1.3, std::sin(a) * 1.3, 0});
    ExpectNear(view.v, {0, 0, 0.8});
  }
}

TEST(GeometryConversionTest, AstraConeIsOurConeTurnedHalfWayWithColumnsReversed) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::vector<double> astra_angles = TestAngles(random);
  const int64_t rows = 5, columns = 8;
  const double origin_source = 300, origin_detector = 200, spacing_x = 0.6, spacing_y = 0.9;
  // ASTRA cone_vec users shift a detector by adding to d along u; shift it 2.5 mm.
  const double astra_shift_mm = 2.5;
  // theta_ours = a + pi, offset_u = -shift (our e_u is ASTRA's -u), columns reversed.
  FanConeOptions options;
  options.detector = {rows, columns, spacing_y, spacing_x, -astra_shift_mm, 0};
  options.source_origin_mm = origin_source;
  options.origin_detector_mm = origin_detector;
  for (const double a : astra_angles) options.angles_rad.push_back(a + kPi);
  auto geometry = MakeCircularCone(options);
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  for (size_t i = 0; i < astra_angles.size(); ++i) {
    AstraView astra = AstraCone(astra_angles[i], origin_source, origin_detector, spacing_x,
                                spacing_y);
    astra.detector = astra.detector + (astra_shift_mm / spacing_x) * astra.u;
    const int64_t view = static_cast<int64_t>(i);
    ExpectNear(geometry->views()[i].source, astra.source);
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t column = 0; column < columns; ++column) {
        ExpectNear(geometry->PixelPosition(view, static_cast<double>(row),
                                           static_cast<double>(columns - 1 - column)),
                   AstraPixel(astra, rows, columns, static_cast<double>(row),
                              static_cast<double>(column)));
      }
    }
  }
}

TEST(GeometryConversionTest, AstraConeVecVectorsAreOurViewVectors) {
  // cone_vec rows (srcX..vZ) are our ViewVectors one to one: same pixel formula.
  const AstraView astra = AstraCone(0.4, 300, 200, 0.6, 0.9);
  auto geometry = VectorGeometry::Create(BeamKind::kCone, DetectorShape::kFlat, 5, 8,
                                         {{astra.source, astra.detector, astra.u, astra.v}});
  ASSERT_TRUE(geometry.ok());
  ExpectNear(geometry->PixelPosition(0, 1, 6), AstraPixel(astra, 5, 8, 1, 6));
}

TEST(GeometryConversionTest, AstraFanflatIsOurFanTurnedHalfWayWithColumnsReversed) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::vector<double> astra_angles = TestAngles(random);
  const int64_t columns = 11;
  FanConeOptions options;
  options.detector = {1, columns, 1.0, 1.7, 0, 0};
  options.source_origin_mm = 500;
  options.origin_detector_mm = 250;
  for (const double a : astra_angles) options.angles_rad.push_back(a + kPi);
  auto geometry = MakeFan2D(options);
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  for (size_t i = 0; i < astra_angles.size(); ++i) {
    const double a = astra_angles[i];
    // fanflat -> fanflat_vec (geom_2vec): src (sin a DSO, -cos a DSO), d (-sin a ODD,
    // cos a ODD), u (cos a, sin a) DetectorWidth.
    const Vec3 source = {std::sin(a) * 500, -std::cos(a) * 500, 0};
    const Vec3 detector = {-std::sin(a) * 250, std::cos(a) * 250, 0};
    const Vec3 u = {std::cos(a) * 1.7, std::sin(a) * 1.7, 0};
    ExpectNear(geometry->views()[i].source, source);
    for (int64_t column = 0; column < columns; ++column) {
      ExpectNear(geometry->PixelPosition(static_cast<int64_t>(i), 0,
                                         static_cast<double>(columns - 1 - column)),
                 detector + (static_cast<double>(column) - 5.0) * u);
    }
  }
}

TEST(GeometryConversionTest, TigreConeIsOurConeAQuarterTurnBackWithColumnsReversed) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::vector<double> alphas = TestAngles(random);
  // TIGRE names: DSO, DSD, nDetecU/V, dDetecU/V, offDetecU/V (Common/CUDA/Siddon_projection.cu).
  const double dso = 1000, dsd = 1536, d_u = 0.8, d_v = 0.6, off_u = 4.0, off_v = -3.0;
  const int64_t n_u = 6, n_v = 4;
  FanConeOptions options;
  options.detector = {n_v, n_u, d_v, d_u, -off_u, off_v};
  options.source_origin_mm = dso;
  options.origin_detector_mm = dsd - dso;
  for (const double alpha : alphas) options.angles_rad.push_back(alpha - kPi / 2);
  auto geometry = MakeCircularCone(options);
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  for (size_t i = 0; i < alphas.size(); ++i) {
    const double alpha = alphas[i];
    // computeDeltas_Siddon before the voxel-unit scaling, with no image offset or
    // detector rotation: S = (DSO, 0, 0) and detector pixel (u, pixelV) at
    // (-(DSD - DSO), dU (u - nU/2 + 0.5) + offU, dV (nV/2 - 0.5 - pixelV) + offV), both
    // turned about z by alpha; the kernel reads stored row v as pixelV = nV - v - 1.
    const auto rotate = [alpha](const Vec3& p) {
      return Vec3{std::cos(alpha) * p.x - std::sin(alpha) * p.y,
                  std::sin(alpha) * p.x + std::cos(alpha) * p.y, p.z};
    };
    ExpectNear(geometry->views()[i].source, rotate({dso, 0, 0}));
    for (int64_t v = 0; v < n_v; ++v) {
      for (int64_t u = 0; u < n_u; ++u) {
        const double pixel_v = static_cast<double>(n_v - v - 1);
        const Vec3 tigre_pixel = rotate(
            {-(dsd - dso), d_u * (static_cast<double>(u) - n_u / 2.0 + 0.5) + off_u,
             d_v * (n_v / 2.0 - 0.5 - pixel_v) + off_v});
        ExpectNear(geometry->PixelPosition(static_cast<int64_t>(i), static_cast<double>(v),
                                           static_cast<double>(n_u - 1 - u)),
                   tigre_pixel);
      }
    }
  }
}

TEST(GeometryConversionTest, RtkCircularGeometryProjectsOurPixelsOntoTheirCoordinates) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::vector<double> gantry_deg = {0, 90, 41.9};
  gantry_deg.push_back(std::uniform_real_distribution<double>(0, 360)(random));
  // RTK ThreeDCircularProjectionGeometry (documentation/docs/Geometry.md), source offsets 0.
  const double sid = 1000, sdd = 1536, offset_x = -11.5, offset_y = 2.25;
  const int64_t columns = 9, rows = 5;
  const double spacing_x = 0.4, spacing_y = 0.7;
  // The projection image's own ITK origin (physical coordinate of pixel (0, 0)).
  const double image_origin_x = -1.2, image_origin_y = -1.9;
  const double image_center_x = image_origin_x + 0.5 * (columns - 1) * spacing_x;
  const double image_center_y = image_origin_y + 0.5 * (rows - 1) * spacing_y;
  FanConeOptions options;
  options.detector = {rows, columns, spacing_y, spacing_x, -(offset_x + image_center_x),
                      offset_y + image_center_y};
  options.source_origin_mm = sid;
  options.origin_detector_mm = sdd - sid;
  for (const double g : gantry_deg) options.angles_rad.push_back(g * kPi / 180);
  auto geometry = MakeCircularCone(options);
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  for (size_t i = 0; i < gantry_deg.size(); ++i) {
    const double g = gantry_deg[i] * kPi / 180;
    // M_P = [1 0 -offX; 0 1 -offY; 0 0 1] [-SDD 0 0 0; 0 -SDD 0 0; 0 0 1 -SID] M_R with
    // M_R the rotation about y by -GantryAngle.
    const auto project = [&](const Vec3& rtk_point) {
      const Vec3 rotated = {std::cos(-g) * rtk_point.x + std::sin(-g) * rtk_point.z, rtk_point.y,
                            -std::sin(-g) * rtk_point.x + std::cos(-g) * rtk_point.z};
      const double w = rotated.z - sid;
      return std::array<double, 2>{(-sdd * rotated.x - offset_x * w) / w,
                                   (-sdd * rotated.y - offset_y * w) / w};
    };
    // Our frame to RTK's: x_rtk = -x, y_rtk = z (its rotation axis), z_rtk = y.
    const auto to_rtk = [](const Vec3& p) { return Vec3{-p.x, p.z, p.y}; };
    const Vec3 source_rtk = to_rtk(geometry->views()[i].source);
    ExpectNear(source_rtk, {sid * std::sin(g), 0, sid * std::cos(g)});
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t column = 0; column < columns; ++column) {
        const auto [x, y] = project(to_rtk(geometry->PixelPosition(
            static_cast<int64_t>(i), static_cast<double>(row),
            static_cast<double>(columns - 1 - column))));
        EXPECT_NEAR(x, image_origin_x + static_cast<double>(column) * spacing_x, 1e-9);
        EXPECT_NEAR(y, image_origin_y + static_cast<double>(row) * spacing_y, 1e-9);
      }
    }
  }
}

TEST(GeometryConversionTest, RtkParallelGeometryProjectsOurRaysOntoTheirCoordinates) {
  // RTK's parallel case (SourceToDetectorDistance = 0): M_P = [1 0 0 -offX; 0 1 0 -offY;
  // 0 0 0 1] M_R, rays along -z of the rotated frame.
  const double offset_x = 3.5, offset_y = -1.25, spacing_x = 0.5, spacing_y = 0.75;
  const int64_t columns = 7, rows = 3;
  const double image_origin_x = -1.5, image_origin_y = -0.75;  // centred: cx = cy = 0
  const std::vector<double> gantry_deg = {0, 90, 41.9, 233.0};
  std::vector<double> angles;
  for (const double g : gantry_deg) angles.push_back(g * kPi / 180);
  auto geometry = MakeParallel3D({rows, columns, spacing_y, spacing_x, -offset_x, offset_y},
                                 angles);
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  for (size_t i = 0; i < angles.size(); ++i) {
    const double g = angles[i];
    const auto rotate = [g](const Vec3& p) {  // M_R: about y by -GantryAngle
      return Vec3{std::cos(-g) * p.x + std::sin(-g) * p.z, p.y,
                  -std::sin(-g) * p.x + std::cos(-g) * p.z};
    };
    const auto to_rtk = [](const Vec3& p) { return Vec3{-p.x, p.z, p.y}; };
    ExpectNear(rotate(to_rtk(geometry->views()[i].source)), {0, 0, -1}, 1e-12);
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t column = 0; column < columns; ++column) {
        const Ray ray = geometry->PixelRay(static_cast<int64_t>(i), static_cast<double>(row),
                                           static_cast<double>(columns - 1 - column));
        for (const double along : {0.9e6, 1.1e6}) {
          const Vec3 rotated = rotate(to_rtk(ray.origin + along * ray.direction));
          const double expected_x = image_origin_x + static_cast<double>(column) * spacing_x;
          const double expected_y = image_origin_y + static_cast<double>(row) * spacing_y;
          EXPECT_NEAR(rotated.x - offset_x, expected_x, 1e-6);
          EXPECT_NEAR(rotated.y - offset_y, expected_y, 1e-6);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tomo::core

namespace tomo::core {
namespace {

// Where the centre of voxel (iy, ix) of `volume` meets view `view`'s detector of a parallel
// geometry, as a fractional column.
double OurColumn(const VectorGeometry& geometry, int64_t view, const VolumeGeometry& volume,
                 double iy, double ix) {
  const ViewVectors& v = geometry.views()[static_cast<size_t>(view)];
  const Vec3 point{volume.x_mm(ix), volume.y_mm(iy), 0};
  const Vec3 d = point - v.detector_center;
  const double along = (d.x * v.u.x + d.y * v.u.y) / (v.u.x * v.u.x + v.u.y * v.u.y);
  return along + 0.5 * static_cast<double>(geometry.columns() - 1);
}

// scikit-image's radon (scikit-image/scikit-image: skimage/transform/radon_transform.py):
// for angle a (degrees given, radians used) it warps the image with the inverse map
// R = [[cos a, sin a, -c (cos a + sin a - 1)], [-sin a, cos a, -c (cos a - sin a - 1)]],
// c = N // 2, taking output (col, row) to input (col, row), and sums each output column:
// sinogram[k, view] is output column k. So input pixel (row, col) lands on the output
// column x_out of R^-1 (col, row). Our conversion (docs/geometry.md): theta = a, the image
// flipped vertically (our iy = N - 1 - row, ix = col), center_mm = (((N-1)/2 - N//2) p,
// (N//2 - (N-1)/2) p), detector offset ((P-1)/2 - P//2) p for the sinogram's P rows, the
// sinogram transposed.
TEST(GeometryConversionTest, ScikitImageRadonIsOurParallel2DOnAFlippedImage) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const double p = 0.37;  // our pixel size, mm (scikit-image counts pixels)
  for (const int64_t n : {64, 65}) {
    const int64_t c = n / 2;
    auto volume = VolumeGeometry::Create(
        {n, n, 1}, {p, p, p},
        {(0.5 * (n - 1) - c) * p, (c - 0.5 * (n - 1)) * p, 0});
    ASSERT_TRUE(volume.ok());
    const std::vector<double> angles = TestAngles(random);
    auto geometry = MakeParallel2D({1, n, p, p, (0.5 * (n - 1) - c) * p, 0}, angles);
    ASSERT_TRUE(geometry.ok()) << geometry.status();
    std::uniform_int_distribution<int64_t> pixel(0, n - 1);
    for (size_t view = 0; view < angles.size(); ++view) {
      const double a = angles[view];
      const double r00 = std::cos(a), r01 = std::sin(a), t0 = -c * (std::cos(a) + std::sin(a) - 1);
      const double r10 = -std::sin(a), r11 = std::cos(a), t1 = -c * (std::cos(a) - std::sin(a) - 1);
      for (int trial = 0; trial < 5; ++trial) {
        const int64_t row = pixel(random), col = pixel(random);
        // Solve R (x_out, y_out) + t = (col, row) for x_out.
        const double det = r00 * r11 - r01 * r10;
        const double x_out = (r11 * (col - t0) - r01 * (row - t1)) / det;
        EXPECT_NEAR(OurColumn(*geometry, static_cast<int64_t>(view), *volume,
                              static_cast<double>(n - 1 - row), static_cast<double>(col)),
                    x_out, 1e-9)
            << "n " << n << " angle " << a << " pixel (" << row << ", " << col << ")";
      }
    }
  }
}

// tomopy's project (tomopy/tomopy: source/libtomo/recon/project.c, utils.c): object
// obj[slice][ix][iy] of unit pixels centred at (ix - (ox-1)/2, iy - (oz-1)/2); the ray of
// detector d at angle theta (radians) runs from src = R(theta) (xi, yi) to
// det = R(theta) (-xi, yi), yi = (1 - dx)/2 + d + mov, mov = (dx - 1)/2 - center + 0.5
// (+0.01 when mov is within 0.01 above an integer, keeping rays off grid lines). Our
// conversion: the same arrays (our (z, y, x) is its (slice, ix, iy): its x is our y, its y
// our x), theta_ours = -theta, detector offset (dx/2 - center) p, volume centred.
TEST(GeometryConversionTest, TomopyProjectIsOurParallelWithNegatedAngles) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const double p = 0.65;
  const int64_t ox = 40, oz = 40, dx = 57;
  std::uniform_real_distribution<double> centre_shift(-4.0, 4.0);
  for (int trial_centre = 0; trial_centre < 3; ++trial_centre) {
    const double center = 0.5 * dx + (trial_centre == 0 ? 0.0 : centre_shift(random)) + 0.013;
    auto volume = VolumeGeometry::Create({oz, ox, 1}, {p, p, p}, {0, 0, 0});
    ASSERT_TRUE(volume.ok());
    std::vector<double> angles = TestAngles(random);
    std::vector<double> ours;
    for (double theta : angles) ours.push_back(-theta);
    auto geometry = MakeParallel2D({1, dx, p, p, (0.5 * dx - center) * p, 0}, ours);
    ASSERT_TRUE(geometry.ok()) << geometry.status();
    double mov = (dx - 1) * 0.5 - center;
    if (mov - std::floor(mov) < 0.01) mov += 0.01;
    mov += 0.5;
    std::uniform_int_distribution<int64_t> pick_x(0, ox - 1), pick_y(0, oz - 1);
    for (size_t view = 0; view < angles.size(); ++view) {
      const double s = std::sin(angles[view]), co = std::cos(angles[view]);
      const double xi = -ox - oz;
      // The signed distance of a point from detector d's ray (calc_coords' src and det).
      auto distance = [&](double d, double px, double py) {
        const double yi = (1 - dx) / 2.0 + d + mov;
        const double srcx = xi * co - yi * s, srcy = xi * s + yi * co;
        const double detx = -xi * co - yi * s, dety = -xi * s + yi * co;
        const double ex = detx - srcx, ey = dety - srcy, length = std::hypot(ex, ey);
        return (ex * (py - srcy) - ey * (px - srcx)) / length;
      };
      for (int trial = 0; trial < 5; ++trial) {
        const int64_t ix = pick_x(random), iy = pick_y(random);
        const double px = ix - 0.5 * (ox - 1), py = iy - 0.5 * (oz - 1);
        // Distance is linear in d: the fractional detector whose ray passes the centre.
        const double d0 = distance(0, px, py), d1 = distance(1, px, py);
        const double tomopy_d = d0 / (d0 - d1);
        // Our voxel (iy_ours, ix_ours) = its (ix, iy).
        EXPECT_NEAR(OurColumn(*geometry, static_cast<int64_t>(view), *volume,
                              static_cast<double>(ix), static_cast<double>(iy)),
                    tomopy_d, 0.011)
            << "center " << center << " angle " << angles[view];
      }
    }
  }
}

}  // namespace
}  // namespace tomo::core

namespace tomo::core {
namespace {

// plastimatch's cone-beam geometry (simonoxen/plastimatch): `drr` places the source for
// gantry angle a (radians) at isocenter + sad (cos a, -sin a, 0) (drr.cxx,
// drr_render_volume); Proj_matrix::set (proj_matrix.cxx) takes nrm = unit(cam - tgt),
// plt = nrm x vup, pup = plt x nrm, the panel centre at cam - sid nrm, and
// drr_render_volume_perspective puts pixel (row r, column c) at
// centre + (c - ic[0]) ps[0] prt + (r - ic[1]) ps[1] pdn with prt = -plt, pdn = -pup
// (vup, default (0, 0, 1), points towards the top row, so rows run down). Its projection
// matrix (intrinsic diag(1/ps[0], 1/ps[1], 1/sid) times the extrinsic [-plt; -pup; -nrm]
// with translations plt.tgt, pup.tgt, nrm.tgt + sad) gives column ic[0] + x/w and row
// ic[1] + y/w, which is what `fdk` samples. Our conversion (docs/geometry.md):
// theta = -a - pi/2, source_origin = sad, origin_detector = sid - sad,
// offset_u = (ic[0] - (C-1)/2) ps[0], offset_v = (ic[1] - (R-1)/2) ps[1], rows and
// columns both reversed, everything moved by -isocenter.
struct PlastimatchPanel {
  Vec3 cam, center, prt, pdn;
};

PlastimatchPanel PlastimatchDrrPanel(double a, const Vec3& isocenter, double sad, double sid) {
  const Vec3 vup = {0, 0, 1};
  const Vec3 cam = isocenter + Vec3{sad * std::cos(a), -sad * std::sin(a), 0};
  const Vec3 nrm = Normalized(cam - isocenter);
  const Vec3 plt = Normalized(Cross(nrm, vup));
  const Vec3 pup = Normalized(Cross(plt, nrm));
  return {cam, cam - sid * nrm, -1.0 * plt, -1.0 * pup};
}

TEST(GeometryConversionTest, PlastimatchDrrIsOurConeWithNegatedAnglesAndBothAxesReversed) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::vector<double> gantry = TestAngles(random);
  const double sad = 1000, sid = 1630;
  const int64_t columns = 7, rows = 4;           // plastimatch's detector_resolution (c, r)
  const double ps_column = 0.8, ps_row = 1.15;   // ps[0], ps[1] (mm)
  std::uniform_real_distribution<double> shift(-3.0, 3.0);
  // ic[0] (column) and ic[1] (row) off the panel centre, as `drr -c` allows.
  const double ic_column = 0.5 * (columns - 1) + shift(random);
  const double ic_row = 0.5 * (rows - 1) + shift(random);
  const Vec3 isocenter = {12.5, -7.25, 3.0};
  FanConeOptions options;
  options.detector = {rows, columns, ps_row, ps_column,
                      (ic_column - 0.5 * (columns - 1)) * ps_column,
                      (ic_row - 0.5 * (rows - 1)) * ps_row};
  options.source_origin_mm = sad;
  options.origin_detector_mm = sid - sad;
  for (const double a : gantry) options.angles_rad.push_back(-a - kPi / 2);
  auto geometry = MakeCircularCone(options);
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  for (size_t i = 0; i < gantry.size(); ++i) {
    const PlastimatchPanel panel = PlastimatchDrrPanel(gantry[i], isocenter, sad, sid);
    ExpectNear(geometry->views()[i].source, panel.cam - isocenter);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < columns; ++c) {
        const Vec3 theirs = panel.center + ((c - ic_column) * ps_column) * panel.prt +
                            ((r - ic_row) * ps_row) * panel.pdn;
        ExpectNear(geometry->PixelPosition(static_cast<int64_t>(i),
                                           static_cast<double>(rows - 1 - r),
                                           static_cast<double>(columns - 1 - c)),
                   theirs - isocenter);
      }
    }
  }
}

TEST(GeometryConversionTest, PlastimatchProjectionMatrixSendsOurPixelsToTheirIndices) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::vector<double> gantry = TestAngles(random);
  // The matrix takes sad as |cam|, so it describes the source only with the isocenter at
  // the origin (fdk's volume is centred there).
  const double sad = 1000, sid = 1500, ps_column = 0.388, ps_row = 0.388;
  const int64_t columns = 9, rows = 6;
  const double ic_column = 4.0 + 1.75, ic_row = 2.5 - 0.5;
  FanConeOptions options;
  options.detector = {rows, columns, ps_row, ps_column,
                      (ic_column - 0.5 * (columns - 1)) * ps_column,
                      (ic_row - 0.5 * (rows - 1)) * ps_row};
  options.source_origin_mm = sad;
  options.origin_detector_mm = sid - sad;
  for (const double a : gantry) options.angles_rad.push_back(-a - kPi / 2);
  auto geometry = MakeCircularCone(options);
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  for (size_t i = 0; i < gantry.size(); ++i) {
    const Vec3 vup = {0, 0, 1};
    const Vec3 cam = {sad * std::cos(gantry[i]), -sad * std::sin(gantry[i]), 0};
    const Vec3 nrm = Normalized(cam);
    const Vec3 plt = Normalized(Cross(nrm, vup));
    const Vec3 pup = Normalized(Cross(plt, nrm));
    const double cam_distance = Norm(cam);
    // matrix = intrinsic x extrinsic, the target at the origin.
    const auto project = [&](const Vec3& x) {
      const double xe = -Dot(plt, x), ye = -Dot(pup, x), ze = -Dot(nrm, x) + cam_distance;
      const double w = ze / sid;
      return std::array<double, 2>{ic_column + (xe / ps_column) / w,
                                   ic_row + (ye / ps_row) / w};
    };
    // Points along our pixel's ray (from the source through the pixel) all land on
    // plastimatch's (column, row) of that pixel.
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t column = 0; column < columns; ++column) {
        const Vec3 pixel = geometry->PixelPosition(static_cast<int64_t>(i),
                                                   static_cast<double>(row),
                                                   static_cast<double>(column));
        const Vec3 source = geometry->views()[i].source;
        for (const double along : {0.4, 0.6, 1.0}) {
          const auto [c, r] = project(source + along * (pixel - source));
          EXPECT_NEAR(c, static_cast<double>(columns - 1 - column), 1e-9);
          EXPECT_NEAR(r, static_cast<double>(rows - 1 - row), 1e-9);
        }
      }
    }
  }
}

// plastimatch fdk's volume (fdk_util.cxx, my_create_volume): dim voxels over volume_size
// mm per axis, voxel i at -size/2 + spacing/2 + i spacing, x fastest: our volume with
// the same size, voxel_size = size/dim and center_mm = 0, stored the same way.
TEST(GeometryConversionTest, PlastimatchFdkVolumeIsOurCentredVolume) {
  const int64_t dim[3] = {17, 12, 5};
  const double size_mm[3] = {60.0, 48.0, 21.0};
  auto volume = VolumeGeometry::Create(
      {dim[0], dim[1], dim[2]}, {size_mm[0] / dim[0], size_mm[1] / dim[1], size_mm[2] / dim[2]},
      {0, 0, 0});
  ASSERT_TRUE(volume.ok()) << volume.status();
  for (int axis = 0; axis < 3; ++axis) {
    const double spacing = size_mm[axis] / static_cast<double>(dim[axis]);
    for (int64_t index = 0; index < dim[axis]; ++index) {
      const double theirs = -size_mm[axis] / 2 + spacing / 2 + static_cast<double>(index) * spacing;
      const double i = static_cast<double>(index);
      const double ours = axis == 0 ? volume->x_mm(i) : axis == 1 ? volume->y_mm(i) : volume->z_mm(i);
      EXPECT_NEAR(ours, theirs, 1e-9) << "axis " << axis << " index " << index;
    }
  }
}

}  // namespace
}  // namespace tomo::core
