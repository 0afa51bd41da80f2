#include "server/job_manager.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/algorithms/reconstruction.h"
#include "core/devices/devices.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/spool.h"
#include "test_jobs.h"

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

class JobManagerTest : public ::testing::Test {
 protected:
  void StartManager(std::unique_ptr<core::Algorithm> fbp = nullptr, ServerLimits limits = {}) {
    dir_ = NewTempDir("manager");
    auto spool = Spool::Open(dir_);
    ASSERT_TRUE(spool.ok()) << spool.status();
    spool_ = std::move(*spool);
    registry_ = core::AlgorithmRegistry::WithBuiltins();
    if (fbp) registry_.Register("fbp", std::move(fbp));
    JobManagerOptions options;
    options.limits = limits;
    options.devices = {core::CpuDevice()};
    manager_ = std::make_unique<JobManager>(options, *spool_, registry_);
    ASSERT_TRUE(manager_->Start().ok());
  }

  void TearDown() override {
    if (manager_) manager_->Shutdown();
  }

  absl::StatusOr<pb::Job> Submit(const pb::JobSpec& spec, const std::string& bytes) {
    auto upload = manager_->BeginUpload(spec);
    if (!upload.ok()) return upload.status();
    for (size_t at = 0; at < bytes.size(); at += 1000) {
      absl::Status status = (*upload)->Append(absl::string_view(bytes).substr(at, 1000));
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
  ASSERT_EQ(done.results_size(), 1);
  EXPECT_EQ(done.results(0).name(), "volume.raw");
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

TEST_F(JobManagerTest, InvalidSpecStoresNothing) {
  StartManager();
  pb::JobSpec spec = SmallSpec();
  spec.mutable_geometry()->mutable_parallel_2d()->mutable_angles()->mutable_uniform()->set_count(0);
  auto upload = manager_->BeginUpload(spec);
  EXPECT_EQ(upload.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SpoolJobCount(), 0u);
  EXPECT_EQ(ListedJobCount(), 0u);
}

TEST_F(JobManagerTest, TooManyBytesRemovesTheJob) {
  StartManager();
  pb::JobSpec spec = SmallSpec();
  auto upload = manager_->BeginUpload(spec);
  ASSERT_TRUE(upload.ok());
  EXPECT_EQ(ListedJobCount(), 1u);
  EXPECT_EQ(manager_->GetJob((*upload)->job_id())->state(), pb::JOB_STATE_UPLOADING);
  absl::Status status = (*upload)->Append(std::string(spec.input().size_bytes() + 1, 'x'));
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

TEST_F(JobManagerTest, ShutdownCancelsRunningJobsAndClosesWatches) {
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
  EXPECT_EQ(manager_->GetJob(running->id())->state(), pb::JOB_STATE_CANCELLED);
  EXPECT_EQ(running_watcher.events().back().state(), pb::JOB_STATE_CANCELLED);
  EXPECT_THAT(running_watcher.events().back().message(), HasSubstr("shutting down"));
  EXPECT_EQ(queued_watcher.closed().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(manager_->BeginUpload(SmallSpec()).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tomo::server
