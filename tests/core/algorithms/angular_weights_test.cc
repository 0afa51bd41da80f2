#include "core/algorithms/angular_weights.h"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/geometry/parallel_geometry_2d.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

constexpr double kPi = 3.14159265358979323846;

double Sum(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0);
}

// A uniform half scan is an arc: every view stands for span / count, the arc is the span,
// and a parallel beam gives each view pi / count.
TEST(AngularWeightsTest, UniformHalfScanIsAnEvenArc) {
  const std::vector<double> angles = ParallelGeometry2D::UniformAngles(180, 0.3, kPi);
  const AngularShares shares = ComputeAngularShares(angles);
  EXPECT_FALSE(shares.cyclic);
  EXPECT_NEAR(shares.range_rad, kPi, 1e-12);
  for (double share : shares.share_rad) EXPECT_NEAR(share, kPi / 180, 1e-12);
  for (double weight : ParallelBeamWeights(angles)) EXPECT_NEAR(weight, kPi / 180, 1e-12);
}

// A uniform full scan covers the circle: each view stands for 2 pi / count, and a parallel
// beam, which sees every line twice, gives each view half of that.
TEST(AngularWeightsTest, UniformFullScanIsCyclic) {
  const std::vector<double> angles = ParallelGeometry2D::UniformAngles(360, -1.0, 2 * kPi);
  const AngularShares shares = ComputeAngularShares(angles);
  EXPECT_TRUE(shares.cyclic);
  EXPECT_NEAR(shares.range_rad, 2 * kPi, 1e-12);
  for (double share : shares.share_rad) EXPECT_NEAR(share, 2 * kPi / 360, 1e-12);
  for (double weight : ParallelBeamWeights(angles)) EXPECT_NEAR(weight, kPi / 360, 1e-12);
}

// Uneven arc, worked by hand: gaps 0.1, 0.2, 0.3; inner views take half of each gap beside
// them, end views their one gap; positions run from half a share before the first view.
TEST(AngularWeightsTest, UnevenArcByHand) {
  const AngularShares shares = ComputeAngularShares({0.0, 0.1, 0.3, 0.6});
  EXPECT_FALSE(shares.cyclic);
  const std::vector<double> expected_shares = {0.1, 0.15, 0.25, 0.3};
  const std::vector<double> expected_positions = {0.05, 0.15, 0.35, 0.65};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(shares.share_rad[i], expected_shares[i], 1e-12) << "view " << i;
    EXPECT_NEAR(shares.position_rad[i], expected_positions[i], 1e-12) << "view " << i;
  }
  EXPECT_NEAR(shares.range_rad, 0.8, 1e-12);
  const std::vector<double> weights = ParallelBeamWeights({0.0, 0.1, 0.3, 0.6});
  EXPECT_NEAR(Sum(weights), kPi, 1e-12);
  EXPECT_NEAR(weights[3] / weights[0], 3.0, 1e-12);
}

// An arc across 0 (and angles given as negative or beyond a turn) is still one even arc.
TEST(AngularWeightsTest, ArcAcrossZeroAndWholeTurns) {
  const AngularShares shares =
      ComputeAngularShares({-0.2, 2 * kPi - 0.1, 0.0, 4 * kPi + 0.1});
  EXPECT_FALSE(shares.cyclic);
  for (double share : shares.share_rad) EXPECT_NEAR(share, 0.1, 1e-12);
  EXPECT_NEAR(shares.range_rad, 0.4, 1e-12);
  EXPECT_NEAR(shares.position_rad[0], 0.05, 1e-12);
  EXPECT_NEAR(shares.position_rad[3], 0.35, 1e-12);
}

// Shares belong to views, not to positions in the list: shuffling the angles shuffles the
// shares the same way.
TEST(AngularWeightsTest, SharesFollowTheViewsThroughAShuffle) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> angle(0, 2.5);
  std::vector<double> angles(40);
  for (double& a : angles) a = angle(random);
  std::vector<size_t> order(angles.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), random);
  std::vector<double> shuffled;
  for (size_t i : order) shuffled.push_back(angles[i]);

  const AngularShares plain = ComputeAngularShares(angles);
  const AngularShares mixed = ComputeAngularShares(shuffled);
  for (size_t k = 0; k < order.size(); ++k) {
    EXPECT_DOUBLE_EQ(mixed.share_rad[k], plain.share_rad[order[k]]);
  }
  EXPECT_NEAR(Sum(ParallelBeamWeights(shuffled)), kPi, 1e-12);
}

// Degenerate sets: one view, or every view at the same angle, split pi evenly.
TEST(AngularWeightsTest, DegenerateSetsSplitPiEvenly) {
  EXPECT_EQ(ParallelBeamWeights({}).size(), 0u);
  const std::vector<double> one = ParallelBeamWeights({1.0});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_NEAR(one[0], kPi, 1e-12);
  for (double weight : ParallelBeamWeights({0.5, 0.5, 0.5})) EXPECT_NEAR(weight, kPi / 3, 1e-12);
}

}  // namespace
}  // namespace tomo::core
