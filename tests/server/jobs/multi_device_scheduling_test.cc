// The scheduler's multi-device jobs in process (scheduler.h, multi_device_policy.h): three
// CPU workers, and an "fbp" that splits (streams views, so the policy counts it as Fdk)
// and holds every run until the test opens a gate, so that which job runs where is seen
// while the jobs run. The end-to-end test runs the real FDK on the real tomod.
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/algorithms/reconstruction.h"
#include "core/devices/devices.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/job_manager.h"
#include "server/storage/spool.h"
#include "tests/runner/test_jobs.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;
using testing::Crc32;
using testing::NewTempDir;
using testing::SmallConeSpec;

// Holds each run until Open() (or its cancel), then returns zeros; records how many
// backends each run was given.
class GatedSplittingAlgorithm final : public core::Algorithm {
 public:
  struct Gate {
    absl::Mutex mu;
    bool open ABSL_GUARDED_BY(mu) = false;
    std::vector<size_t> backends ABSL_GUARDED_BY(mu);
  };
  explicit GatedSplittingAlgorithm(std::shared_ptr<Gate> gate) : gate_(std::move(gate)) {}

  absl::StatusOr<core::Array3D> Run(const core::ReconstructionRequest& request,
                                    const core::Array3D& projections, core::Backend& backend,
                                    const core::RunContext& context) const override {
    return RunOnBackends(request, projections, {&backend}, context);
  }
  absl::StatusOr<core::Array3D> RunOnBackends(const core::ReconstructionRequest& request,
                                              const core::Array3D&,
                                              const std::vector<core::Backend*>& backends,
                                              const core::RunContext& context) const override {
    {
      absl::MutexLock lock(&gate_->mu);
      gate_->backends.push_back(backends.size());
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    for (;;) {
      if (context.is_cancelled && context.is_cancelled()) {
        return absl::CancelledError("cancelled");
      }
      {
        absl::MutexLock lock(&gate_->mu);
        if (gate_->open) break;
      }
      if (absl::Now() > deadline) return absl::DeadlineExceededError("the gate never opened");
      absl::SleepFor(absl::Milliseconds(1));
    }
    return core::Array3D(request.volume.dims());
  }
  bool StreamsViews(const core::ReconstructionRequest&) const override { return true; }
  // As the built-in fbp on these cone geometries: the policy may give it several devices.
  bool SplitsOverBackends(const core::ReconstructionRequest&) const override { return true; }

 private:
  std::shared_ptr<Gate> gate_;
};

class MultiDeviceSchedulingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spool = Spool::Open(NewTempDir("multi-device"));
    ASSERT_TRUE(spool.ok()) << spool.status();
    spool_ = std::move(*spool);
  }
  void TearDown() override {
    Open();
    if (manager_) manager_->Shutdown();
  }

  // Three CPU workers; large jobs (at least min_voxels) may take idle ones.
  void Start(MultiDeviceJobs mode, uint64_t min_voxels, bool paused, size_t workers = 3) {
    JobManagerOptions options;
    options.devices.clear();
    for (size_t i = 0; i < workers; ++i) {
      core::DeviceInfo cpu = core::CpuDevice();
      if (i > 0) cpu.id = absl::StrCat("cpu:", i);
      options.devices.push_back(cpu);
    }
    options.multi_device = {mode, min_voxels};
    options.reconstruct_while_uploading = WhileUploading::kNever;
    options.metrics = &metrics_;
    registry_ = core::AlgorithmRegistry::WithBuiltins();
    registry_.Register("fbp", std::make_unique<GatedSplittingAlgorithm>(gate_));
    manager_ = std::make_unique<JobManager>(options, *spool_, registry_);
    manager_->SetSchedulingPaused(paused);
    absl::Status started = manager_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }
  void Restart(MultiDeviceJobs mode, uint64_t min_voxels, bool paused) {
    manager_->Shutdown();
    manager_.reset();
    Start(mode, min_voxels, paused);
  }

  // A cone-beam FDK job of an n^3 volume (16^3 = 4096 voxels by default).
  std::string Submit(uint32_t n = 16, bool sirt = false) {
    pb::JobSpec spec = SmallConeSpec(12, 10, 18, n);
    if (sirt) spec.mutable_algorithm()->mutable_sirt()->set_iterations(2);
    const std::string bytes(spec.input().size_bytes(), '\0');
    auto upload = manager_->BeginUpload(spec);
    EXPECT_TRUE(upload.ok()) << upload.status();
    if (!upload.ok()) return "";
    EXPECT_TRUE((*upload)->Append(bytes).ok());
    absl::StatusOr<pb::Job> job = (*upload)->Commit(bytes.size(), Crc32(bytes));
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id() : "";
  }

  pb::Job WaitForState(const std::string& id, pb::JobState state) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    absl::StatusOr<pb::Job> job = manager_->GetJob(id);
    while (job.ok() && job->state() != state && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
      job = manager_->GetJob(id);
    }
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return pb::Job();
    EXPECT_EQ(job->state(), state) << pb::JobState_Name(job->state()) << " " << job->error();
    return *job;
  }

  void Open() {
    absl::MutexLock lock(&gate_->mu);
    gate_->open = true;
  }
  std::vector<size_t> BackendsGiven() {
    absl::MutexLock lock(&gate_->mu);
    return gate_->backends;
  }

  std::unique_ptr<Spool> spool_;
  std::shared_ptr<GatedSplittingAlgorithm::Gate> gate_ =
      std::make_shared<GatedSplittingAlgorithm::Gate>();
  core::AlgorithmRegistry registry_;
  TomodMetrics metrics_;
  std::unique_ptr<JobManager> manager_;
};

