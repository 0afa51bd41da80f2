// The multi-device policy on its own: the flag's values, how many idle devices a job
// starting now takes, and which jobs count as large and splitting.
#include "server/jobs/multi_device_policy.h"

#include <random>

#include "absl/strings/str_cat.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"
#include "tests/runner/test_jobs.h"

namespace tomo::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::SmallConeSpec;
using testing::SmallSpec;

TEST(MultiDevicePolicyTest, ParsesTheFlagsValuesAndRefusesOthersNamingFlagValueAndChoices) {
  absl::StatusOr<MultiDeviceJobs> off = ParseMultiDeviceJobs("off");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(*off, MultiDeviceJobs::kOff);
  absl::StatusOr<MultiDeviceJobs> idle = ParseMultiDeviceJobs("idle");
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_EQ(*idle, MultiDeviceJobs::kIdle);
  EXPECT_EQ(MultiDeviceJobsName(MultiDeviceJobs::kIdle), "idle");
  EXPECT_EQ(MultiDeviceJobsName(MultiDeviceJobs::kOff), "off");
  for (const char* bad : {"", "Idle", "on", "all", "idle "}) {
    absl::StatusOr<MultiDeviceJobs> parsed = ParseMultiDeviceJobs(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(parsed.status().message()),
                AllOf(HasSubstr("--multi_device_jobs"), HasSubstr(absl::StrCat("\"", bad, "\"")),
                      HasSubstr("off, idle")));
  }
}

TEST(MultiDevicePolicyTest, OffNeverGivesMoreThanOneDevice) {
  const MultiDevicePolicy off{MultiDeviceJobs::kOff, 0};
  EXPECT_EQ(ExtraDevicesForJob(off, {uint64_t{1} << 40, true}, 7, 0), 0u);
}

TEST(MultiDevicePolicyTest, IdleGivesALargeSplittingJobEveryIdleDeviceNoQueuedJobWaitsFor) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const uint64_t min_voxels = 1000 + random() % 100000;
  const MultiDevicePolicy idle{MultiDeviceJobs::kIdle, min_voxels};
  const MultiDeviceCandidate large{min_voxels, true};
  EXPECT_EQ(ExtraDevicesForJob(idle, large, 3, 0), 3u);
  EXPECT_EQ(ExtraDevicesForJob(idle, {min_voxels + 1 + random() % 1000, true}, 5, 0), 5u);
  // Each job still queued keeps one idle device for itself.
  EXPECT_EQ(ExtraDevicesForJob(idle, large, 3, 1), 2u);
  EXPECT_EQ(ExtraDevicesForJob(idle, large, 3, 3), 0u);
  EXPECT_EQ(ExtraDevicesForJob(idle, large, 3, 10), 0u);
  EXPECT_EQ(ExtraDevicesForJob(idle, large, 0, 0), 0u);
}

TEST(MultiDevicePolicyTest, IdleKeepsSmallOrNonSplittingJobsOnOneDevice) {
  const uint64_t min_voxels = 4096;
  const MultiDevicePolicy idle{MultiDeviceJobs::kIdle, min_voxels};
  EXPECT_EQ(ExtraDevicesForJob(idle, {min_voxels - 1, true}, 3, 0), 0u);
  EXPECT_EQ(ExtraDevicesForJob(idle, {min_voxels * 100, false}, 3, 0), 0u);
}

TEST(MultiDevicePolicyTest, CandidateCountsVoxelsAndSplitsWhatTheCoreShares) {
  const core::AlgorithmRegistry registry = core::AlgorithmRegistry::WithBuiltins();
  // A cone-beam FDK job of an odd, non-cubic volume: Fdk splits it into z-slabs.
  tomoserve::v1::JobSpec cone = SmallConeSpec(36, 18, 30, 16);
  cone.mutable_volume()->mutable_size()->set_x(21);
  cone.mutable_volume()->mutable_size()->set_y(17);
  cone.mutable_volume()->mutable_size()->set_z(11);
  absl::StatusOr<ValidatedJob> fdk = ValidateJobSpec(cone, {});
  ASSERT_TRUE(fdk.ok()) << fdk.status();
  MultiDeviceCandidate candidate = CandidateOf(*fdk, registry);
  EXPECT_EQ(candidate.voxels, 21u * 17u * 11u);
  EXPECT_TRUE(candidate.splits);

  // SIRT and CGLS on the same geometry split their views among the devices
  // (SeveralDevicesResidentOperators).
  tomoserve::v1::JobSpec sirt = cone;
  sirt.mutable_algorithm()->mutable_sirt()->set_iterations(3);
  absl::StatusOr<ValidatedJob> iterative = ValidateJobSpec(sirt, {});
  ASSERT_TRUE(iterative.ok()) << iterative.status();
  EXPECT_TRUE(CandidateOf(*iterative, registry).splits);
  tomoserve::v1::JobSpec cgls = cone;
  cgls.mutable_algorithm()->mutable_cgls()->set_iterations(3);
  absl::StatusOr<ValidatedJob> conjugate = ValidateJobSpec(cgls, {});
  ASSERT_TRUE(conjugate.ok()) << conjugate.status();
  EXPECT_TRUE(CandidateOf(*conjugate, registry).splits);

  // 2D parallel-beam FBP is not split (its own exact-transpose path); SIRT on it is, as on
  // any vector geometry (the views are shared, the one slice replicated).
  absl::StatusOr<ValidatedJob> parallel = ValidateJobSpec(SmallSpec(40, 30, 24), {});
  ASSERT_TRUE(parallel.ok()) << parallel.status();
  candidate = CandidateOf(*parallel, registry);
  EXPECT_FALSE(candidate.splits);
  EXPECT_EQ(candidate.voxels, 24u * 24u);
  tomoserve::v1::JobSpec parallel_sirt = SmallSpec(40, 30, 24);
  parallel_sirt.mutable_algorithm()->mutable_sirt()->set_iterations(3);
  absl::StatusOr<ValidatedJob> parallel_iterative = ValidateJobSpec(parallel_sirt, {});
  ASSERT_TRUE(parallel_iterative.ok()) << parallel_iterative.status();
  EXPECT_TRUE(CandidateOf(*parallel_iterative, registry).splits);
}

}  // namespace
}  // namespace tomo::server
