// Uploads that hold tomod's resources, end to end with the real tomod over loopback: a
// stalled upload is ended after --upload_idle_timeout and its room released; an upload
// reserves the spool as its bytes arrive, not its declared size up front; one client's
// uploads in progress are bounded by --max_uploads_per_client; and a SIGTERM during a CPU
// cone-beam run stops tomod within the documented bound.
#include <grpcpp/grpcpp.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/job_spec_json.h"
#include "client/tomo_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/end_to_end/daemon_fixture.h"
#include "tomoserve/v1/tomoserve.grpc.pb.h"

namespace tomo::testing {
namespace {

namespace v1 = ::tomoserve::v1;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = uint64_t{1} << 20;

// A parallel-beam FBP job of `views` views of 1024 detectors onto a 16 x 16 image (outputs
// of a few KiB): its input is views x 4 KiB.
v1::JobSpec WideSpec(uint32_t views) {
  v1::JobSpec spec;
  spec.set_name("wide");
  auto* geometry = spec.mutable_geometry()->mutable_parallel_2d();
  geometry->set_num_detectors(1024);
  geometry->set_detector_spacing_mm(0.7);
  geometry->mutable_angles()->mutable_uniform()->set_count(views);
  geometry->mutable_angles()->mutable_uniform()->set_span_deg(180);
  spec.mutable_volume()->mutable_size()->set_x(16);
  spec.mutable_volume()->mutable_size()->set_y(16);
  spec.mutable_volume()->mutable_size()->set_z(1);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_x(2.5);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_y(2.5);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_z(2.5);
  spec.mutable_input()->set_encoding(v1::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(uint64_t{views} * 1024 * 4);
  spec.mutable_algorithm()->mutable_fbp();
  spec.add_outputs(v1::OUTPUT_FORMAT_RAW_FLOAT32);
  return spec;
}

// One Submit stream driven by hand: the spec, then data as asked, then (maybe) upload_end.
class RawUpload {
 public:
  RawUpload(v1::Reconstruction::Stub& stub, const v1::JobSpec& spec, absl::Duration deadline)
      : spec_(spec) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    writer_ = stub.Submit(&context_, &response_);
    v1::SubmitRequest request;
    *request.mutable_spec() = spec;
    open_ = writer_->Write(request);
  }
  // Sends bytes (random: a CRC-checked upload of zeros would prove little); false once the
  // stream is closed.
  bool Send(uint64_t bytes, std::mt19937_64& random) {
    std::string data(bytes, '\0');
    for (char& c : data) c = static_cast<char>(random());
    crc_ = client::Crc32Update(crc_, data.data(), data.size());
    sent_ += bytes;
    v1::SubmitRequest request;
    request.set_data(std::move(data));
    open_ = open_ && writer_->Write(request);
    return open_;
  }
  // upload_end (when the stream is still open), then the call's status.
  grpc::Status End() {
    if (open_) {
      v1::SubmitRequest request;
      request.mutable_upload_end()->set_total_bytes(sent_);
      request.mutable_upload_end()->set_crc32(crc_);
      writer_->Write(request);
      writer_->WritesDone();
    }
    return writer_->Finish();
  }
  // The call's status without upload_end (waits for tomod to end it).
  grpc::Status Wait() { return writer_->Finish(); }
  void Cancel() { context_.TryCancel(); }
  const v1::SubmitResponse& response() const { return response_; }

 private:
  v1::JobSpec spec_;
  grpc::ClientContext context_;
  v1::SubmitResponse response_;
  std::unique_ptr<grpc::ClientWriter<v1::SubmitRequest>> writer_;
  bool open_ = false;
  uint64_t sent_ = 0;
  uint32_t crc_ = 0;
};

class UploadLimitsTest : public DaemonTest {
 public:  // for the helpers below
  void Restart(const std::vector<std::string>& flags) {
    stub_.reset();
    client_.reset();
    channel_.reset();
    ASSERT_EQ(StopDaemon(), 0);
    StartDaemon(flags);
    ASSERT_FALSE(HasFatalFailure());
    channel_ = client::MakeChannel(server(), client::ClientOptions{});
    stub_ = v1::Reconstruction::NewStub(channel_);
    client_ = std::make_unique<client::TomoClient>(channel_);
  }
  void TearDown() override {
    stub_.reset();
    client_.reset();
    channel_.reset();
    DaemonTest::TearDown();
  }

