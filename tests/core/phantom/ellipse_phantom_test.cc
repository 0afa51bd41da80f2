#include "core/phantom/ellipse_phantom.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

// Midpoint-rule integral of DensityAt along the ray at (s, theta), over |t| <= half_length.
// Each crossing of an ellipse's edge costs at most step/2 times the density jump.
double NumericLineIntegral(const EllipsePhantom& phantom, double s, double theta,
                           double half_length, double step) {
  const double ux = std::cos(theta), uy = std::sin(theta);
  const double rx = std::sin(theta), ry = -std::cos(theta);
  const int64_t count = static_cast<int64_t>(std::ceil(2 * half_length / step));
  const double h = 2 * half_length / static_cast<double>(count);
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double t = -half_length + (static_cast<double>(i) + 0.5) * h;
    sum += phantom.DensityAt(s * ux + t * rx, s * uy + t * ry);
  }
  return sum * h;
}

VolumeGeometry OnePixelAt(double x, double y, double size) {
  return VolumeGeometry::Create({1, 1, 1}, {size, size, size}, {x, y, 0}).value();
}

TEST(EllipsePhantomTest, DiscLineIntegralIsTheChordLength) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  const double r = 17.5, cx = 3.0, cy = -4.5, density = 0.7;
  // A disc's rotation must not matter.
  const EllipsePhantom disc({Ellipse{cx, cy, r, r, 0.4, density}});
  for (int i = 0; i < 200; ++i) {
    const double theta = M_PI * 2 * uniform(random);
    const double s = 25.0 * uniform(random);
    const double distance = s - (cx * std::cos(theta) + cy * std::sin(theta));
    const double expected =
        std::abs(distance) < r ? 2 * density * std::sqrt(r * r - distance * distance) : 0.0;
    EXPECT_NEAR(disc.LineIntegral(s, theta), expected, 1e-12 * r)
        << "s " << s << " theta " << theta;
  }
}

TEST(EllipsePhantomTest, SheppLoganIntegralsMatchNumericIntegrationOfDensity) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const EllipsePhantom phantom = EllipsePhantom::ModifiedSheppLogan(1.0);
  // A ray crosses at most 20 edges whose jumps total less than 4, so the midpoint rule
  // with step 2e-5 is within 4e-5 of the exact value; allow 1e-4.
  constexpr double kStep = 2e-5;
  constexpr double kTolerance = 1e-4;
  for (int i = 0; i < 12; ++i) {
    const double theta = M_PI * uniform(random);
    const double s = 1.9 * uniform(random) - 0.95;
    const double numeric = NumericLineIntegral(phantom, s, theta, 1.0, kStep);
    EXPECT_NEAR(phantom.LineIntegral(s, theta), numeric, kTolerance)
        << "s " << s << " theta " << theta;
  }
  // Rays through the small ellipses near y = -0.605, at their rotations' critical angles.
  for (double theta : {0.0, M_PI / 2, M_PI / 10, -M_PI / 10}) {
    const double s = -0.605 * std::sin(theta) + 0.01;
    EXPECT_NEAR(phantom.LineIntegral(s, theta), NumericLineIntegral(phantom, s, theta, 1.0, kStep),
                kTolerance)
        << "theta " << theta;
  }
}

TEST(EllipsePhantomTest, ModifiedSheppLoganDensitiesAtKnownPoints) {
  const EllipsePhantom phantom = EllipsePhantom::ModifiedSheppLogan(128.0);
  EXPECT_EQ(phantom.ellipses().size(), 10u);
  // Brain matter: skull 1.0 minus 0.8.
  EXPECT_NEAR(phantom.DensityAt(0, 0), 0.2, 1e-12);
  // Skull rim between the two outer ellipses.
  EXPECT_NEAR(phantom.DensityAt(0, 0.9 * 128), 1.0, 1e-12);
  // The dark ellipses ("ventricles"): 0.2 - 0.2.
  EXPECT_NEAR(phantom.DensityAt(-0.22 * 128, 0), 0.0, 1e-12);
  EXPECT_NEAR(phantom.DensityAt(0.22 * 128, 0), 0.0, 1e-12);
  // The large bright ellipse above.
  EXPECT_NEAR(phantom.DensityAt(0, 0.35 * 128), 0.3, 1e-12);
  // Outside.
  EXPECT_EQ(phantom.DensityAt(0.95 * 128, 0.95 * 128), 0.0);
  EXPECT_EQ(phantom.DensityAt(0, 0.93 * 128), 0.0);
}

