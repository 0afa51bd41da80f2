// The service through a real gRPC stub: an in-process tomod on 127.0.0.1:0 with the CPU
// backend.
#include "server/api/reconstruction_service.h"

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/devices/devices.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/tomod_server.h"
#include "server/storage/spool.h"
#include "tests/runner/test_jobs.h"
#include "tests/core/random_seed.h"
#include "tomoserve/v1/tomoserve.grpc.pb.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using testing::BlockingAlgorithm;
using testing::Crc32;
using testing::NewTempDir;
using testing::PhantomSinogramBytes;
using testing::SmallSpec;

struct Fetched {
  grpc::Status status;
  std::string data;
  std::vector<pb::FetchResultResponse> messages;  // without data
  std::vector<size_t> sizes;                      // of each message's data
};

// The streams of a striped fetch (stripes[k]: stripe k of stripes.size(), units of unit
// bytes from offset) put back together into size bytes, of which those before offset and
// any that no stripe sent keep a poison value. Checks (EXPECT) that each message lies in
// one unit of its own stripe and that every byte of [offset, size) came exactly once.
std::string Reassemble(const std::vector<Fetched>& stripes, uint64_t offset, uint64_t size,
                       uint64_t unit) {
  std::string file(size, '\xa5');
  std::vector<int> times(size, 0);
  for (size_t k = 0; k < stripes.size(); ++k) {
    size_t at_in_data = 0;
    for (size_t m = 0; m < stripes[k].messages.size(); ++m) {
      const uint64_t at = stripes[k].messages[m].offset(), bytes = stripes[k].sizes[m];
      if (bytes == 0) continue;
      EXPECT_LE(at + bytes, size);
      EXPECT_GE(at, offset);
      if (at + bytes > size || at < offset) return file;
      const uint64_t first_unit = (at - offset) / unit;
      const uint64_t last_unit = (at + bytes - 1 - offset) / unit;
      EXPECT_EQ(first_unit, last_unit) << "a message across units at " << at;
      EXPECT_EQ(first_unit % stripes.size(), k) << "unit " << first_unit << " in stripe " << k;
      file.replace(at, bytes, stripes[k].data, at_in_data, bytes);
      for (uint64_t i = at; i < at + bytes; ++i) ++times[i];
      at_in_data += bytes;
    }
  }
  size_t wrong = 0;
  for (uint64_t i = offset; i < size; ++i) wrong += times[i] != 1 ? 1 : 0;
  EXPECT_EQ(wrong, 0u) << "bytes that did not come exactly once";
  return file;
}

class ReconstructionServiceTest : public ::testing::Test {
 protected:
  void StartServer(std::unique_ptr<core::Algorithm> fbp = nullptr, ServerLimits limits = {}) {
    spool_dir_ = NewTempDir("service");
    ServerOptions options;
    options.limits = limits;
    // Jobs a test leaves running are handed back at once rather than waited for.
    options.drain_timeout = absl::Milliseconds(100);
    options.listen = "127.0.0.1:0";
    options.spool_dir = spool_dir_;
    options.devices = {core::CpuDevice()};
    options.shutdown_grace = absl::Seconds(1);
    core::AlgorithmRegistry registry = core::AlgorithmRegistry::WithBuiltins();
    if (fbp) registry.Register("fbp", std::move(fbp));
    auto server = TomodServer::Start(options, std::move(registry));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_GT(server_->port(), 0);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(16 << 20);
    channel_ = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                         grpc::InsecureChannelCredentials(), args);
    stub_ = pb::Reconstruction::NewStub(channel_);
  }

  void SetUp() override { StartServer(); }

  void TearDown() override {
    stub_.reset();
    channel_.reset();
    if (server_) server_->Shutdown();
  }

  // Submits spec and bytes in chunks; crc_xor spoils the checksum, send_end=false omits
  // upload_end.
  grpc::Status Submit(const pb::JobSpec& spec, const std::string& bytes, pb::Job* job,
                      uint32_t crc_xor = 0, bool send_end = true, size_t chunk = 4096) {
    grpc::ClientContext context;
    pb::SubmitResponse response;
    auto writer = stub_->Submit(&context, &response);
    pb::SubmitRequest request;
    *request.mutable_spec() = spec;
    bool ok = writer->Write(request);
    for (size_t at = 0; ok && at < bytes.size(); at += chunk) {
      request.set_data(bytes.substr(at, chunk));
      ok = writer->Write(request);
    }
    if (ok && send_end) {
      request.mutable_upload_end()->set_total_bytes(bytes.size());
      request.mutable_upload_end()->set_crc32(Crc32(bytes) ^ crc_xor);
      writer->Write(request);
    }
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (status.ok() && job != nullptr) *job = response.job();
    return status;
  }

  grpc::Status Watch(const std::string& id, std::vector<pb::JobEvent>* events) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    pb::WatchJobRequest request;
    request.set_job_id(id);
    auto reader = stub_->WatchJob(&context, request);
    pb::JobEvent event;
    while (reader->Read(&event)) events->push_back(event);
    return reader->Finish();
  }

  Fetched Fetch(const std::string& id, uint64_t offset, const std::string& name = "") {
    grpc::ClientContext context;
    pb::FetchResultRequest request;
    request.set_job_id(id);
    request.set_name(name);
    request.set_offset(offset);
    auto reader = stub_->FetchResult(&context, request);
    Fetched fetched;
    pb::FetchResultResponse response;
    while (reader->Read(&response)) {
      EXPECT_EQ(response.offset(), offset + fetched.data.size());
      fetched.data += response.data();
      fetched.sizes.push_back(response.data().size());
      response.clear_data();
      fetched.messages.push_back(response);
    }
    fetched.status = reader->Finish();
    return fetched;
  }

  grpc::Status GetJob(const std::string& id, pb::Job* job) {
    grpc::ClientContext context;
    pb::GetJobRequest request;
    request.set_job_id(id);
    return stub_->GetJob(&context, request, job);
  }

  std::vector<pb::Job> ListJobs() {
    grpc::ClientContext context;
    pb::ListJobsResponse response;
    grpc::Status status = stub_->ListJobs(&context, pb::ListJobsRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return {response.jobs().begin(), response.jobs().end()};
  }

  // Waits up to 10 s for ListJobs and the spool to be empty (an abort finishes on the
  // server's threads, possibly after the client has its status).
  bool NoJobsLeft() {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!ListJobs().empty() ||
           !std::filesystem::is_empty(std::filesystem::path(spool_dir_) / "jobs")) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return true;
  }

  std::string spool_dir_;
  std::unique_ptr<TomodServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Reconstruction::Stub> stub_;
};

