// Tests of ReconstructIcdCuda (core/statistical/cuda/icd_cuda.cc and its kernels) against
// the CPU reference (core/statistical/icd_cpu.cc) and the analytic phantom: multi-voxel
// (one column or two per step) and single-voxel updates, circular and helical cones, a
// start volume and FDK starts; graphs against plain launches; cancellation and the memory
// budget.
//
// Every test skips when core::ListCudaDevices() is empty (CI has no GPU). Inputs are fresh
// each run (seed printed; TOMO_TEST_SEED replays). Measured differences are printed as
// "[ measure ]" lines.
//
// Tolerances, and why: the device evaluates footprints, updates and the prior's cost in
// float32, the CPU in float64; both track the residual in float32. A float32 emulation of
// the device's arithmetic on the CPU (same schedule, sequential sums) differed from the
// reference by at most 2.3e-7 in the per-iteration cost and 1.1e-6 in the volume (relative
// RMS) over these cases; the device's other summation orders and float32 prior add about as
// much again. Relative differences of the per-iteration cost: kCostTolerance = 2e-5; of the
// volumes, RMS of the difference over RMS of the CPU volume: kVolumeTolerance = 1e-4.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "core/algorithms/filtered_back_projection.h"
#include "core/devices/devices.h"
#include "core/operators/cpu/cpu_backend.h"
#include "core/statistical/cuda/icd_cuda.h"
#include "core/statistical/icd_cpu.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"
#include "tests/core/statistical/icd_test_case.h"

namespace tomo::core::statistical {
namespace {

using ::testing::HasSubstr;

constexpr double kCostTolerance = 2e-5;
constexpr double kVolumeTolerance = 1e-4;

double RelativeRmsDifference(const Array3D& a, const Array3D& b) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a.data()[i]) - b.data()[i];
    diff += d * d;
    norm += static_cast<double>(b.data()[i]) * b.data()[i];
  }
  return std::sqrt(diff / norm);
}

double RmsError(const Array3D& a, const Array3D& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a.data()[i]) - b.data()[i];
    sum += d * d;
  }
  return std::sqrt(sum / static_cast<double>(a.size()));
}

IcdOptions Options(const VolumeGeometry& volume, GroupingMode grouping, int64_t iterations) {
  IcdOptions options;
  options.iterations = iterations;
  options.prior = DefaultQggmrfPrior(volume);
  options.prior.sigma = 3e-4;  // as in icd_cpu_test.cc, for the test case's dose
  options.prior.c = 1.0;
  options.grouping = grouping;
  options.columns_per_step = 1;  // the literature's MVU and SVU; tests name other values
  return options;
}

class IcdCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ListCudaDevices().empty()) GTEST_SKIP() << "no CUDA device";
    seed_ = tomo::testing::TestSeed();
    random_.seed(seed_);
  }
  uint64_t seed_ = 0;
  std::mt19937_64 random_;
};