TEST_F(MultiDeviceSchedulingTest, OffGivesEachJobOneDevice) {
  Start(MultiDeviceJobs::kOff, 0, /*paused=*/false);
  const std::string id = Submit();
  const pb::Job job = WaitForState(id, pb::JOB_STATE_RUNNING);
  ASSERT_THAT(job.devices(), SizeIs(1));
  EXPECT_EQ(job.device(), job.devices(0));
  EXPECT_EQ(manager_->busy_devices(), 1u);
  Open();
  WaitForState(id, pb::JOB_STATE_SUCCEEDED);
  EXPECT_THAT(BackendsGiven(), ElementsAre(1u));
}

TEST_F(MultiDeviceSchedulingTest, LargeJobTakesEveryIdleDeviceWhichTakesNoOtherJobMeanwhile) {
  Start(MultiDeviceJobs::kIdle, 16 * 16 * 16, /*paused=*/false);
  const std::string large = Submit(16);
  pb::Job job = WaitForState(large, pb::JOB_STATE_RUNNING);
  EXPECT_THAT(job.devices(), UnorderedElementsAre("cpu", "cpu:1", "cpu:2"));
  EXPECT_EQ(job.device(), job.devices(0));
  EXPECT_EQ(manager_->busy_devices(), 3u);

  // The lent workers sleep: a job queued now waits for the large one's end, which is
  // bounded by its run (it never waits for devices itself).
  const std::string small = Submit(8);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(manager_->GetJob(small)->state(), pb::JOB_STATE_QUEUED);
  Open();
  job = WaitForState(large, pb::JOB_STATE_SUCCEEDED);
  EXPECT_THAT(job.devices(), SizeIs(3));
  job = WaitForState(small, pb::JOB_STATE_SUCCEEDED);
  EXPECT_THAT(job.devices(), SizeIs(1));
  EXPECT_THAT(BackendsGiven(), ElementsAre(3u, 1u));
  EXPECT_EQ(manager_->busy_devices(), 0u);
  EXPECT_EQ(metrics_.job_runs().Value({"3"}), 1);
  EXPECT_EQ(metrics_.job_runs().Value({"1"}), 1);
}