TEST_F(ReconstructionServiceTest, SubmitWatchFetchListDelete) {
  pb::JobSpec spec = SmallSpec(64, 90, 64);
  const std::string bytes = PhantomSinogramBytes(spec);
  pb::Job job;
  grpc::Status status = Submit(spec, bytes, &job);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(job.state(), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(job.input_bytes(), bytes.size());
  EXPECT_EQ(job.spec().name(), "small phantom");

  std::vector<pb::JobEvent> events;
  status = Watch(job.id(), &events);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_GE(events.size(), 2u);
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_GT(events[i].sequence(), events[i - 1].sequence());
  }
  EXPECT_EQ(events.back().state(), pb::JOB_STATE_SUCCEEDED);

  pb::Job done;
  ASSERT_TRUE(GetJob(job.id(), &done).ok());
  EXPECT_EQ(done.state(), pb::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(done.results_size(), 2);  // the volume, then its JSON sidecar
  const pb::ResultFile& file = done.results(0);
  EXPECT_EQ(file.name(), "volume.raw");
  EXPECT_EQ(file.size_bytes(), 64u * 64u * 4u);

  Fetched whole = Fetch(job.id(), 0);
  ASSERT_TRUE(whole.status.ok()) << whole.status.error_message();
  EXPECT_EQ(whole.data.size(), file.size_bytes());
  EXPECT_EQ(Crc32(whole.data), file.crc32());
  ASSERT_FALSE(whole.messages.empty());
  EXPECT_TRUE(whole.messages.back().last());
  EXPECT_EQ(whole.messages.back().total_bytes(), file.size_bytes());
  EXPECT_EQ(whole.messages.back().crc32(), file.crc32());
  for (size_t i = 0; i + 1 < whole.messages.size(); ++i) EXPECT_FALSE(whole.messages[i].last());

  Fetched tail = Fetch(job.id(), 1000, "volume.raw");
  ASSERT_TRUE(tail.status.ok()) << tail.status.error_message();
  EXPECT_EQ(tail.data, whole.data.substr(1000));
  EXPECT_EQ(tail.messages.back().crc32(), file.crc32());

  Fetched end = Fetch(job.id(), file.size_bytes());
  ASSERT_TRUE(end.status.ok());
  EXPECT_TRUE(end.data.empty());
  ASSERT_EQ(end.messages.size(), 1u);
  EXPECT_TRUE(end.messages[0].last());

  Fetched beyond = Fetch(job.id(), file.size_bytes() + 1);
  EXPECT_EQ(beyond.status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  Fetched unknown = Fetch(job.id(), 0, "volume.nii");
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(unknown.status.error_message(), HasSubstr("volume.raw"));

  std::vector<pb::Job> jobs = ListJobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].id(), job.id());

  {
    grpc::ClientContext context;
    pb::DeleteJobRequest request;
    request.set_job_id(job.id());
    pb::DeleteJobResponse response;
    ASSERT_TRUE(stub_->DeleteJob(&context, request, &response).ok());
  }
  EXPECT_EQ(GetJob(job.id(), &done).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(NoJobsLeft());
}

TEST_F(ReconstructionServiceTest, LargeChunksUpTo16MiB) {
  pb::JobSpec spec = SmallSpec(1024, 1024, 16);  // 4 MiB of projections
  const std::string bytes(spec.input().size_bytes(), '\0');
  pb::Job job;
  grpc::Status status = Submit(spec, bytes, &job, 0, true, bytes.size());
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(job.input_bytes(), bytes.size());
}

TEST_F(ReconstructionServiceTest, CancelQueuedJob) {
  server_->manager().SetSchedulingPaused(true);
  pb::JobSpec spec = SmallSpec(16, 8, 16);
  pb::Job job;
  ASSERT_TRUE(Submit(spec, std::string(spec.input().size_bytes(), '\0'), &job).ok());
  grpc::ClientContext context;
  pb::CancelJobRequest request;
  request.set_job_id(job.id());
  pb::Job cancelled;
  ASSERT_TRUE(stub_->CancelJob(&context, request, &cancelled).ok());
  EXPECT_EQ(cancelled.state(), pb::JOB_STATE_CANCELLED);
  std::vector<pb::JobEvent> events;
  ASSERT_TRUE(Watch(job.id(), &events).ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].state(), pb::JOB_STATE_CANCELLED);
  Fetched fetched = Fetch(job.id(), 0);
  EXPECT_EQ(fetched.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(fetched.status.error_message(), HasSubstr("CANCELLED"));
}

TEST_F(ReconstructionServiceTest, BadSpecIsInvalidArgumentAndLeavesNoJob) {
  pb::JobSpec spec = SmallSpec(16, 8, 16);
  spec.mutable_geometry()->mutable_parallel_2d()->mutable_angles()->mutable_uniform()->set_count(0);
  grpc::Status status = Submit(spec, std::string(512, '\0'), nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("geometry.parallel_2d.angles.uniform.count: 0 is out of range"));

  spec = SmallSpec(16, 8, 16);
  spec.mutable_input()->set_size_bytes(1000);
  status = Submit(spec, std::string(1000, '\0'), nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("input.size_bytes: 1000 does not match"));
  EXPECT_TRUE(NoJobsLeft());
}

TEST_F(ReconstructionServiceTest, DataBeforeSpecIsInvalidArgument) {
  grpc::ClientContext context;
  pb::SubmitResponse response;
  auto writer = stub_->Submit(&context, &response);
  pb::SubmitRequest request;
  request.set_data("abcd");
  writer->Write(request);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("first SubmitRequest must be the spec"));
  EXPECT_TRUE(NoJobsLeft());
}

