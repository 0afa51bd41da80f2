#include "server/tomod_server.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/runner/test_jobs.h"
#include "tomoserve/v1/tomoserve.grpc.pb.h"

namespace tomo::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  auto dir = std::filesystem::path(::testing::TempDir()) /
             absl::StrCat("tomod_server_", name, "_", ::getpid());
  std::filesystem::remove_all(dir);
  return dir.string();
}

ServerOptions TestOptions(const std::string& name) {
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.spool_dir = TempDir(name) + "/spool";
  options.devices = {core::CpuDevice()};
  options.shutdown_grace = absl::Seconds(1);
  return options;
}

// grpc.health.v1.Health/Check with an empty request; the response's bytes (SERVING is
// field 1 = 1: "\x08\x01", NOT_SERVING "\x08\x02"), or the error.
std::string HealthCheck(int port) {
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  grpc::Slice empty;
  grpc::ByteBuffer request(&empty, 1), response;
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                 &response, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return "error: " + status.error_message();
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return "error: unreadable";
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes += std::string(s.begin(), s.end());
  return bytes;
}

TEST(CheckListenAddressTest, LoopbackOnlyUnlessTlsOrAllowed) {
  // (listen, tls, allow_insecure_remote)
  EXPECT_TRUE(CheckListenAddress("127.0.0.1:50051", false, false).ok());
  EXPECT_TRUE(CheckListenAddress("127.1.2.3:0", false, false).ok());
  EXPECT_TRUE(CheckListenAddress("localhost:50051", false, false).ok());
  EXPECT_TRUE(CheckListenAddress("[::1]:50051", false, false).ok());
  EXPECT_TRUE(CheckListenAddress("unix:/tmp/tomod.sock", false, false).ok());
  absl::Status status = CheckListenAddress("0.0.0.0:50051", false, false);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--allow_insecure_remote"));
  EXPECT_THAT(status.message(), HasSubstr("--tls_cert_file"));
  EXPECT_FALSE(CheckListenAddress("[::]:50051", false, false).ok());
  EXPECT_FALSE(CheckListenAddress("10.1.2.3:50051", false, false).ok());
  EXPECT_FALSE(CheckListenAddress(":50051", false, false).ok());
  EXPECT_TRUE(CheckListenAddress("0.0.0.0:50051", false, true).ok());
  EXPECT_TRUE(CheckListenAddress("0.0.0.0:50051", true, false).ok());
  EXPECT_TRUE(CheckListenAddress("[::]:50051", true, false).ok());
  EXPECT_FALSE(CheckListenAddress("127.0.0.1", true, false).ok());
  EXPECT_FALSE(CheckListenAddress("127.0.0.1:99999", false, false).ok());
}

TEST(SelectDevicesTest, ExplicitDevicesWin) {
  ServerOptions options;
  options.devices = {core::CpuDevice()};
  absl::StatusOr<std::vector<core::DeviceInfo>> devices = SelectDevices(options);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  options.devices.clear();
  devices = SelectDevices(options);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_FALSE(devices->empty());
  if (core::ListCudaDevices().empty()) {
    EXPECT_EQ(devices->back().id, "cpu");
  }
}

TEST(SelectDevicesTest, DeviceIdsPickDevicesAndUnknownOnesAreNamed) {
  ServerOptions options;
  options.device_ids = {"cpu"};
  absl::StatusOr<std::vector<core::DeviceInfo>> devices = SelectDevices(options);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ(devices->front().id, "cpu");

  options.device_ids = {"cuda:99"};
  devices = SelectDevices(options);
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(devices.status().message()),
              AllOf(HasSubstr("--devices: cuda:99 is not a device here"), HasSubstr("cpu")));

  options.device_ids = {"cpu", "cpu"};
  devices = SelectDevices(options);
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(devices.status().message()), HasSubstr("listed twice"));
}

TEST(SelectDevicesTest, CpuNumbersAreMoreCpuWorkers) {
  ServerOptions options;
  options.device_ids = {"cpu:2", "cpu", "cpu:7"};
  absl::StatusOr<std::vector<core::DeviceInfo>> devices = SelectDevices(options);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 3u);
  EXPECT_EQ((*devices)[0].id, "cpu:2");
  EXPECT_EQ((*devices)[1].id, "cpu");
  EXPECT_EQ((*devices)[2].id, "cpu:7");
  for (const core::DeviceInfo& device : *devices) {
    EXPECT_EQ(device.kind, core::DeviceKind::kCpu) << device.id;
  }

  // cpu:0 is the CPU itself.
  options.device_ids = {"cpu", "cpu:0"};
  devices = SelectDevices(options);
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(devices.status().message()), HasSubstr("--devices: cpu is listed twice"));
  options.device_ids = {"cpu:1", "cpu:1"};
  devices = SelectDevices(options);
  EXPECT_THAT(std::string(devices.status().message()),
              HasSubstr("--devices: cpu:1 is listed twice"));
  for (const char* bad : {"cpu:", "cpu:-1", "cpu:one"}) {
    options.device_ids = {bad};
    devices = SelectDevices(options);
    EXPECT_EQ(devices.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(devices.status().message()),
                HasSubstr(absl::StrCat("--devices: ", bad, " is not a device here")));
  }
}

TEST(TomodServerTest, WritesThePortFileAndServesHealth) {
  ServerOptions options = TestOptions("port");
  options.port_file = TempDir("port") + "_port";
  auto server = TomodServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  std::ifstream in(options.port_file);
  std::string line;
  std::getline(in, line);
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(line, &port)) << line;
  EXPECT_EQ(port, (*server)->port());
  EXPECT_TRUE(std::filesystem::exists(options.spool_dir + "/jobs"));

  // grpc.health.v1.Health/Check with an empty request: SERVING is field 1 = 1.
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  grpc::ByteBuffer request, response;
  grpc::Slice empty;
  request = grpc::ByteBuffer(&empty, 1);
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                 &response, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes += std::string(s.begin(), s.end());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));
  (*server)->Shutdown();
}

