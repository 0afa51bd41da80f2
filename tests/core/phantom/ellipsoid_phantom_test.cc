#include "core/phantom/ellipsoid_phantom.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/geometry/geometry_builders.h"
#include "core/phantom/ellipse_phantom.h"
#include "gtest/gtest.h"

namespace tomo::core {
namespace {

constexpr double kPi = 3.14159265358979323846;

Ray MakeRay(Vec3 origin, Vec3 direction) { return {origin, Normalized(direction)}; }

// A slab of the projection test, off-centre and thinner than the ellipsoids.
constexpr double kSlabLowMm = -1.2;
constexpr double kSlabHighMm = 2.1;

TEST(EllipsoidPhantomTest, SphereChordIsTwiceTheHalfChord) {
  const double r = 10.0;
  EllipsoidPhantom sphere({Ellipsoid{{1, 2, 3}, {r, r, r}, 0.3, 0.5}});
  for (double d : {0.0, 2.5, 7.0, 9.99, 10.5}) {
    // Along an oblique direction, at distance d from the centre.
    const Vec3 direction = Normalized({1, 2, -0.5});
    const Vec3 offset = d * Normalized(Cross(direction, {0, 0, 1}));
    const Vec3 origin = Vec3{1, 2, 3} + offset - 300.0 * direction;
    const double expected = d < r ? 0.5 * 2.0 * std::sqrt(r * r - d * d) : 0.0;
    EXPECT_NEAR(sphere.LineIntegral(MakeRay(origin, direction)), expected, 1e-9) << d;
    // The whole line counts, also behind the origin.
    EXPECT_NEAR(sphere.LineIntegral(MakeRay(Vec3{1, 2, 3} + offset, direction)), expected, 1e-9);
  }
}

TEST(EllipsoidPhantomTest, FarParallelRayOriginKeepsPrecision) {
  EllipsoidPhantom sphere({Ellipsoid{{0, 0, 0}, {20, 20, 20}, 0, 1}});
  const Ray ray = MakeRay({12, -1e6, 0}, {0, 1, 0});
  EXPECT_NEAR(sphere.LineIntegral(ray), 2.0 * std::sqrt(400.0 - 144.0), 1e-6);
}

// Midpoint-rule integral of DensityAt along a ray, for checking the chords.
double NumericIntegral(const EllipsoidPhantom& phantom, const Ray& ray, double half_length,
                       int steps) {
  const double dt = 2.0 * half_length / steps;
  double sum = 0;
  for (int i = 0; i < steps; ++i) {
    const double t = -half_length + (i + 0.5) * dt;
    sum += phantom.DensityAt(ray.origin + t * ray.direction);
  }
  return sum * dt;
}

TEST(EllipsoidPhantomTest, RotatedEllipsoidMatchesNumericIntegration) {
  EllipsoidPhantom phantom(
      {Ellipsoid{{3, -2, 1}, {12, 5, 8}, 0.7, 1.5}, Ellipsoid{{-1, 1, 0}, {4, 9, 3}, -1.1, -0.4}});
  const std::vector<Ray> rays = {
      MakeRay({3, -2, 1}, {1, 0, 0}),        MakeRay({0, 0, 0}, {0.3, 1, 0.2}),
      MakeRay({2, -1, 2}, {-1, 0.4, 0.9}),   MakeRay({-1, 1, 0.5}, {0, 0, 1}),
      MakeRay({5, 3, -2}, {0.7, -0.7, 0.1}), MakeRay({0, 4, 0}, {1, 0.05, 0})};
  for (const Ray& ray : rays) {
    const double numeric = NumericIntegral(phantom, ray, 40.0, 200000);
    EXPECT_NEAR(phantom.LineIntegral(ray), numeric, 2e-3)
        << ray.direction.x << " " << ray.direction.y << " " << ray.direction.z;
  }
}

TEST(EllipsoidPhantomTest, SheppLogan3DTable) {
  const EllipsoidPhantom phantom = EllipsoidPhantom::SheppLogan3D(100.0);
  ASSERT_EQ(phantom.ellipsoids().size(), 10u);
  // Toft's contrasts: skull 1, brain 1 - 0.8 = 0.2.
  EXPECT_DOUBLE_EQ(phantom.DensityAt({0, 0, 0}), 0.2);
  EXPECT_DOUBLE_EQ(phantom.DensityAt({0, 90, 0}), 1.0);
  EXPECT_DOUBLE_EQ(phantom.DensityAt({0, 95, 0}), 0.0);
  // Ventricles (ellipsoids 3 and 4) at z = -25 mm: 0.2 - 0.2 = 0.
  EXPECT_NEAR(phantom.DensityAt({-22, 0, -25}), 0.0, 1e-12);
  EXPECT_NEAR(phantom.DensityAt({22, 0, -25}), 0.0, 1e-12);
  // Ellipsoid 10 at z = 62.5 mm: 0.2 - 0.1.
  EXPECT_NEAR(phantom.DensityAt({0, 10, 62.5}), 0.1, 1e-12);
}

// The z = 0 plane of the 3D phantom holds the cross-sections of the ellipsoids that reach
// it: an ellipsoid centred at z0 with semi-axes (a, b, c) cuts it in the ellipse with
// semi-axes (a, b) sqrt(1 - (z0 / c)^2). In-plane rays must see exactly those ellipses.
TEST(EllipsoidPhantomTest, InPlaneRaysMatchTheCrossSectionEllipses) {
  const EllipsoidPhantom phantom = EllipsoidPhantom::SheppLogan3D(100.0);
  std::vector<Ellipse> sections;
  for (const Ellipsoid& e : phantom.ellipsoids()) {
    const double ratio = e.center_mm.z / e.semi_axes_mm.z;
    if (ratio * ratio >= 1.0) continue;
    const double scale = std::sqrt(1.0 - ratio * ratio);
    sections.push_back(Ellipse{e.center_mm.x, e.center_mm.y, scale * e.semi_axes_mm.x,
                               scale * e.semi_axes_mm.y, e.rotation_rad, e.density});
  }
  // Skull, brain and ellipsoid 5 (centred at z = -25 mm with c = 50 mm).
  ASSERT_EQ(sections.size(), 3u);
  const EllipsePhantom slice(sections);
  for (double theta : {0.0, 0.4, 1.3, 2.9, 4.0}) {
    for (double s = -95; s <= 95; s += 2.5) {
      // The 2D ray at (s, theta): points s e_u + l r, r = (sin, -cos).
      const Vec3 r = {std::sin(theta), -std::cos(theta), 0};
      const Vec3 e_u = {std::cos(theta), std::sin(theta), 0};
      EXPECT_NEAR(phantom.LineIntegral({s * e_u, r}), slice.LineIntegral(s, theta), 1e-9)
          << s << " " << theta;
    }
  }
  // The documented difference from the 2D modified Shepp-Logan: its inner ellipses are not
  // in this plane, and its brain is shifted by -0.0184 radius in y. Rays that miss the inner
  // ellipses of both agree exactly: vertical rays (theta = 0) with 0.48 <= |s| / radius <=
  // 0.68 (the chord of an ellipse does not depend on a shift along the ray) and horizontal
  // rays through the skull only.
  const EllipsePhantom modified = EllipsePhantom::ModifiedSheppLogan(100.0);
  for (double s : {-68.0, -60.0, -48.0, 48.0, 55.0, 68.0}) {
    EXPECT_NEAR(phantom.LineIntegral({Vec3{s, 0, 0}, Vec3{0, -1, 0}}),
                modified.LineIntegral(s, 0.0), 1e-9)
        << s;
  }
  for (double s : {-91.0, -90.0, 88.0, 91.0}) {
    EXPECT_NEAR(phantom.LineIntegral({Vec3{0, s, 0}, Vec3{1, 0, 0}}),
                modified.LineIntegral(s, 0.5 * kPi), 1e-9)
        << s;
  }
  // Through the middle the 2D inner ellipses make the difference.
  EXPECT_GT(std::fabs(phantom.LineIntegral({Vec3{0, 0, 0}, Vec3{0, -1, 0}}) -
                      modified.LineIntegral(0.0, 0.0)),
            0.5);
}

TEST(EllipsoidPhantomTest, RasterizeVolumeAndMass) {
  // A sphere of radius 10 mm and density 2 on 1 mm voxels: mass 2 * 4/3 pi r^3.
  EllipsoidPhantom phantom({Ellipsoid{{0.3, -0.2, 0.1}, {10, 10, 10}, 0, 2.0},
                            Ellipsoid{{0, 0, 0}, {6, 3, 4}, 0.6, -1.0}});
  const VolumeGeometry volume = VolumeGeometry::Create({32, 32, 32}, {1, 1, 1}, {}).value();
  const Array3D image = phantom.Rasterize(volume, 4);
  double mass = 0;
  for (int64_t i = 0; i < image.size(); ++i) mass += image.data()[i];
  const double expected = 2.0 * 4.0 / 3.0 * kPi * 1000.0 - 1.0 * 4.0 / 3.0 * kPi * 6 * 3 * 4;
  EXPECT_NEAR(mass, expected, 0.005 * expected);
  EXPECT_FLOAT_EQ(image.at(16, 16, 16), 1.0f);
  EXPECT_FLOAT_EQ(image.at(16, 16, 31), 0.0f);
}

TEST(EllipsoidPhantomTest, ProjectMatchesLineIntegralsAndMass) {
  EllipsoidPhantom phantom({Ellipsoid{{0, 0, 0}, {10, 10, 10}, 0, 1.0}});
  FanConeOptions cone;
  cone.detector = {16, 24, 2.0, 2.0, 0, 0};
  cone.source_origin_mm = 100;
  cone.origin_detector_mm = 100;
  cone.angles_rad = UniformAnglesRad(4, 0, 2 * kPi);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const Array3D one = phantom.Project(geometry, 1);
  for (int64_t v = 0; v < 4; ++v) {
    EXPECT_NEAR(one.at(v, 5, 7), phantom.LineIntegral(geometry.PixelRay(v, 5, 7)), 1e-5);
  }
  // Parallel beams: the supersampled projections integrate to the mass.
  DetectorLayout detector = {32, 32, 1.0, 1.0, 0, 0};
  const VectorGeometry parallel = MakeParallel3D(detector, UniformAnglesRad(3, 0, kPi)).value();
  const Array3D p = phantom.Project(parallel, 3);
  for (int64_t v = 0; v < 3; ++v) {
    double sum = 0;
    for (int64_t r = 0; r < 32; ++r) {
      for (int64_t c = 0; c < 32; ++c) sum += p.at(v, r, c);
    }
    EXPECT_NEAR(sum, 4.0 / 3.0 * kPi * 1000.0, 0.005 * 4.0 / 3.0 * kPi * 1000.0);
  }
  // A one-row fan: the centre pixel's ray through the middle of the sphere.
  FanConeOptions fan = cone;
  fan.detector = {1, 25, 1.0, 1.0, 0, 0};
  const Array3D f = phantom.Project(MakeFan2D(fan).value(), 4);
  EXPECT_NEAR(f.at(0, 0, 12), 20.0, 0.05);
}

// The slab's part of the phantom: against numeric integration of the density inside the
// slab, additivity over adjacent slabs, infinite bounds giving the whole line, horizontal
// rays, and Project with bounds equal to its per-ray integrals.
TEST(EllipsoidPhantomTest, SlabLineIntegralsCutThePhantomBetweenHeights) {
  const EllipsoidPhantom phantom(
      {Ellipsoid{{3, -2, 1}, {12, 5, 8}, 0.7, 1.5}, Ellipsoid{{-1, 1, -2}, {4, 9, 3}, -1.1, -0.4}});
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<Ray> rays = {
      MakeRay({0, 0, 0}, {0.3, 1, 0.2}), MakeRay({2, -1, 2}, {-1, 0.4, 0.9}),
      MakeRay({-1, 1, 0.5}, {0, 0, 1}),  MakeRay({5, 3, -2}, {0.7, -0.7, -0.3})};
  for (const Ray& ray : rays) {
    SCOPED_TRACE(ray.direction.z);
    const double lo = -1.7, mid = 0.9, hi = 3.3;
    // Midpoint rule over the part of the line inside [lo, hi].
    const int steps = 200000;
    const double half_length = 40.0, dt = 2.0 * half_length / steps;
    double numeric = 0;
    for (int i = 0; i < steps; ++i) {
      const Vec3 point = ray.origin + (-half_length + (i + 0.5) * dt) * ray.direction;
      if (point.z >= lo && point.z <= hi) numeric += phantom.DensityAt(point) * dt;
    }
    const double slab = phantom.LineIntegral(ray, lo, hi);
    EXPECT_NEAR(slab, numeric, 2e-3);
    EXPECT_GT(std::abs(slab), 0.01);  // every ray meets the slab's part
    EXPECT_NEAR(phantom.LineIntegral(ray, lo, mid) + phantom.LineIntegral(ray, mid, hi), slab,
                1e-9);
    EXPECT_NEAR(phantom.LineIntegral(ray, -inf, inf), phantom.LineIntegral(ray), 1e-9);
  }
  const Ray horizontal = MakeRay({0, 0, 0.5}, {1, 0.2, 0});
  EXPECT_NEAR(phantom.LineIntegral(horizontal, 0.4, 0.6), phantom.LineIntegral(horizontal), 1e-12);
  EXPECT_EQ(phantom.LineIntegral(horizontal, 0.6, 0.9), 0.0);

  FanConeOptions cone;
  cone.detector = {9, 13, 1.7, 1.3, 0.4, -0.6};
  cone.source_origin_mm = 60;
  cone.origin_detector_mm = 45;
  cone.angles_rad = UniformAnglesRad(5, 0.2, 2 * kPi);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const Array3D slab = phantom.Project(geometry, 1, kSlabLowMm, kSlabHighMm);
  const Array3D whole = phantom.Project(geometry, 1);
  const Array3D unbounded = phantom.Project(geometry, 1, -inf, inf);
  bool cut = false;
  for (int64_t v = 0; v < 5; ++v) {
    for (int64_t r = 0; r < 9; ++r) {
      for (int64_t c = 0; c < 13; ++c) {
        const Ray ray = geometry.PixelRay(v, r, c);
        ASSERT_NEAR(slab.at(v, r, c), phantom.LineIntegral(ray, kSlabLowMm, kSlabHighMm), 1e-5);
        ASSERT_NEAR(unbounded.at(v, r, c), whole.at(v, r, c), 1e-5);
        cut = cut || std::abs(slab.at(v, r, c) - whole.at(v, r, c)) > 0.1;
      }
    }
  }
  EXPECT_TRUE(cut) << "the slab must cut some rays";
}

// An extruded 2D phantom gives the 2D line integrals along fan rays in the plane: the
// oracle for fan-beam reconstructions of the 2D phantom.
TEST(EllipsoidPhantomTest, ExtrudedPhantomHasThe2DLineIntegralsInPlane) {
  const EllipsePhantom flat = EllipsePhantom::ModifiedSheppLogan(100.0);
  const EllipsoidPhantom extruded = EllipsoidPhantom::ExtrudedFrom(flat);
  for (double theta : {0.0, 0.37, 1.2, 2.9, 4.4}) {
    for (double s : {-80.0, -31.5, 0.0, 12.25, 66.0}) {
      // The in-plane line x cos t + y sin t = s, as a ray with a far origin.
      const Vec3 direction{std::sin(theta), -std::cos(theta), 0.0};
      const Vec3 foot{s * std::cos(theta), s * std::sin(theta), 0.0};
      const Ray ray{foot - 500.0 * direction, direction};
      EXPECT_NEAR(extruded.LineIntegral(ray), flat.LineIntegral(s, theta), 1e-9)
          << "theta " << theta << " s " << s;
    }
  }
  EXPECT_DOUBLE_EQ(extruded.DensityAt({0.0, 0.0, 0.0}), flat.DensityAt(0.0, 0.0));
  EXPECT_DOUBLE_EQ(extruded.DensityAt({30.0, -20.0, 0.0}), flat.DensityAt(30.0, -20.0));
}

}  // namespace
}  // namespace tomo::core