TEST_F(ReconstructionServiceTest, WrongChecksumLeavesNoJob) {
  pb::JobSpec spec = SmallSpec(16, 8, 16);
  grpc::Status status = Submit(spec, std::string(spec.input().size_bytes(), '\7'), nullptr, 0x1);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("upload_end.crc32"));
  EXPECT_TRUE(NoJobsLeft());
}

TEST_F(ReconstructionServiceTest, StreamWithoutUploadEndLeavesNoJob) {
  pb::JobSpec spec = SmallSpec(16, 8, 16);
  grpc::Status status =
      Submit(spec, std::string(spec.input().size_bytes(), '\7'), nullptr, 0, /*send_end=*/false);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("without upload_end"));
  EXPECT_TRUE(NoJobsLeft());
}

TEST_F(ReconstructionServiceTest, TooManyBytesLeaveNoJob) {
  pb::JobSpec spec = SmallSpec(16, 8, 16);
  grpc::Status status = Submit(spec, std::string(spec.input().size_bytes() + 8, '\7'), nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("exceed input.size_bytes 512"));
  EXPECT_TRUE(NoJobsLeft());
}

TEST_F(ReconstructionServiceTest, CancelledUploadLeavesNoJob) {
  pb::JobSpec spec = SmallSpec(64, 90, 64);
  grpc::ClientContext context;
  pb::SubmitResponse response;
  auto writer = stub_->Submit(&context, &response);
  pb::SubmitRequest request;
  *request.mutable_spec() = spec;
  ASSERT_TRUE(writer->Write(request));
  request.set_data(std::string(4096, '\0'));
  ASSERT_TRUE(writer->Write(request));
  // Wait until the server has the job, then hang up mid-stream.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (ListJobs().empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(2));
  std::vector<pb::Job> jobs = ListJobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].state(), pb::JOB_STATE_UPLOADING);
  context.TryCancel();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  EXPECT_TRUE(NoJobsLeft());
}

TEST_F(ReconstructionServiceTest, UnknownIds) {
  std::vector<pb::JobEvent> events;
  grpc::Status status = Watch("20990101-000000-000000-000000000000", &events);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("20990101-000000-000000-000000000000"));
  EXPECT_TRUE(events.empty());

  pb::Job job;
  EXPECT_EQ(GetJob("nope", &job).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext context;
  pb::CancelJobRequest cancel;
  cancel.set_job_id("nope");
  EXPECT_EQ(stub_->CancelJob(&context, cancel, &job).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext context2;
  pb::DeleteJobRequest del;
  del.set_job_id("nope");
  pb::DeleteJobResponse deleted;
  grpc::Status delete_status = stub_->DeleteJob(&context2, del, &deleted);
  EXPECT_EQ(delete_status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(delete_status.error_message(), HasSubstr("\"nope\""));
  EXPECT_EQ(Fetch("nope", 0).status.error_code(), grpc::StatusCode::NOT_FOUND);
}

// FetchResult takes its request as raw bytes (the method is raw on the server): bytes that
// are no FetchResultRequest are INVALID_ARGUMENT naming the message, and tomod serves on.
TEST_F(ReconstructionServiceTest, FetchRequestThatDoesNotParseIsInvalidArgument) {
  static const std::string kMethod =
      absl::StrCat("/", pb::Reconstruction::service_full_name(), "/FetchResult");
  const grpc::internal::RpcMethod method(kMethod.c_str(),
                                         grpc::internal::RpcMethod::SERVER_STREAMING);
  const std::string garbage("\x0a\xff\xff\xff", 4);  // field 1 with a cut length
  grpc::Slice slice(garbage);
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(channel_.get(), method,
                                                                    &context, request));
  grpc::ByteBuffer message;
  EXPECT_FALSE(reader->Read(&message));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("FetchResultRequest"));
  EXPECT_EQ(Fetch("nope", 0).status.error_code(), grpc::StatusCode::NOT_FOUND);  // still serving
}

TEST_F(ReconstructionServiceTest, ListJobsPageSizeLimit) {
  grpc::ClientContext context;
  pb::ListJobsRequest request;
  request.set_page_size(1001);
  pb::ListJobsResponse response;
  grpc::Status status = stub_->ListJobs(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("page_size: 1001"));
}

TEST_F(ReconstructionServiceTest, ManyWatchersSeeTheSameEvents) {
  server_->manager().SetSchedulingPaused(true);
  pb::JobSpec spec = SmallSpec(32, 30, 32);
  pb::Job job;
  ASSERT_TRUE(Submit(spec, PhantomSinogramBytes(spec), &job).ok());
  constexpr int kWatchers = 16;
  std::vector<std::vector<pb::JobEvent>> events(kWatchers);
  std::vector<grpc::Status> statuses(kWatchers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWatchers; ++i) {
    threads.emplace_back([&, i] { statuses[i] = Watch(job.id(), &events[i]); });
  }
  absl::SleepFor(absl::Milliseconds(100));
  server_->manager().SetSchedulingPaused(false);
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kWatchers; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].error_message();
    ASSERT_FALSE(events[i].empty());
    EXPECT_EQ(events[i].back().state(), pb::JOB_STATE_SUCCEEDED);
    for (size_t k = 1; k < events[i].size(); ++k) {
      EXPECT_GT(events[i][k].sequence(), events[i][k - 1].sequence());
    }
  }
}

