// Tests of the statistical weights (core/statistical/statistical_weights.cc).
#include "core/statistical/statistical_weights.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::core::statistical {
namespace {

using ::testing::HasSubstr;

TEST(StatisticalWeightsTest, CountsAreTheWeights) {
  Array3D counts({2, 3, 4});
  for (int64_t i = 0; i < counts.size(); ++i) counts.data()[i] = static_cast<float>(i * 7);
  const Array3D w = WeightsFromCounts(counts).value();
  for (int64_t i = 0; i < w.size(); ++i) EXPECT_EQ(w.data()[i], counts.data()[i]);
  counts.at(1, 2, 3) = -1;
  auto bad = WeightsFromCounts(counts);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("counts[1, 2, 3]: -1"));
}

TEST(StatisticalWeightsTest, IntensitiesGiveLineIntegralsAndExpectedCounts) {
  Array3D intensities({3, 2, 5});
  Array3D flat({1, 2, 5});
  for (int64_t i = 0; i < flat.size(); ++i) flat.data()[i] = 1000.0f + 10.0f * i;
  for (int64_t v = 0; v < 3; ++v) {
    for (int64_t r = 0; r < 2; ++r) {
      for (int64_t c = 0; c < 5; ++c) {
        intensities.at(v, r, c) = flat.at(0, r, c) * std::exp(-0.1f * (v + r + c));
      }
    }
  }
  intensities.at(2, 1, 4) = 0;  // photon starvation
  const PostLogData data = PostLogFromIntensities(intensities, flat, 5e4).value();
  EXPECT_NEAR(data.line_integrals.at(1, 1, 2), 0.4, 1e-5);
  EXPECT_NEAR(data.weights.at(1, 1, 2), 5e4 * std::exp(-0.4), 0.1);
  EXPECT_EQ(data.weights.at(2, 1, 4), 0.0f);
  EXPECT_EQ(data.line_integrals.at(2, 1, 4), 0.0f);

  auto wrong_dims = PostLogFromIntensities(intensities, Array3D({2, 2, 5}, 1.0f), 5e4);
  ASSERT_FALSE(wrong_dims.ok());
  EXPECT_THAT(wrong_dims.status().message(), HasSubstr("flat_field: dims (2, 2, 5)"));
  auto bad_counts = PostLogFromIntensities(intensities, flat, 0);
  ASSERT_FALSE(bad_counts.ok());
  EXPECT_THAT(bad_counts.status().message(), HasSubstr("flat_field_counts: 0"));
  flat.at(0, 1, 1) = 0;
  auto bad_flat = PostLogFromIntensities(intensities, flat, 5e4);
  ASSERT_FALSE(bad_flat.ok());
  EXPECT_THAT(bad_flat.status().message(), HasSubstr("flat_field[0, 1, 1]"));
}

}  // namespace
}  // namespace tomo::core::statistical
