#include "server/jobs/job_manager.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/algorithms/reconstruction.h"
#include "core/devices/devices.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "google/protobuf/util/message_differencer.h"
#include "runner/disk_space.h"
#include "server/jobs/job_id.h"
#include "server/storage/job_store.h"
#include "server/storage/spool.h"
#include "tests/runner/test_jobs.h"
#include "tests/core/random_seed.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::BlockingAlgorithm;
using testing::Crc32;
using testing::NewTempDir;
using testing::PhantomSinogramBytes;
using testing::RandomValues;
using testing::RandomVolumeAlgorithm;
using testing::SmallSpec;

class FailingAlgorithm final : public core::Algorithm {
 public:
  absl::StatusOr<core::Array3D> Run(const core::ReconstructionRequest&, const core::Array3D&,
                                    core::Backend&, const core::RunContext&) const override {
    return absl::InternalError("boom");
  }
};

// Records the detector count of each job it runs (tests use it to tell jobs apart).
class RecordingAlgorithm final : public core::Algorithm {
 public:
  explicit RecordingAlgorithm(std::vector<int64_t>* order, absl::Mutex* mu)
      : order_(order), mu_(mu) {}
  absl::StatusOr<core::Array3D> Run(const core::ReconstructionRequest& request,
                                    const core::Array3D&, core::Backend&,
                                    const core::RunContext&) const override {
    absl::MutexLock lock(mu_);
    order_->push_back(core::ProjectionDims(request.geometry).d2);
    return core::Array3D(request.volume.dims());
  }

 private:
  std::vector<int64_t>* order_;
  absl::Mutex* mu_;
};

class RecordingWatcher final : public JobWatcher {
 public:
  bool Enqueue(const pb::JobEvent& event) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(event);
    return false;
  }
  bool Close(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    closed_ = status;
    return false;
  }
  void Flush() override {}

  // Waits until an event with a terminal state arrived, or a Close.
  bool WaitForEnd(absl::Duration timeout = absl::Seconds(20)) {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return !closed_.ok() || (!events_.empty() && IsTerminal(events_.back().state()));
    };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }
  std::vector<pb::JobEvent> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  absl::Status closed() {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

 private:
  absl::Mutex mu_;
  std::vector<pb::JobEvent> events_ ABSL_GUARDED_BY(mu_);
  absl::Status closed_ ABSL_GUARDED_BY(mu_);
};

// Float32 bytes with fresh Gaussian noise (sigma 0.05) added to every value.
// What admission reserves for a job of spec: its input and the bound of its outputs.
uint64_t ReservedBytes(const pb::JobSpec& spec) {
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  EXPECT_TRUE(job.ok()) << job.status();
  absl::StatusOr<SpoolNeed> need = job.ok() ? JobSpoolNeed(*job) : job.status();
  EXPECT_TRUE(need.ok()) << need.status();
  return need.ok() ? need->total_bytes() : 0;
}

std::string WithNoise(std::string bytes, std::mt19937_64& random) {
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (size_t at = 0; at + sizeof(float) <= bytes.size(); at += sizeof(float)) {
    float value;
    std::memcpy(&value, bytes.data() + at, sizeof(float));
    value += noise(random);
    std::memcpy(bytes.data() + at, &value, sizeof(float));
  }
  return bytes;
}

class JobManagerTest : public ::testing::Test {
 protected:
  void StartManager(std::unique_ptr<core::Algorithm> fbp = nullptr, ServerLimits limits = {}) {
    JobManagerOptions options;
    options.limits = limits;
    StartManagerWith(options, std::move(fbp));
  }

  // A fresh spool; options.devices is set to the CPU.
  void StartManagerWith(JobManagerOptions options, std::unique_ptr<core::Algorithm> fbp = nullptr,
                        bool paused = false) {
    OpenSpool();
    options_ = std::move(options);
    StartOnSpool(std::move(fbp), paused);
  }

  void OpenSpool() {
    dir_ = NewTempDir("manager");
    auto spool = Spool::Open(dir_);
    ASSERT_TRUE(spool.ok()) << spool.status();
    spool_ = std::move(*spool);
  }

  // A manager on the existing spool and its database, as tomod starting again.
  void StartOnSpool(std::unique_ptr<core::Algorithm> fbp = nullptr, bool paused = false) {
    registry_ = core::AlgorithmRegistry::WithBuiltins();
    if (fbp) registry_.Register("fbp", std::move(fbp));
    options_.devices = {core::CpuDevice()};
    manager_ = std::make_unique<JobManager>(options_, *spool_, registry_);
    manager_->SetSchedulingPaused(paused);
    absl::Status started = manager_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  void RestartManager(std::unique_ptr<core::Algorithm> fbp = nullptr, bool paused = false) {
    manager_->Shutdown();
    manager_.reset();
    StartOnSpool(std::move(fbp), paused);
  }

  void TearDown() override {
    if (manager_) manager_->Shutdown();
  }

  absl::StatusOr<pb::Job> Submit(const pb::JobSpec& spec, const std::string& bytes) {
    auto upload = manager_->BeginUpload(spec);
    if (!upload.ok()) return upload.status();
    for (size_t at = 0; at < bytes.size(); at += 1000) {
      absl::Status status = (*upload)->Append(bytes.substr(at, 1000)).status();
      if (!status.ok()) return status;
    }
    return (*upload)->Commit(bytes.size(), Crc32(bytes));
  }

  absl::StatusOr<pb::Job> SubmitSmall(uint32_t detectors = 16, int32_t priority = 0) {
    pb::JobSpec spec = SmallSpec(detectors, 8, 16);
    spec.set_priority(priority);
    return Submit(spec, std::string(spec.input().size_bytes(), '\0'));
  }

  pb::Job WaitForState(const std::string& id, pb::JobState state) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    absl::StatusOr<pb::Job> job = manager_->GetJob(id);
    while (job.ok() && job->state() != state && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(2));
      job = manager_->GetJob(id);
    }
    EXPECT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->state(), state) << pb::JobState_Name(job->state()) << " " << job->error();
    return *job;
  }

  size_t SpoolJobCount() {
    size_t n = 0;
    for ([[maybe_unused]] const auto& entry :
         std::filesystem::directory_iterator(std::filesystem::path(dir_) / "jobs")) {
      ++n;
    }
    return n;
  }

  size_t ListedJobCount() {
    auto list = manager_->ListJobs({});
    EXPECT_TRUE(list.ok());
    return static_cast<size_t>(list->jobs_size());
  }

  std::string dir_;
  std::unique_ptr<Spool> spool_;
  JobManagerOptions options_;
  core::AlgorithmRegistry registry_;
  std::unique_ptr<JobManager> manager_;
};

TEST_F(JobManagerTest, PhantomJobSucceedsWithEventsInOrder) {
  StartManager();
  manager_->SetSchedulingPaused(true);
  pb::JobSpec spec = SmallSpec(64, 90, 64);
  const std::string bytes = PhantomSinogramBytes(spec);
  auto job = Submit(spec, bytes);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(job->input_bytes(), bytes.size());
  EXPECT_EQ(testing::ReadFile(spool_->InputPath(job->id())), bytes);

  RecordingWatcher watcher;
  ASSERT_TRUE(manager_->Watch(job->id(), &watcher).ok());
  manager_->SetSchedulingPaused(false);
  ASSERT_TRUE(watcher.WaitForEnd());
  std::vector<pb::JobEvent> events = watcher.events();
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front().state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(events.front().sequence(), 2u);  // UPLOADING was 1
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_EQ(events[i].sequence(), events[i - 1].sequence() + 1);
    EXPECT_EQ(events[i].job_id(), job->id());
  }
  EXPECT_EQ(events[1].state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(events.back().state(), pb::JOB_STATE_SUCCEEDED);

  pb::Job done = *manager_->GetJob(job->id());
  EXPECT_EQ(done.device(), "cpu");
  EXPECT_DOUBLE_EQ(done.progress().fraction(), 1.0);
  ASSERT_EQ(done.results_size(), 2);  // the volume, then its JSON sidecar
  EXPECT_EQ(done.results(0).name(), "volume.raw");
  EXPECT_EQ(done.results(1).name(), "volume.json");
  EXPECT_EQ(done.results(0).size_bytes(), 64u * 64u * 4u);
  auto result = manager_->FindResult(job->id(), "");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Crc32(testing::ReadFile(result->path)), done.results(0).crc32());
  EXPECT_TRUE(done.has_created() && done.has_started() && done.has_finished());

  // A late watcher gets the terminal state at once.
  RecordingWatcher late;
  ASSERT_TRUE(manager_->Watch(job->id(), &late).ok());
  ASSERT_EQ(late.events().size(), 1u);
  EXPECT_EQ(late.events()[0].sequence(), events.back().sequence());
}

// Transmissions with three zero readings: the job succeeds, and what the preprocessing
// found is in the job's notes and in one of its events.
TEST_F(JobManagerTest, InputNotesStayWithTheResult) {
  StartManager();
  manager_->SetSchedulingPaused(true);  // the watcher must see the run's events
  pb::JobSpec spec = SmallSpec(64, 90, 64);
  std::string bytes = PhantomSinogramBytes(spec);
  std::vector<float> values(bytes.size() / 4);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  for (float& v : values) v = std::exp(-0.05f * v);  // transmissions
  values[100] = values[2000] = values[4321] = 0.0f;
  std::memcpy(bytes.data(), values.data(), bytes.size());
  spec.mutable_input()->mutable_preprocessing()->set_negative_log(true);
  auto job = Submit(spec, bytes);
  ASSERT_TRUE(job.ok()) << job.status();
  RecordingWatcher watcher;
  ASSERT_TRUE(manager_->Watch(job->id(), &watcher).ok());
  manager_->SetSchedulingPaused(false);
  ASSERT_TRUE(watcher.WaitForEnd());
  pb::Job done = WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(done.notes_size(), 1);
  EXPECT_THAT(done.notes(0), ::testing::HasSubstr("3 further unusable readings replaced"));
  bool in_events = false;
  for (const pb::JobEvent& event : watcher.events()) in_events |= event.message() == done.notes(0);
  EXPECT_TRUE(in_events);
}

