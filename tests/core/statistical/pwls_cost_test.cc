// Tests of the PWLS cost (core/statistical/pwls_cost.cc): the prior's value does not depend
// on the memory layout, counts each neighbour pair once (against a brute-force double sum
// over ordered pairs), and the data term is 1/2 sum w (A x - y)^2.
#include "core/statistical/pwls_cost.h"

#include <cmath>
#include <random>

#include "core/geometry/geometry_builders.h"
#include "gtest/gtest.h"
#include "tests/core/random_arrays.h"
#include "tests/core/random_seed.h"

namespace tomo::core::statistical {
namespace {

TEST(PwlsCostTest, PriorValueCountsEachPairOnceInAnyLayout) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const Size3 n{7, 5, 6};
  const VolumeGeometry volume = VolumeGeometry::Create(n, {0.6, 0.9, 1.3}, {}).value();
  QggmrfPrior prior = DefaultQggmrfPrior(volume);
  prior.sigma = 0.01;
  const Array3D x = testing::RandomArray(volume.dims(), random, 0.0f, 0.05f);
  // Brute force: half the sum over ordered pairs.
  const QggmrfCoefficientsT<double> k = QggmrfCoefficients(prior);
  double brute = 0;
  for (int64_t iz = 0; iz < n.z; ++iz) {
    for (int64_t iy = 0; iy < n.y; ++iy) {
      for (int64_t ix = 0; ix < n.x; ++ix) {
        for (int m = 0; m < 26; ++m) {
          const NeighbourOffset o = NeighbourOffsetOf(m);
          const int64_t jx = ix + o.dx, jy = iy + o.dy, jz = iz + o.dz;
          if (jx < 0 || jx >= n.x || jy < 0 || jy >= n.y || jz < 0 || jz >= n.z) continue;
          brute += 0.5 * prior.neighbour_weights[m] *
                   QggmrfPotential<double>(k, static_cast<double>(x.at(iz, iy, ix)) - x.at(jz, jy, jx));
        }
      }
    }
  }
  const double zyx = QggmrfPriorValue(prior, n, x.data(), 1, n.x, n.x * n.y);
  std::vector<float> z_fastest(static_cast<size_t>(x.size()));
  for (int64_t iz = 0; iz < n.z; ++iz) {
    for (int64_t iy = 0; iy < n.y; ++iy) {
      for (int64_t ix = 0; ix < n.x; ++ix) {
        z_fastest[static_cast<size_t>((iy * n.x + ix) * n.z + iz)] = x.at(iz, iy, ix);
      }
    }
  }
  const double zf = QggmrfPriorValue(prior, n, z_fastest.data(), n.z, n.x * n.z, 1);
  EXPECT_NEAR(zyx / brute, 1.0, 1e-12);  // sums in other orders
  EXPECT_NEAR(zf / brute, 1.0, 1e-12);
  EXPECT_GT(brute, 0);
}

TEST(PwlsCostTest, DataTermIsHalfTheWeightedSquaredResidual) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  FanConeOptions cone;
  cone.detector = {9, 13, 1.2, 0.8, 0, 0};
  cone.source_origin_mm = 40;
  cone.origin_detector_mm = 30;
  cone.angles_rad = UniformAnglesRad(5, 0, 2 * M_PI);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const VolumeGeometry volume = VolumeGeometry::Create({6, 5, 4}, {0.7, 0.8, 0.9}, {}).value();
  const auto sf = SeparableFootprintProjector::Create(geometry, volume).value();
  const Array3D x = testing::RandomArray(volume.dims(), random);
  const Array3D y = testing::RandomArray(geometry.projection_dims(), random);
  const Array3D w = testing::RandomArray(geometry.projection_dims(), random);
  const Array3D ax = sf.Forward(x).value();
  double expected = 0;
  for (int64_t i = 0; i < ax.size(); ++i) {
    const double e = static_cast<double>(ax.data()[i]) - y.data()[i];
    expected += 0.5 * w.data()[i] * e * e;
  }
  const QggmrfPrior prior = DefaultQggmrfPrior(volume);
  const PwlsCost cost = EvaluatePwlsCost(sf, y, w, x, prior).value();
  EXPECT_NEAR(cost.data_term / expected, 1.0, 1e-12);
  EXPECT_NEAR(cost.prior_term, QggmrfPriorValue(prior, volume.size(), x.data(), 1, 6, 30), 1e-12);
  EXPECT_FALSE(EvaluatePwlsCost(sf, Array3D({5, 9, 12}), w, x, prior).ok());
}

}  // namespace
}  // namespace tomo::core::statistical