TEST_F(IcdCudaTest, AgreesWithTheCpuReference) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  struct Mode {
    GroupingMode grouping;
    int columns_per_step;
    IcdKernel kernel;
    const char* name;
    bool v4_flags = true, v4_prefetch = true;
    int v4_threads = 0;
    bool v4_l1_prefetch = false;
    int v4_voxels_per_thread = 1;
    bool v4_poll_sleep = false;
    int view_group_shift = 3;
  };
  const Mode modes[] = {
      {GroupingMode::kMultiVoxel, 1, IcdKernel::kPersistent, "MVU, persistent"},
      {GroupingMode::kMultiVoxel, 3, IcdKernel::kPersistent, "MVU, 3 columns per step, persistent"},
      {GroupingMode::kSingleVoxel, 1, IcdKernel::kPersistent, "SVU, persistent"},
      {GroupingMode::kMultiVoxel, 1, IcdKernel::kLaunchPerStep, "MVU, launch per step"},
      {GroupingMode::kMultiVoxel, 3, IcdKernel::kLaunchPerStep,
       "MVU, 3 columns per step, launch per step"},
      {GroupingMode::kSingleVoxel, 1, IcdKernel::kLaunchPerStep, "SVU, launch per step"},
      {GroupingMode::kMultiVoxel, 1, IcdKernel::kPersistentV4, "MVU, v4"},
      {GroupingMode::kMultiVoxel, 3, IcdKernel::kPersistentV4, "MVU, 3 columns per step, v4"},
      {GroupingMode::kSingleVoxel, 1, IcdKernel::kPersistentV4, "SVU, v4"},
      {GroupingMode::kMultiVoxel, 3, IcdKernel::kPersistentV4,
       "MVU, 3 columns per step, v4 with grid barriers, no prefetch", false, false},
      {GroupingMode::kMultiVoxel, 3, IcdKernel::kPersistentV4,
       "MVU, 3 columns per step, v4, 2 voxels per thread, 320 threads", true, true, 320, false, 2},
      {GroupingMode::kMultiVoxel, 1, IcdKernel::kPersistentV4,
       "MVU, v4, 2 voxels per thread, grid barriers", false, true, 0, false, 2},
      {GroupingMode::kMultiVoxel, 3, IcdKernel::kPersistentV4,
       "MVU, 3 columns per step, v4 with the L1 prefetch, 2 voxels per thread, 256 threads",
       true, true, 256, true, 2},
      {GroupingMode::kMultiVoxel, 3, IcdKernel::kPersistentV4,
       "MVU, 3 columns per step, v4, flags polled with sleeps, 288 threads", true, true, 288,
       false, 1, true},
      // The default puts the partials of 8 views side by side (the helical case's 36 views
      // end in a part group); these take them view by view and 4 at a time.
      {GroupingMode::kMultiVoxel, 3, IcdKernel::kPersistentV4,
       "MVU, 3 columns per step, v4, partials view by view", true, true, 0, false, 1, false, 0},
      {GroupingMode::kSingleVoxel, 1, IcdKernel::kPersistent,
       "SVU, persistent, partials of 4 views together", true, true, 0, false, 1, false, 2}};
  for (bool helical : {false, true}) {
    for (const Mode& mode : modes) {
      const GroupingMode grouping = mode.grouping;
      SCOPED_TRACE(helical ? "helical" : "circular");
      SCOPED_TRACE(mode.name);
      const IcdTestCase c = MakeIcdTestCase(random_, helical);
      const auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume).value();
      IcdOptions options = Options(c.volume, grouping, 3);
      options.columns_per_step = mode.columns_per_step;
      // A start volume exercises the device's forward projection of the start.
      Array3D start = c.phantom.Rasterize(c.volume, 1);
      for (int64_t i = 0; i < start.size(); ++i) start.data()[i] *= 0.5f;
      auto cpu = ReconstructIcdCpu(sf, c.line_integrals, c.weights, &start, options, {});
      IcdCudaTuning tuning;
      tuning.kernel = mode.kernel;
      tuning.v4_flags = mode.v4_flags;
      tuning.v4_prefetch = mode.v4_prefetch;
      tuning.v4_threads = mode.v4_threads;
      tuning.v4_l1_prefetch = mode.v4_l1_prefetch;
      tuning.v4_voxels_per_thread = mode.v4_voxels_per_thread;
      tuning.v4_poll_sleep = mode.v4_poll_sleep;
      tuning.partial_view_group_shift = mode.view_group_shift;
      tuning.steps_per_launch = 37;  // launches that end and start within iterations
      auto gpu = ReconstructIcdCuda(sf, c.line_integrals, c.weights, &start, options, 0, tuning, {});
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      EXPECT_EQ(gpu->total_groups, cpu->total_groups);
      EXPECT_EQ(gpu->steps, cpu->steps);
      EXPECT_NEAR(gpu->initial_cost / cpu->initial_cost, 1.0, kCostTolerance);
      for (size_t k = 0; k < cpu->iterations.size(); ++k) {
        std::printf("[ measure ] %s %s iteration %zu: cost CPU %.7e CUDA %.7e\n",
                    helical ? "helical" : "circular", mode.name, k + 1,
                    cpu->iterations[k].cost, gpu->iterations[k].cost);
        EXPECT_NEAR(gpu->iterations[k].cost / cpu->iterations[k].cost, 1.0, kCostTolerance);
        if (k > 0) {
          EXPECT_LT(gpu->iterations[k].cost, gpu->iterations[k - 1].cost);
        }
      }
      const double difference = RelativeRmsDifference(gpu->volume, cpu->volume);
      std::printf("[ measure ] volume CUDA vs CPU: relative RMS difference %.2e\n", difference);
      EXPECT_LT(difference, kVolumeTolerance);
    }
  }
}

