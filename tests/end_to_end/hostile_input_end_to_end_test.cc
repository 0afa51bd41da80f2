// No request, file or full disk may bring tomod down (issue 17), tested on the real tomod:
// Submits whose file sizes sum past 2^64 are refused and tomod keeps serving; absurd
// finite geometry values are refused naming the field; a job whose result is not finite
// ends FAILED; bytes that do not parse are INVALID_ARGUMENT naming the message on every
// method; unknown enum numbers and data after upload_end are refused; the spool lock
// holds after tomod.lock is removed; a job that crashes tomod on each run is failed as
// poison; and on a small tmpfs spool, jobs that do not fit are refused before their data
// is taken, results stay fetchable, DeleteJob works and tomod restarts on the full disk.
#include <grpcpp/generic/generic_stub.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/job_spec_json.h"
#include "client/tomo_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"
#include "tests/end_to_end/daemon_fixture.h"
#include "tests/server/http_get.h"

namespace tomo::testing {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::tomoserve::v1;
using ::testing::HasSubstr;

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();

// A call of `method` (any kind) with these bytes as its one request message, through
// gRPC's generic stub, so that the bytes need not parse on this side. Returns the status
// and, in *reply, the first message the server sent (if any).
grpc::Status CallWithBytes(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                           const std::string& bytes, std::string* reply = nullptr) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  grpc::CompletionQueue queue;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, method, &queue);
  void* tag = nullptr;
  bool ok = false;
  auto next = [&](intptr_t expected) {
    while (queue.Next(&tag, &ok)) {
      if (reinterpret_cast<intptr_t>(tag) == expected) return ok;
    }
    return false;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  next(1);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  next(2);
  call->WritesDone(reinterpret_cast<void*>(3));
  next(3);
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(4));
  if (next(4) && reply != nullptr) {
    std::vector<grpc::Slice> slices;
    (void)response.Dump(&slices);
    reply->clear();
    for (const grpc::Slice& s : slices)
      reply->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  next(5);
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  return status;
}

// The gRPC health service's answer for `service`: 1 SERVING, 2 NOT_SERVING, 0 when the
// call failed (grpc.health.v1.HealthCheckRequest is field 1, the service name).
int HealthOf(const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  std::string request =
      absl::StrCat("\x0a", std::string(1, static_cast<char>(service.size())), service);
  std::string reply;
  grpc::Status status = CallWithBytes(channel, "/grpc.health.v1.Health/Check", request, &reply);
  if (!status.ok() || reply.size() != 2 || reply[0] != 0x08) return 0;
  return reply[1];
}

