#include "core/phantom/ellipsoid_radon.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

// Two unit vectors completing n to an orthonormal frame.
void PlaneBasis(const Vec3& n, Vec3& e1, Vec3& e2) {
  const Vec3 helper = std::abs(n.z) < 0.9 ? Vec3{0, 0, 1} : Vec3{1, 0, 0};
  e1 = Normalized(Cross(n, helper));
  e2 = Cross(n, e1);
}

// A phantom of tilted, offset ellipsoids of both signs, drawn at random inside a 40 mm ball.
EllipsoidPhantom RandomPhantom(std::mt19937_64& random) {
  std::uniform_real_distribution<double> centre(-12, 12), axis(2, 15), angle(-M_PI, M_PI),
      density(-1, 2);
  std::vector<Ellipsoid> ellipsoids;
  for (int i = 0; i < 5; ++i) {
    ellipsoids.push_back({{centre(random), centre(random), centre(random)},
                          {axis(random), axis(random), axis(random)},
                          angle(random),
                          density(random)});
  }
  return EllipsoidPhantom(std::move(ellipsoids));
}

Vec3 RandomUnit(std::mt19937_64& random) {
  std::normal_distribution<double> normal;
  return Normalized({normal(random), normal(random), normal(random)});
}

TEST(EllipsoidRadonTest, SphereGivesTheDiscArea) {
  const EllipsoidPhantom sphere({{{1, -2, 3}, {5, 5, 5}, 0.4, 0.5}});
  const Vec3 n = Normalized({1, 2, 2});
  const double c = Dot(Vec3{1, -2, 3}, n);  // the centre's offset along n: 1
  for (double s : {-5.5, -4.9, -2.0, 0.0, 1.3, 4.99, 6.0}) {
    const double expected = std::abs(s) < 5 ? 0.5 * M_PI * (25 - s * s) : 0.0;
    EXPECT_NEAR(EllipsoidPlaneIntegral(sphere, n, c + s), expected, 1e-12) << s;
  }
}

TEST(EllipsoidRadonTest, PlaneIntegralsSumToTheMassForEveryDirection) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const EllipsoidPhantom phantom = RandomPhantom(random);
  double mass = 0;
  for (const Ellipsoid& e : phantom.ellipsoids()) {
    mass += e.density * 4.0 / 3.0 * M_PI * e.semi_axes_mm.x * e.semi_axes_mm.y * e.semi_axes_mm.z;
  }
  for (int trial = 0; trial < 10; ++trial) {
    const Vec3 n = RandomUnit(random);
    // Each term is a quadratic in t on its support: the midpoint rule's error is the
    // support's kinks only, O(h^2).
    const double h = 1e-3;
    double sum = 0;
    for (double t = -40 + h / 2; t < 40; t += h) sum += EllipsoidPlaneIntegral(phantom, n, t) * h;
    EXPECT_NEAR(sum, mass, 1e-5 * std::abs(mass) + 1e-3) << trial;
  }
}

TEST(EllipsoidRadonTest, MatchesTheIntegralOfExactLineIntegralsAcrossThePlane) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const EllipsoidPhantom phantom = RandomPhantom(random);
  const EllipsoidPhantom head = EllipsoidPhantom::SheppLogan3D(20.0);
  std::uniform_real_distribution<double> offset(-15, 15);
  for (const EllipsoidPhantom* p : {&phantom, &head}) {
    for (int trial = 0; trial < 8; ++trial) {
      const Vec3 n = RandomUnit(random);
      const double t = offset(random);
      Vec3 e1, e2;
      PlaneBasis(n, e1, e2);
      // Lines along e2 in the plane, at offsets a along e1 (midpoint rule over [-50, 50]).
      // The chord lengths have square-root ends, where the midpoint rule errs by about
      // 0.2 sqrt(2 r) h^1.5 per end and per ellipsoid (r ~ 15 mm): 2e-4 at h = 1 um, summed
      // over up to 10 ellipsoids below the 2e-3 allowed (values ~ 10 to 500).
      const int count = 100000;
      const double step = 100.0 / count;
      double brute = 0;
      for (int j = 0; j < count; ++j) {
        const double a = -50 + (j + 0.5) * step;
        brute += p->LineIntegral(Ray{t * n + a * e1, e2}) * step;
      }
      const double exact = EllipsoidPlaneIntegral(*p, n, t);
      EXPECT_NEAR(exact, brute, 1e-5 * std::abs(brute) + 2e-3) << "trial " << trial << " t " << t;
    }
  }
}

TEST(EllipsoidRadonTest, MatchesPointSamplesOfTheDensityOverThePlane) {
  // An oracle that shares nothing with the closed form: the density summed over a fine grid
  // of points in the plane (error ~ the boundary's share of grid cells).
  const EllipsoidPhantom head = EllipsoidPhantom::SheppLogan3D(20.0);
  const Vec3 normals[] = {Normalized({0.3, -0.5, 0.8}), Normalized({1, 0.1, 0}),
                          Normalized({0, 0, 1})};
  const double offsets[] = {-5.0, 2.5, 0.0};
  for (int trial = 0; trial < 3; ++trial) {
    const Vec3 n = normals[trial];
    Vec3 e1, e2;
    PlaneBasis(n, e1, e2);
    const double h = 0.04;
    double sum = 0;
    for (double a = -22 + h / 2; a < 22; a += h) {
      for (double b = -22 + h / 2; b < 22; b += h) {
        sum += head.DensityAt(offsets[trial] * n + a * e1 + b * e2);
      }
    }
    sum *= h * h;
    const double exact = EllipsoidPlaneIntegral(head, n, offsets[trial]);
    EXPECT_GT(exact, 10.0);
    EXPECT_NEAR(exact, sum, 2e-3 * exact) << trial;
  }
}

TEST(EllipsoidRadonTest, TransformFillsDirectionsBySamplesAndAveragesOverTheSample) {
  auto g = MakeUniformSolidAngleRadon(7, 41, 1.3);
  ASSERT_TRUE(g.ok());
  const EllipsoidPhantom head = EllipsoidPhantom::SheppLogan3D(20.0);
  const Array3D point = EllipsoidRadonTransform(head, *g, 1);
  const Array3D mean = EllipsoidRadonTransform(head, *g, 4);
  ASSERT_EQ(point.dims(), (Dims3{7, 1, 41}));
  for (int64_t i = 0; i < 7; ++i) {
    const Vec3 n = g->directions[static_cast<size_t>(i)].unit();
    for (int64_t k = 0; k < 41; ++k) {
      const double t = (k - 20) * 1.3;
      EXPECT_FLOAT_EQ(point.at(i, 0, k), static_cast<float>(EllipsoidPlaneIntegral(head, n, t)));
      double expected = 0;
      for (double o : {-0.375, -0.125, 0.125, 0.375}) {
        expected += EllipsoidPlaneIntegral(head, n, t + o * 1.3) / 4;
      }
      EXPECT_FLOAT_EQ(mean.at(i, 0, k), static_cast<float>(expected));
    }
  }
}

}  // namespace
}  // namespace tomo::core