// The persistent kernel with fewer blocks than views (each block then owns several views,
// and views of one block follow each other within a phase), on a non-square volume with
// more slices than the default case (groups of several voxels, strides over 3), against
// the CPU reference.
TEST_F(IcdCudaTest, PersistentBlocksOwningSeveralViewsAgreeWithTheCpu) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  const IcdTestCase c = MakeIcdTestCase(random_, false, {23, 14, 29});
  const auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume).value();
  IcdOptions options = Options(c.volume, GroupingMode::kMultiVoxel, 2);
  options.columns_per_step = 2;
  auto cpu = ReconstructIcdCpu(sf, c.line_integrals, c.weights, nullptr, options, {});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  struct Kernel {
    IcdKernel kernel;
    bool v4_flags;
    int v4_voxels_per_thread;
    const char* name;
    int view_group_shift = 3;
  };
  for (const Kernel& kernel :
       {Kernel{IcdKernel::kPersistent, false, 1, "persistent"},
        Kernel{IcdKernel::kPersistentV4, true, 1, "v4, flags"},
        Kernel{IcdKernel::kPersistentV4, false, 1, "v4, grid barriers"},
        Kernel{IcdKernel::kPersistentV4, true, 2, "v4, flags, 2 voxels per thread"},
        Kernel{IcdKernel::kPersistentV4, true, 1, "v4, flags, partials of 4 views together", 2}})
  for (int blocks : {1, 5}) {
    SCOPED_TRACE(kernel.name);
    SCOPED_TRACE(blocks);
    IcdCudaTuning tuning;
    tuning.kernel = kernel.kernel;
    tuning.v4_flags = kernel.v4_flags;
    tuning.v4_voxels_per_thread = kernel.v4_voxels_per_thread;
    tuning.partial_view_group_shift = kernel.view_group_shift;
    tuning.persistent_blocks = blocks;
    tuning.steps_per_launch = 100;
    auto gpu = ReconstructIcdCuda(sf, c.line_integrals, c.weights, nullptr, options, 0, tuning, {});
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_GT(gpu->max_group_size, 2);
    for (size_t k = 0; k < cpu->iterations.size(); ++k) {
      std::printf("[ measure ] %s, %d blocks, iteration %zu: cost CPU %.7e CUDA %.7e\n",
                  kernel.name, blocks, k + 1, cpu->iterations[k].cost, gpu->iterations[k].cost);
      EXPECT_NEAR(gpu->iterations[k].cost / cpu->iterations[k].cost, 1.0, kCostTolerance);
    }
    const double difference = RelativeRmsDifference(gpu->volume, cpu->volume);
    std::printf("[ measure ] volume CUDA vs CPU: relative RMS difference %.2e\n", difference);
    EXPECT_LT(difference, kVolumeTolerance);
  }
}

TEST_F(IcdCudaTest, BeatsFdkAgainstThePhantomAndGraphsEqualPlainLaunches) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  const IcdTestCase c = MakeIcdTestCase(random_, false);
  const auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume).value();
  CpuBackend cpu;
  const Array3D fdk =
      Fdk(c.geometry, c.volume, c.line_integrals, FdkOptions{}, cpu, RunContext{}).value();
  const Array3D truth = c.phantom.Rasterize(c.volume, 3);
  IcdOptions options = Options(c.volume, GroupingMode::kMultiVoxel, 4);
  options.columns_per_step = 3;
  IcdCudaTuning graphs;
  graphs.kernel = IcdKernel::kLaunchPerStep;
  graphs.groups_per_graph = 7;  // a remainder of plain launches too
  IcdCudaTuning plain;
  plain.kernel = IcdKernel::kLaunchPerStep;
  plain.groups_per_graph = 0;
  auto with_graphs = ReconstructIcdCuda(sf, c.line_integrals, c.weights, &fdk, options, 0, graphs, {});
  auto with_launches = ReconstructIcdCuda(sf, c.line_integrals, c.weights, &fdk, options, 0, plain, {});
  ASSERT_TRUE(with_graphs.ok()) << with_graphs.status();
  ASSERT_TRUE(with_launches.ok()) << with_launches.status();
  // The same kernels in the same order. Not bit for bit: the initial residual's forward
  // projection adds the columns of a view with atomics (icd_support_kernels.cu), so its
  // float sums, and what follows from them, change in the last bits from run to run (seen on
  // an H100: equal to 6 digits). Within 1e-5 of the largest voxel.
  float largest = 0;
  for (int64_t i = 0; i < with_launches->volume.size(); ++i) {
    largest = std::max(largest, std::abs(with_launches->volume.data()[i]));
  }
  for (int64_t i = 0; i < with_graphs->volume.size(); ++i) {
    ASSERT_NEAR(with_graphs->volume.data()[i], with_launches->volume.data()[i], 1e-5 * largest)
        << i;
  }
  const double fdk_error = RmsError(fdk, truth);
  const double icd_error = RmsError(with_graphs->volume, truth);
  std::printf("[ measure ] RMS error vs phantom: FDK %.3e ICD (CUDA) %.3e\n", fdk_error, icd_error);
  EXPECT_LT(icd_error, 0.6 * fdk_error);
}