TEST_F(JobManagerTest, InvalidSpecStoresNothing) {
  StartManager();
  pb::JobSpec spec = SmallSpec();
  spec.mutable_geometry()->mutable_parallel_2d()->mutable_angles()->mutable_uniform()->set_count(0);
  auto upload = manager_->BeginUpload(spec);
  EXPECT_EQ(upload.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SpoolJobCount(), 0u);
  EXPECT_EQ(ListedJobCount(), 0u);
}

TEST_F(JobManagerTest, JobThatFitsNoDeviceBudgetIsRefusedBeforeItsUpload) {
  JobManagerOptions options;
  // SmallSpec's 2D FBP needs its 64 x 64 image and 90 x 64 sinogram: 39424 bytes.
  options.memory_budget_bytes = 39423;
  StartManagerWith(options);
  auto refused = manager_->BeginUpload(SmallSpec());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("needs at least 39424 bytes"));
  EXPECT_THAT(refused.status().message(), HasSubstr("cpu 39423"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--memory_budget_bytes"));
  EXPECT_EQ(ListedJobCount(), 0u);
  EXPECT_EQ(SpoolJobCount(), 0u);

  // The job's own budget can only lower the server's.
  pb::JobSpec spec = SmallSpec();
  spec.set_memory_budget_bytes(uint64_t{1} << 40);
  EXPECT_EQ(manager_->BeginUpload(spec).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(JobManagerTest, JobThatFitsTheBudgetExactlyIsAccepted) {
  JobManagerOptions options;
  options.memory_budget_bytes = 39424;
  StartManagerWith(options);
  auto accepted = manager_->BeginUpload(SmallSpec());
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  // A job budget below the minimum refuses it again.
  pb::JobSpec spec = SmallSpec();
  spec.set_memory_budget_bytes(1000);
  EXPECT_EQ(manager_->BeginUpload(spec).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(JobManagerTest, TooManyBytesRemovesTheJob) {
  StartManager();
  pb::JobSpec spec = SmallSpec();
  auto upload = manager_->BeginUpload(spec);
  ASSERT_TRUE(upload.ok());
  EXPECT_EQ(ListedJobCount(), 1u);
  EXPECT_EQ(manager_->GetJob((*upload)->job_id())->state(), pb::JOB_STATE_UPLOADING);
  absl::Status status =
      (*upload)->Append(std::string(spec.input().size_bytes() + 1, 'x')).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("23041 bytes received exceed input.size_bytes 23040"));
  EXPECT_EQ(ListedJobCount(), 0u);
  EXPECT_EQ(SpoolJobCount(), 0u);
}

TEST_F(JobManagerTest, WrongChecksumRemovesTheJob) {
  StartManager();
  pb::JobSpec spec = SmallSpec();
  const std::string bytes(spec.input().size_bytes(), '\1');
  auto upload = manager_->BeginUpload(spec);
  ASSERT_TRUE(upload.ok());
  const std::string id = (*upload)->job_id();
  ASSERT_TRUE((*upload)->Append(bytes).ok());
  auto job = (*upload)->Commit(bytes.size(), Crc32(bytes) ^ 1);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(), HasSubstr("upload_end.crc32: 0x"));
  EXPECT_EQ(manager_->GetJob(id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(SpoolJobCount(), 0u);
}

TEST_F(JobManagerTest, WrongTotalOrShortUploadRemovesTheJob) {
  StartManager();
  pb::JobSpec spec = SmallSpec();
  const std::string bytes(spec.input().size_bytes(), '\1');
  {
    auto upload = manager_->BeginUpload(spec);
    ASSERT_TRUE(upload.ok());
    ASSERT_TRUE((*upload)->Append(bytes).ok());
    auto job = (*upload)->Commit(bytes.size() + 4, Crc32(bytes));
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(job.status().message(),
                HasSubstr("upload_end.total_bytes: 23044 does not match input.size_bytes 23040"));
  }
  {
    auto upload = manager_->BeginUpload(spec);
    ASSERT_TRUE(upload.ok());
    ASSERT_TRUE((*upload)->Append(bytes.substr(0, 100)).ok());
    auto job = (*upload)->Commit(bytes.size(), Crc32(bytes));
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(job.status().message(), HasSubstr("100 bytes received"));
  }
  EXPECT_EQ(ListedJobCount(), 0u);
  EXPECT_EQ(SpoolJobCount(), 0u);
}

TEST_F(JobManagerTest, AbandonedUploadLeavesNothing) {
  StartManager();
  {
    auto upload = manager_->BeginUpload(SmallSpec());
    ASSERT_TRUE(upload.ok());
    ASSERT_TRUE((*upload)->Append("abcd").ok());
    EXPECT_EQ(SpoolJobCount(), 1u);
  }
  EXPECT_EQ(ListedJobCount(), 0u);
  EXPECT_EQ(SpoolJobCount(), 0u);
  EXPECT_EQ(manager_->queue_length(), 0u);
}

TEST_F(JobManagerTest, HigherPriorityRunsFirstFifoWithin) {
  std::vector<int64_t> order;
  absl::Mutex mu;
  StartManager(std::make_unique<RecordingAlgorithm>(&order, &mu));
  manager_->SetSchedulingPaused(true);
  std::vector<std::string> ids;
  for (auto [detectors, priority] :
       std::vector<std::pair<uint32_t, int32_t>>{{8, 0}, {9, 10}, {10, 0}, {11, 5}, {12, -3}}) {
    auto job = SubmitSmall(detectors, priority);
    ASSERT_TRUE(job.ok()) << job.status();
    ids.push_back(job->id());
  }
  manager_->SetSchedulingPaused(false);
  for (const std::string& id : ids) WaitForState(id, pb::JOB_STATE_SUCCEEDED);
  absl::MutexLock lock(&mu);
  EXPECT_THAT(order, ElementsAre(9, 11, 8, 10, 12));
}

TEST_F(JobManagerTest, CancelQueuedJobAtOnce) {
  StartManager();
  manager_->SetSchedulingPaused(true);
  auto job = SubmitSmall();
  ASSERT_TRUE(job.ok());
  RecordingWatcher watcher;
  ASSERT_TRUE(manager_->Watch(job->id(), &watcher).ok());
  auto cancelled = manager_->CancelJob(job->id());
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), pb::JOB_STATE_CANCELLED);
  ASSERT_TRUE(watcher.WaitForEnd(absl::Seconds(1)));
  EXPECT_EQ(watcher.events().back().state(), pb::JOB_STATE_CANCELLED);
  // Cancelling again is harmless; the job never runs.
  EXPECT_TRUE(manager_->CancelJob(job->id()).ok());
  manager_->SetSchedulingPaused(false);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(manager_->GetJob(job->id())->state(), pb::JOB_STATE_CANCELLED);
  EXPECT_EQ(manager_->queue_length(), 0u);
}

TEST_F(JobManagerTest, CancelRunningJob) {
  StartManager(std::make_unique<BlockingAlgorithm>());
  auto job = SubmitSmall();
  ASSERT_TRUE(job.ok());
  RecordingWatcher watcher;
  ASSERT_TRUE(manager_->Watch(job->id(), &watcher).ok());
  WaitForState(job->id(), pb::JOB_STATE_RUNNING);
  // Cancel once the algorithm runs (its progress is in), not while the input is read.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (manager_->GetJob(job->id())->progress().stage() != "blocking" &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  auto cancelling = manager_->CancelJob(job->id());
  ASSERT_TRUE(cancelling.ok());
  pb::Job done = WaitForState(job->id(), pb::JOB_STATE_CANCELLED);
  EXPECT_TRUE(done.error().empty());
  EXPECT_EQ(manager_->FindResult(job->id(), "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(watcher.WaitForEnd());
  bool saw_progress = false;
  for (const pb::JobEvent& event : watcher.events()) {
    saw_progress |= event.progress().stage() == "blocking";
  }
  EXPECT_TRUE(saw_progress);
  EXPECT_EQ(watcher.events().back().state(), pb::JOB_STATE_CANCELLED);
}

TEST_F(JobManagerTest, FailedRunKeepsTheError) {
  StartManager(std::make_unique<FailingAlgorithm>());
  auto job = SubmitSmall();
  ASSERT_TRUE(job.ok());
  pb::Job done = WaitForState(job->id(), pb::JOB_STATE_FAILED);
  EXPECT_EQ(done.error(), "INTERNAL: boom");
  EXPECT_EQ(manager_->CancelJob(job->id()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(manager_->DeleteJob(job->id()).ok());
}

TEST_F(JobManagerTest, QueueFullIsResourceExhausted) {
  ServerLimits limits;
  limits.max_queue_length = 2;
  StartManager(nullptr, limits);
  manager_->SetSchedulingPaused(true);
  ASSERT_TRUE(SubmitSmall().ok());
  ASSERT_TRUE(SubmitSmall().ok());
  auto third = SubmitSmall();
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), AllOf(HasSubstr("queue is full"),
                                              HasSubstr("--max_queue_length")));
}

TEST_F(JobManagerTest, JobsPerClientLimitCountsUnfinishedJobsAcrossRestarts) {
  ServerLimits limits;
  limits.max_jobs_per_client = 2;
  StartManager(nullptr, limits);
  manager_->SetSchedulingPaused(true);
  pb::JobSpec spec = SmallSpec(16, 8, 16);
  const std::string bytes(spec.input().size_bytes(), '\0');
  auto submit = [&](absl::string_view client) -> absl::StatusOr<pb::Job> {
    auto upload = manager_->BeginUpload(spec, client);
    if (!upload.ok()) return upload.status();
    if (absl::Status s = (*upload)->Append(bytes).status(); !s.ok()) return s;
    return (*upload)->Commit(bytes.size(), Crc32(bytes));
  };
  auto a1 = submit("10.0.0.1");
  ASSERT_TRUE(a1.ok()) << a1.status();
  EXPECT_EQ(a1->client(), "10.0.0.1");
  // An upload in progress counts too.
  auto a2 = manager_->BeginUpload(spec, "10.0.0.1");
  ASSERT_TRUE(a2.ok()) << a2.status();
  auto refused = submit("10.0.0.1");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              AllOf(HasSubstr("client 10.0.0.1 has 2 unfinished jobs"),
                    HasSubstr("limit is 2 per client (--max_jobs_per_client)")));
  // Other clients, and calls without a client, are not affected.
  EXPECT_TRUE(submit("10.0.0.2").ok());
  EXPECT_TRUE(submit("").ok());
  a2->reset();  // an abandoned upload frees its place
  auto a3 = submit("10.0.0.1");
  ASSERT_TRUE(a3.ok()) << a3.status();
  EXPECT_EQ(submit("10.0.0.1").status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(manager_->CancelJob(a1->id()).ok());  // an ended job frees its place
  ASSERT_TRUE(submit("10.0.0.1").ok());

  // The count is rebuilt from the database after a restart.
  RestartManager(nullptr, /*paused=*/true);
  EXPECT_EQ(submit("10.0.0.1").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(submit("10.0.0.2").ok());
  // Finished jobs do not count.
  manager_->SetSchedulingPaused(false);
  WaitForState(a3->id(), pb::JOB_STATE_SUCCEEDED);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  absl::StatusOr<pb::Job> later = submit("10.0.0.1");
  while (!later.ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
    later = submit("10.0.0.1");
  }
  EXPECT_TRUE(later.ok()) << later.status();
}

// Tenants: the job is its tenant's (across a restart), keys are per tenant, ListJobs can
// list one tenant's jobs, and the tenant quotas count per tenant.
TEST_F(JobManagerTest, TenantsOwnTheirJobsKeysAndQuotas) {
  JobManagerOptions options;
  options.tenant_max_unfinished_jobs = 2;
  StartManagerWith(options, nullptr, /*paused=*/true);
  std::mt19937_64 random(std::random_device{}());
  pb::JobSpec spec = SmallSpec(16, 8, 16);
  spec.set_idempotency_key(absl::StrCat("tenant-key-", random()));
  const std::string bytes(spec.input().size_bytes(), '\0');
  auto submit = [&](const pb::JobSpec& s, absl::string_view tenant) -> absl::StatusOr<pb::Job> {
    auto upload = manager_->BeginUpload(s, tenant, tenant);
    if (!upload.ok()) return upload.status();
    if ((*upload)->existing_job()) return *(*upload)->existing_job();
    if (absl::Status st = (*upload)->Append(bytes).status(); !st.ok()) return st;
    return (*upload)->Commit(bytes.size(), Crc32(bytes));
  };
  absl::StatusOr<pb::Job> a = submit(spec, "lab-a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->tenant(), "lab-a");
  absl::StatusOr<pb::Job> b = submit(spec, "lab-b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(b->id(), a->id());
  absl::StatusOr<pb::Job> a_again = submit(spec, "lab-a");
  ASSERT_TRUE(a_again.ok()) << a_again.status();
  EXPECT_EQ(a_again->id(), a->id());
  // The default tenant's key is another key again.
  absl::StatusOr<pb::Job> untenanted = submit(spec, "");
  ASSERT_TRUE(untenanted.ok()) << untenanted.status();
  EXPECT_NE(untenanted->id(), a->id());
  EXPECT_NE(untenanted->id(), b->id());

  auto listed = manager_->ListJobs({}, std::string("lab-b"));
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->jobs_size(), 1);
  EXPECT_EQ(listed->jobs(0).id(), b->id());
  EXPECT_EQ(manager_->ListJobs({})->jobs_size(), 3);

  // Quota: lab-a has one queued job; a second is taken, a third refused; lab-b is apart.
  pb::JobSpec other = SmallSpec(16, 8, 16);
  ASSERT_TRUE(submit(other, "lab-a").ok());
  absl::StatusOr<pb::Job> refused = submit(other, "lab-a");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              AllOf(HasSubstr("quota tenant_max_unfinished_jobs: tenant lab-a has 2"),
                    HasSubstr("the limit is 2 (--tenant_max_unfinished_jobs)")));
  EXPECT_TRUE(submit(other, "lab-b").ok());

  // After a restart the owners, the keys and the counts are what they were.
  RestartManager(nullptr, /*paused=*/true);
  absl::StatusOr<pb::Job> restored = manager_->GetJob(a->id());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->tenant(), "lab-a");
  a_again = submit(spec, "lab-a");
  ASSERT_TRUE(a_again.ok()) << a_again.status();
  EXPECT_EQ(a_again->id(), a->id());
  EXPECT_EQ(submit(other, "lab-a").status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(JobManagerTest, TenantSpoolQuotaNamesItsNumbers) {
  JobManagerOptions options;
  pb::JobSpec spec = SmallSpec(16, 8, 16);
  const std::string bytes(spec.input().size_bytes(), '\0');
  // Room for one job's input and outputs, not two.
  options.tenant_max_spool_bytes = 3 * spec.input().size_bytes() + (64 << 10);
  StartManagerWith(options, nullptr, /*paused=*/true);
  auto submit = [&](absl::string_view tenant) -> absl::StatusOr<pb::Job> {
    auto upload = manager_->BeginUpload(spec, tenant, tenant);
    if (!upload.ok()) return upload.status();
    if (absl::Status st = (*upload)->Append(bytes).status(); !st.ok()) return st;
    return (*upload)->Commit(bytes.size(), Crc32(bytes));
  };
  int taken = 0;
  absl::Status refused;
  for (; taken < 100; ++taken) {
    refused = submit("lab-a").status();
    if (!refused.ok()) break;
  }
  ASSERT_GE(taken, 1);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(),
              AllOf(HasSubstr("quota tenant_max_spool_bytes: tenant lab-a's jobs hold or reserve"),
                    HasSubstr(absl::StrCat("over the limit of ", options.tenant_max_spool_bytes,
                                           " (--tenant_max_spool_bytes)"))));
  EXPECT_TRUE(submit("lab-b").ok());
}

TEST_F(JobManagerTest, DeleteNeedsAFinishedJob) {
  StartManager();
  manager_->SetSchedulingPaused(true);
  auto job = SubmitSmall();
  ASSERT_TRUE(job.ok());
  absl::Status status = manager_->DeleteJob(job->id());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("is QUEUED; cancel it first"));
  ASSERT_TRUE(manager_->CancelJob(job->id()).ok());
  EXPECT_TRUE(std::filesystem::exists(spool_->JobDir(job->id())));
  ASSERT_TRUE(manager_->DeleteJob(job->id()).ok());
  EXPECT_FALSE(std::filesystem::exists(spool_->JobDir(job->id())));
  EXPECT_EQ(manager_->GetJob(job->id()).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobManagerTest, UnknownIdsAreNotFoundNamingTheId) {
  StartManager();
  const std::string id = "20990101-000000-000000-000000000000";
  for (absl::Status status :
       {manager_->GetJob(id).status(), manager_->CancelJob(id).status(),
        manager_->DeleteJob(id), manager_->FindResult(id, "").status()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(status.message(), HasSubstr(id));
  }
  RecordingWatcher watcher;
  EXPECT_EQ(manager_->Watch("no such job", &watcher).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(watcher.events().empty());
}

TEST_F(JobManagerTest, ListJobsPagesOldestFirstAndFilters) {
  StartManager();
  manager_->SetSchedulingPaused(true);
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(SubmitSmall()->id());
  ASSERT_TRUE(manager_->CancelJob(ids[1]).ok());

  pb::ListJobsRequest request;
  request.set_page_size(2);
  std::vector<std::string> seen;
  for (int page = 0; page < 10; ++page) {
    auto response = manager_->ListJobs(request);
    ASSERT_TRUE(response.ok()) << response.status();
    for (const pb::Job& job : response->jobs()) seen.push_back(job.id());
    if (response->next_page_token().empty()) break;
    request.set_page_token(response->next_page_token());
  }
  EXPECT_EQ(seen, ids);

  pb::ListJobsRequest queued;
  queued.add_states(pb::JOB_STATE_QUEUED);
  auto response = manager_->ListJobs(queued);
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->jobs_size(), 4);
  queued.clear_states();
  queued.add_states(pb::JOB_STATE_CANCELLED);
  response = manager_->ListJobs(queued);
  ASSERT_EQ(response->jobs_size(), 1);
  EXPECT_EQ(response->jobs(0).id(), ids[1]);

  pb::ListJobsRequest big;
  big.set_page_size(2000);
  EXPECT_THAT(manager_->ListJobs(big).status().message(),
              HasSubstr("page_size: 2000 is out of range [0, 1000]"));
  pb::ListJobsRequest bad_token;
  bad_token.set_page_token("garbage");
  EXPECT_EQ(manager_->ListJobs(bad_token).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JobManagerTest, FindResultErrors) {
  StartManager();
  auto job = SubmitSmall();
  ASSERT_TRUE(job.ok());
  WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED);
  auto missing = manager_->FindResult(job->id(), "volume.nii");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("its results are: volume.raw"));
  EXPECT_TRUE(manager_->FindResult(job->id(), "volume.raw").ok());
}

// Early fetch: while the outputs are written (held there by the test hook), the raw
// result is the volume in memory, by name and as the first result; not while QUEUED or
// reconstructing, and no other format. It is the file that is then written, and once the
// job has ended the record holds it no more.
TEST_F(JobManagerTest, RawResultIsTheVolumeBeingWrittenWhileTheOutputsAreWritten) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::string id;  // set before the worker may start
  absl::StatusCode while_reconstructing = absl::StatusCode::kUnknown;
  absl::Notification writing, release;
  JobManagerOptions options;
  options.before_writing_results = [&](const std::string&) {
    writing.Notify();
    release.WaitForNotificationWithTimeout(absl::Seconds(30));
  };
  StartManagerWith(options, std::make_unique<RandomVolumeAlgorithm>(seed, [&] {
                     while_reconstructing = manager_->FindResult(id, "volume.raw").status().code();
                   }),
                   /*paused=*/true);
  pb::JobSpec spec = SmallSpec(16, 8, 16);
  spec.add_outputs(pb::OUTPUT_FORMAT_RAW_FLOAT32);
  spec.add_outputs(pb::OUTPUT_FORMAT_NIFTI);
  auto job = Submit(spec, std::string(spec.input().size_bytes(), '\0'));
  ASSERT_TRUE(job.ok()) << job.status();
  id = job->id();
  EXPECT_EQ(manager_->FindResult(id, "volume.raw").status().code(),
            absl::StatusCode::kFailedPrecondition);  // QUEUED
  manager_->SetSchedulingPaused(false);
  ASSERT_TRUE(writing.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(while_reconstructing, absl::StatusCode::kFailedPrecondition);
  const pb::Job running = *manager_->GetJob(id);
  EXPECT_EQ(running.state(), pb::JOB_STATE_RUNNING);
  EXPECT_NE(running.progress().stage(), "write results") << "shared after the event";

  std::shared_ptr<const core::Array3D> held;
  {
    auto by_name = manager_->FindResult(id, "volume.raw");
    auto first = manager_->FindResult(id, "");
    ASSERT_TRUE(by_name.ok()) << by_name.status();
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_NE(by_name->being_written, nullptr);
    EXPECT_EQ(first->being_written, by_name->being_written);
    EXPECT_TRUE(by_name->path.empty());
    EXPECT_EQ(by_name->file.name(), "volume.raw");
    EXPECT_EQ(by_name->file.format(), pb::OUTPUT_FORMAT_RAW_FLOAT32);
    EXPECT_EQ(by_name->file.size_bytes(), 16u * 16u * 4u);
    held = by_name->being_written;
  }
  for (const char* other : {"volume.json", "volume.nii"}) {
    EXPECT_EQ(manager_->FindResult(id, other).status().code(),
              absl::StatusCode::kFailedPrecondition)
        << other;
  }
  const std::vector<float> expected = RandomValues(seed, 16 * 16);
  ASSERT_EQ(held->size(), 16 * 16);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), held->data()));
  const std::string in_memory(reinterpret_cast<const char*>(held->data()), held->size_bytes());
  release.Notify();

  const pb::Job done = WaitForState(id, pb::JOB_STATE_SUCCEEDED);
  auto file = manager_->FindResult(id, "volume.raw");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->being_written, nullptr);
  EXPECT_EQ(testing::ReadFile(file->path), in_memory);
  EXPECT_EQ(file->file.crc32(), Crc32(in_memory));
  EXPECT_EQ(done.results(0).crc32(), Crc32(in_memory));
  EXPECT_EQ(held.use_count(), 1) << "the record or the worker still holds the volume";
}

// A job cancelled while its outputs are written: the volume is no result any more.
TEST_F(JobManagerTest, CancelledWhileWritingDropsTheVolumeBeingWritten) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  absl::Notification writing, release;
  JobManagerOptions options;
  options.before_writing_results = [&](const std::string&) {
    writing.Notify();
    release.WaitForNotificationWithTimeout(absl::Seconds(30));
  };
  StartManagerWith(options, std::make_unique<RandomVolumeAlgorithm>(seed));
  auto job = SubmitSmall();
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(writing.WaitForNotificationWithTimeout(absl::Seconds(20)));
  auto result = manager_->FindResult(job->id(), "volume.raw");
  ASSERT_TRUE(result.ok()) << result.status();
  std::shared_ptr<const core::Array3D> held = std::move(result->being_written);
  ASSERT_NE(held, nullptr);
  ASSERT_TRUE(manager_->CancelJob(job->id()).ok());
  release.Notify();
  WaitForState(job->id(), pb::JOB_STATE_CANCELLED);
  EXPECT_EQ(manager_->FindResult(job->id(), "volume.raw").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(held.use_count(), 1);
}

TEST_F(JobManagerTest, ShutdownRequeuesRunningJobsAndClosesWatches) {
  StartManager(std::make_unique<BlockingAlgorithm>());
  auto running = SubmitSmall();
  ASSERT_TRUE(running.ok());
  WaitForState(running->id(), pb::JOB_STATE_RUNNING);
  auto queued = SubmitSmall();
  ASSERT_TRUE(queued.ok());
  RecordingWatcher running_watcher, queued_watcher;
  ASSERT_TRUE(manager_->Watch(running->id(), &running_watcher).ok());
  ASSERT_TRUE(manager_->Watch(queued->id(), &queued_watcher).ok());
  manager_->Shutdown();
  // Handed back, not ended: an accepted job is never lost to a stop of tomod.
  pb::Job handed_back = *manager_->GetJob(running->id());
  EXPECT_EQ(handed_back.state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(handed_back.attempts(), 0u);
  EXPECT_TRUE(handed_back.device().empty());
  EXPECT_FALSE(handed_back.has_started());
  EXPECT_EQ(running_watcher.events().back().state(), pb::JOB_STATE_QUEUED);
  EXPECT_THAT(running_watcher.events().back().message(),
              AllOf(HasSubstr("queued again"), HasSubstr("shutting down"),
                    HasSubstr("does not count as an attempt")));
  EXPECT_EQ(running_watcher.closed().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(queued_watcher.closed().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(manager_->BeginUpload(SmallSpec()).status().code(), absl::StatusCode::kUnavailable);

  // After the restart both run, the handed-back one first (it was queued first).
  RestartManager();
  pb::Job rerun = WaitForState(running->id(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(rerun.attempts(), 1u);
  WaitForState(queued->id(), pb::JOB_STATE_SUCCEEDED);
}

TEST_F(JobManagerTest, DrainRefusesNewJobsLetsUploadsCommitAndRequeuesOnTimeout) {
  StartManager(std::make_unique<BlockingAlgorithm>());
  auto running = SubmitSmall();
  ASSERT_TRUE(running.ok());
  WaitForState(running->id(), pb::JOB_STATE_RUNNING);
  auto cancelled = SubmitSmall();
  ASSERT_TRUE(cancelled.ok());
  // An upload that began before the drain.
  pb::JobSpec spec = SmallSpec(16, 8, 16);
  const std::string bytes(spec.input().size_bytes(), '\0');
  auto upload = manager_->BeginUpload(spec);
  ASSERT_TRUE(upload.ok()) << upload.status();
  ASSERT_TRUE((*upload)->Append(bytes).ok());

  const absl::Time start = absl::Now();
  std::thread drain(
      [&] { manager_->Drain(absl::Milliseconds(300), "tomod is draining (SIGTERM)"); });
  // New jobs are refused at once, naming why.
  absl::StatusOr<std::unique_ptr<Upload>> refused;
  for (refused = manager_->BeginUpload(spec); refused.ok();
       refused = manager_->BeginUpload(spec)) {
    refused->reset();
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(),
              AllOf(HasSubstr("tomod is draining (SIGTERM)"), HasSubstr("not accepting new jobs")));
  auto committed = (*upload)->Commit(bytes.size(), Crc32(bytes));
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_EQ(committed->state(), pb::JOB_STATE_QUEUED);
  // A cancel during the drain still ends its job.
  ASSERT_TRUE(manager_->CancelJob(cancelled->id()).ok());
  drain.join();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  // Nothing new started during the drain; the blocking run is still going.
  EXPECT_EQ(manager_->GetJob(committed->id())->state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(manager_->GetJob(running->id())->state(), pb::JOB_STATE_RUNNING);
  manager_->Shutdown();
  EXPECT_EQ(manager_->GetJob(running->id())->state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(manager_->GetJob(cancelled->id())->state(), pb::JOB_STATE_CANCELLED);

  RestartManager(nullptr, /*paused=*/true);
  EXPECT_EQ(manager_->GetJob(running->id())->state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(manager_->GetJob(running->id())->attempts(), 0u);
  EXPECT_EQ(manager_->GetJob(committed->id())->state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(manager_->queue_length(), 2u);
}

TEST_F(JobManagerTest, CutDrainShortEndsTheWaitAtOnce) {
  StartManager(std::make_unique<BlockingAlgorithm>());
  auto running = SubmitSmall();
  ASSERT_TRUE(running.ok());
  WaitForState(running->id(), pb::JOB_STATE_RUNNING);
  const absl::Time start = absl::Now();
  std::thread drain([&] { manager_->Drain(absl::Seconds(20), "draining"); });
  absl::SleepFor(absl::Milliseconds(50));
  manager_->CutDrainShort();  // tomod's second SIGTERM
  drain.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  manager_->Shutdown();
  EXPECT_EQ(manager_->GetJob(running->id())->state(), pb::JOB_STATE_QUEUED);
}

TEST_F(JobManagerTest, DrainEndsEarlyWhenTheRunsEnd) {
  StartManager();
  auto job = SubmitSmall();
  ASSERT_TRUE(job.ok());
  const absl::Time start = absl::Now();
  manager_->Drain(absl::Seconds(20), "draining");
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  // Queued or done, never lost; and when it ran, it finished during the drain.
  const pb::JobState state = manager_->GetJob(job->id())->state();
  EXPECT_TRUE(state == pb::JOB_STATE_QUEUED || state == pb::JOB_STATE_SUCCEEDED)
      << pb::JobState_Name(state);
}

// ---------------------------------------------------------------- durability

// Finite random line integrals for spec (any finite input reconstructs).
std::string RandomSinogram(const pb::JobSpec& spec, std::mt19937_64& random) {
  std::vector<float> values(spec.input().size_bytes() / sizeof(float));
  std::uniform_real_distribution<float> value(0.0f, 4.0f);
  for (float& v : values) v = value(random);
  return std::string(reinterpret_cast<const char*>(values.data()), spec.input().size_bytes());
}

::testing::AssertionResult SameJob(const pb::Job& a, const pb::Job& b) {
  std::string diff;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  if (differencer.Compare(a, b)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "job " << a.id() << " differs: " << diff;
}

TEST_F(JobManagerTest, RestartRestoresEveryState) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  StartManager();

  pb::JobSpec good = SmallSpec(16 + random() % 32, 8 + random() % 16, 16);
  good.set_idempotency_key(absl::StrCat("restart-", random()));
  auto succeeded = Submit(good, RandomSinogram(good, random));
  ASSERT_TRUE(succeeded.ok()) << succeeded.status();
  WaitForState(succeeded->id(), pb::JOB_STATE_SUCCEEDED);

  pb::JobSpec bad = SmallSpec(16 + random() % 32, 8 + random() % 16, 16);
  std::string nan_data = RandomSinogram(bad, random);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&nan_data[4 * (random() % (nan_data.size() / 4))], &nan, 4);
  auto failed = Submit(bad, nan_data);
  ASSERT_TRUE(failed.ok()) << failed.status();
  WaitForState(failed->id(), pb::JOB_STATE_FAILED);

  auto deleted = SubmitSmall();
  ASSERT_TRUE(deleted.ok());
  WaitForState(deleted->id(), pb::JOB_STATE_SUCCEEDED);
  ASSERT_TRUE(manager_->DeleteJob(deleted->id()).ok());

  manager_->SetSchedulingPaused(true);
  auto cancelled = SubmitSmall();
  ASSERT_TRUE(cancelled.ok());
  ASSERT_TRUE(manager_->CancelJob(cancelled->id()).ok());

  // Queued jobs, told apart by their detector count; they must run in priority order
  // (FIFO within a priority) after the restart too.
  struct Queued {
    std::string id;
    int32_t priority;
    int64_t detectors;
  };
  std::vector<Queued> queued;
  const int queued_count = 3 + static_cast<int>(random() % 4);
  for (int i = 0; i < queued_count; ++i) {
    const int32_t priority = static_cast<int32_t>(random() % 5) - 2;
    auto job = SubmitSmall(static_cast<uint32_t>(20 + i), priority);
    ASSERT_TRUE(job.ok()) << job.status();
    queued.push_back({job->id(), priority, 20 + i});
  }
  std::vector<int64_t> expected_order;
  std::vector<Queued> by_priority = queued;
  std::stable_sort(by_priority.begin(), by_priority.end(),
                   [](const Queued& a, const Queued& b) { return a.priority > b.priority; });
  for (const Queued& q : by_priority) expected_order.push_back(q.detectors);

  auto before = manager_->ListJobs({});
  ASSERT_TRUE(before.ok());
  const uint64_t used_before = manager_->spool_used_bytes();

  std::vector<int64_t> order;
  absl::Mutex mu;
  RestartManager(std::make_unique<RecordingAlgorithm>(&order, &mu), /*paused=*/true);

  auto after = manager_->ListJobs({});
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->jobs_size(), before->jobs_size());
  for (int i = 0; i < before->jobs_size(); ++i) {
    EXPECT_TRUE(SameJob(after->jobs(i), before->jobs(i)));
  }
  EXPECT_EQ(manager_->GetJob(deleted->id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(manager_->spool_used_bytes(), used_before);
  EXPECT_EQ(manager_->queue_length(), static_cast<size_t>(queued_count));

  // The finished result is still there, byte for byte.
  pb::Job done = *manager_->GetJob(succeeded->id());
  auto result = manager_->FindResult(succeeded->id(), "");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(Crc32(testing::ReadFile(result->path)), done.results(0).crc32());
  EXPECT_THAT(manager_->GetJob(failed->id())->error(), HasSubstr("is not finite"));

  // The idempotency key is known across the restart: no second job.
  auto again = manager_->BeginUpload(good);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE((*again)->existing_job().has_value());
  EXPECT_EQ((*again)->existing_job()->id(), succeeded->id());
  EXPECT_EQ(ListedJobCount(), static_cast<size_t>(before->jobs_size()));

  // A late watcher gets the restored state with the sequence continued.
  RecordingWatcher watcher;
  ASSERT_TRUE(manager_->Watch(queued[0].id, &watcher).ok());
  ASSERT_EQ(watcher.events().size(), 1u);
  EXPECT_EQ(watcher.events()[0].state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(watcher.events()[0].sequence(), 2u);  // UPLOADING 1, QUEUED 2

  manager_->SetSchedulingPaused(false);
  for (const Queued& q : queued) {
    pb::Job job = WaitForState(q.id, pb::JOB_STATE_SUCCEEDED);
    EXPECT_EQ(job.attempts(), 1u);
  }
  ASSERT_TRUE(watcher.WaitForEnd());
  EXPECT_EQ(watcher.events()[1].sequence(), 3u);
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, expected_order);
}

TEST_F(JobManagerTest, RecoveryAfterACrashRerunsFailsCancelsAndCleansUp) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  OpenSpool();
  options_.max_attempts = 2 + static_cast<uint32_t>(random() % 3);
  const pb::JobSpec spec = SmallSpec(16 + random() % 16, 8 + random() % 8, 16);
  const std::string data = RandomSinogram(spec, random);

  // The database and spool as a SIGKILL may leave them.
  std::string uploading, queued, interrupted, exhausted, cancelling, succeeded, stray;
  const std::string result_bytes = RandomSinogram(SmallSpec(16, 16, 16), random);
  {
    auto store = JobStore::Open(spool_->DatabasePath());
    ASSERT_TRUE(store.ok()) << store.status();
    auto put = [&](pb::JobState state, uint32_t attempts, bool cancel_requested,
                   const std::string& input) {
      StoredJob record;
      record.job.set_id(NewJobId());
      record.job.set_state(state);
      *record.job.mutable_spec() = spec;
      record.job.set_input_bytes(data.size());
      record.job.set_attempts(attempts);
      record.job.mutable_created()->set_seconds(absl::ToUnixSeconds(absl::Now()));
      record.cancel_requested = cancel_requested;
      record.event_sequence = 3;
      if (state == pb::JOB_STATE_SUCCEEDED) {
        record.job.mutable_finished()->set_seconds(absl::ToUnixSeconds(absl::Now()));
        pb::ResultFile* file = record.job.add_results();
        file->set_name("volume.raw");
        file->set_format(pb::OUTPUT_FORMAT_RAW_FLOAT32);
        file->set_size_bytes(result_bytes.size());
        file->set_crc32(Crc32(result_bytes));
      }
      EXPECT_TRUE((*store)->Put(record).ok());
      EXPECT_TRUE(spool_->CreateJobDir(record.job.id()).ok());
      testing::WriteFile(spool_->InputPath(record.job.id()), input);
      return record.job.id();
    };
    uploading = put(pb::JOB_STATE_UPLOADING, 0, false, data.substr(0, data.size() / 2));
    queued = put(pb::JOB_STATE_QUEUED, 0, false, data);
    interrupted = put(pb::JOB_STATE_RUNNING, options_.max_attempts - 1, false, data);
    exhausted = put(pb::JOB_STATE_RUNNING, options_.max_attempts, false, data);
    cancelling = put(pb::JOB_STATE_RUNNING, 1, true, data);
    succeeded = put(pb::JOB_STATE_SUCCEEDED, 1, false, data);
    std::filesystem::create_directories(spool_->ResultsDir(succeeded));
    testing::WriteFile(spool_->ResultPath(succeeded, "volume.raw"), result_bytes);
    // The interrupted run had written half a result, and published a stale one.
    std::filesystem::create_directories(spool_->ResultsPartialDir(interrupted));
    testing::WriteFile(spool_->ResultsPartialDir(interrupted) + "/volume.raw", "half");
    std::filesystem::create_directories(spool_->ResultsDir(interrupted));
    testing::WriteFile(spool_->ResultPath(interrupted, "volume.raw"), "stale");
    // A directory whose upload never got a record.
    stray = NewJobId();
    ASSERT_TRUE(spool_->CreateJobDir(stray).ok());
    testing::WriteFile(spool_->InputPath(stray), "x");
  }

  StartOnSpool(nullptr, /*paused=*/true);
  EXPECT_EQ(manager_->GetJob(uploading).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(spool_->JobDir(uploading)));
  EXPECT_FALSE(std::filesystem::exists(spool_->JobDir(stray)));
  EXPECT_EQ(manager_->GetJob(queued)->state(), pb::JOB_STATE_QUEUED);
  pb::Job requeued = *manager_->GetJob(interrupted);
  EXPECT_EQ(requeued.state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(requeued.attempts(), options_.max_attempts - 1);
  EXPECT_FALSE(std::filesystem::exists(spool_->ResultsDir(interrupted)));
  EXPECT_FALSE(std::filesystem::exists(spool_->ResultsPartialDir(interrupted)));
  pb::Job gave_up = *manager_->GetJob(exhausted);
  EXPECT_EQ(gave_up.state(), pb::JOB_STATE_FAILED);
  EXPECT_THAT(gave_up.error(),
              AllOf(HasSubstr(absl::StrCat("each of the job's ", options_.max_attempts, " runs")),
                    HasSubstr(absl::StrCat("--max_attempts is ", options_.max_attempts))));
  EXPECT_TRUE(gave_up.has_finished());
  EXPECT_EQ(manager_->GetJob(cancelling)->state(), pb::JOB_STATE_CANCELLED);
  EXPECT_EQ(manager_->queue_length(), 2u);
  auto kept = manager_->FindResult(succeeded, "volume.raw");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(testing::ReadFile(kept->path), result_bytes);

  manager_->SetSchedulingPaused(false);
  WaitForState(queued, pb::JOB_STATE_SUCCEEDED);
  pb::Job rerun = WaitForState(interrupted, pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(rerun.attempts(), options_.max_attempts);
  auto result = manager_->FindResult(interrupted, "");
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(Crc32(testing::ReadFile(result->path)), rerun.results(0).crc32());
  EXPECT_NE(testing::ReadFile(result->path), "stale");

  // What recovery decided is durable: a second restart finds the same.
  RestartManager();
  EXPECT_EQ(manager_->GetJob(exhausted)->state(), pb::JOB_STATE_FAILED);
  EXPECT_EQ(manager_->GetJob(cancelling)->state(), pb::JOB_STATE_CANCELLED);
  EXPECT_TRUE(SameJob(*manager_->GetJob(interrupted), rerun));
}

TEST_F(JobManagerTest, IdempotencyKeyGivesTheSameJob) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  StartManager();
  manager_->SetSchedulingPaused(true);
  pb::JobSpec spec = SmallSpec(16 + random() % 16, 8 + random() % 8, 16);
  spec.set_idempotency_key(absl::StrCat("key-", random()));
  const std::string data = RandomSinogram(spec, random);
  auto first = Submit(spec, data);
  ASSERT_TRUE(first.ok()) << first.status();

  auto again = Submit(spec, data);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->id(), first->id());
  EXPECT_EQ(ListedJobCount(), 1u);
  EXPECT_EQ(SpoolJobCount(), 1u);

  pb::JobSpec other = spec;
  other.set_priority(other.priority() + 1);
  auto reused = manager_->BeginUpload(other);
  EXPECT_EQ(reused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(reused.status().message(),
              AllOf(HasSubstr(absl::StrCat("idempotency_key: \"", spec.idempotency_key(), "\"")),
                    HasSubstr(first->id())));

  // Two uploads with one key at once: the first to commit is the job for both.
  pb::JobSpec raced = spec;
  raced.set_idempotency_key(absl::StrCat("race-", random()));
  auto a = manager_->BeginUpload(raced);
  auto b = manager_->BeginUpload(raced);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->job_id(), (*b)->job_id());
  ASSERT_TRUE((*a)->Append(data).ok());
  ASSERT_TRUE((*b)->Append(data).ok());
  auto b_job = (*b)->Commit(data.size(), Crc32(data));
  auto a_job = (*a)->Commit(data.size(), Crc32(data));
  ASSERT_TRUE(a_job.ok() && b_job.ok()) << a_job.status() << " " << b_job.status();
  EXPECT_EQ(a_job->id(), b_job->id());
  EXPECT_EQ(a_job->id(), (*b)->job_id());
  EXPECT_EQ(ListedJobCount(), 2u);
  EXPECT_EQ(SpoolJobCount(), 2u);
  EXPECT_EQ(manager_->queue_length(), 2u);

  // A deleted job frees its key.
  ASSERT_TRUE(manager_->CancelJob(first->id()).ok());
  ASSERT_TRUE(manager_->DeleteJob(first->id()).ok());
  auto fresh = Submit(spec, data);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_NE(fresh->id(), first->id());
}

TEST_F(JobManagerTest, FinishedJobsExpireAfterTheTtl) {
  JobManagerOptions options;
  options.result_ttl = absl::Milliseconds(300);
  options.sweep_interval = absl::Milliseconds(20);
  StartManagerWith(options);
  auto done = SubmitSmall();
  ASSERT_TRUE(done.ok());
  pb::Job finished = WaitForState(done->id(), pb::JOB_STATE_SUCCEEDED);
  manager_->SetSchedulingPaused(true);
  auto waiting = SubmitSmall();
  ASSERT_TRUE(waiting.ok());

  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (manager_->GetJob(done->id()).ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  const absl::Time gone = absl::Now();
  EXPECT_EQ(manager_->GetJob(done->id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_GE(gone - absl::FromUnixSeconds(finished.finished().seconds()) -
                absl::Nanoseconds(finished.finished().nanos()),
            options.result_ttl);
  // The files go right after the record (outside the manager's lock).
  while (std::filesystem::exists(spool_->JobDir(done->id())) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_FALSE(std::filesystem::exists(spool_->JobDir(done->id())));
  // Only finished jobs expire.
  EXPECT_EQ(manager_->GetJob(waiting->id())->state(), pb::JOB_STATE_QUEUED);
  // Its input, and its outputs reserved until it ends.
  EXPECT_EQ(manager_->spool_used_bytes(), ReservedBytes(waiting->spec()));

  RestartManager(nullptr, /*paused=*/true);
  EXPECT_EQ(manager_->GetJob(done->id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ListedJobCount(), 1u);
}

TEST_F(JobManagerTest, SpoolLimitRefusesUploadsNamingLimitAndUsage) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const pb::JobSpec spec = SmallSpec(16 + random() % 32, 8 + random() % 16, 16);
  const uint64_t input = spec.input().size_bytes();
  // A job takes its input and, until it ends, the bound of its outputs.
  const uint64_t per_job = ReservedBytes(spec);
  ASSERT_GT(per_job, input);
  JobManagerOptions options;
  options.max_spool_bytes = 2 * per_job + random() % per_job;
  StartManagerWith(options, nullptr, /*paused=*/true);
  const std::string data(input, '\0');
  auto a = Submit(spec, data);
  ASSERT_TRUE(a.ok()) << a.status();
  // An upload in progress holds its room.
  auto b = manager_->BeginUpload(spec);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(manager_->spool_used_bytes(), 2 * per_job);
  auto refused = manager_->BeginUpload(spec);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              AllOf(HasSubstr("--max_spool_bytes"),
                    HasSubstr(absl::StrCat("limit of ", options.max_spool_bytes, " bytes")),
                    HasSubstr(absl::StrCat(2 * per_job, " bytes are in use")),
                    HasSubstr(absl::StrCat("the job needs ", per_job, " bytes (input.size_bytes ",
                                           input, " and at most ", per_job - input,
                                           " of outputs)"))));
  b->reset();  // abandoned: its room is free again
  EXPECT_EQ(manager_->spool_used_bytes(), per_job);
  auto c = Submit(spec, data);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(manager_->BeginUpload(spec).status().code(), absl::StatusCode::kResourceExhausted);
  // Deleting a job frees its room at once.
  ASSERT_TRUE(manager_->CancelJob(a->id()).ok());
  ASSERT_TRUE(manager_->DeleteJob(a->id()).ok());
  EXPECT_TRUE(Submit(spec, data).ok());
}

// Admission against the spool file system's free space: a job whose input and outputs do
// not fit the free space less --min_free_spool_bytes is refused before anything is stored,
// naming its need and the free space.
TEST_F(JobManagerTest, UploadsThatDoNotFitTheFreeSpaceAreRefusedNamingNeedAndFree) {
  const pb::JobSpec spec = SmallSpec(24, 12, 16);
  OpenSpool();
  // More than is free is to be kept for the database (by a margin other processes writing
  // to the same file system do not change).
  const uint64_t free_now = std::filesystem::space(dir_).available;
  options_.min_free_spool_bytes = free_now + (1ull << 30);
  StartOnSpool(nullptr, /*paused=*/true);
  auto refused = manager_->BeginUpload(spec);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              AllOf(HasSubstr(absl::StrCat("spool file system is full: the job needs ",
                                           ReservedBytes(spec), " bytes")),
                    HasSubstr("bytes free"), HasSubstr("--min_free_spool_bytes")));
  EXPECT_EQ(manager_->spool_used_bytes(), 0u);
  EXPECT_EQ(ListedJobCount(), 0u);
}

// Crash attribution: the crash log names the job whose run a fatal signal interrupted.
// That job is charged the run (and failed as poison once each of its runs crashed tomod);
// the other job running then gets its attempt back; a stop without a crash line charges
// every interrupted run as before.
TEST_F(JobManagerTest, CrashLogChargesOnlyTheJobThatCrashedTomod) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  OpenSpool();
  options_.max_attempts = 2 + static_cast<uint32_t>(random() % 3);
  options_.crash_log_path = dir_ + "/crashes";
  const pb::JobSpec spec = SmallSpec(16 + random() % 16, 8 + random() % 8, 16);
  const std::string data = RandomSinogram(spec, random);
  std::string poison, retried, bystander;
  {
    auto store = JobStore::Open(spool_->DatabasePath());
    ASSERT_TRUE(store.ok()) << store.status();
    auto put = [&](uint32_t attempts) {
      StoredJob record;
      record.job.set_id(NewJobId());
      record.job.set_state(pb::JOB_STATE_RUNNING);
      *record.job.mutable_spec() = spec;
      record.job.set_input_bytes(data.size());
      record.job.set_attempts(attempts);
      record.event_sequence = 2;
      EXPECT_TRUE((*store)->Put(record).ok());
      EXPECT_TRUE(spool_->CreateJobDir(record.job.id()).ok());
      testing::WriteFile(spool_->InputPath(record.job.id()), data);
      return record.job.id();
    };
    poison = put(options_.max_attempts);      // its last run, and every run crashed
    retried = put(1);                          // crashed once, has attempts left
    bystander = put(options_.max_attempts);   // interrupted by another job's crash
  }
  std::string log;
  for (uint32_t i = 0; i + 1 < options_.max_attempts; ++i) {
    absl::StrAppend(&log, poison, " SIGSEGV\n#start\n");
  }
  absl::StrAppend(&log, poison, " SIGABRT\n", retried, " SIGABRT\n");
  testing::WriteFile(options_.crash_log_path, log);
  StartOnSpool(nullptr, /*paused=*/true);

  const pb::Job failed = *manager_->GetJob(poison);
  EXPECT_EQ(failed.state(), pb::JOB_STATE_FAILED);
  EXPECT_THAT(failed.error(),
              HasSubstr(absl::StrCat("crashed tomod's worker process (SIGABRT) in each of its ",
                                     options_.max_attempts, " runs; it is failed as poison")));
  const pb::Job again = *manager_->GetJob(retried);
  EXPECT_EQ(again.state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(again.attempts(), 1u);  // the crash counted
  const pb::Job spared = *manager_->GetJob(bystander);
  EXPECT_EQ(spared.state(), pb::JOB_STATE_QUEUED) << spared.error();
  EXPECT_EQ(spared.attempts(), options_.max_attempts - 1);  // given back
  // The log keeps the lines of the jobs that run again, then a start mark.
  const std::string rewritten = testing::ReadFile(options_.crash_log_path);
  EXPECT_THAT(rewritten, HasSubstr(absl::StrCat(retried, " SIGABRT\n#start\n")));
  EXPECT_THAT(rewritten, ::testing::Not(HasSubstr(poison)));

  // A stop without a crash line (SIGKILL): every interrupted run counts again.
  manager_->Shutdown();
  manager_.reset();
  {
    auto store = JobStore::Open(spool_->DatabasePath());
    ASSERT_TRUE(store.ok());
    auto record = (*store)->Get(bystander);
    ASSERT_TRUE(record.ok() && record->has_value());
    StoredJob running = **record;
    running.job.set_state(pb::JOB_STATE_RUNNING);
    running.job.set_attempts(options_.max_attempts);
    ASSERT_TRUE((*store)->Put(running).ok());
  }
  StartOnSpool(nullptr, /*paused=*/true);
  const pb::Job killed = *manager_->GetJob(bystander);
  EXPECT_EQ(killed.state(), pb::JOB_STATE_FAILED);
  EXPECT_THAT(killed.error(), HasSubstr("tomod stopped during each of the job's"));
}

// Reading ahead (InputPrefetcher): the fixture with the counters the manager reports to,
// alive until TearDown has shut the manager down.
class JobManagerPrefetchTest : public JobManagerTest {
 protected:
  double Outcomes(const TomodMetrics& metrics, const char* outcome) const {
    return metrics.input_prefetch().Value({outcome});
  }

  TomodMetrics metrics_;
  TomodMetrics metrics_without_prefetch_;
};

// Two queued jobs on one worker: the second's input is read while the first runs (a hit),
// and both jobs write the bytes that a manager reading every input from the spool writes.
TEST_F(JobManagerPrefetchTest, PrefetchedJobsSucceedWithTheBytesOfReadingTheSpool) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::vector<std::pair<pb::JobSpec, std::string>> inputs;
  for (uint32_t detectors : {48u, 64u}) {
    const pb::JobSpec spec = SmallSpec(detectors, 60, 48);
    inputs.emplace_back(spec, WithNoise(PhantomSinogramBytes(spec), random));
  }
  auto run = [&](uint64_t prefetch_bytes, TomodMetrics& metrics) {
    JobManagerOptions options;
    options.prefetch_bytes = prefetch_bytes;
    options.metrics = &metrics;
    StartManagerWith(options, nullptr, /*paused=*/true);
    std::vector<std::string> ids;
    for (const auto& [spec, bytes] : inputs) {
      auto job = Submit(spec, bytes);
      EXPECT_TRUE(job.ok()) << job.status();
      if (job.ok()) ids.push_back(job->id());
    }
    manager_->SetSchedulingPaused(false);
    std::vector<std::string> volumes;
    for (const std::string& id : ids) {
      WaitForState(id, pb::JOB_STATE_SUCCEEDED);
      auto result = manager_->FindResult(id, "volume.raw");
      EXPECT_TRUE(result.ok()) << result.status();
      volumes.push_back(result.ok() ? testing::ReadFile(result->path) : "");
    }
    manager_->Shutdown();
    return volumes;
  };
  const std::vector<std::string> prefetched = run(kDefaultPrefetchBytes, metrics_);
  const std::vector<std::string> read = run(0, metrics_without_prefetch_);
  ASSERT_EQ(prefetched.size(), 2u);
  ASSERT_EQ(read.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(prefetched[i].size(), 48u * 48u * 4u) << "job " << i;
    EXPECT_TRUE(prefetched[i] == read[i]) << "job " << i << " differs with prefetching";
  }
  EXPECT_NE(prefetched[0], prefetched[1]);
  EXPECT_EQ(Outcomes(metrics_, "hit"), 1);
  EXPECT_EQ(Outcomes(metrics_, "miss"), 1);  // the first job: nothing ran before it
  EXPECT_EQ(Outcomes(metrics_, "dropped"), 0);
  for (const char* outcome : {"hit", "miss", "dropped"}) {
    EXPECT_EQ(Outcomes(metrics_without_prefetch_, outcome), 0) << outcome;
  }
}

TEST_F(JobManagerPrefetchTest, CancellingAQueuedJobDropsItsPrefetchedInput) {
  JobManagerOptions options;
  options.metrics = &metrics_;
  StartManagerWith(options, std::make_unique<BlockingAlgorithm>(), /*paused=*/true);
  auto running = SubmitSmall(16);
  auto queued = SubmitSmall(17);
  ASSERT_TRUE(running.ok() && queued.ok());
  manager_->SetSchedulingPaused(false);
  WaitForState(running->id(), pb::JOB_STATE_RUNNING);
  // Once the algorithm runs, the queued job's read has begun.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (manager_->GetJob(running->id())->progress().stage() != "blocking" &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(Outcomes(metrics_, "dropped"), 0);
  ASSERT_EQ(manager_->CancelJob(queued->id())->state(), pb::JOB_STATE_CANCELLED);
  EXPECT_EQ(Outcomes(metrics_, "dropped"), 1);
  ASSERT_TRUE(manager_->CancelJob(running->id()).ok());
  WaitForState(running->id(), pb::JOB_STATE_CANCELLED);
  EXPECT_EQ(manager_->GetJob(queued->id())->state(), pb::JOB_STATE_CANCELLED);
  EXPECT_EQ(Outcomes(metrics_, "hit"), 0);
  EXPECT_EQ(Outcomes(metrics_, "miss"), 1);
  EXPECT_EQ(Outcomes(metrics_, "dropped"), 1);
}

// A read ahead that fails is dropped; the worker reads the input itself and the job fails
// with the error of that normal path.
TEST_F(JobManagerPrefetchTest, FailedPrefetchFallsBackToTheNormalRead) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  JobManagerOptions options;
  options.metrics = &metrics_;
  StartManagerWith(options, nullptr, /*paused=*/true);
  const pb::JobSpec spec = SmallSpec(32, 20, 32);
  const std::string good_bytes = PhantomSinogramBytes(spec);
  std::string bad_bytes = good_bytes;
  const size_t index = random() % (bad_bytes.size() / sizeof(float));
  const float infinity = std::numeric_limits<float>::infinity();
  std::memcpy(bad_bytes.data() + index * sizeof(float), &infinity, sizeof(float));
  auto good = Submit(spec, good_bytes);
  auto bad = Submit(spec, bad_bytes);
  ASSERT_TRUE(good.ok() && bad.ok());
  manager_->SetSchedulingPaused(false);
  WaitForState(good->id(), pb::JOB_STATE_SUCCEEDED);
  pb::Job failed = WaitForState(bad->id(), pb::JOB_STATE_FAILED);
  EXPECT_THAT(failed.error(), AllOf(HasSubstr("INVALID_ARGUMENT"),
                                    HasSubstr(absl::StrCat("at index ", index, " ")),
                                    HasSubstr("is not finite")));
  EXPECT_EQ(Outcomes(metrics_, "hit"), 0);
  EXPECT_EQ(Outcomes(metrics_, "miss"), 2);
  EXPECT_EQ(Outcomes(metrics_, "dropped"), 1);
}

// ---------------------------------------------------------------- reconstructing while uploading

class JobManagerFollowTest : public JobManagerTest {
 protected:
  void StartFollowing(TomodMetrics& metrics,
                      WhileUploading mode = WhileUploading::kOnAnyWorker) {
    JobManagerOptions options;
    options.reconstruct_while_uploading = mode;
    options.metrics = &metrics;
    StartManagerWith(options);
  }
  static double Followed(const TomodMetrics& metrics, const char* outcome) {
    return metrics.upload_followed().Value({outcome});
  }
  // Waits until the follower has counted outcome `times` times.
  static void WaitForFollowed(const TomodMetrics& metrics, const char* outcome, double times) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (Followed(metrics, outcome) < times && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    EXPECT_EQ(Followed(metrics, outcome), times) << outcome;
  }
  // Appends bytes [from, to) in pieces of 4 KiB.
  static void Append(Upload& upload, const std::string& bytes, size_t from, size_t to) {
    for (size_t at = from; at < to; at += 4096) {
      absl::StatusOr<bool> room = upload.Append(bytes.substr(at, std::min<size_t>(4096, to - at)));
      ASSERT_TRUE(room.ok()) << room.status();
    }
  }
  std::string Volume(const std::string& id) {
    auto result = manager_->FindResult(id, "volume.raw");
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? testing::ReadFile(result->path) : "";
  }

  TomodMetrics metrics_;
};

// The followed job goes UPLOADING, QUEUED, RUNNING, SUCCEEDED like any other and writes
// the volume of the same job run from the spool (up to float summation order).
TEST_F(JobManagerFollowTest, FollowedJobWritesTheBytesOfAJobRunFromTheSpool) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const pb::JobSpec spec = testing::SmallConeSpec(64, 24, 40, 24);
  const std::string bytes = WithNoise(testing::PhantomConeProjectionBytes(spec), random);

  StartFollowing(metrics_);
  auto upload = manager_->BeginUpload(spec);
  ASSERT_TRUE(upload.ok()) << upload.status();
  const std::string id = (*upload)->job_id();
  RecordingWatcher watcher;
  ASSERT_TRUE(manager_->Watch(id, &watcher).ok());
  Append(**upload, bytes, 0, bytes.size());
  auto committed = (*upload)->Commit(bytes.size(), Crc32(bytes));
  ASSERT_TRUE(committed.ok()) << committed.status();
  ASSERT_TRUE(watcher.WaitForEnd());
  std::vector<pb::JobState> states;
  for (const pb::JobEvent& event : watcher.events()) {
    if (states.empty() || states.back() != event.state()) states.push_back(event.state());
  }
  EXPECT_THAT(states, ElementsAre(pb::JOB_STATE_UPLOADING, pb::JOB_STATE_QUEUED,
                                  pb::JOB_STATE_RUNNING, pb::JOB_STATE_SUCCEEDED));
  EXPECT_EQ(manager_->GetJob(id)->attempts(), 1u);
  EXPECT_EQ(Followed(metrics_, "used"), 1);
  const std::string followed = Volume(id);
  manager_->Shutdown();

  TomodMetrics never_metrics;
  StartFollowing(never_metrics, WhileUploading::kNever);
  auto plain = Submit(spec, bytes);
  ASSERT_TRUE(plain.ok()) << plain.status();
  WaitForState(plain->id(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(followed.size(), 24u * 24u * 24u * 4u);
  const std::string from_spool = Volume(plain->id());
  ASSERT_EQ(followed.size(), from_spool.size());
  // The CPU's cancellable run back projects in blocks of views (Fdk, for cancellation
  // between blocks) and sums the blocks in float; the followed run cannot be cancelled
  // while it uploads and sums all views at once. (upload_stream_test checks bit equality
  // with an uncancellable run; on CUDA both are one piece.)
  float max_difference = 0, peak = 0;
  for (size_t at = 0; at < followed.size(); at += sizeof(float)) {
    float a, b;
    std::memcpy(&a, followed.data() + at, sizeof(float));
    std::memcpy(&b, from_spool.data() + at, sizeof(float));
    max_difference = std::max(max_difference, std::abs(a - b));
    peak = std::max(peak, std::abs(b));
  }
  EXPECT_GT(peak, 0.1f);
  EXPECT_LE(max_difference, 1e-6f * peak) << "the followed volume differs";
  EXPECT_EQ(Followed(never_metrics, "used"), 0);
}

// A followed job shares its volume for early fetch too, before its outputs are written;
// the raw file written is those bytes.
TEST_F(JobManagerFollowTest, FollowedJobSharesTheVolumeBeingWritten) {
  const pb::JobSpec spec = testing::SmallConeSpec(24, 16, 24, 16);
  const std::string bytes = testing::PhantomConeProjectionBytes(spec);
  std::string in_memory;
  absl::StatusCode file_status = absl::StatusCode::kUnknown;
  JobManagerOptions options;
  options.reconstruct_while_uploading = WhileUploading::kOnAnyWorker;
  options.metrics = &metrics_;
  options.before_writing_results = [&](const std::string& id) {
    auto result = manager_->FindResult(id, "volume.raw");
    if (!result.ok() || result->being_written == nullptr) return;
    in_memory.assign(reinterpret_cast<const char*>(result->being_written->data()),
                     result->being_written->size_bytes());
    file_status = manager_->FindResult(id, "volume.json").status().code();
  };
  StartManagerWith(options);
  auto upload = manager_->BeginUpload(spec);
  ASSERT_TRUE(upload.ok()) << upload.status();
  const std::string id = (*upload)->job_id();
  Append(**upload, bytes, 0, bytes.size());
  ASSERT_TRUE((*upload)->Commit(bytes.size(), Crc32(bytes)).ok());
  WaitForState(id, pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(Followed(metrics_, "used"), 1);
  EXPECT_EQ(in_memory.size(), 16u * 16u * 16u * 4u);
  EXPECT_EQ(file_status, absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Volume(id), in_memory);
}

// The default follows on device workers only: a CPU worker runs the job from the spool.
TEST_F(JobManagerFollowTest, OnlyDeviceWorkersFollowByDefault) {
  StartFollowing(metrics_, WhileUploading::kOnDevices);
  const pb::JobSpec spec = testing::SmallConeSpec();
  auto job = Submit(spec, testing::PhantomConeProjectionBytes(spec));
  ASSERT_TRUE(job.ok()) << job.status();
  WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED);
  for (const char* outcome : {"used", "given_up", "yielded", "aborted"}) {
    EXPECT_EQ(Followed(metrics_, outcome), 0) << outcome;
  }
}

// An upload that breaks off, and one with a wrong checksum, free the worker for the next.
TEST_F(JobManagerFollowTest, FailedUploadsFreeTheWorker) {
  StartFollowing(metrics_);
  const pb::JobSpec spec = testing::SmallConeSpec();
  const std::string bytes = testing::PhantomConeProjectionBytes(spec);
  {
    auto upload = manager_->BeginUpload(spec);
    ASSERT_TRUE(upload.ok()) << upload.status();
    Append(**upload, bytes, 0, bytes.size() / 2);
  }  // the Submit stream broke
  WaitForFollowed(metrics_, "aborted", 1);
  {
    auto upload = manager_->BeginUpload(spec);
    ASSERT_TRUE(upload.ok()) << upload.status();
    Append(**upload, bytes, 0, bytes.size());
    auto refused = (*upload)->Commit(bytes.size(), Crc32(bytes) ^ 1);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  }
  WaitForFollowed(metrics_, "aborted", 2);
  EXPECT_EQ(ListedJobCount(), 0u);
  auto job = Submit(spec, bytes);
  ASSERT_TRUE(job.ok()) << job.status();
  WaitForState(job->id(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(Followed(metrics_, "used"), 1);
}

// A committed job never waits behind an upload: the follower lets go, runs it, and the
// upload's job later runs from the spool.
TEST_F(JobManagerFollowTest, CommittedJobTakesTheWorkerFromAnUpload) {
  StartFollowing(metrics_);
  const pb::JobSpec spec = testing::SmallConeSpec();
  const std::string bytes = testing::PhantomConeProjectionBytes(spec);
  auto upload = manager_->BeginUpload(spec);
  ASSERT_TRUE(upload.ok()) << upload.status();
  Append(**upload, bytes, 0, bytes.size() / 2);
  auto small = SubmitSmall();  // 2D: committed at once, not followed
  ASSERT_TRUE(small.ok()) << small.status();
  WaitForState(small->id(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(Followed(metrics_, "yielded"), 1);
  EXPECT_EQ(manager_->GetJob((*upload)->job_id())->state(), pb::JOB_STATE_UPLOADING);
  Append(**upload, bytes, bytes.size() / 2, bytes.size());
  auto committed = (*upload)->Commit(bytes.size(), Crc32(bytes));
  ASSERT_TRUE(committed.ok()) << committed.status();
  WaitForState(committed->id(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(Followed(metrics_, "used"), 0);
}

// Only one worker: a second upload at the same time is not followed and runs from the
// spool after the first.
TEST_F(JobManagerFollowTest, OneFollowerPerWorker) {
  StartFollowing(metrics_);
  const pb::JobSpec spec = testing::SmallConeSpec();
  const std::string bytes = testing::PhantomConeProjectionBytes(spec);
  auto first = manager_->BeginUpload(spec);
  auto second = manager_->BeginUpload(spec);
  ASSERT_TRUE(first.ok() && second.ok());
  Append(**second, bytes, 0, bytes.size());
  Append(**first, bytes, 0, bytes.size());
  auto second_job = (*second)->Commit(bytes.size(), Crc32(bytes));
  auto first_job = (*first)->Commit(bytes.size(), Crc32(bytes));
  ASSERT_TRUE(first_job.ok() && second_job.ok());
  WaitForState(first_job->id(), pb::JOB_STATE_SUCCEEDED);
  WaitForState(second_job->id(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(Volume(first_job->id()) == Volume(second_job->id()));
  // The second committed while the first was followed: the follower let go of the first,
  // whose job then ran from the spool too.
  EXPECT_EQ(Followed(metrics_, "used") + Followed(metrics_, "yielded"), 1);
}

// Bad values: the follower gives up and the job fails from the spool, naming the value.
TEST_F(JobManagerFollowTest, NonFiniteInputFailsWithTheErrorOfTheNormalRead) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  StartFollowing(metrics_);
  const pb::JobSpec spec = testing::SmallConeSpec();
  std::string bytes = testing::PhantomConeProjectionBytes(spec);
  const size_t index = random() % (bytes.size() / sizeof(float));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + index * sizeof(float), &nan, sizeof(float));
  auto job = Submit(spec, bytes);
  ASSERT_TRUE(job.ok()) << job.status();
  pb::Job failed = WaitForState(job->id(), pb::JOB_STATE_FAILED);
  EXPECT_THAT(failed.error(), AllOf(HasSubstr("INVALID_ARGUMENT"),
                                    HasSubstr(absl::StrCat("at index ", index, " ")),
                                    HasSubstr("is not finite")));
  EXPECT_EQ(Followed(metrics_, "given_up"), 1);
}

// A drain lets the follower go: the upload still commits, and its job waits QUEUED.
TEST_F(JobManagerFollowTest, DrainLeavesTheFollowedJobQueued) {
  StartFollowing(metrics_);
  const pb::JobSpec spec = testing::SmallConeSpec();
  const std::string bytes = testing::PhantomConeProjectionBytes(spec);
  auto upload = manager_->BeginUpload(spec);
  ASSERT_TRUE(upload.ok()) << upload.status();
  Append(**upload, bytes, 0, bytes.size() / 2);
  std::thread drain([&] { manager_->Drain(absl::Seconds(20), "draining for the test"); });
  WaitForFollowed(metrics_, "yielded", 1);
  Append(**upload, bytes, bytes.size() / 2, bytes.size());
  auto committed = (*upload)->Commit(bytes.size(), Crc32(bytes));
  ASSERT_TRUE(committed.ok()) << committed.status();
  drain.join();
  EXPECT_EQ(manager_->GetJob(committed->id())->state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(Followed(metrics_, "used"), 0);
}

// Shutdown does not wait for an upload that a worker follows.
TEST_F(JobManagerFollowTest, ShutdownWhileFollowingReturns) {
  StartFollowing(metrics_);
  const pb::JobSpec spec = testing::SmallConeSpec();
  const std::string bytes = testing::PhantomConeProjectionBytes(spec);
  auto upload = manager_->BeginUpload(spec);
  ASSERT_TRUE(upload.ok()) << upload.status();
  Append(**upload, bytes, 0, bytes.size() / 3);
  absl::SleepFor(absl::Milliseconds(100));  // the worker is (very likely) following by now
  const absl::Time start = absl::Now();
  manager_->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // 0 when the worker had not yet picked the upload up: it then stops without following.
  EXPECT_LE(Followed(metrics_, "yielded"), 1);
  EXPECT_EQ(Followed(metrics_, "used"), 0);
  upload->reset();
  EXPECT_EQ(ListedJobCount(), 0u);
}

}  // namespace
}  // namespace tomo::server