class HostileInputTest : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    if (HasFatalFailure()) return;
    Connect();
  }

  void TearDown() override {
    client_.reset();
    stub_.reset();
    channel_.reset();
    DaemonTest::TearDown();
  }

  void Connect() {
    channel_ = client::MakeChannel(server(), client::ClientOptions{});
    stub_ = v1::Reconstruction::NewStub(channel_);
    client_ = std::make_unique<client::TomoClient>(channel_);
  }

  void Restart(const std::vector<std::string>& flags = {}) {
    client_.reset();
    stub_.reset();
    channel_.reset();
    StartDaemon(flags);
    Connect();
  }

  // Submit with the raw stub: the spec, data, upload_end (total and CRC of data), then
  // `after_end` when not empty. Returns the call's status.
  grpc::Status RawSubmit(const v1::JobSpec& spec, const std::string& data,
                         const std::string& after_end = "") {
    grpc::ClientContext context;
    v1::SubmitResponse response;
    auto writer = stub_->Submit(&context, &response);
    v1::SubmitRequest request;
    *request.mutable_spec() = spec;
    bool open = writer->Write(request);
    if (open && !data.empty()) {
      request.Clear();
      request.set_data(data);
      open = writer->Write(request);
    }
    if (open) {
      request.Clear();
      request.mutable_upload_end()->set_total_bytes(data.size());
      request.mutable_upload_end()->set_crc32(client::Crc32Update(0, data.data(), data.size()));
      open = writer->Write(request);
    }
    if (open && !after_end.empty()) {
      request.Clear();
      request.set_data(after_end);
      writer->Write(request);
    }
    writer->WritesDone();
    return writer->Finish();
  }

  v1::JobSpec PhantomSpec(const std::string& name, int size, int views) {
    const std::string dir = MakePhantom(name, size, views);
    absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(dir + "/job.json");
    EXPECT_TRUE(spec.ok()) << spec.status();
    phantom_data_ = dir + "/sinogram.raw";
    return spec.ok() ? *spec : v1::JobSpec();
  }

  // Polls until the job has ended (or 120 s).
  v1::Job WaitForEnd(const std::string& id) {
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    while (absl::Now() < deadline) {
      absl::StatusOr<v1::Job> job = client_->GetJob(id);
      if (job.ok() &&
          (job->state() == v1::JOB_STATE_SUCCEEDED || job->state() == v1::JOB_STATE_FAILED ||
           job->state() == v1::JOB_STATE_CANCELLED)) {
        return *job;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    ADD_FAILURE() << "job " << id << " did not end within 120 s";
    return v1::Job();
  }

  // tomod still answers, and has no job directory beyond `jobs`.
  void ExpectServing(size_t jobs = 0) {
    absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
    EXPECT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(JobDirs(spool_dir()).size(), jobs);
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Reconstruction::Stub> stub_;
  std::unique_ptr<client::TomoClient> client_;
  std::string phantom_data_;
};

TEST_F(HostileInputTest, SubmitsWhoseFileSizesWrapAreRefusedAndTomodServes) {
  // DICOM-CT-PD: 1000 + (2^64 - 500) wraps to 500, the bytes actually sent.
  v1::JobSpec dicom;
  dicom.mutable_geometry()->mutable_from_input_files();
  dicom.mutable_volume()->mutable_size()->set_x(16);
  dicom.mutable_volume()->mutable_size()->set_y(16);
  dicom.mutable_volume()->mutable_size()->set_z(2);
  dicom.mutable_volume()->mutable_voxel_size_mm()->set_x(0.7);
  dicom.mutable_volume()->mutable_voxel_size_mm()->set_y(0.7);
  dicom.mutable_input()->set_encoding(v1::DATA_ENCODING_DICOM_CT_PD);
  dicom.mutable_input()->set_size_bytes(500);
  v1::InputFile* a = dicom.mutable_input()->add_files();
  a->set_name("a.dcm");
  a->set_size_bytes(1000);
  v1::InputFile* b = dicom.mutable_input()->add_files();
  b->set_name("b.dcm");
  b->set_size_bytes(kMax64 - 499);
  dicom.mutable_algorithm()->mutable_sirt()->set_iterations(2);
  grpc::Status status = RawSubmit(dicom, std::string(500, 'x'));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("input.files[1].size_bytes"));
  EXPECT_THAT(status.error_message(), HasSubstr("past 2^64 - 1"));
  ExpectServing();

  // Raw float32: 9 views of 1 detector (36 bytes) and a flat field of 2^64 - 36 bytes.
  v1::JobSpec raw;
  v1::ParallelBeam2D* p = raw.mutable_geometry()->mutable_parallel_2d();
  p->set_num_detectors(1);
  p->set_detector_spacing_mm(1);
  p->mutable_angles()->mutable_uniform()->set_count(9);
  p->mutable_angles()->mutable_uniform()->set_span_deg(180);
  raw.mutable_volume()->mutable_size()->set_x(4);
  raw.mutable_volume()->mutable_size()->set_y(4);
  raw.mutable_volume()->mutable_voxel_size_mm()->set_x(1);
  raw.mutable_volume()->mutable_voxel_size_mm()->set_y(1);
  raw.mutable_input()->set_encoding(v1::DATA_ENCODING_FLOAT32_LE);
  v1::InputFile* projections = raw.mutable_input()->add_files();
  projections->set_name("p.raw");
  projections->set_size_bytes(36);
  v1::InputFile* flat = raw.mutable_input()->add_files();
  flat->set_name("flat.raw");
  flat->set_size_bytes(kMax64 - 35);
  flat->set_role(v1::INPUT_ROLE_FLAT_FIELD);
  raw.mutable_input()->set_size_bytes(0);  // the wrapped sum
  raw.mutable_algorithm()->mutable_fbp();
  status = RawSubmit(raw, "");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("input.files[1].size_bytes"));
  ExpectServing();

  // And a good job still runs to the end.
  v1::JobSpec good = PhantomSpec("phantom", 32, 24);
  absl::StatusOr<v1::Job> job = client_->Submit(good, {phantom_data_});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(WaitForEnd(job->id()).state(), v1::JOB_STATE_SUCCEEDED);
}

