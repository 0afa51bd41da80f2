#include "core/geometry/radon_geometry.h"

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

RadonGeometry ThreeDirections() {
  RadonGeometry g;
  g.directions = {{0.0, 0.3, 1.0}, {1.0, 1.2, 1.5}, {-2.0, 0.7, 2.0}};
  g.num_samples = 17;
  g.sample_spacing_mm = 0.4;
  return g;
}

TEST(RadonGeometryTest, UnitVectorFollowsThePhysicsConvention) {
  const Vec3 n = RadonDirection{0.3, 1.1, 1.0}.unit();
  EXPECT_NEAR(n.x, std::sin(1.1) * std::cos(0.3), 1e-15);
  EXPECT_NEAR(n.y, std::sin(1.1) * std::sin(0.3), 1e-15);
  EXPECT_NEAR(n.z, std::cos(1.1), 1e-15);
  const Vec3 up = RadonDirection{2.0, 0.0, 1.0}.unit();
  EXPECT_NEAR(up.z, 1.0, 1e-15);
  EXPECT_NEAR((RadonDirection{0, M_PI / 2, 1}.unit().x), 1.0, 1e-15);
  EXPECT_NEAR((RadonDirection{M_PI / 2, M_PI / 2, 1}.unit().y), 1.0, 1e-15);
}

TEST(RadonGeometryTest, SamplesAreCentredAndDimsAreDirectionsBySamples) {
  RadonGeometry g = ThreeDirections();
  EXPECT_TRUE(ValidateRadonGeometry(g).ok());
  EXPECT_EQ(g.projection_dims(), (Dims3{3, 1, 17}));
  EXPECT_DOUBLE_EQ(g.sample_t_mm(8), 0.0);
  EXPECT_DOUBLE_EQ(g.sample_t_mm(0), -8 * 0.4);
  EXPECT_DOUBLE_EQ(g.sample_t_mm(16), 8 * 0.4);
  g.num_samples = 4;
  EXPECT_DOUBLE_EQ(g.sample_t_mm(0), -1.5 * 0.4);
  EXPECT_DOUBLE_EQ(g.sample_t_mm(1.5), 0.0);
}

TEST(RadonGeometryTest, BadFieldsAreRefusedNamingFieldValueAndRange) {
  struct Case {
    void (*edit)(RadonGeometry&);
    const char* expected;
  };
  const Case cases[] = {
      {[](RadonGeometry& g) { g.directions[1].phi_rad = kNaN; },
       "directions[1].phi_rad: nan is not a finite angle in [-2 pi, 2 pi]"},
      {[](RadonGeometry& g) { g.directions[2].phi_rad = 7.0; },
       "directions[2].phi_rad: 7 is not a finite angle in [-2 pi, 2 pi]"},
      {[](RadonGeometry& g) { g.directions[0].theta_rad = -0.1; },
       "directions[0].theta_rad: -0.1 is not a finite angle in [0, pi]"},
      {[](RadonGeometry& g) { g.directions[2].theta_rad = kInf; },
       "directions[2].theta_rad: inf is not a finite angle in [0, pi]"},
      {[](RadonGeometry& g) { g.directions[1].weight_sr = 0.0; },
       "directions[1].weight_sr: 0 must be a finite solid angle > 0"},
      {[](RadonGeometry& g) { g.directions[2].weight_sr = -1.5; },
       "directions[2].weight_sr: -1.5 must be a finite solid angle > 0"},
      {[](RadonGeometry& g) { g.directions[0].weight_sr = kNaN; },
       "directions[0].weight_sr: nan must be a finite solid angle > 0"},
      {[](RadonGeometry& g) { g.num_samples = 1; }, "num_samples: 1 is out of range [2, 65536]"},
      {[](RadonGeometry& g) { g.num_samples = 70000; },
       "num_samples: 70000 is out of range [2, 65536]"},
      {[](RadonGeometry& g) { g.sample_spacing_mm = 0; },
       "sample_spacing_mm: 0 must be a finite value > 0"},
      {[](RadonGeometry& g) { g.sample_spacing_mm = kNaN; },
       "sample_spacing_mm: nan must be a finite value > 0"},
      {[](RadonGeometry& g) { g.directions.clear(); },
       "directions: 0 directions, allowed [1, 65536]"},
  };
  for (const Case& c : cases) {
    RadonGeometry g = ThreeDirections();
    c.edit(g);
    const absl::Status status = ValidateRadonGeometry(g);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_EQ(status.message(), c.expected);
  }
}

