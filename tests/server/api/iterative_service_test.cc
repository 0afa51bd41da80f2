// The iterative methods through a real in-process tomod (CPU backend, the built-in
// registry): progress per iteration reaches Watch with the residual, a running SIRT job is
// cancelled between iterations (CANCELLED) and the daemon keeps serving: the next job runs
// to SUCCEEDED.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/devices/devices.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/tomod_server.h"
#include "tests/runner/test_jobs.h"
#include "tomoserve/v1/tomoserve.grpc.pb.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
using ::testing::HasSubstr;
using testing::Crc32;
using testing::NewTempDir;
using testing::PhantomSinogramBytes;
using testing::SmallSpec;

class IterativeServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.drain_timeout = absl::Milliseconds(100);
    options.listen = "127.0.0.1:0";
    options.spool_dir = NewTempDir("iterative_service");
    options.devices = {core::CpuDevice()};
    options.shutdown_grace = absl::Seconds(1);
    auto server = TomodServer::Start(options, core::AlgorithmRegistry::WithBuiltins());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = pb::Reconstruction::NewStub(channel_);
  }
  void TearDown() override {
    stub_.reset();
    channel_.reset();
    if (server_) server_->Shutdown();
  }

  grpc::Status Submit(const pb::JobSpec& spec, const std::string& bytes, pb::Job* job) {
    grpc::ClientContext context;
    pb::SubmitResponse response;
    auto writer = stub_->Submit(&context, &response);
    pb::SubmitRequest request;
    *request.mutable_spec() = spec;
    bool ok = writer->Write(request);
    for (size_t at = 0; ok && at < bytes.size(); at += 65536) {
      request.set_data(bytes.substr(at, 65536));
      ok = writer->Write(request);
    }
    request.mutable_upload_end()->set_total_bytes(bytes.size());
    request.mutable_upload_end()->set_crc32(Crc32(bytes));
    writer->Write(request);
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (status.ok()) *job = response.job();
    return status;
  }

  // Reads the job's events until it ends or `until` says stop (then cancels the watch).
  template <typename Until>
  std::vector<pb::JobEvent> Watch(const std::string& id, const Until& until) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    pb::WatchJobRequest request;
    request.set_job_id(id);
    auto reader = stub_->WatchJob(&context, request);
    std::vector<pb::JobEvent> events;
    pb::JobEvent event;
    while (reader->Read(&event)) {
      events.push_back(event);
      if (until(event)) {
        context.TryCancel();
        break;
      }
    }
    reader->Finish();
    return events;
  }

  pb::Job GetJob(const std::string& id) {
    grpc::ClientContext context;
    pb::GetJobRequest request;
    request.set_job_id(id);
    pb::Job job;
    EXPECT_TRUE(stub_->GetJob(&context, request, &job).ok());
    return job;
  }

  std::unique_ptr<TomodServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Reconstruction::Stub> stub_;
};

TEST_F(IterativeServiceTest, CancelMidRunThenServeTheNextJob) {
  // 1000 SIRT iterations of a 96^2 image from 120 views: many seconds on the CPU.
  pb::JobSpec spec = SmallSpec(128, 120, 96);
  spec.mutable_algorithm()->mutable_sirt()->set_iterations(1000);
  const std::string bytes = PhantomSinogramBytes(spec);
  pb::Job job;
  grpc::Status submitted = Submit(spec, bytes, &job);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  // Wait for the third iteration's progress, then cancel.
  std::vector<pb::JobEvent> events = Watch(job.id(), [](const pb::JobEvent& e) {
    return e.has_progress() && e.progress().iteration() >= 3;
  });
  ASSERT_FALSE(events.empty());
  ASSERT_TRUE(events.back().has_progress());
  EXPECT_GE(events.back().progress().iteration(), 3u);
  EXPECT_EQ(events.back().progress().iterations_total(), 1000u);
  EXPECT_THAT(events.back().progress().stage(), HasSubstr("sirt: relative residual"));
  // The residual as a number too: noise-free data, so it falls below 1 from the start.
  ASSERT_TRUE(events.back().progress().has_relative_residual());
  EXPECT_GT(events.back().progress().relative_residual(), 0.0);
  EXPECT_LT(events.back().progress().relative_residual(), 1.0);
  {
    grpc::ClientContext context;
    pb::CancelJobRequest request;
    request.set_job_id(job.id());
    pb::Job response;
    ASSERT_TRUE(stub_->CancelJob(&context, request, &response).ok());
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  pb::Job current = GetJob(job.id());
  while (current.state() != pb::JOB_STATE_CANCELLED && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
    current = GetJob(job.id());
  }
  EXPECT_EQ(current.state(), pb::JOB_STATE_CANCELLED);
  EXPECT_LT(current.progress().iteration(), 1000u);

  // The daemon still serves: a short OS-SART job succeeds.
  pb::JobSpec next = SmallSpec(64, 60, 48);
  auto* os_sart = next.mutable_algorithm()->mutable_os_sart();
  os_sart->mutable_iterative()->set_iterations(3);
  os_sart->mutable_iterative()->set_non_negative(true);
  os_sart->set_blocks(6);
  os_sart->set_order(pb::VIEW_ORDER_INTERLEAVED);
  pb::Job second;
  ASSERT_TRUE(Submit(next, PhantomSinogramBytes(next), &second).ok());
  std::vector<pb::JobEvent> second_events =
      Watch(second.id(), [](const pb::JobEvent&) { return false; });
  ASSERT_FALSE(second_events.empty());
  EXPECT_EQ(second_events.back().state(), pb::JOB_STATE_SUCCEEDED);
  int iterations_seen = 0;
  for (const pb::JobEvent& e : second_events) {
    if (e.has_progress() && e.progress().iterations_total() == 3) ++iterations_seen;
  }
  EXPECT_GE(iterations_seen, 1);
  const pb::Job done = GetJob(second.id());
  const pb::ResultFile* raw = nullptr;
  for (const pb::ResultFile& file : done.results()) {
    if (file.name() == "volume.raw") raw = &file;
  }
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(raw->size_bytes(), 48u * 48u * 4u);
}

TEST_F(IterativeServiceTest, BadIterativeSpecIsInvalidArgumentNamingTheField) {
  pb::JobSpec spec = SmallSpec(64, 60, 48);
  spec.mutable_algorithm()->mutable_os_sart()->mutable_iterative()->set_iterations(2);
  spec.mutable_algorithm()->mutable_os_sart()->set_blocks(61);
  pb::Job job;
  grpc::Status status = Submit(spec, PhantomSinogramBytes(spec), &job);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("algorithm.os_sart.blocks: 61"));
}

}  // namespace
}  // namespace tomo::server