TEST_F(HostileInputTest, AbsurdFiniteValuesAreRefusedNamingTheField) {
  const v1::JobSpec base = PhantomSpec("phantom", 32, 24);
  const std::string data = FileBytes(phantom_data_);
  struct Case {
    std::function<void(v1::JobSpec&)> set;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](v1::JobSpec& s) {
         s.mutable_geometry()->mutable_parallel_2d()->set_detector_spacing_mm(1e308);
       },
       "geometry.parallel_2d.detector_spacing_mm: 1e+308 is out of range [1e-05, 1000] mm"},
      {[](v1::JobSpec& s) {
         s.mutable_geometry()->mutable_parallel_2d()->set_detector_spacing_mm(5e-324);
       },
       "geometry.parallel_2d.detector_spacing_mm: 4.94066e-324 is out of range"},
      {[](v1::JobSpec& s) {
         s.mutable_geometry()->mutable_parallel_2d()->set_detector_offset_mm(1e300);
       },
       "geometry.parallel_2d.detector_offset_mm: 1e+300 is out of range"},
      {[](v1::JobSpec& s) { s.mutable_volume()->mutable_voxel_size_mm()->set_x(1e300); },
       "volume.voxel_size_mm.x: 1e+300 is out of range [1e-05, 1000] mm"},
      {[](v1::JobSpec& s) { s.mutable_volume()->mutable_center_mm()->set_y(1e300); },
       "volume.center_mm.y: 1e+300 is out of range [-100000, 100000] mm"},
  };
  ASSERT_TRUE(base.geometry().has_parallel_2d()) << base.DebugString();
  for (const Case& c : cases) {
    v1::JobSpec spec = base;
    c.set(spec);
    grpc::Status status = RawSubmit(spec, data);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field;
    EXPECT_THAT(status.error_message(), HasSubstr(c.field));
  }
  ExpectServing();
}

