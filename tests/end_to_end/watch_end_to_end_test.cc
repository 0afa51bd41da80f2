// WatchJob at scale on the real tomod: 300 watchers of one job, all on gRPC's client
// callback API (no thread per watcher here either). Those that stay get every event of the
// job, in order and without gaps, up to the terminal state; half of them disconnect early,
// and tomod keeps serving and forgets them (its tomod_watchers gauge returns to 0).
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/job_spec_json.h"
#include "client/tomo_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/end_to_end/daemon_fixture.h"
#include "tests/server/http_get.h"
#include "tomoserve/v1/tomoserve.grpc.pb.h"

namespace tomo::testing {
namespace {

namespace v1 = ::tomoserve::v1;

constexpr int kWatchers = 300;
constexpr int kChannels = 4;

// One WatchJob stream. With leave_after > 0 it cancels its call after that many events.
class Watcher final : public grpc::ClientReadReactor<v1::JobEvent> {
 public:
  Watcher(v1::Reconstruction::Stub& stub, const std::string& job_id, int leave_after)
      : leave_after_(leave_after) {
    request_.set_job_id(job_id);
    stub.async()->WatchJob(&context_, &request_, this);
    StartRead(&event_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows with the status
    bool leave = false;
    {
      absl::MutexLock lock(&mu_);
      events_.push_back(event_);
      leave = leave_after_ > 0 && static_cast<int>(events_.size()) >= leave_after_;
    }
    if (leave) {
      context_.TryCancel();
      return;
    }
    StartRead(&event_);
  }

  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }

  bool WaitForEvents(size_t count, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]()
                      ABSL_SHARED_LOCKS_REQUIRED(mu_) { return events_.size() >= count || done_; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout) && events_.size() >= count;
  }
  bool WaitForDone(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
  }
  std::vector<v1::JobEvent> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  grpc::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  bool leaves() const { return leave_after_ > 0; }

 private:
  const int leave_after_;
  grpc::ClientContext context_;
  v1::WatchJobRequest request_;
  v1::JobEvent event_;
  absl::Mutex mu_;
  std::vector<v1::JobEvent> events_ ABSL_GUARDED_BY(mu_);
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

class WatchTest : public DaemonTest {};

TEST_F(WatchTest, ThreeHundredWatchersGetEveryEventInOrderAndHalfLeaveEarly) {
  ASSERT_EQ(StopDaemon(), 0);
  const int metrics_port = FreeLoopbackPort();
  StartDaemon({"--devices=cpu", absl::StrCat("--metrics_port=", metrics_port)});
  ASSERT_FALSE(HasFatalFailure());
  // A longer job (about a second on the CPU; 300 watchers connect in well under 0.1 s)
  // holds the only worker, so the watched job waits QUEUED until every watcher is
  // connected; cancelling the longer one then lets it run.
  const std::string blocker_dir = MakePhantom("blocker", 512, 720);
  const std::string watched_dir = MakePhantom("watched", 128, 180);
  ASSERT_FALSE(HasFailure());
  client::TomoClient client(server());
  absl::StatusOr<v1::JobSpec> blocker_spec = client::ReadJobSpecFile(blocker_dir + "/job.json");
  absl::StatusOr<v1::JobSpec> watched_spec = client::ReadJobSpecFile(watched_dir + "/job.json");
  ASSERT_TRUE(blocker_spec.ok() && watched_spec.ok());
  absl::StatusOr<v1::Job> blocker = client.Submit(*blocker_spec, {blocker_dir + "/sinogram.raw"});
  ASSERT_TRUE(blocker.ok()) << blocker.status();
  absl::StatusOr<v1::Job> watched = client.Submit(*watched_spec, {watched_dir + "/sinogram.raw"});
  ASSERT_TRUE(watched.ok()) << watched.status();

  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<v1::Reconstruction::Stub>> stubs;
  for (int c = 0; c < kChannels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", c);  // distinct channels, not one shared subchannel
    channels.push_back(
        grpc::CreateCustomChannel(server(), grpc::InsecureChannelCredentials(), args));
    stubs.push_back(v1::Reconstruction::NewStub(channels.back()));
  }
  const absl::Time connecting = absl::Now();
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < kWatchers; ++i) {
    // Odd ones leave: half after the first event (still QUEUED), half after the second.
    const int leave_after = i % 2 == 0 ? 0 : (i % 4 == 1 ? 1 : 2);
    watchers.push_back(
        std::make_unique<Watcher>(*stubs[i % kChannels], watched->id(), leave_after));
  }
  for (auto& watcher : watchers) {
    ASSERT_TRUE(watcher->WaitForEvents(1, absl::Seconds(30))) << watcher->status().error_message();
  }
  std::cout << "300 watchers connected in " << absl::Now() - connecting << "\n";
  absl::StatusOr<v1::Job> still = client.GetJob(watched->id());
  ASSERT_TRUE(still.ok());
  ASSERT_EQ(still->state(), v1::JOB_STATE_QUEUED)
      << "the blocker ended before the watchers were in";
  ASSERT_TRUE(client.Cancel(blocker->id()).ok());

  for (auto& watcher : watchers) {
    ASSERT_TRUE(watcher->WaitForDone(absl::Seconds(60)));
  }
  std::vector<uint64_t> reference;
  int stayed = 0, left = 0;
  for (auto& watcher : watchers) {
    const std::vector<v1::JobEvent> events = watcher->events();
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.front().state(), v1::JOB_STATE_QUEUED);
    for (size_t k = 1; k < events.size(); ++k) {
      ASSERT_EQ(events[k].sequence(), events[k - 1].sequence() + 1) << "event lost or reordered";
    }
    if (watcher->leaves()) {
      ++left;
      EXPECT_EQ(watcher->status().error_code(), grpc::StatusCode::CANCELLED);
      continue;
    }
    ++stayed;
    EXPECT_TRUE(watcher->status().ok()) << watcher->status().error_message();
    EXPECT_EQ(events.back().state(), v1::JOB_STATE_SUCCEEDED);
    std::vector<uint64_t> sequences;
    for (const v1::JobEvent& event : events) sequences.push_back(event.sequence());
    if (reference.empty()) reference = sequences;
    EXPECT_EQ(sequences, reference) << "watchers saw different events";
  }
  EXPECT_EQ(stayed, kWatchers / 2);
  EXPECT_EQ(left, kWatchers / 2);
  EXPECT_GE(reference.size(), 3u);  // QUEUED, RUNNING, ..., SUCCEEDED

  // tomod serves on, and holds no watcher any more.
  absl::StatusOr<v1::ServerInfo> info = client.GetServerInfo();
  EXPECT_TRUE(info.ok()) << info.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  double open = -1;
  while (absl::Now() < deadline) {
    absl::StatusOr<HttpResponse> scraped = HttpGet("127.0.0.1", metrics_port, "/metrics");
    ASSERT_TRUE(scraped.ok()) << scraped.status();
    open = ParseSamples(scraped->body)["tomod_watchers"];
    if (open == 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(open, 0);
  watchers.clear();
  ProcessResult status = Tomo({"status", watched->id()});
  EXPECT_EQ(status.exit_code, 0) << status.Describe();
}

}  // namespace
}  // namespace tomo::testing