TEST_F(MultiDeviceSchedulingTest, QueuedJobsKeepADeviceEachBeforeALargeJobTakesMore) {
  // Two large jobs queued while paused: the first takes one idle device beyond its own
  // and leaves the third to the second job.
  Start(MultiDeviceJobs::kIdle, 1000, /*paused=*/true);
  const std::string first = Submit();
  const std::string second = Submit();
  manager_->SetSchedulingPaused(false);
  const pb::Job a = WaitForState(first, pb::JOB_STATE_RUNNING);
  const pb::Job b = WaitForState(second, pb::JOB_STATE_RUNNING);
  EXPECT_THAT(a.devices(), SizeIs(2));
  EXPECT_THAT(b.devices(), SizeIs(1));
  std::set<std::string> all(a.devices().begin(), a.devices().end());
  all.insert(b.devices().begin(), b.devices().end());
  EXPECT_THAT(all, UnorderedElementsAre("cpu", "cpu:1", "cpu:2"));
  Open();
  WaitForState(first, pb::JOB_STATE_SUCCEEDED);
  WaitForState(second, pb::JOB_STATE_SUCCEEDED);
}

TEST_F(MultiDeviceSchedulingTest, SmallOrNonSplittingJobsKeepOneDevice) {
  Start(MultiDeviceJobs::kIdle, 16 * 16 * 16, /*paused=*/false);
  const std::string small = Submit(15);  // 3375 voxels, under 4096
  pb::Job job = WaitForState(small, pb::JOB_STATE_RUNNING);
  EXPECT_THAT(job.devices(), SizeIs(1));
  // Another small job takes a second device while the first runs; SIRT, large and able to
  // share its views, finds only the third idle and takes it alone.
  const std::string other = Submit(15);
  job = WaitForState(other, pb::JOB_STATE_RUNNING);
  EXPECT_THAT(job.devices(), SizeIs(1));
  const std::string sirt = Submit(20, /*sirt=*/true);
  job = WaitForState(sirt, pb::JOB_STATE_SUCCEEDED);  // the built-in SIRT, not gated
  EXPECT_THAT(job.devices(), SizeIs(1));
  Open();
  WaitForState(small, pb::JOB_STATE_SUCCEEDED);
  WaitForState(other, pb::JOB_STATE_SUCCEEDED);
  EXPECT_THAT(BackendsGiven(), ElementsAre(1u, 1u));
}

TEST_F(MultiDeviceSchedulingTest, CancelFreesEveryDeviceOfTheJob) {
  Start(MultiDeviceJobs::kIdle, 1000, /*paused=*/false);
  const std::string first = Submit();
  EXPECT_THAT(WaitForState(first, pb::JOB_STATE_RUNNING).devices(), SizeIs(3));
  ASSERT_TRUE(manager_->CancelJob(first).ok());
  pb::Job job = WaitForState(first, pb::JOB_STATE_CANCELLED);
  EXPECT_THAT(job.devices(), SizeIs(3));  // where it ran
  EXPECT_EQ(manager_->busy_devices(), 0u);
  const std::string second = Submit();
  EXPECT_THAT(WaitForState(second, pb::JOB_STATE_RUNNING).devices(), SizeIs(3));
  Open();
  WaitForState(second, pb::JOB_STATE_SUCCEEDED);
}

TEST_F(MultiDeviceSchedulingTest, ShutdownHandsAMultiDeviceJobBackQueuedWithNoDevices) {
  Start(MultiDeviceJobs::kIdle, 1000, /*paused=*/false);
  const std::string id = Submit();
  EXPECT_THAT(WaitForState(id, pb::JOB_STATE_RUNNING).devices(), SizeIs(3));
  Restart(MultiDeviceJobs::kIdle, 1000, /*paused=*/true);
  pb::Job job = WaitForState(id, pb::JOB_STATE_QUEUED);
  EXPECT_THAT(job.devices(), IsEmpty());
  EXPECT_TRUE(job.device().empty());
  EXPECT_EQ(job.attempts(), 0u);
  manager_->SetSchedulingPaused(false);
  job = WaitForState(id, pb::JOB_STATE_RUNNING);
  EXPECT_THAT(job.devices(), SizeIs(3));
  Open();
  job = WaitForState(id, pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.attempts(), 1u);
}

}  // namespace
}  // namespace tomo::server