TEST_F(HostileInputTest, AJobWhoseResultIsNotFiniteEndsFailed) {
  v1::JobSpec spec = PhantomSpec("phantom", 32, 24);
  // Finite projections whose filtered sums overflow float32.
  const size_t values = spec.input().size_bytes() / 4;
  std::string data(values * 4, '\0');
  std::mt19937 random(static_cast<uint32_t>(TestSeed()));
  for (size_t i = 0; i < values; ++i) {
    const float value =
        (i % 2 == 0 ? 1.0f : -1.0f) * (3.0e38f + static_cast<float>(random() % 1000) * 1e34f);
    std::memcpy(&data[4 * i], &value, 4);
  }
  const std::string path = dir() + "/huge.raw";
  WriteBytes(path, data);
  absl::StatusOr<v1::Job> job = client_->Submit(spec, {path});
  ASSERT_TRUE(job.ok()) << job.status();
  const v1::Job ended = WaitForEnd(job->id());
  EXPECT_EQ(ended.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(ended.error(), HasSubstr("the reconstructed volume is not finite"));
  EXPECT_EQ(ended.results_size(), 0);
}

TEST_F(HostileInputTest, BytesThatDoNotParseAreInvalidArgumentOnEveryMethod) {
  // Field 1 (length-delimited) with a length that runs past the end.
  const std::string garbage("\x0a\xff\xff\xff\xff\x0f\x01", 7);
  const std::vector<std::pair<std::string, std::string>> methods = {
      {"Submit", "SubmitRequest"},
      {"SubmitStripe", "SubmitStripeRequest"},
      {"GetJob", "GetJobRequest"},
      {"ListJobs", "ListJobsRequest"},
      {"WatchJob", "WatchJobRequest"},
      {"CancelJob", "CancelJobRequest"},
      {"DeleteJob", "DeleteJobRequest"},
      {"FetchResult", "FetchResultRequest"},
      {"GetServerInfo", "GetServerInfoRequest"}};
  for (const auto& [method, message] : methods) {
    grpc::Status status =
        CallWithBytes(channel_, absl::StrCat("/tomoserve.v1.Reconstruction/", method), garbage);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << status.error_code() << " " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(absl::StrCat(message, ": not a valid message")))
        << method;
  }
  // A string that is not UTF-8 does not parse either (proto3).
  v1::GetJobRequest request;
  std::string bytes = request.SerializeAsString() + std::string("\x0a\x02\xc3\x28", 4);
  grpc::Status status = CallWithBytes(channel_, "/tomoserve.v1.Reconstruction/GetJob", bytes);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  ExpectServing();
  // protobuf's complaint about the string went into tomod's log as JSON, like every line.
  const std::string log = ReadFileOrEmpty(tomod_log());
  EXPECT_THAT(log, HasSubstr("\"event\":\"protobuf\""));
  for (const std::string& line : SplitLines(log)) {
    if (!line.empty()) EXPECT_EQ(line.front(), '{') << line;
  }
}

TEST_F(HostileInputTest, UnknownStatesAndDataAfterUploadEndAreRefused) {
  grpc::ClientContext context;
  v1::ListJobsRequest list;
  list.add_states(static_cast<v1::JobState>(42));
  v1::ListJobsResponse listed;
  grpc::Status status = stub_->ListJobs(&context, list, &listed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("states[0]: 42 is not a job state"));

  const v1::JobSpec spec = PhantomSpec("phantom", 32, 24);
  const std::string data = FileBytes(phantom_data_);
  status = RawSubmit(spec, data, "more bytes after the end");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("a message after upload_end"));
  absl::StatusOr<std::vector<v1::Job>> jobs = client_->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_TRUE(jobs->empty());
  // Without anything after upload_end the same upload is a job.
  EXPECT_TRUE(RawSubmit(spec, data).ok());
}

TEST_F(HostileInputTest, TheSpoolLockHoldsAfterTomodLockIsRemoved) {
  ASSERT_TRUE(fs::exists(spool_dir() + "/tomod.lock"));
  fs::remove(spool_dir() + "/tomod.lock");
  ChildProcess second;
  ASSERT_TRUE(second
                  .Start({BinaryPath("tomod", TOMOD_BINARY), "--listen=127.0.0.1:0",
                          "--spool_dir=" + spool_dir(), "--metrics_port=0",
                          "--port_file=" + dir() + "/second.port"},
                         dir() + "/second.out", dir() + "/second.err")
                  .ok());
  std::optional<int> code = second.Wait(absl::Seconds(30));
  ASSERT_TRUE(code.has_value()) << "a second tomod runs on the spool";
  EXPECT_NE(*code, 0);
  EXPECT_THAT(ReadFileOrEmpty(dir() + "/second.err"), HasSubstr("in use by another tomod"));
  ExpectServing();
}