TEST_F(ReconstructionServiceTest, WatcherThatHangsUpIsCleanedUp) {
  server_->manager().SetSchedulingPaused(true);
  pb::JobSpec spec = SmallSpec(16, 8, 16);
  pb::Job job;
  ASSERT_TRUE(Submit(spec, std::string(spec.input().size_bytes(), '\0'), &job).ok());
  for (int i = 0; i < 5; ++i) {
    grpc::ClientContext context;
    pb::WatchJobRequest request;
    request.set_job_id(job.id());
    auto reader = stub_->WatchJob(&context, request);
    pb::JobEvent event;
    ASSERT_TRUE(reader->Read(&event));
    EXPECT_EQ(event.state(), pb::JOB_STATE_QUEUED);
    context.TryCancel();
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // Every hung-up watch has unsubscribed (OnDone runs on the server's threads).
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (server_->manager().watcher_count() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  EXPECT_EQ(server_->manager().watcher_count(), 0u);
  // The job still runs to the end, with nobody left to tell.
  server_->manager().SetSchedulingPaused(false);
  std::vector<pb::JobEvent> events;
  ASSERT_TRUE(Watch(job.id(), &events).ok());
  EXPECT_EQ(events.back().state(), pb::JOB_STATE_SUCCEEDED);
}

TEST_F(ReconstructionServiceTest, GetServerInfo) {
  grpc::ClientContext context;
  pb::ServerInfo info;
  ASSERT_TRUE(stub_->GetServerInfo(&context, pb::GetServerInfoRequest(), &info).ok());
  EXPECT_FALSE(info.version().empty());
  EXPECT_NE(info.version(), "unknown");
  ASSERT_EQ(info.devices_size(), 1);
  EXPECT_EQ(info.devices(0).id(), "cpu");
  EXPECT_THAT(info.algorithms(), Contains("fbp"));
  EXPECT_EQ(info.limits().max_views(), ServerLimits().max_views);
  EXPECT_EQ(info.limits().max_queue_length(), ServerLimits().max_queue_length);
}

class ReconstructionServiceCancelTest : public ReconstructionServiceTest {
 protected:
  void SetUp() override { StartServer(std::make_unique<BlockingAlgorithm>()); }
};

TEST_F(ReconstructionServiceCancelTest, CancelRunningJob) {
  pb::JobSpec spec = SmallSpec(16, 8, 16);
  pb::Job job;
  ASSERT_TRUE(Submit(spec, std::string(spec.input().size_bytes(), '\0'), &job).ok());
  std::vector<pb::JobEvent> events;
  grpc::Status watch_status;
  std::thread watcher([&] { watch_status = Watch(job.id(), &events); });
  pb::Job current;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (GetJob(job.id(), &current).ok() && current.state() != pb::JOB_STATE_RUNNING &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_EQ(current.state(), pb::JOB_STATE_RUNNING);
  {
    grpc::ClientContext context;
    pb::DeleteJobRequest request;
    request.set_job_id(job.id());
    pb::DeleteJobResponse response;
    grpc::Status status = stub_->DeleteJob(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(), AllOf(HasSubstr("RUNNING"), HasSubstr("cancel it first")));
  }
  grpc::ClientContext context;
  pb::CancelJobRequest request;
  request.set_job_id(job.id());
  pb::Job response;
  ASSERT_TRUE(stub_->CancelJob(&context, request, &response).ok());
  watcher.join();
  ASSERT_TRUE(watch_status.ok()) << watch_status.error_message();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().state(), pb::JOB_STATE_CANCELLED);
  ASSERT_TRUE(GetJob(job.id(), &current).ok());
  EXPECT_EQ(current.state(), pb::JOB_STATE_CANCELLED);
}

class ReconstructionServiceLimitTest : public ReconstructionServiceTest {
 protected:
  void SetUp() override {
    ServerLimits limits;
    limits.max_jobs_per_client = 1;
    StartServer(std::make_unique<BlockingAlgorithm>(), limits);
  }
};

TEST_F(ReconstructionServiceLimitTest, JobsPerClientAreCountedByPeerHostAndReported) {
  pb::JobSpec spec = SmallSpec(16, 8, 16);
  const std::string bytes(spec.input().size_bytes(), '\0');
  pb::Job first;
  ASSERT_TRUE(Submit(spec, bytes, &first).ok());
  EXPECT_EQ(first.client(), "127.0.0.1");
  grpc::Status refused = Submit(spec, bytes, nullptr);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              AllOf(HasSubstr("client 127.0.0.1 has 1 unfinished jobs"),
                    HasSubstr("limit is 1 per client (--max_jobs_per_client)")));
  // An ended job no longer counts.
  grpc::ClientContext context;
  pb::CancelJobRequest request;
  request.set_job_id(first.id());
  pb::Job response;
  ASSERT_TRUE(stub_->CancelJob(&context, request, &response).ok());
  pb::Job current;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (GetJob(first.id(), &current).ok() && current.state() != pb::JOB_STATE_CANCELLED &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  pb::Job second;
  EXPECT_TRUE(Submit(spec, bytes, &second).ok());

  grpc::ClientContext info_context;
  pb::ServerInfo info;
  ASSERT_TRUE(stub_->GetServerInfo(&info_context, pb::GetServerInfoRequest(), &info).ok());
  EXPECT_EQ(info.limits().max_jobs_per_client(), 1u);
  EXPECT_EQ(info.limits().max_iterations(), ServerLimits().max_iterations);
  EXPECT_EQ(info.limits().max_attempts(), 3u);
}

// ---------------------------------------------------------------- early fetch

// A FetchResult stream read on its own thread, so that a test sees what has arrived while
// the stream is still open.
class FetchStream {
 public:
  FetchStream(pb::Reconstruction::Stub& stub, const std::string& id, const std::string& name,
              uint64_t offset)
      : FetchStream(stub, Request(id, name, offset)) {}
  // Any request; a striped one's messages need not follow each other.
  FetchStream(pb::Reconstruction::Stub& stub, const pb::FetchResultRequest& request)
      : thread_([this, &stub, request] {
          const uint64_t offset = request.offset();
          auto reader = stub.FetchResult(&context_, request);
          pb::FetchResultResponse response;
          while (reader->Read(&response)) {
            absl::MutexLock lock(&mu_);
            if (request.stripe_count() <= 1) {
              EXPECT_EQ(response.offset(), offset + fetched_.data.size());
            }
            fetched_.data += response.data();
            fetched_.sizes.push_back(response.data().size());
            response.clear_data();
            fetched_.messages.push_back(response);
          }
          grpc::Status status = reader->Finish();
          absl::MutexLock lock(&mu_);
          fetched_.status = status;
          ended_ = true;
        }) {}
  ~FetchStream() {
    context_.TryCancel();
    thread_.join();
  }

  static pb::FetchResultRequest Request(const std::string& id, const std::string& name,
                                        uint64_t offset, uint32_t stripe_count = 0,
                                        uint32_t stripe_index = 0, uint64_t stripe_bytes = 0) {
    pb::FetchResultRequest request;
    request.set_job_id(id);
    request.set_name(name);
    request.set_offset(offset);
    request.set_stripe_count(stripe_count);
    request.set_stripe_index(stripe_index);
    request.set_stripe_bytes(stripe_bytes);
    return request;
  }

  // True once at least bytes have arrived (false: the stream ended or timeout passed).
  bool WaitForBytes(size_t bytes, absl::Duration timeout = absl::Seconds(20)) {
    absl::MutexLock lock(&mu_);
    auto arrived = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return ended_ || fetched_.data.size() >= bytes;
    };
    mu_.AwaitWithTimeout(absl::Condition(&arrived), timeout);
    return fetched_.data.size() >= bytes;
  }
  // What arrived so far; ended tells whether the stream is over.
  Fetched Snapshot(bool* ended) {
    absl::MutexLock lock(&mu_);
    *ended = ended_;
    return fetched_;
  }
  Fetched WaitForEnd(absl::Duration timeout = absl::Seconds(20)) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&ended_), timeout);
    EXPECT_TRUE(ended_) << "the fetch did not end";
    return fetched_;
  }

 private:
  grpc::ClientContext context_;
  absl::Mutex mu_;
  Fetched fetched_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the members above exist
};