TEST_F(IcdCudaTest, CancelsBetweenGroupsAndRefusesWhatDoesNotFit) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  const IcdTestCase c = MakeIcdTestCase(random_, false);
  const auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume).value();
  const IcdOptions options = Options(c.volume, GroupingMode::kMultiVoxel, 2);
  IcdCudaTuning tuning;
  tuning.groups_per_graph = 16;  // both kernels check between batches of 16 steps
  tuning.steps_per_launch = 16;
  int checks = 0;
  RunContext cancelling;
  cancelling.is_cancelled = [&] { return ++checks > 3; };
  auto cancelled = ReconstructIcdCuda(sf, c.line_integrals, c.weights, nullptr, options, 0,
                                      tuning, cancelling);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(cancelled.status().message(), HasSubstr("icd / iteration 1 / step 48"));

  RunContext small;
  small.memory_budget_bytes = 100000;
  auto refused =
      ReconstructIcdCuda(sf, c.line_integrals, c.weights, nullptr, options, 0, tuning, small);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("budget of 100000 bytes"));
}

// Version 4 keeps the runner's contract: progress after each iteration (with the cost the
// result records), cancellation between launches (naming the step), with flags and with
// grid barriers.
TEST_F(IcdCudaTest, V4ReportsProgressAndCancelsBetweenLaunches) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  const IcdTestCase c = MakeIcdTestCase(random_, false);
  const auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume).value();
  IcdOptions options = Options(c.volume, GroupingMode::kMultiVoxel, 2);
  options.columns_per_step = 3;
  for (bool flags : {true, false}) {
    SCOPED_TRACE(flags ? "flags" : "grid barriers");
    IcdCudaTuning tuning;
    tuning.kernel = IcdKernel::kPersistentV4;
    tuning.v4_flags = flags;
    tuning.steps_per_launch = 16;
    std::vector<ProgressUpdate> updates;
    RunContext reporting;
    reporting.on_progress = [&](const ProgressUpdate& update) { updates.push_back(update); };
    auto done = ReconstructIcdCuda(sf, c.line_integrals, c.weights, nullptr, options, 0, tuning,
                                   reporting);
    ASSERT_TRUE(done.ok()) << done.status();
    ASSERT_EQ(updates.size(), 2u);
    for (size_t k = 0; k < updates.size(); ++k) {
      EXPECT_EQ(updates[k].iteration, k + 1);
      EXPECT_EQ(updates[k].iterations_total, 2u);
      EXPECT_DOUBLE_EQ(updates[k].fraction, static_cast<double>(k + 1) / 2.0);
      EXPECT_DOUBLE_EQ(updates[k].cost, done->iterations[k].cost);
    }

    int checks = 0;
    RunContext cancelling;
    cancelling.is_cancelled = [&] { return ++checks > 3; };
    auto cancelled = ReconstructIcdCuda(sf, c.line_integrals, c.weights, nullptr, options, 0,
                                        tuning, cancelling);
    ASSERT_FALSE(cancelled.ok());
    EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);
    EXPECT_THAT(cancelled.status().message(), HasSubstr("icd / iteration 1 / step 48"));
  }
}

}  // namespace
}  // namespace tomo::core::statistical