TEST_F(HostileInputTest, AJobThatCrashesTomodOnEachRunIsFailedAsPoison) {
  ASSERT_EQ(StopDaemon(), 0);
  const std::vector<std::string> flags = {"--testing_crash_on_job_name=poison", "--max_attempts=2"};
  Restart(flags);
  v1::JobSpec poison = PhantomSpec("phantom", 32, 24);
  poison.set_name("poison");
  v1::JobSpec innocent = poison;
  innocent.set_name("innocent");
  absl::StatusOr<v1::Job> bad = client_->Submit(poison, {phantom_data_});
  ASSERT_TRUE(bad.ok()) << bad.status();
  // (The jobs a crash interrupts beside the culprit, which needs several workers, are
  // tested in job_manager_test's CrashLogChargesOnlyTheJobThatCrashedTomod.)
  std::optional<int> code = WaitForDaemonExit(absl::Seconds(60));
  ASSERT_TRUE(code.has_value()) << "run 1 did not crash tomod";
  EXPECT_EQ(*code, 128 + SIGABRT);
  // Run 2 starts as tomod starts (the job is queued again), before it listens.
  ChildProcess second;
  std::vector<std::string> argv = {BinaryPath("tomod", TOMOD_BINARY), "--listen=127.0.0.1:0",
                                   "--spool_dir=" + spool_dir(), "--metrics_port=0"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  ASSERT_TRUE(second.Start(argv, dir() + "/run2.out", dir() + "/run2.err").ok());
  code = second.Wait(absl::Seconds(60));
  ASSERT_TRUE(code.has_value()) << "run 2 did not crash tomod";
  EXPECT_EQ(*code, 128 + SIGABRT) << ReadFileOrEmpty(dir() + "/run2.err");
  // The third start fails the job instead of running it.
  Restart(flags);
  const v1::Job failed = WaitForEnd(bad->id());
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.error(), HasSubstr("crashed tomod's worker process (SIGABRT) in each of "
                                        "its 2 runs; it is failed as poison"));
  EXPECT_THAT(ReadFileOrEmpty(spool_dir() + "/crashes"), HasSubstr("#start"));
  // tomod serves on: another job runs to the end.
  absl::StatusOr<v1::Job> good = client_->Submit(innocent, {phantom_data_});
  ASSERT_TRUE(good.ok()) << good.status();
  const v1::Job succeeded = WaitForEnd(good->id());
  EXPECT_EQ(succeeded.state(), v1::JOB_STATE_SUCCEEDED) << succeeded.error();
  EXPECT_EQ(succeeded.attempts(), 1u);
}

// A small file system of its own for the spool: a tmpfs mounted here when root (as CI
// is); without the right to mount, this case cannot make a full disk and is skipped
// saying so.
class FullDiskTest : public HostileInputTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(StopDaemon(), 0);
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs for the spool";
    fs::remove_all(spool_dir());
    fs::create_directories(spool_dir());
    if (::mount("tomo-test", spool_dir().c_str(), "tmpfs", 0, "size=16m") != 0) {
      const int err = errno;
      // Root without CAP_SYS_ADMIN (some containers) cannot mount either.
      if (err == EPERM) GTEST_SKIP() << "cannot mount a tmpfs here (EPERM, no CAP_SYS_ADMIN)";
      FAIL() << "mount tmpfs on " << spool_dir() << ": " << std::strerror(err);
    }
    mounted_ = true;
    metrics_port_ = FreeLoopbackPort();
    flags_.push_back(absl::StrCat("--metrics_port=", metrics_port_));
    Restart(flags_);
  }

  // tomod_spool_degraded as scraped from /metrics (-1 when the scrape failed).
  double Degraded() {
    absl::StatusOr<HttpResponse> response = HttpGet("127.0.0.1", metrics_port_, "/metrics");
    if (!response.ok() || response->status != 200) return -1;
    const std::map<std::string, double> samples = ParseSamples(response->body);
    auto it = samples.find("tomod_spool_degraded");
    return it == samples.end() ? -1 : it->second;
  }

  void TearDown() override {
    if (mounted_) {
      HostileInputTest::TearDown();  // stops tomod first
      ::umount2(spool_dir().c_str(), MNT_DETACH);
      return;
    }
    HostileInputTest::TearDown();
  }

  // Writes zeros to path until the file system is full (or limit bytes).
  static void Fill(const std::string& path, uint64_t limit = ~0ull) {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    const std::string block(64 << 10, '\0');
    uint64_t written = 0;
    while (written < limit &&
           out.write(block.data(), static_cast<std::streamsize>(
                                       std::min<uint64_t>(block.size(), limit - written)))) {
      written += std::min<uint64_t>(block.size(), limit - written);
      out.flush();
      if (!out) break;
    }
  }

  static uint64_t FreeBytes(const std::string& path) { return fs::space(path).available; }

  bool mounted_ = false;
  int metrics_port_ = 0;
  std::vector<std::string> flags_ = {"--min_free_spool_bytes=2097152",
                                     "--spool_reserve_bytes=1048576"};
};