  // Jobs tomod lists in state.
  size_t JobsIn(v1::JobState state) {
    absl::StatusOr<std::vector<v1::Job>> jobs = client_->ListJobs({state});
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    return jobs.ok() ? jobs->size() : 0;
  }
  // Polls until exactly `count` jobs are UPLOADING (tomod has taken their specs, or ended
  // the others: a call's client may see its end before tomod has removed the job), at most
  // 30 s.
  void WaitForUploading(size_t count) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (JobsIn(v1::JOB_STATE_UPLOADING) != count && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_EQ(JobsIn(v1::JOB_STATE_UPLOADING), count);
  }
  // tomod's threads now (entries of /proc/<pid>/task).
  int TomodThreads() {
    int threads = 0;
    std::error_code error;
    for (std::filesystem::directory_iterator it(absl::StrCat("/proc/", tomod_pid(), "/task"),
                                                error);
         !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
      ++threads;
    }
    return threads;
  }
  uint64_t SpoolUsedBytes() {
    absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->spool_used_bytes() : 0;
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Reconstruction::Stub> stub_;
  std::unique_ptr<client::TomoClient> client_;
};

// An upload that sends its spec and 4 KiB and then nothing is ended after the idle time:
// the call fails, the job is gone and its room on the spool is free again.
TEST_F(UploadLimitsTest, AStalledUploadIsEndedAfterTheIdleTimeAndItsRoomReleased) {
  std::mt19937_64 random(std::random_device{}());
  Restart({"--devices=cpu", "--upload_idle_timeout=1s"});
  RawUpload stalled(*stub_, WideSpec(2048), absl::Seconds(30));  // declares 8 MiB
  ASSERT_TRUE(stalled.Send(4096, random));
  WaitForUploading(1);
  EXPECT_GT(SpoolUsedBytes(), 0u);
  const absl::Time start = absl::Now();
  const grpc::Status status = stalled.Wait();
  const absl::Duration waited = absl::Now() - start;
  // Ended by tomod (the client's own deadline is 30 s), within a few idle times.
  EXPECT_NE(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_NE(status.error_code(), grpc::StatusCode::OK);
  EXPECT_LT(waited, absl::Seconds(10));
  WaitForUploading(0);
  EXPECT_EQ(SpoolUsedBytes(), 0u);
  EXPECT_THAT(FileBytes(tomod_log()),
              AllOf(HasSubstr("--upload_idle_timeout"), HasSubstr("after 4096 bytes")));
  // An upload that keeps sending, slower than the idle time in total but never idle that
  // long, is not ended.
  RawUpload steady(*stub_, WideSpec(16), absl::Seconds(30));
  for (int i = 0; i < 16; ++i) {
    absl::SleepFor(absl::Milliseconds(150));
    ASSERT_TRUE(steady.Send(4096, random)) << "chunk " << i;
  }
  const grpc::Status ended = steady.End();
  EXPECT_TRUE(ended.ok()) << ended.error_message();
  EXPECT_EQ(steady.response().job().state(), v1::JOB_STATE_QUEUED);
}

// An upload that declares most of --max_spool_bytes and sends 4 KiB holds only its first
// reservation step (8 MiB), so another client's job still fits; when the first upload then
// sends the rest and no longer fits, it fails naming the limit.
TEST_F(UploadLimitsTest, AnUploadReservesTheSpoolAsItsBytesArriveNotItsDeclaredSize) {
  std::mt19937_64 random(std::random_device{}());
  Restart({"--devices=cpu", absl::StrCat("--max_spool_bytes=", 48 * kMiB)});
  RawUpload large(*stub_, WideSpec(10240), absl::Seconds(120));  // declares 40 MiB
  ASSERT_TRUE(large.Send(4096, random));
  WaitForUploading(1);
  const uint64_t held = SpoolUsedBytes();
  EXPECT_GE(held, 8 * kMiB);
  EXPECT_LT(held, 9 * kMiB) << "the whole declared input is reserved up front";

  RawUpload other(*stub_, WideSpec(6144), absl::Seconds(120));  // 24 MiB
  for (int i = 0; i < 24; ++i) ASSERT_TRUE(other.Send(kMiB, random)) << "MiB " << i;
  const grpc::Status committed = other.End();
  ASSERT_TRUE(committed.ok()) << committed.error_message();
  EXPECT_EQ(other.response().job().state(), v1::JOB_STATE_QUEUED);

  // 40 + 24 MiB do not fit 48: the first upload fails as its reservation grows.
  bool open = true;
  for (int i = 0; i < 40 && open; ++i) open = large.Send(kMiB, random);
  const grpc::Status refused = large.End();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), AllOf(HasSubstr("--max_spool_bytes"),
                                             HasSubstr(absl::StrCat("of its ", 40 * kMiB))));
  WaitForUploading(0);
}

// `count` uploads of `views` x 4 KiB that send their spec and 4 KiB and then stall hold no
// thread of tomod's each (before, each held its writer's threads until reaped: 3 for a
// ChunkWriter, 8 for a MappedFileWriter): tomod's thread count falls back to within 20 of
// what it was before they came. The idle reaper still ends every one of them, and an
// upload after them succeeds. extra_flags go to tomod.
void StalledUploadsHoldNoThread(UploadLimitsTest& test, int count, uint32_t views,
                                const std::vector<std::string>& extra_flags) {
  constexpr int kSlack = 20;
  std::mt19937_64 random(std::random_device{}());
  std::vector<std::string> flags = {"--devices=cpu", "--upload_idle_timeout=15s",
                                    absl::StrCat("--max_uploads_per_client=", count + 10)};
  flags.insert(flags.end(), extra_flags.begin(), extra_flags.end());
  test.Restart(flags);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  v1::Reconstruction::Stub& stub = *test.stub_;
  // A first upload and its job make tomod start whatever it starts on first use (random
  // bytes: the job may fail on a value that is not finite, which does not matter here).
  {
    RawUpload first(stub, WideSpec(16), absl::Seconds(30));
    for (int i = 0; i < 16; ++i) ASSERT_TRUE(first.Send(4096, random));
    const grpc::Status status = first.End();
    ASSERT_TRUE(status.ok()) << status.error_message();
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    absl::StatusOr<v1::Job> job = test.client_->GetJob(first.response().job().id());
    while (job.ok() && !client::IsFinal(job->state()) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
      job = test.client_->GetJob(first.response().job().id());
    }
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_TRUE(client::IsFinal(job->state())) << job->DebugString();
  }
  absl::SleepFor(absl::Seconds(1));
  const int before = test.TomodThreads();
  ASSERT_GT(before, 0);
  const uint64_t spool_before = test.SpoolUsedBytes();  // the first job's files

  std::vector<std::unique_ptr<RawUpload>> stalled;
  for (int i = 0; i < count; ++i) {
    stalled.push_back(std::make_unique<RawUpload>(stub, WideSpec(views), absl::Seconds(60)));
    ASSERT_TRUE(stalled.back()->Send(4096, random)) << "upload " << i;
  }
  const absl::Time last_sent = absl::Now();
  test.WaitForUploading(count);
  int threads = test.TomodThreads();
  int most = threads;
  while (threads >= before + kSlack && absl::Now() < last_sent + absl::Seconds(8)) {
    absl::SleepFor(absl::Milliseconds(50));
    threads = test.TomodThreads();
    most = std::max(most, threads);
  }
  EXPECT_LT(threads, before + kSlack)
      << count << " stalled uploads: tomod runs " << threads << " threads, " << before
      << " before them (at most " << most << " meanwhile)";
  std::printf("tomod's threads: %d before %d stalled uploads of %u views, %d with them (at "
              "most %d)\n",
              before, count, views, threads, most);
  EXPECT_EQ(test.JobsIn(v1::JOB_STATE_UPLOADING), static_cast<size_t>(count))
      << "uploads were ended before the count was taken";

  // The reaper ends them all after --upload_idle_timeout.
  for (std::unique_ptr<RawUpload>& upload : stalled) {
    const grpc::Status status = upload->Wait();
    EXPECT_NE(status.error_code(), grpc::StatusCode::OK);
    EXPECT_NE(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  }
  stalled.clear();
  test.WaitForUploading(0);
  EXPECT_EQ(test.SpoolUsedBytes(), spool_before);

  RawUpload after(stub, WideSpec(64), absl::Seconds(30));
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(after.Send(4096, random)) << "chunk " << i;
  const grpc::Status committed = after.End();
  EXPECT_TRUE(committed.ok()) << committed.error_message();
  EXPECT_EQ(after.response().job().state(), v1::JOB_STATE_QUEUED);
}

// 200 small uploads (each written by a ChunkWriter: 3 threads each before).
TEST_F(UploadLimitsTest, StalledUploadsHoldNoThreadAndAreStillReaped) {
  StalledUploadsHoldNoThread(*this, 200, 16, {});
}

// 60 uploads declaring 64 MiB into a spool on tmpfs (each written through a
// MappedFileWriter: 8 threads each before).
TEST_F(UploadLimitsTest, LargeStalledUploadsOnATmpfsSpoolHoldNoThread) {
  struct statfs shm {};
  if (::statfs("/dev/shm", &shm) != 0 || shm.f_type != TMPFS_MAGIC) {
    GTEST_SKIP() << "/dev/shm is not tmpfs here";
  }
  const std::string spool = absl::StrCat("/dev/shm/tomo-e2e-stalled-", ::getpid());
  absl::Cleanup remove_spool = [this, &spool] {
    stub_.reset();
    client_.reset();
    channel_.reset();
    EXPECT_EQ(StopDaemon(), 0);
    std::error_code ignored;
    std::filesystem::remove_all(spool, ignored);
  };
  StalledUploadsHoldNoThread(*this, 60, 16384, {"--spool_dir=" + spool});
}

// One client's uploads in progress are bounded; ending one makes room for the next.
TEST_F(UploadLimitsTest, UploadsInProgressPerClientAreBounded) {
  std::mt19937_64 random(std::random_device{}());
  Restart({"--devices=cpu", "--max_uploads_per_client=2"});
  RawUpload first(*stub_, WideSpec(64), absl::Seconds(60));
  RawUpload second(*stub_, WideSpec(64), absl::Seconds(60));
  WaitForUploading(2);
  RawUpload third(*stub_, WideSpec(64), absl::Seconds(60));
  const grpc::Status refused = third.Wait();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(),
              AllOf(HasSubstr("--max_uploads_per_client"), HasSubstr("2 uploads in progress")));
  first.Cancel();
  first.Wait();
  WaitForUploading(1);
  RawUpload fourth(*stub_, WideSpec(64), absl::Seconds(60));
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(fourth.Send(4096, random));
  const grpc::Status committed = fourth.End();
  EXPECT_TRUE(committed.ok()) << committed.error_message();
  second.Cancel();
  second.Wait();
}

// A SIGTERM while a CPU cone-beam job is in its back projection: with --drain_timeout=0s
// the run is stopped at its next cancellation point (every 32 views on the CPU), so tomod
// exits 0 well within the bound deploy/README.md documents (drain + 10 s), and the job is
// QUEUED again after the restart.
TEST_F(UploadLimitsTest, SigtermDuringACpuConeBackProjectionStopsWithinTheDocumentedBound) {
  // The values do not matter here, only the run's length: zeros, not an analytic phantom
  // (its projections would take longer to make than the whole test).
  const uint32_t n = 160, views = 360, pixels = 128;
  v1::JobSpec spec;
  spec.set_name("cone to stop");
  v1::ConeBeam* cone = spec.mutable_geometry()->mutable_cone();
  cone->mutable_detector()->set_rows(pixels);
  cone->mutable_detector()->set_columns(pixels);
  cone->mutable_detector()->set_row_spacing_mm(1.0);
  cone->mutable_detector()->set_column_spacing_mm(1.0);
  cone->set_source_origin_mm(240);
  cone->set_origin_detector_mm(80);
  cone->mutable_angles()->mutable_uniform()->set_count(views);
  cone->mutable_angles()->mutable_uniform()->set_span_deg(360);
  spec.mutable_volume()->mutable_size()->set_x(n);
  spec.mutable_volume()->mutable_size()->set_y(n);
  spec.mutable_volume()->mutable_size()->set_z(n);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_x(0.5);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_y(0.5);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_z(0.5);
  spec.mutable_input()->set_encoding(v1::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(uint64_t{views} * pixels * pixels * 4);
  spec.mutable_algorithm()->mutable_fbp();
  spec.add_outputs(v1::OUTPUT_FORMAT_RAW_FLOAT32);
  const std::string data = dir() + "/zeros.raw";
  {
    std::ofstream out(data, std::ios::binary);
    const std::string zeros(spec.input().size_bytes(), '\0');
    out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
    ASSERT_TRUE(out.good());
  }
  Restart({"--devices=cpu", "--drain_timeout=0s"});
  absl::StatusOr<v1::Job> submitted = client_->Submit(spec, {data});
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->id();
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  absl::StatusOr<v1::Job> job = client_->GetJob(id);
  while (job.ok() && !(job->state() == v1::JOB_STATE_RUNNING &&
                       job->progress().stage() == "back projection") &&
         job->state() != v1::JOB_STATE_SUCCEEDED && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
    job = client_->GetJob(id);
  }
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->state(), v1::JOB_STATE_RUNNING) << "the job was not caught back projecting";
  stub_.reset();
  client_.reset();
  channel_.reset();
  const absl::Time stop = absl::Now();
  ASSERT_EQ(StopDaemon(absl::Seconds(60)), 0);
  const absl::Duration stopped_in = absl::Now() - stop;
  EXPECT_LT(stopped_in, absl::Seconds(10)) << "drain 0 s + grace 5 s + margin 5 s";
  StartDaemon({"--devices=cpu", "--drain_timeout=0s"});
  ASSERT_FALSE(HasFatalFailure());
  client::TomoClient client(server());
  absl::StatusOr<v1::Job> requeued = client.GetJob(id);
  ASSERT_TRUE(requeued.ok()) << requeued.status();
  EXPECT_NE(requeued->state(), v1::JOB_STATE_FAILED) << requeued->error();
  EXPECT_EQ(requeued->attempts(), requeued->state() == v1::JOB_STATE_QUEUED ? 0u : 1u);
  ASSERT_EQ(client.Cancel(id).status().code(), absl::StatusCode::kOk);
}

}  // namespace
}  // namespace tomo::testing
