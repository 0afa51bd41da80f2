// Tests of the q-GGMRF prior (core/statistical/qggmrf_prior.cc, qggmrf_math.h and
// icd_update_math.h): default neighbour weights, validation naming the field, the
// surrogate's curvature against a numerical derivative and its bound, and the one-voxel
// update against a brute-force minimisation.
#include "core/statistical/qggmrf_prior.h"

#include <cmath>
#include <random>

#include "core/statistical/icd_update_math.h"
#include "core/statistical/qggmrf_math.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core::statistical {
namespace {

using ::testing::HasSubstr;

TEST(QggmrfPriorTest, DefaultNeighbourWeightsAreNormalisedInverseDistances) {
  const std::array<double, 26> w = DefaultNeighbourWeights({0.5, 0.7, 1.3});
  double sum = 0;
  for (int k = 0; k < 26; ++k) {
    sum += w[k];
    EXPECT_EQ(w[k], w[25 - k]);
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  // k = 12 is (0, 0, -1): distance 0.5; k = 10 is (0, -1, 0): 0.7; k = 4 is (-1, 0, 0): 1.3;
  // k = 0 is (-1, -1, -1).
  EXPECT_EQ(NeighbourOffsetOf(12).dx, -1);
  EXPECT_EQ(NeighbourOffsetOf(10).dy, -1);
  EXPECT_EQ(NeighbourOffsetOf(4).dz, -1);
  EXPECT_NEAR(w[12] / w[10], 0.7 / 0.5, 1e-12);
  EXPECT_NEAR(w[12] / w[4], 1.3 / 0.5, 1e-12);
  EXPECT_NEAR(w[12] / w[0], std::sqrt(0.25 + 0.49 + 1.69) / 0.5, 1e-12);
  EXPECT_TRUE(ValidateQggmrfPrior(DefaultQggmrfPrior(
                  VolumeGeometry::Create({4, 4, 4}, {0.5, 0.7, 1.3}, {}).value()))
                  .ok());
}

TEST(QggmrfPriorTest, BadParametersAreRefusedNamingTheField) {
  const QggmrfPrior good = DefaultQggmrfPrior(VolumeGeometry::Create({4, 4, 4}, {1, 1, 1}, {}).value());
  struct Bad {
    void (*change)(QggmrfPrior&);
    const char* field;
  };
  const Bad cases[] = {
      {[](QggmrfPrior& p) { p.p = 2.5; }, "prior.p: 2.5"},
      {[](QggmrfPrior& p) { p.p = 0.5; }, "prior.p: 0.5"},
      {[](QggmrfPrior& p) { p.q = 0.9; }, "prior.q: 0.9"},
      {[](QggmrfPrior& p) { p.p = 1.5; p.q = 1.8; }, "prior.q: 1.8"},
      {[](QggmrfPrior& p) { p.c = 0; }, "prior.c: 0"},
      {[](QggmrfPrior& p) { p.c = NAN; }, "prior.c"},
      {[](QggmrfPrior& p) { p.sigma = -1; }, "prior.sigma: -1"},
      {[](QggmrfPrior& p) { p.sigma = INFINITY; }, "prior.sigma"},
      {[](QggmrfPrior& p) { p.neighbour_weights[3] = -0.1; }, "prior.neighbour_weights[3]"},
      {[](QggmrfPrior& p) { p.neighbour_weights[7] *= 2; }, "prior.neighbour_weights[7]"},
      {[](QggmrfPrior& p) { p.neighbour_weights.fill(0); }, "prior.neighbour_weights"},
  };
  for (const Bad& bad : cases) {
    QggmrfPrior prior = good;
    bad.change(prior);
    const absl::Status status = ValidateQggmrfPrior(prior);
    ASSERT_FALSE(status.ok()) << bad.field;
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr(bad.field));
  }
}

TEST(QggmrfPriorTest, SurrogateCurvatureIsHalfTheSlopeOverDifferenceAndBoundsThePotential) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> difference(-0.02, 0.02);
  for (const auto& [p, q] : {std::pair{2.0, 1.2}, std::pair{2.0, 1.0}, std::pair{1.6, 1.1},
                            std::pair{2.0, 2.0}}) {
    QggmrfPrior prior;
    prior.p = p;
    prior.q = q;
    prior.c = 0.3;
    prior.sigma = 0.004;
    const QggmrfCoefficientsT<double> k = QggmrfCoefficients(prior);
    for (int trial = 0; trial < 200; ++trial) {
      const double d0 = difference(random), d = difference(random);
      const double h = 1e-7 * std::max(std::abs(d0), 1e-4);
      const double slope = (QggmrfPotential(k, d0 + h) - QggmrfPotential(k, d0 - h)) / (2 * h);
      const double curvature = QggmrfSurrogateCurvature(k, d0);
      EXPECT_NEAR(curvature, slope / (2 * d0), 1e-5 * curvature) << "p " << p << " q " << q;
      const double bound = QggmrfPotential(k, d0) + curvature * (d * d - d0 * d0);
      // The bound subtracts terms of the size of rho(d0): rounding relative to that.
      const double rounding = 1e-12 * (QggmrfPotential(k, d0) + QggmrfPotential(k, d));
      EXPECT_GE(bound, QggmrfPotential(k, d) - rounding) << "d0 " << d0 << " d " << d;
    }
  }
  // p = 2: the curvature at 0 is the potential's second derivative / 2 = 1 / (2 sigma^2).
  QggmrfPrior quadratic_near_zero;
  const QggmrfCoefficientsT<double> k = QggmrfCoefficients(quadratic_near_zero);
  EXPECT_NEAR(QggmrfSurrogateCurvature(k, 0.0),
              0.5 / (quadratic_near_zero.sigma * quadratic_near_zero.sigma), 1e-6);
}

TEST(QggmrfPriorTest, VoxelUpdateMinimisesTheSurrogateAndLowersTheTrueObjective) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> value(0.0, 0.04), theta(-200, 200), weight(0, 0.1);
  QggmrfPrior prior;
  const QggmrfCoefficientsT<double> k = QggmrfCoefficients(prior);
  for (int trial = 0; trial < 100; ++trial) {
    const double x = value(random), t1 = theta(random), t2 = std::abs(theta(random)) * 50;
    double values[26], weights[26];
    for (int n = 0; n < 26; ++n) {
      values[n] = value(random);
      weights[n] = n % 5 == 0 ? 0.0 : weight(random);
    }
    const double r = SurrogateVoxelUpdate<double>(x, t1, t2, values, weights, k);
    ASSERT_GE(r, 0);
    auto surrogate = [&](double s) {
      double f = t1 * (s - x) + 0.5 * t2 * (s - x) * (s - x);
      for (int n = 0; n < 26; ++n) {
        f += weights[n] * QggmrfSurrogateCurvature(k, x - values[n]) * (s - values[n]) * (s - values[n]);
      }
      return f;
    };
    auto objective = [&](double s) {
      double f = t1 * (s - x) + 0.5 * t2 * (s - x) * (s - x);
      for (int n = 0; n < 26; ++n) f += weights[n] * QggmrfPotential(k, s - values[n]);
      return f;
    };
    // Brute force over r >= 0.
    for (double s = 0; s < 0.2; s += 1e-4) {
      ASSERT_LE(surrogate(r), surrogate(s) + 1e-9) << "s " << s;
    }
    EXPECT_LE(objective(r), objective(x) + 1e-12);
  }
}

}  // namespace
}  // namespace tomo::core::statistical