TEST(EllipsePhantomTest, RasterizeMeansPixelsThatLieInOneRegion) {
  const EllipsePhantom phantom = EllipsePhantom::ModifiedSheppLogan(128.0);
  EXPECT_NEAR(phantom.Rasterize(OnePixelAt(0, 0, 1.0), 4).at(0, 0, 0), 0.2, 1e-6);
  EXPECT_NEAR(phantom.Rasterize(OnePixelAt(0, 0.35 * 128, 1.0), 4).at(0, 0, 0), 0.3, 1e-6);
  EXPECT_NEAR(phantom.Rasterize(OnePixelAt(0, 0.9 * 128, 1.0), 4).at(0, 0, 0), 1.0, 1e-6);
  EXPECT_EQ(phantom.Rasterize(OnePixelAt(125, 125, 1.0), 4).at(0, 0, 0), 0.0f);
}

TEST(EllipsePhantomTest, RasterizeAveragesEdgePixelsAndFillsEverySlice) {
  // A pixel cut in half by the edge of a half-plane-like huge disc gets the mean.
  const double r = 1000.0;
  const EllipsePhantom half({Ellipse{r, 0.0, r, r, 0.0, 2.0}});
  EXPECT_NEAR(half.Rasterize(OnePixelAt(0, 0, 1.0), 16).at(0, 0, 0), 1.0, 1e-3);

  // The mass of a disc: pi r^2 density, to the supersampled pixelisation's accuracy.
  const EllipsePhantom disc({Ellipse{2.0, -3.0, 20.0, 20.0, 0.0, 1.5}});
  auto volume = VolumeGeometry::Create({64, 60, 2}, {0.8, 0.8, 1.0}, {0, 0, 0});
  ASSERT_TRUE(volume.ok());
  const Array3D image = disc.Rasterize(*volume, 8);
  ASSERT_EQ(image.dims(), volume->dims());
  double mass = 0;
  for (int64_t y = 0; y < 60; ++y) {
    for (int64_t x = 0; x < 64; ++x) {
      mass += image.at(0, y, x) * 0.8 * 0.8;
      EXPECT_EQ(image.at(0, y, x), image.at(1, y, x));
    }
  }
  EXPECT_NEAR(mass, M_PI * 20 * 20 * 1.5, 0.002 * M_PI * 20 * 20 * 1.5);
}

TEST(EllipsePhantomTest, ParallelProjectionsAverageExactIntegralsAcrossEachElement) {
  const EllipsePhantom phantom = EllipsePhantom::ModifiedSheppLogan(100.0);
  auto geometry = ParallelGeometry2D::Create(31, 7.0, 2.5, {0.0, 0.7, 2.0});
  ASSERT_TRUE(geometry.ok());
  const Array3D single = phantom.ParallelProjections(*geometry, 1);
  const Array3D triple = phantom.ParallelProjections(*geometry, 3);
  ASSERT_EQ(single.dims(), geometry->projection_dims());
  double largest = 0;
  for (int64_t v = 0; v < 3; ++v) {
    const double theta = geometry->angles_rad()[v];
    for (int64_t k = 0; k < 31; ++k) {
      const double centre = phantom.LineIntegral(geometry->detector_position_mm(k), theta);
      const double mean =
          (phantom.LineIntegral(geometry->detector_position_mm(k - 1.0 / 3), theta) + centre +
           phantom.LineIntegral(geometry->detector_position_mm(k + 1.0 / 3), theta)) /
          3;
      EXPECT_NEAR(single.at(v, 0, k), centre, 1e-5 * (1 + centre));
      EXPECT_NEAR(triple.at(v, 0, k), mean, 1e-5 * (1 + mean));
      largest = std::max(largest, centre);
    }
  }
  EXPECT_GT(largest, 10.0);  // the rays do cross the phantom
}

}  // namespace
}  // namespace tomo::core