TEST(RadonGeometryTest, RepeatedAndOppositeDirectionsAreRefused) {
  {
    RadonGeometry g = ThreeDirections();
    g.directions.push_back({1.0 - 2 * M_PI, 1.2, 1.0});  // directions[1] again, phi - 2 pi
    const absl::Status status = ValidateRadonGeometry(g);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("directions[3]: "));
    EXPECT_THAT(status.message(), HasSubstr("repeats directions[1]"));
    EXPECT_THAT(status.message(), HasSubstr("within 1e-06 rad"));
  }
  {
    // -n of directions[2] = (phi + pi, pi - theta).
    RadonGeometry g = ThreeDirections();
    g.directions.push_back({-2.0 + M_PI, M_PI - 0.7, 1.0});
    const absl::Status status = ValidateRadonGeometry(g);
    EXPECT_THAT(status.message(), HasSubstr("directions[3]: "));
    EXPECT_THAT(status.message(), HasSubstr("is opposite to directions[2]"));
  }
  {
    // On the equator, opposite directions have the same z: the case a z-sort alone misses.
    RadonGeometry g = ThreeDirections();
    g.directions.push_back({0.25, M_PI / 2, 1.0});
    g.directions.push_back({0.25 + M_PI, M_PI / 2 + 1e-9, 1.0});
    EXPECT_THAT(ValidateRadonGeometry(g).message(), HasSubstr("directions[4]: "));
    EXPECT_THAT(ValidateRadonGeometry(g).message(), HasSubstr("is opposite to directions[3]"));
  }
  {
    // At the pole phi does not matter.
    RadonGeometry g = ThreeDirections();
    g.directions.push_back({0.0, 0.0, 1.0});
    g.directions.push_back({2.5, 0.0, 1.0});
    EXPECT_THAT(ValidateRadonGeometry(g).message(), HasSubstr("repeats directions[3]"));
  }
  {
    // 2e-6 rad apart is allowed.
    RadonGeometry g = ThreeDirections();
    g.directions.push_back({0.0, 0.3 + 2e-6, 1.0});
    EXPECT_TRUE(ValidateRadonGeometry(g).ok());
  }
}

TEST(RadonGeometryTest, UniformSolidAngleCoversTheHemisphereWithEqualWeights) {
  for (int64_t count : {1, 2, 13, 208, 1000}) {
    SCOPED_TRACE(count);
    auto g = MakeUniformSolidAngleRadon(count, 64, 0.75);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_EQ(g->num_directions(), count);
    EXPECT_EQ(g->num_samples, 64);
    EXPECT_EQ(g->sample_spacing_mm, 0.75);
    double sum = 0;
    Vec3 mean_z_weighted{};
    for (const RadonDirection& d : g->directions) {
      EXPECT_DOUBLE_EQ(d.weight_sr, 2 * M_PI / count);
      const Vec3 n = d.unit();
      EXPECT_NEAR(Norm(n), 1.0, 1e-15);
      EXPECT_GT(n.z, 0.0);
      sum += d.weight_sr;
      mean_z_weighted = mean_z_weighted + d.weight_sr * n;
    }
    EXPECT_NEAR(sum, 2 * M_PI, 1e-12);
    if (count >= 208) {
      // Quadrature over the hemisphere: integral of n is (0, 0, pi) (of z: pi).
      EXPECT_NEAR(mean_z_weighted.z, M_PI, 1e-4 * M_PI);
      EXPECT_NEAR(mean_z_weighted.x, 0.0, 0.02);
      EXPECT_NEAR(mean_z_weighted.y, 0.0, 0.02);
    }
  }
  EXPECT_EQ(MakeUniformSolidAngleRadon(0, 64, 1).status().message(),
            "count: 0 is out of range [1, 65536]");
  EXPECT_EQ(MakeUniformSolidAngleRadon(65537, 8, 1).status().message(),
            "count: 65537 is out of range [1, 65536]");
  EXPECT_TRUE(MakeUniformSolidAngleRadon(65536, 8, 1).ok());
  EXPECT_TRUE(MakeEqualLinearAngleRadon(256, 256, 8, 1).ok());
  EXPECT_EQ(MakeUniformSolidAngleRadon(10, 1, 1).status().message(),
            "num_samples: 1 is out of range [2, 65536]");
}