TEST(TomodServerTest, ServesOnAUnixSocket) {
  ServerOptions options = TestOptions("unix");
  const std::string socket = TempDir("unix") + ".sock";
  options.listen = absl::StrCat("unix:", socket);
  auto server = TomodServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->port(), 0);
  auto stub = tomoserve::v1::Reconstruction::NewStub(
      grpc::CreateChannel(options.listen, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  tomoserve::v1::ServerInfo info;
  grpc::Status status = stub->GetServerInfo(&context, {}, &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(info.version().empty());
}

TEST(TomodServerTest, SpoolIsExclusive) {
  ServerOptions options = TestOptions("exclusive");
  auto first = TomodServer::Start(options);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = TomodServer::Start(options);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("in use by another tomod"));
}

TEST(TomodServerTest, RefusesInsecureRemoteAndBadLimits) {
  ServerOptions options = TestOptions("refuse");
  options.listen = "0.0.0.0:0";
  EXPECT_EQ(TomodServer::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = TestOptions("refuse");
  options.limits.max_queue_length = 0;
  EXPECT_THAT(TomodServer::Start(options).status().message(), HasSubstr("--max_queue_length"));
  options = TestOptions("refuse");
  options.max_attempts = 0;
  EXPECT_THAT(TomodServer::Start(options).status().message(),
              HasSubstr("--max_attempts: 0 is out of range [1, 2^32)"));
  options = TestOptions("refuse");
  options.result_ttl = absl::Seconds(-5);
  absl::Status negative = TomodServer::Start(options).status();
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.message(), HasSubstr("--result_ttl: -5s is negative"));
}

TEST(TomodServerTest, PortInUseIsUnavailable) {
  auto first = TomodServer::Start(TestOptions("inuse1"));
  ASSERT_TRUE(first.ok());
  ServerOptions options = TestOptions("inuse2");
  options.listen = absl::StrCat("127.0.0.1:", (*first)->port());
  auto second = TomodServer::Start(options);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

TEST(TomodServerTest, DrainReportsNotServingRefusesSubmitsAndRequeuesTheRunningJob) {
  namespace pb = ::tomoserve::v1;
  ServerOptions options = TestOptions("drain");
  options.drain_timeout = absl::Milliseconds(1500);
  core::AlgorithmRegistry blocking = core::AlgorithmRegistry::WithBuiltins();
  blocking.Register("fbp", std::make_unique<testing::BlockingAlgorithm>());
  auto server = TomodServer::Start(options, std::move(blocking));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto stub = pb::Reconstruction::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  const pb::JobSpec spec = testing::SmallSpec(16, 8, 16);
  const std::string bytes(spec.input().size_bytes(), '\0');
  auto submit = [&](pb::Job* job) {
    grpc::ClientContext context;
    pb::SubmitResponse response;
    auto writer = stub->Submit(&context, &response);
    pb::SubmitRequest request;
    *request.mutable_spec() = spec;
    writer->Write(request);
    request.set_data(bytes);
    writer->Write(request);
    request.mutable_upload_end()->set_total_bytes(bytes.size());
    request.mutable_upload_end()->set_crc32(testing::Crc32(bytes));
    writer->Write(request);
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    *job = response.job();
    return status;
  };
  auto get = [&](const std::string& id) {
    grpc::ClientContext context;
    pb::GetJobRequest request;
    request.set_job_id(id);
    pb::Job job;
    stub->GetJob(&context, request, &job);
    return job;
  };
  pb::Job job;
  ASSERT_TRUE(submit(&job).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (get(job.id()).state() != pb::JOB_STATE_RUNNING && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_EQ(get(job.id()).state(), pb::JOB_STATE_RUNNING);
  ASSERT_EQ(HealthCheck(port), std::string("\x08\x01", 2));

  const absl::Time start = absl::Now();
  std::thread stopper([&] { (*server)->Shutdown("tomod is draining (SIGTERM)"); });
  while (HealthCheck(port) != std::string("\x08\x02", 2) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(HealthCheck(port), std::string("\x08\x02", 2));
  pb::Job refused;
  grpc::Status status = submit(&refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(),
              AllOf(HasSubstr("tomod is draining (SIGTERM)"), HasSubstr("not accepting new jobs")));
  // The running job goes on during the drain, and can be watched and queried.
  EXPECT_EQ(get(job.id()).state(), pb::JOB_STATE_RUNNING);
  stopper.join();
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, options.drain_timeout);
  EXPECT_LT(took, options.drain_timeout + absl::Seconds(8));
  server->reset();

  // The next tomod on the spool runs it to the end, as its first counted attempt.
  server = TomodServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  stub = pb::Reconstruction::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", (*server)->port()), grpc::InsecureChannelCredentials()));
  const absl::Time later = deadline + absl::Seconds(20);
  while (get(job.id()).state() != pb::JOB_STATE_SUCCEEDED && absl::Now() < later) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  pb::Job done = get(job.id());
  EXPECT_EQ(done.state(), pb::JOB_STATE_SUCCEEDED) << done.error();
  EXPECT_EQ(done.attempts(), 1u);
}

TEST(TomodServerTest, RefusesANegativeDrainTimeout) {
  ServerOptions options = TestOptions("negdrain");
  options.drain_timeout = absl::Seconds(-1);
  absl::Status status = TomodServer::Start(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--drain_timeout: -1s is negative"));
}

}  // namespace
}  // namespace tomo::server