TEST_F(FullDiskTest, JobsThatDoNotFitAreRefusedAndTomodServesReadsDeletesAndRestarts) {
  // Two jobs finish while there is room.
  EXPECT_EQ(Degraded(), 0);
  v1::JobSpec spec = PhantomSpec("phantom", 64, 48);
  absl::StatusOr<v1::Job> first = client_->Submit(spec, {phantom_data_});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(WaitForEnd(first->id()).state(), v1::JOB_STATE_SUCCEEDED);
  absl::StatusOr<v1::Job> second = client_->Submit(spec, {phantom_data_});
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(WaitForEnd(second->id()).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(fs::exists(spool_dir() + "/reserve.runtime"));
  EXPECT_TRUE(fs::exists(spool_dir() + "/reserve.startup"));

  // Leave room for less than the next job's input and outputs beyond the 2 MiB margin.
  const uint64_t free_now = FreeBytes(spool_dir());
  const uint64_t need = spec.input().size_bytes() + 64 * 64 * 4;
  ASSERT_GT(free_now, (2u << 20) + need);
  Fill(spool_dir() + "/filler", free_now - (2u << 20) - need / 2);
  absl::StatusOr<v1::Job> refused = client_->Submit(spec, {phantom_data_});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("spool file system is full: the job needs"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("bytes free"));
  EXPECT_EQ(JobDirs(spool_dir()).size(), 2u) << "the refused job left files";

  // Now fill it to the last byte: degraded, but reads and deletes are served.
  Fill(spool_dir() + "/filler");
  EXPECT_LT(FreeBytes(spool_dir()), 64u << 10);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (HealthOf(channel_, "tomoserve.v1.Reconstruction.admission") != 2 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(HealthOf(channel_, "tomoserve.v1.Reconstruction.admission"), 2);
  EXPECT_EQ(HealthOf(channel_, "tomoserve.v1.Reconstruction"), 1);
  EXPECT_EQ(Degraded(), 1);
  absl::StatusOr<v1::ResultFile> fetched = client_->Fetch(first->id(), "", dir() + "/volume.raw");
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fs::file_size(dir() + "/volume.raw"), 64u * 64u * 4u);
  absl::Status deleted = client_->Delete(second->id());
  EXPECT_TRUE(deleted.ok()) << deleted;
  EXPECT_EQ(JobDirs(spool_dir()).size(), 1u);
  Fill(spool_dir() + "/filler");  // what the delete freed

  // Restart on the full disk.
  ASSERT_EQ(StopDaemon(), 0);
  Restart(flags_);
  deleted = client_->Delete(first->id());
  EXPECT_TRUE(deleted.ok()) << deleted;
  EXPECT_TRUE(JobDirs(spool_dir()).empty());

  // Room again: admission serves, a job runs.
  fs::remove(spool_dir() + "/filler");
  const absl::Time later = absl::Now() + absl::Seconds(10);
  while (HealthOf(channel_, "tomoserve.v1.Reconstruction.admission") != 1 && absl::Now() < later) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(Degraded(), 0);
  absl::StatusOr<v1::Job> again = client_->Submit(spec, {phantom_data_});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(WaitForEnd(again->id()).state(), v1::JOB_STATE_SUCCEEDED);
}

}  // namespace
}  // namespace tomo::testing
