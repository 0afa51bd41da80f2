// JobTable with a store whose writes wait until the test lets them through: reads and other
// jobs' changes never wait for a write, watchers get a change only once it is durable (in
// order, progress behind it), WaitDurable returns the write's error, and a job removed
// before its end was durable still shows its watchers the end.
#include "server/jobs/job_table.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;

// Writes are held until Release(); a write of a job named "refuse" fails.
class GatedStore final : public JobStore {
 public:
  absl::Status Apply(const std::vector<JobStoreWrite>& writes) override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&open_));
    for (const JobStoreWrite& write : writes) {
      if (write.put.has_value() && write.put->job.id() == "refuse") {
        return absl::ResourceExhaustedError("disk full");
      }
    }
    applied_ += writes.size();
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<StoredJob>> LoadAll(std::vector<std::string>*) const override {
    return std::vector<StoredJob>();
  }
  absl::StatusOr<std::optional<StoredJob>> Get(absl::string_view) const override {
    return std::nullopt;
  }
  absl::StatusOr<std::optional<std::string>> FindByIdempotencyKey(
      absl::string_view) const override {
    return std::nullopt;
  }
  const std::string& path() const override { return path_; }

  void Release() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }

 private:
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  size_t applied_ ABSL_GUARDED_BY(mu_) = 0;
  std::string path_ = "gated";
};

class RecordingWatcher final : public JobWatcher {
 public:
  bool Enqueue(const pb::JobEvent& event) override {
    absl::MutexLock lock(&mu_);
    states.push_back(event.state());
    messages.push_back(event.message());
    return false;
  }
  bool Close(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    closed = status;
    return false;
  }
  void Flush() override {}
  size_t count() {
    absl::MutexLock lock(&mu_);
    return states.size();
  }

  absl::Mutex mu_;
  std::vector<pb::JobState> states;
  std::vector<std::string> messages;
  std::optional<absl::Status> closed;
};

pb::Job JobIn(const std::string& id, pb::JobState state) {
  pb::Job job;
  job.set_id(id);
  job.set_state(state);
  return job;
}

// A record committed QUEUED (durably, before the gate closes writes) with a watcher.
JobRecord& AddQueued(JobTable& table, const std::string& id) {
  absl::MutexLock lock(&table.mu());
  JobRecord& record = table.records()[id];
  record.job = JobIn(id, pb::JOB_STATE_QUEUED);
  record.last_event.set_job_id(id);
  record.last_event.set_state(pb::JOB_STATE_QUEUED);
  record.last_told = record.last_event;
  return record;
}

TEST(JobTableTest, ChangesAreToldOnceDurableAndNothingWaitsForTheWrite) {
  JobTable table(nullptr, nullptr);
  auto store = std::make_unique<GatedStore>();
  GatedStore* gate = store.get();
  table.Open(std::move(store), {});
  JobRecord& a = AddQueued(table, "a");
  AddQueued(table, "b");
  RecordingWatcher watcher;
  ASSERT_TRUE(table.Watch("a", &watcher).ok());
  ASSERT_EQ(watcher.count(), 1u);  // the newest durable event first

  JobTable::Ticket running;
  {
    WatcherFlushes flushes;
    absl::MutexLock lock(&table.mu());
    running = table.Commit(a, JobIn("a", pb::JOB_STATE_RUNNING), "running",
                           JobTable::Durability::kPersist, flushes);
    pb::Job progress = JobIn("a", pb::JOB_STATE_RUNNING);
    progress.mutable_progress()->set_fraction(0.5);
    table.Commit(a, progress, "half", JobTable::Durability::kMemoryOnly, flushes);
  }
  EXPECT_GT(running, 0u);
  // The write waits at the gate; the table answers and another job changes meanwhile.
  {
    WatcherFlushes flushes;
    absl::MutexLock lock(&table.mu());
    EXPECT_EQ(table.Find("a").value()->job.state(), pb::JOB_STATE_RUNNING);
    table.Commit(*table.Find("b").value(), JobIn("b", pb::JOB_STATE_CANCELLED), "cancelled",
                 JobTable::Durability::kMemoryOnly, flushes);
  }
  EXPECT_EQ(watcher.count(), 1u) << "told before the change was durable";

  gate->Release();
  EXPECT_TRUE(table.WaitDurable(running).ok());
  // Told before WaitDurable returned, in order, the progress behind the change it followed.
  ASSERT_EQ(watcher.count(), 3u);
  EXPECT_EQ(watcher.messages[1], "running");
  EXPECT_EQ(watcher.messages[2], "half");
  table.Close();
}

TEST(JobTableTest, WaitDurableReturnsTheWritesError) {
  JobTable table(nullptr, nullptr);
  auto store = std::make_unique<GatedStore>();
  GatedStore* gate = store.get();
  table.Open(std::move(store), {});
  JobRecord& refused = AddQueued(table, "refuse");
  JobRecord& fine = AddQueued(table, "fine");
  JobTable::Ticket bad, good;
  {
    WatcherFlushes flushes;
    absl::MutexLock lock(&table.mu());
    bad = table.Commit(refused, JobIn("refuse", pb::JOB_STATE_CANCELLED), "",
                       JobTable::Durability::kPersist, flushes);
    good = table.Commit(fine, JobIn("fine", pb::JOB_STATE_CANCELLED), "",
                        JobTable::Durability::kPersist, flushes);
  }
  gate->Release();
  // Both rode in one batch; only the bad write fails.
  EXPECT_EQ(table.WaitDurable(bad).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(table.WaitDurable(bad).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(table.WaitDurable(good).ok());
  table.Close();
}

TEST(JobTableTest, AJobRemovedBeforeItsEndWasDurableStillShowsItsWatchersTheEnd) {
  JobTable table(nullptr, nullptr);
  auto store = std::make_unique<GatedStore>();
  GatedStore* gate = store.get();
  table.Open(std::move(store), {});
  JobRecord& a = AddQueued(table, "a");
  RecordingWatcher watcher;
  ASSERT_TRUE(table.Watch("a", &watcher).ok());
  {
    WatcherFlushes flushes;
    absl::MutexLock lock(&table.mu());
    table.Commit(a, JobIn("a", pb::JOB_STATE_SUCCEEDED), "succeeded",
                 JobTable::Durability::kPersist, flushes);
    table.WriteDelete("a");
    table.Erase(table.records().find("a"), absl::OkStatus(), flushes);
  }
  ASSERT_EQ(watcher.count(), 2u);
  EXPECT_EQ(watcher.states.back(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_FALSE(watcher.closed.has_value()) << "a terminal event ends the watch by itself";
  gate->Release();
  table.Close();
}

}  // namespace
}  // namespace tomo::server
