// Tests of core/operators/filtered_back_projection_weights.cc and of the Backend's default
// FilterAndBackProject (core/operators/backend.cc): weights of every accepted shape
// multiply as documented; wrong sizes are refused naming the field; the default
// FilterAndBackProject equals weighting, FilterRows and BackProject done by hand.
#include "core/operators/filtered_back_projection_weights.h"

#include <random>
#include <vector>
#include <string>

#include "core/geometry/geometry_builders.h"
#include "core/operators/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "tests/core/random_arrays.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using testing::RandomArray;

std::vector<float> RandomValues(size_t count, std::mt19937_64& random) {
  std::uniform_real_distribution<float> uniform(0.5f, 2.0f);
  std::vector<float> values(count);
  for (float& v : values) v = uniform(random);
  return values;
}

TEST(FilteredBackProjectionWeightsTest, MultipliesPixelAndColumnFactors) {
  std::mt19937_64 random(testing::TestSeed());
  SCOPED_TRACE(testing::SeedTrace(testing::TestSeed()));
  const Dims3 dims{3, 4, 5};
  const Array3D input = RandomArray(dims, random);
  for (bool per_view : {false, true}) {
    FilteredBackProjectionWeights weights;
    weights.pixel = RandomValues(static_cast<size_t>((per_view ? 3 : 1) * 4 * 5), random);
    weights.column = RandomValues(3 * 5, random);
    ASSERT_TRUE(weights.Check(dims).ok());
    EXPECT_EQ(weights.pixel_shared_by_views(dims), !per_view);
    Array3D output = input.Clone();
    ApplyFilteredBackProjectionWeights(weights, output);
    for (int64_t v = 0; v < 3; ++v) {
      for (int64_t r = 0; r < 4; ++r) {
        for (int64_t c = 0; c < 5; ++c) {
          const float pixel = weights.pixel[static_cast<size_t>(((per_view ? v : 0) * 4 + r) * 5 + c)];
          const float column = weights.column[static_cast<size_t>(v * 5 + c)];
          EXPECT_FLOAT_EQ(output.at(v, r, c), input.at(v, r, c) * pixel * column);
        }
      }
    }
  }
  // Empty weights leave the data alone.
  Array3D output = input.Clone();
  ApplyFilteredBackProjectionWeights(FilteredBackProjectionWeights{}, output);
  for (int64_t i = 0; i < input.size(); ++i) EXPECT_EQ(output.data()[i], input.data()[i]);
}

TEST(FilteredBackProjectionWeightsTest, RefusesWrongSizesNamingTheField) {
  const Dims3 dims{3, 4, 5};
  FilteredBackProjectionWeights pixel;
  pixel.pixel.resize(19);
  absl::Status status = pixel.Check(dims);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("weights.pixel: 19 values"), std::string::npos) << status;
  FilteredBackProjectionWeights column;
  column.column.resize(5);
  status = column.Check(dims);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("weights.column: 5 values"), std::string::npos) << status;
}

TEST(BackendTest, DefaultFilterAndBackProjectComposesTheOperators) {
  std::mt19937_64 random(testing::TestSeed());
  SCOPED_TRACE(testing::SeedTrace(testing::TestSeed()));
  FanConeOptions cone;
  cone.detector = {9, 17, 1.0, 1.1, 0.3, 0};
  cone.source_origin_mm = 40;
  cone.origin_detector_mm = 25;
  cone.angles_rad = testing::RandomAngles(6, random);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const VolumeGeometry volume = VolumeGeometry::Create({10, 9, 7}, {1, 1, 1}, {}).value();
  const Array3D projections = RandomArray(geometry.projection_dims(), random);
  FilteredBackProjectionWeights weights;
  weights.pixel = RandomValues(9 * 17, random);
  weights.column = RandomValues(6 * 17, random);
  const RampFilter filter = RampFilter::Create(FilterOptions{}, 17, 0.8).value();
  CpuBackend cpu;
  Array3D fused(volume.dims(), -1.0f);
  ASSERT_TRUE(cpu.FilterAndBackProject(geometry, volume, projections, filter, weights,
                                       BackProjectionWeighting::kFdk, fused)
                  .ok());
  Array3D by_hand = projections.Clone();
  ApplyFilteredBackProjectionWeights(weights, by_hand);
  ASSERT_TRUE(cpu.FilterRows(filter, by_hand).ok());
  Array3D expected(volume.dims(), -2.0f);
  ASSERT_TRUE(
      cpu.BackProject(geometry, volume, by_hand, BackProjectionWeighting::kFdk, expected).ok());
  for (int64_t i = 0; i < expected.size(); ++i) EXPECT_EQ(fused.data()[i], expected.data()[i]);
  EXPECT_FALSE(cpu.PrefersFilterAndBackProject());

  // Into the caller's memory: the same values there, and nothing written around them.
  constexpr float kPoison = -7.5f;
  std::vector<float> larger(static_cast<size_t>(volume.dims().count() + 2 * 33), kPoison);
  ASSERT_TRUE(cpu.FilterAndBackProjectInto(geometry, volume, projections, filter, weights,
                                           BackProjectionWeighting::kFdk, larger.data() + 33)
                  .ok());
  for (int64_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(larger[static_cast<size_t>(33 + i)], expected.data()[i]);
  }
  for (int i = 0; i < 33; ++i) {
    EXPECT_EQ(larger[static_cast<size_t>(i)], kPoison);
    EXPECT_EQ(larger[larger.size() - 1 - static_cast<size_t>(i)], kPoison);
  }

  FilteredBackProjectionWeights wrong;
  wrong.column.resize(3);
  const absl::Status status = cpu.FilterAndBackProject(geometry, volume, projections, filter,
                                                       wrong, BackProjectionWeighting::kFdk,
                                                       fused);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

}  // namespace
}  // namespace tomo::core
