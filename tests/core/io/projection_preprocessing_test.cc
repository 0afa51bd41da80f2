#include "core/io/projection_preprocessing.h"

#include <cmath>
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

// Detector readings simulated from known line integrals: I = D + (F - D) exp(-p), with a
// dark and flat field that vary per pixel and are measured in several noisy-free frames
// that average to the truth. The chain must give back p.
TEST(ProjectionPreprocessingTest, DarkFlatAndLogRecoverTheLineIntegrals) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const Dims3 dims{6, 4, 5};
  std::uniform_real_distribution<float> integrals(0.0f, 6.0f), dark_level(50, 150),
      gain(1000, 60000), wobble(-20, 20);
  Array3D truth(dims), readings(dims), dark({1, 4, 5}), flat({1, 4, 5});
  for (int64_t i = 0; i < 20; ++i) {
    dark.data()[i] = dark_level(random);
    flat.data()[i] = dark.data()[i] + gain(random);
  }
  // Three frames each that average to the fields above.
  Array3D dark_frames({3, 4, 5}), flat_frames({3, 4, 5});
  for (int64_t i = 0; i < 20; ++i) {
    const float a = wobble(random), b = wobble(random);
    dark_frames.data()[i] = dark.data()[i] + a;
    dark_frames.data()[20 + i] = dark.data()[i] - a;
    dark_frames.data()[40 + i] = dark.data()[i];
    flat_frames.data()[i] = flat.data()[i] + b;
    flat_frames.data()[20 + i] = flat.data()[i];
    flat_frames.data()[40 + i] = flat.data()[i] - b;
  }
  for (int64_t v = 0; v < dims.d0; ++v) {
    for (int64_t i = 0; i < 20; ++i) {
      const float p = integrals(random);
      truth.data()[v * 20 + i] = p;
      readings.data()[v * 20 + i] = dark.data()[i] + (flat.data()[i] - dark.data()[i]) * std::exp(-p);
    }
  }
  absl::StatusOr<Array3D> dark_mean = MeanFrame(dark_frames, "dark");
  absl::StatusOr<Array3D> flat_mean = MeanFrame(flat_frames, "flat");
  ASSERT_TRUE(dark_mean.ok() && flat_mean.ok());
  for (int64_t i = 0; i < 20; ++i) {
    ASSERT_NEAR(dark_mean->data()[i], dark.data()[i], 1e-3);
    ASSERT_NEAR(flat_mean->data()[i], flat.data()[i], 1e-2);
  }
  ASSERT_TRUE(ApplyDarkFlat(readings, &*dark_mean, *flat_mean).ok());
  absl::StatusOr<int64_t> clamped = NegativeLog(readings);
  ASSERT_TRUE(clamped.ok());
  EXPECT_EQ(*clamped, 0);
  for (int64_t i = 0; i < truth.size(); ++i) {
    // float32 readings of up to 6e4 carry ~4e-3 absolute error; at exp(-6) of the gain
    // that is a relative error of ~3e-5 / exp(-6), i.e. ~1e-2 in p at worst.
    ASSERT_NEAR(readings.data()[i], truth.data()[i], 2e-2) << i;
  }
}

TEST(ProjectionPreprocessingTest, GuardsNonPositiveTransmission) {
  Array3D t({1, 1, 5});
  t.data()[0] = 1.0f;
  t.data()[1] = 0.0f;
  t.data()[2] = -3.0f;
  t.data()[3] = std::numeric_limits<float>::quiet_NaN();
  t.data()[4] = 0.5f;
  absl::StatusOr<int64_t> clamped = NegativeLog(t, 1e-4f);
  ASSERT_TRUE(clamped.ok());
  EXPECT_EQ(*clamped, 3);
  EXPECT_FLOAT_EQ(t.data()[0], 0.0f);
  EXPECT_FLOAT_EQ(t.data()[1], -std::log(1e-4f));
  EXPECT_FLOAT_EQ(t.data()[2], -std::log(1e-4f));
  EXPECT_FLOAT_EQ(t.data()[3], -std::log(1e-4f));
  EXPECT_FLOAT_EQ(t.data()[4], -std::log(0.5f));
  EXPECT_EQ(NegativeLog(t, 0.0f).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NegativeLog(t, 2.0f).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProjectionPreprocessingTest, RefusesBadCalibration) {
  Array3D projections({2, 2, 3}, 100.0f), dark({1, 2, 3}, 10.0f), flat({1, 2, 3}, 1000.0f);
  flat.at(0, 1, 2) = 10.0f;  // equal to the dark level
  absl::Status s = ApplyDarkFlat(projections, &dark, flat);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("(row 1, column 2)"));
  Array3D wrong({1, 3, 2}, 1000.0f);
  s = ApplyDarkFlat(projections, nullptr, wrong);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("flat field"));
  EXPECT_EQ(MeanFrame(Array3D({0, 2, 3}), "dark").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Without a dark field: T = I / F.
  Array3D ones({1, 2, 3}, 1000.0f);
  ASSERT_TRUE(ApplyDarkFlat(projections, nullptr, ones).ok());
  EXPECT_FLOAT_EQ(projections.at(1, 1, 1), 0.1f);
}

}  // namespace
}  // namespace tomo::core