TEST(RadonGeometryTest, UniformSolidAngleHasNoCrowding) {
  // Evenly spread: every direction's nearest neighbour (or its opposite) is near the mean
  // spacing sqrt(2 pi / count), never much closer.
  auto g = MakeUniformSolidAngleRadon(208, 32, 1.0);
  ASSERT_TRUE(g.ok());
  const double spacing = std::sqrt(2 * M_PI / 208);
  for (size_t i = 0; i < g->directions.size(); ++i) {
    double nearest = 10;
    for (size_t j = 0; j < g->directions.size(); ++j) {
      if (i == j) continue;
      const double c = std::abs(Dot(g->directions[i].unit(), g->directions[j].unit()));
      nearest = std::min(nearest, std::acos(std::min(1.0, c)));
    }
    EXPECT_GT(nearest, 0.5 * spacing) << i;
    EXPECT_LT(nearest, 1.5 * spacing) << i;
  }
}

TEST(RadonGeometryTest, EqualLinearAngleWeightsAreCellAreas) {
  for (auto [num_phi, num_theta] :
       {std::pair<int64_t, int64_t>{1, 1}, {8, 3}, {16, 13}, {31, 17}}) {
    SCOPED_TRACE(::testing::Message() << num_phi << " x " << num_theta);
    auto g = MakeEqualLinearAngleRadon(num_phi, num_theta, 33, 0.3);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_EQ(g->num_directions(), num_phi * num_theta);
    const double dphi = 2 * M_PI / num_phi, dtheta = M_PI / 2 / num_theta;
    double sum = 0;
    for (int64_t j = 0; j < num_theta; ++j) {
      for (int64_t i = 0; i < num_phi; ++i) {
        const RadonDirection& d = g->directions[static_cast<size_t>(j * num_phi + i)];
        EXPECT_NEAR(d.phi_rad, i * dphi, 1e-15);
        EXPECT_NEAR(d.theta_rad, (j + 0.5) * dtheta, 1e-15);
        EXPECT_NEAR(Norm(d.unit()), 1.0, 1e-15);
        // The sin(theta) dphi dtheta of the midpoint rule, to second order in dtheta.
        EXPECT_NEAR(d.weight_sr, std::sin(d.theta_rad) * dphi * dtheta,
                    std::sin(d.theta_rad) * dphi * dtheta * dtheta * dtheta / 24 * 1.01);
        sum += d.weight_sr;
      }
    }
    EXPECT_NEAR(sum, 2 * M_PI, 1e-12);
  }
  EXPECT_EQ(MakeEqualLinearAngleRadon(0, 3, 8, 1).status().message(),
            "num_phi: 0 is out of range [1, 65536]");
  EXPECT_EQ(MakeEqualLinearAngleRadon(4, 0, 8, 1).status().message(),
            "num_theta: 0 is out of range [1, 16384] (num_phi * num_theta <= 65536)");
  EXPECT_EQ(MakeEqualLinearAngleRadon(4, 4, 8, -1).status().message(),
            "sample_spacing_mm: -1 must be a finite value > 0");
}

TEST(RadonGeometryTest, RandomDirectionSetsValidateAndShuffledDuplicatesAreFound) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> phi(-M_PI, M_PI), cos_theta(-1, 1), weight(0.01, 1);
  RadonGeometry g;
  g.num_samples = 5;
  g.sample_spacing_mm = 1;
  for (int i = 0; i < 300; ++i) {
    g.directions.push_back({phi(random), std::acos(cos_theta(random)), weight(random)});
  }
  ASSERT_TRUE(ValidateRadonGeometry(g).ok()) << ValidateRadonGeometry(g);
  // The opposite of a random one, at a random place.
  std::uniform_int_distribution<size_t> pick(0, g.directions.size() - 1);
  const size_t original = pick(random);
  RadonDirection opposite = g.directions[original];
  opposite.phi_rad = std::remainder(opposite.phi_rad + M_PI, 2 * M_PI);
  opposite.theta_rad = M_PI - opposite.theta_rad;
  const size_t where = pick(random);
  g.directions.insert(g.directions.begin() + static_cast<std::ptrdiff_t>(where), opposite);
  const absl::Status status = ValidateRadonGeometry(g);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("is opposite to"));
}

}  // namespace
}  // namespace tomo::core
