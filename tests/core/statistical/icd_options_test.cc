// Tests of IcdOptions validation and the memory estimates (core/statistical/icd_options.cc).
#include "core/statistical/icd_options.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::core::statistical {
namespace {

using ::testing::HasSubstr;

TEST(IcdOptionsTest, ValidationNamesTheField) {
  const VolumeGeometry volume = VolumeGeometry::Create({4, 4, 4}, {1, 1, 1}, {}).value();
  IcdOptions options;
  options.prior = DefaultQggmrfPrior(volume);
  EXPECT_TRUE(ValidateIcdOptions(options).ok());
  options.iterations = IcdOptions::kMaxIterations + 1;
  EXPECT_THAT(ValidateIcdOptions(options).message(), HasSubstr("iterations: 1001"));
  options.iterations = 2;
  options.prior.sigma = 0;
  EXPECT_THAT(ValidateIcdOptions(options).message(), HasSubstr("prior.sigma: 0"));
  // The default-constructed prior has no neighbour weights: refused, not run as no prior.
  IcdOptions unset;
  EXPECT_THAT(ValidateIcdOptions(unset).message(), HasSubstr("prior.neighbour_weights"));
}

TEST(IcdOptionsTest, DeviceBytesCountTheResidentArrays) {
  // The literature case: 512^3 voxels, 391 views of 386 x 1024.
  const VolumeGeometry volume =
      VolumeGeometry::Create({512, 512, 512}, {0.415, 0.415, 0.3}, {}).value();
  const Dims3 projections{391, 386, 1024};
  const int64_t steps = 512 * 512 * 3;  // stride 3 in every column
  const uint64_t bytes = IcdDeviceBytes(volume, projections, steps);
  const uint64_t arrays = 4ull * 512 * 512 * 512 + 2ull * 4 * 391 * 386 * 1024;
  EXPECT_GE(bytes, arrays + kIcdStepTaskBytes * steps);
  EXPECT_LT(bytes, arrays + kIcdStepTaskBytes * steps + (16ull << 20));  // the rest is small
  EXPECT_EQ(IcdHostBytes(volume, projections, 1), arrays);
  // Several columns per step: the partner search's detector ranges, 4 bytes per (x, y)
  // column and view (410 MB here).
  EXPECT_EQ(IcdHostBytes(volume, projections, 3), arrays + 4ull * 512 * 512 * 391);
  const VolumeGeometry half =
      VolumeGeometry::Create({512, 512, 256}, {0.415, 0.415, 0.3}, {}).value();
  EXPECT_LT(IcdDeviceBytes(half, projections, steps), bytes);
  // The single-voxel update's task list: one step per voxel.
  EXPECT_GT(IcdDeviceBytes(volume, projections, 512 * 512 * 512), bytes + (7ull << 30));  // 8 GiB of tasks
}

}  // namespace
}  // namespace tomo::core::statistical