// The early fetch through the service, on a JobManager of its own whose test hook holds
// each job at the start of its outputs (the volume shared, nothing written) until the test
// releases it. The algorithm gives a 600 x 600 volume of fresh random values: 1.44 MB, two
// messages, of which the second must wait for the job's end.
class EarlyFetchServiceTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kSide = 600;
  static constexpr size_t kBytes = size_t{kSide} * kSide * 4;

  void SetUp() override {
    seed_ = tomo::testing::TestSeed();
    auto spool = Spool::Open(NewTempDir("early-fetch"));
    ASSERT_TRUE(spool.ok()) << spool.status();
    spool_ = std::move(*spool);
    JobManagerOptions options;
    options.devices = {core::CpuDevice()};
    options.before_writing_results = [this](const std::string&) {
      writing_.Notify();
      release_.WaitForNotificationWithTimeout(absl::Seconds(30));
    };
    registry_ = core::AlgorithmRegistry::WithBuiltins();
    registry_.Register("fbp", std::make_unique<testing::RandomVolumeAlgorithm>(seed_));
    manager_ = std::make_unique<JobManager>(options, *spool_, registry_);
    absl::Status started = manager_->Start();
    ASSERT_TRUE(started.ok()) << started;
    service_ = std::make_unique<ReconstructionService>(*manager_, registry_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(16 << 20);
    stub_ = pb::Reconstruction::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), args));
  }

  void TearDown() override {
    if (!release_.HasBeenNotified()) release_.Notify();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    if (manager_) manager_->Shutdown();
  }

  // Submits a job straight to the manager; returns its id.
  std::string SubmitJob() {
    const pb::JobSpec spec = SmallSpec(16, 8, kSide);
    const std::string bytes(spec.input().size_bytes(), '\0');
    auto upload = manager_->BeginUpload(spec);
    EXPECT_TRUE(upload.ok()) << upload.status();
    if (!upload.ok()) return "";
    EXPECT_TRUE((*upload)->Append(bytes).ok());
    auto job = (*upload)->Commit(bytes.size(), Crc32(bytes));
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id() : "";
  }

  std::string Expected() const {
    const std::vector<float> values = testing::RandomValues(seed_, size_t{kSide} * kSide);
    return std::string(reinterpret_cast<const char*>(values.data()), kBytes);
  }

  // One blocking fetch from offset 0.
  Fetched FetchNow(const std::string& id, const std::string& name) {
    FetchStream stream(*stub_, id, name, 0);
    return stream.WaitForEnd();
  }

  // The count streams of a striped fetch, started together.
  std::vector<std::unique_ptr<FetchStream>> StartStriped(const std::string& id, uint64_t offset,
                                                         uint32_t count, uint64_t unit) {
    std::vector<std::unique_ptr<FetchStream>> streams;
    for (uint32_t k = 0; k < count; ++k) {
      streams.push_back(std::make_unique<FetchStream>(
          *stub_, FetchStream::Request(id, "volume.raw", offset, count, k, unit)));
    }
    return streams;
  }
  std::vector<Fetched> WaitForAll(const std::vector<std::unique_ptr<FetchStream>>& streams) {
    std::vector<Fetched> fetched;
    for (const auto& stream : streams) fetched.push_back(stream->WaitForEnd());
    return fetched;
  }

  // Waits (10 s at most) for the job to end; its state.
  pb::JobState WaitForEndOf(const std::string& id) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    for (;;) {
      absl::StatusOr<pb::Job> job = manager_->GetJob(id);
      if (!job.ok()) return pb::JOB_STATE_UNSPECIFIED;
      if (job->state() == pb::JOB_STATE_SUCCEEDED || job->state() == pb::JOB_STATE_FAILED ||
          job->state() == pb::JOB_STATE_CANCELLED || absl::Now() > deadline) {
        return job->state();
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  // Each stripe ended OK with one last message (the last one), the file's size and CRC-32.
  void ExpectEachStripeEndsWithTheWholeFile(const std::vector<Fetched>& stripes,
                                            uint32_t crc32) {
    for (size_t k = 0; k < stripes.size(); ++k) {
      SCOPED_TRACE(::testing::Message() << "stripe " << k);
      EXPECT_TRUE(stripes[k].status.ok()) << stripes[k].status.error_message();
      ASSERT_FALSE(stripes[k].messages.empty());
      for (size_t m = 0; m + 1 < stripes[k].messages.size(); ++m) {
        EXPECT_FALSE(stripes[k].messages[m].last());
      }
      EXPECT_TRUE(stripes[k].messages.back().last());
      EXPECT_EQ(stripes[k].messages.back().total_bytes(), kBytes);
      EXPECT_EQ(stripes[k].messages.back().crc32(), crc32);
    }
  }

  uint64_t seed_ = 0;
  std::unique_ptr<Spool> spool_;
  core::AlgorithmRegistry registry_;
  std::unique_ptr<JobManager> manager_;
  std::unique_ptr<ReconstructionService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<pb::Reconstruction::Stub> stub_;
  absl::Notification writing_, release_;
};

// Bytes from memory while the outputs are written, the last message only once the job has
// SUCCEEDED, with the recorded size and CRC-32; a resumed fetch the same from its offset.
// QUEUED, and other results while writing, are FAILED_PRECONDITION as before.
TEST_F(EarlyFetchServiceTest, RawResultStreamsWhileWrittenAndEndsWithTheJob) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  manager_->SetSchedulingPaused(true);
  const std::string id = SubmitJob();
  ASSERT_FALSE(id.empty());
  Fetched queued = FetchNow(id, "volume.raw");
  EXPECT_EQ(queued.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(queued.status.error_message(), HasSubstr("QUEUED"));
  manager_->SetSchedulingPaused(false);
  ASSERT_TRUE(writing_.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(FetchNow(id, "volume.json").status.error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);

  FetchStream whole(*stub_, id, "", 0);
  FetchStream resumed(*stub_, id, "volume.raw", 1000);
  ASSERT_TRUE(whole.WaitForBytes(kFetchChunkBytes));
  ASSERT_TRUE(resumed.WaitForBytes(kFetchChunkBytes));
  absl::SleepFor(absl::Milliseconds(300));  // the rest must wait for the job
  bool ended = true;
  Fetched so_far = whole.Snapshot(&ended);
  EXPECT_FALSE(ended);
  EXPECT_EQ(so_far.data.size(), kFetchChunkBytes);
  for (const pb::FetchResultResponse& message : so_far.messages) EXPECT_FALSE(message.last());
  EXPECT_EQ(so_far.data, Expected().substr(0, kFetchChunkBytes)) << "not the volume's bytes";
  release_.Notify();

  const std::string expected = Expected();
  Fetched fetched = whole.WaitForEnd();
  ASSERT_TRUE(fetched.status.ok()) << fetched.status.error_message();
  absl::StatusOr<pb::Job> job = manager_->GetJob(id);
  ASSERT_TRUE(job.ok());
  ASSERT_EQ(job->state(), pb::JOB_STATE_SUCCEEDED);
  const pb::ResultFile& recorded = job->results(0);
  EXPECT_EQ(recorded.crc32(), Crc32(expected));
  EXPECT_TRUE(fetched.data == expected);
  ASSERT_EQ(fetched.messages.size(), 2u);
  EXPECT_TRUE(fetched.messages.back().last());
  EXPECT_EQ(fetched.messages.back().total_bytes(), kBytes);
  EXPECT_EQ(fetched.messages.back().crc32(), recorded.crc32());

  Fetched tail = resumed.WaitForEnd();
  ASSERT_TRUE(tail.status.ok()) << tail.status.error_message();
  EXPECT_TRUE(tail.data == expected.substr(1000));
  ASSERT_FALSE(tail.messages.empty());
  EXPECT_TRUE(tail.messages.back().last());
  EXPECT_EQ(tail.messages.back().crc32(), recorded.crc32());
  // After SUCCEEDED the file is fetched as ever: the same bytes.
  Fetched from_file = FetchNow(id, "volume.raw");
  ASSERT_TRUE(from_file.status.ok()) << from_file.status.error_message();
  EXPECT_TRUE(from_file.data == expected);
}

// A job cancelled while its result streams: ABORTED naming the job and CANCELLED, no last
// message.
TEST_F(EarlyFetchServiceTest, CancelWhileWrittenAbortsTheFetch) {
  const std::string id = SubmitJob();
  ASSERT_TRUE(writing_.WaitForNotificationWithTimeout(absl::Seconds(20)));
  FetchStream stream(*stub_, id, "volume.raw", 0);
  ASSERT_TRUE(stream.WaitForBytes(kFetchChunkBytes));
  ASSERT_TRUE(manager_->CancelJob(id).ok());
  release_.Notify();
  Fetched fetched = stream.WaitForEnd();
  EXPECT_EQ(fetched.status.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_THAT(fetched.status.error_message(), AllOf(HasSubstr(id), HasSubstr("CANCELLED")));
  for (const pb::FetchResultResponse& message : fetched.messages) EXPECT_FALSE(message.last());
  EXPECT_LT(fetched.data.size(), kBytes);
}

// A shutdown while the result streams hands the job back QUEUED: ABORTED naming QUEUED.
TEST_F(EarlyFetchServiceTest, ShutdownWhileWrittenAbortsTheFetch) {
  const std::string id = SubmitJob();
  ASSERT_TRUE(writing_.WaitForNotificationWithTimeout(absl::Seconds(20)));
  FetchStream stream(*stub_, id, "", 0);
  ASSERT_TRUE(stream.WaitForBytes(kFetchChunkBytes));
  std::thread shutdown([this] { manager_->Shutdown(); });
  // Release the run only once the shutdown has asked it to stop (new uploads refused).
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (manager_->BeginUpload(SmallSpec()).status().code() != absl::StatusCode::kUnavailable &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  release_.Notify();
  shutdown.join();
  Fetched fetched = stream.WaitForEnd();
  EXPECT_EQ(fetched.status.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_THAT(fetched.status.error_message(), AllOf(HasSubstr(id), HasSubstr("QUEUED")));
  for (const pb::FetchResultResponse& message : fetched.messages) EXPECT_FALSE(message.last());
}

// ---------------------------------------------------------------- striped fetch

// A finished result fetched as N streams, each a stripe of units: put back together they are
// the file, from any offset; stripes beyond the last unit send only the last message.
TEST_F(EarlyFetchServiceTest, StripedFetchOfTheFileReassemblesIt) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  release_.Notify();
  const std::string id = SubmitJob();
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(WaitForEndOf(id), pb::JOB_STATE_SUCCEEDED);
  const std::string expected = Expected();
  const uint32_t crc = Crc32(expected);
  struct Case {
    uint64_t offset;
    uint32_t count;
    uint64_t unit;  // 0: tomod's default, 1 MiB
  };
  // 1.44 MB: 22 units of 64 KiB (the last one short), 2 of 1 MiB, 1 of 8 MiB.
  for (const Case& c : {Case{0, 3, 64 << 10}, Case{1000, 3, 64 << 10}, Case{0, 3, 0},
                        Case{12345, 5, 8 << 20}, Case{0, 64, 4 << 10}}) {
    SCOPED_TRACE(::testing::Message() << "offset " << c.offset << ", " << c.count
                                      << " stripes of " << c.unit << " bytes");
    std::vector<Fetched> stripes = WaitForAll(StartStriped(id, c.offset, c.count, c.unit));
    ExpectEachStripeEndsWithTheWholeFile(stripes, crc);
    const std::string file = Reassemble(stripes, c.offset, kBytes, c.unit == 0 ? 1 << 20 : c.unit);
    EXPECT_TRUE(file.substr(c.offset) == expected.substr(c.offset)) << "not the result's bytes";
    if (c.unit == (8 << 20)) {
      for (size_t k = 1; k < stripes.size(); ++k) {
        EXPECT_TRUE(stripes[k].data.empty());
        EXPECT_EQ(stripes[k].messages.size(), 1u) << "stripe " << k;
      }
    }
  }
}

// Out-of-range stripe fields are refused before anything is looked up, naming the field.
TEST_F(EarlyFetchServiceTest, BadStripeFieldsAreInvalidArgumentNamingTheField) {
  release_.Notify();
  const std::string id = SubmitJob();
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(WaitForEndOf(id), pb::JOB_STATE_SUCCEEDED);
  struct Case {
    uint32_t count, index;
    uint64_t unit;
    std::string field;
  };
  for (const Case& c : {Case{3, 3, 0, "stripe_index: 3"}, Case{0, 1, 0, "stripe_index: 1"},
                        Case{65, 0, 0, "stripe_count: 65"}, Case{3, 0, 4095, "stripe_bytes: 4095"},
                        Case{3, 0, (8 << 20) + 1, "stripe_bytes: 8388609"}}) {
    FetchStream stream(*stub_,
                       FetchStream::Request(id, "volume.raw", 0, c.count, c.index, c.unit));
    Fetched fetched = stream.WaitForEnd();
    EXPECT_EQ(fetched.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field;
    EXPECT_THAT(fetched.status.error_message(), HasSubstr(c.field));
    EXPECT_TRUE(fetched.messages.empty());
  }
}

// A striped early fetch: every stripe streams all but its last chunk while the result is
// written, and each ends only after the job has SUCCEEDED; together they are the volume.
TEST_F(EarlyFetchServiceTest, StripedEarlyFetchEndsEachStripeAfterSucceeded) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  const std::string id = SubmitJob();
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(writing_.WaitForNotificationWithTimeout(absl::Seconds(20)));
  constexpr uint32_t kStripes = 3;
  constexpr uint64_t kUnit = 64 << 10;  // 22 units, the last short: 8, 7 and 7 per stripe
  auto streams = StartStriped(id, 0, kStripes, kUnit);
  const std::string expected = Expected();
  // All but the last unit of each stripe: stripe 0 holds 8 units, the last is the short
  // one (unit 21); stripes 1 and 2 hold 7 full ones.
  const uint64_t last_unit_bytes = kBytes - 21 * kUnit;
  const uint64_t before_last[kStripes] = {7 * kUnit, 6 * kUnit, 6 * kUnit};
  for (uint32_t k = 0; k < kStripes; ++k) {
    ASSERT_TRUE(streams[k]->WaitForBytes(before_last[k])) << "stripe " << k;
  }
  absl::SleepFor(absl::Milliseconds(300));  // the rest must wait for the job
  for (uint32_t k = 0; k < kStripes; ++k) {
    bool ended = true;
    Fetched so_far = streams[k]->Snapshot(&ended);
    EXPECT_FALSE(ended) << "stripe " << k;
    EXPECT_EQ(so_far.data.size(), before_last[k]) << "stripe " << k;
    for (const pb::FetchResultResponse& message : so_far.messages) EXPECT_FALSE(message.last());
  }
  release_.Notify();
  std::vector<Fetched> stripes = WaitForAll(streams);
  ASSERT_EQ(WaitForEndOf(id), pb::JOB_STATE_SUCCEEDED);
  absl::StatusOr<pb::Job> job = manager_->GetJob(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->results(0).crc32(), Crc32(expected));
  ExpectEachStripeEndsWithTheWholeFile(stripes, job->results(0).crc32());
  EXPECT_EQ(stripes[0].sizes.back(), last_unit_bytes);
  EXPECT_TRUE(Reassemble(stripes, 0, kBytes, kUnit) == expected) << "not the volume's bytes";
}

// A striped early fetch of a job that is cancelled: every stripe ends ABORTED, none with a
// last message.
TEST_F(EarlyFetchServiceTest, StripedEarlyFetchOfACancelledJobAbortsEveryStripe) {
  const std::string id = SubmitJob();
  ASSERT_TRUE(writing_.WaitForNotificationWithTimeout(absl::Seconds(20)));
  auto streams = StartStriped(id, 0, 4, 256 << 10);  // 6 units: stripes 0 and 1 hold 2
  ASSERT_TRUE(streams[0]->WaitForBytes(256 << 10));
  ASSERT_TRUE(manager_->CancelJob(id).ok());
  release_.Notify();
  for (const Fetched& fetched : WaitForAll(streams)) {
    EXPECT_EQ(fetched.status.error_code(), grpc::StatusCode::ABORTED);
    EXPECT_THAT(fetched.status.error_message(), AllOf(HasSubstr(id), HasSubstr("CANCELLED")));
    for (const pb::FetchResultResponse& message : fetched.messages) EXPECT_FALSE(message.last());
  }
}

// ---------------------------------------------------------------- file_bytes

// The whole file's size on the first message of a call and on no other (0 there), so that
// a client can map its file before the bytes come; the last message's total_bytes agrees.
void ExpectFileBytesOnTheFirstMessageOnly(const Fetched& fetched, uint64_t file_bytes) {
  ASSERT_FALSE(fetched.messages.empty());
  EXPECT_EQ(fetched.messages.front().file_bytes(), file_bytes);
  for (size_t m = 1; m < fetched.messages.size(); ++m) {
    EXPECT_EQ(fetched.messages[m].file_bytes(), 0u) << "message " << m;
  }
  if (fetched.messages.back().last()) {
    EXPECT_EQ(fetched.messages.back().total_bytes(), file_bytes);
  }
}

// A fetch of the finished file, from 0 and from an offset: file_bytes is the whole file's.
TEST_F(EarlyFetchServiceTest, PlainFetchSendsFileBytesFirst) {
  release_.Notify();
  const std::string id = SubmitJob();
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(WaitForEndOf(id), pb::JOB_STATE_SUCCEEDED);
  for (uint64_t offset : {uint64_t{0}, uint64_t{1000}, uint64_t{kBytes}}) {
    SCOPED_TRACE(::testing::Message() << "offset " << offset);
    FetchStream stream(*stub_, id, "volume.raw", offset);
    const Fetched fetched = stream.WaitForEnd();
    ASSERT_TRUE(fetched.status.ok()) << fetched.status.error_message();
    EXPECT_EQ(fetched.data.size(), kBytes - offset);
    ExpectFileBytesOnTheFirstMessageOnly(fetched, kBytes);
  }
}

// Each stream of a striped fetch, those without a unit included (their one message is both
// the first and the last).
TEST_F(EarlyFetchServiceTest, StripedFetchSendsFileBytesFirstInEachStream) {
  release_.Notify();
  const std::string id = SubmitJob();
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(WaitForEndOf(id), pb::JOB_STATE_SUCCEEDED);
  for (uint64_t unit : {uint64_t{64} << 10, uint64_t{8} << 20}) {
    SCOPED_TRACE(::testing::Message() << "units of " << unit << " bytes");
    const std::vector<Fetched> stripes = WaitForAll(StartStriped(id, 777, 3, unit));
    for (size_t k = 0; k < stripes.size(); ++k) {
      SCOPED_TRACE(::testing::Message() << "stripe " << k);
      ASSERT_TRUE(stripes[k].status.ok()) << stripes[k].status.error_message();
      ExpectFileBytesOnTheFirstMessageOnly(stripes[k], kBytes);
    }
  }
}

// The early fetch of a result being written: file_bytes on its first message, sent before
// the job ends (the second and last waits for it).
TEST_F(EarlyFetchServiceTest, EarlyFetchSendsFileBytesFirst) {
  const std::string id = SubmitJob();
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(writing_.WaitForNotificationWithTimeout(absl::Seconds(20)));
  FetchStream stream(*stub_, id, "volume.raw", 0);
  ASSERT_TRUE(stream.WaitForBytes(kFetchChunkBytes));
  bool ended = true;
  const Fetched so_far = stream.Snapshot(&ended);
  EXPECT_FALSE(ended) << "the job is held: the last message cannot have come";
  ASSERT_FALSE(so_far.messages.empty());
  EXPECT_FALSE(so_far.messages.front().last());
  EXPECT_EQ(so_far.messages.front().file_bytes(), kBytes);
  release_.Notify();
  const Fetched fetched = stream.WaitForEnd();
  ASSERT_TRUE(fetched.status.ok()) << fetched.status.error_message();
  ExpectFileBytesOnTheFirstMessageOnly(fetched, kBytes);
}

}  // namespace
}  // namespace tomo::server
