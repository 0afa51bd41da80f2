// Uploads that go wrong, driven through the raw gRPC stub against the real tomod: a
// truncated upload (cancelled, or closed without its UploadEnd), a wrong checksum, a wrong
// total, data before the spec. None may leave a job (or spool files) behind, and the
// daemon goes on accepting good uploads, here through the client library.
#include <filesystem>
#include <string>
#include <vector>

#include "client/job_spec_json.h"
#include "client/tomo_client.h"
#include "gtest/gtest.h"
#include "tests/end_to_end/daemon_fixture.h"

namespace tomo::testing {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::tomoserve::v1;

class UploadTest : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    if (HasFatalFailure()) return;
    phantom_ = MakePhantom("phantom", 128, 180);
    absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(phantom_ + "/job.json");
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    data_ = FileBytes(phantom_ + "/sinogram.raw");
    ASSERT_EQ(data_.size(), spec_.input().size_bytes());
    channel_ = client::MakeChannel(server(), client::ClientOptions{});
    stub_ = v1::Reconstruction::NewStub(channel_);
  }

  void TearDown() override {
    // No connection of ours stays open while tomod shuts down.
    stub_.reset();
    channel_.reset();
    DaemonTest::TearDown();
  }

  // Writes the spec and then data_[begin, end) in 64 KiB chunks; false when a write failed
  // (the server ended the call).
  bool WriteSpecAndData(grpc::ClientWriter<v1::SubmitRequest>& writer, size_t begin,
                        size_t end) {
    v1::SubmitRequest request;
    *request.mutable_spec() = spec_;
    if (!writer.Write(request)) return false;
    for (size_t at = begin; at < end; at += 64 << 10) {
      request.Clear();
      request.set_data(data_.substr(at, std::min<size_t>(64 << 10, end - at)));
      if (!writer.Write(request)) return false;
    }
    return true;
  }

  // The daemon has no job and no job files: at once, or within a few seconds for a call
  // whose cancellation it learns asynchronously.
  void ExpectNoJobLeft(const std::string& what) {
    client::TomoClient client(channel_);
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (true) {
      absl::StatusOr<std::vector<v1::Job>> jobs = client.ListJobs();
      ASSERT_TRUE(jobs.ok()) << jobs.status();
      const bool clean = jobs->empty() && JobDirs(spool_dir()).empty();
      if (clean) return;
      if (absl::Now() > deadline) {
        FAIL() << what << " left " << jobs->size() << " job(s) and " << JobDirs(spool_dir()).size()
               << " job directories in the spool";
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  std::string phantom_;
  v1::JobSpec spec_;
  std::string data_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Reconstruction::Stub> stub_;
};

TEST_F(UploadTest, CancelledHalfwayLeavesNoJob) {
  grpc::ClientContext context;
  v1::SubmitResponse response;
  auto writer = stub_->Submit(&context, &response);
  ASSERT_TRUE(WriteSpecAndData(*writer, 0, data_.size() / 2));
  // Let the server take the chunks before the call goes away.
  absl::SleepFor(absl::Milliseconds(300));
  context.TryCancel();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  ExpectNoJobLeft("a cancelled upload");
}

TEST_F(UploadTest, ClosedWithoutUploadEndLeavesNoJob) {
  grpc::ClientContext context;
  v1::SubmitResponse response;
  auto writer = stub_->Submit(&context, &response);
  WriteSpecAndData(*writer, 0, data_.size() / 2);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_FALSE(status.ok());
  std::cout << "no upload_end: " << status.error_code() << " " << status.error_message() << "\n";
  ExpectNoJobLeft("an upload without its end");
}

TEST_F(UploadTest, WrongChecksumLeavesNoJob) {
  grpc::ClientContext context;
  v1::SubmitResponse response;
  auto writer = stub_->Submit(&context, &response);
  ASSERT_TRUE(WriteSpecAndData(*writer, 0, data_.size()));
  v1::SubmitRequest end;
  end.mutable_upload_end()->set_total_bytes(data_.size());
  end.mutable_upload_end()->set_crc32(client::Crc32Update(0, data_.data(), data_.size()) ^ 1u);
  writer->Write(end);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.error_message().find("crc"), std::string::npos)
      << "the error should name the checksum: " << status.error_message();
  std::cout << "wrong crc32: " << status.error_code() << " " << status.error_message() << "\n";
  ExpectNoJobLeft("an upload with a wrong checksum");
}

TEST_F(UploadTest, WrongTotalOrTooMuchDataLeavesNoJob) {
  {
    grpc::ClientContext context;
    v1::SubmitResponse response;
    auto writer = stub_->Submit(&context, &response);
    ASSERT_TRUE(WriteSpecAndData(*writer, 0, data_.size()));
    v1::SubmitRequest end;
    end.mutable_upload_end()->set_total_bytes(data_.size() + 4);
    end.mutable_upload_end()->set_crc32(client::Crc32Update(0, data_.data(), data_.size()));
    writer->Write(end);
    writer->WritesDone();
    EXPECT_FALSE(writer->Finish().ok());
  }
  {
    grpc::ClientContext context;
    v1::SubmitResponse response;
    auto writer = stub_->Submit(&context, &response);
    WriteSpecAndData(*writer, 0, data_.size());
    v1::SubmitRequest more;
    more.set_data("four");
    writer->Write(more);
    writer->WritesDone();
    EXPECT_FALSE(writer->Finish().ok());
  }
  ExpectNoJobLeft("an upload of the wrong size");
}

TEST_F(UploadTest, DataBeforeSpecIsRefused) {
  grpc::ClientContext context;
  v1::SubmitResponse response;
  auto writer = stub_->Submit(&context, &response);
  v1::SubmitRequest request;
  request.set_data(data_.substr(0, 1024));
  writer->Write(request);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  ExpectNoJobLeft("data without a spec");
}

TEST_F(UploadTest, ClientLibrarySubmitsAfterFailedUploads) {
  {
    grpc::ClientContext context;
    v1::SubmitResponse response;
    auto writer = stub_->Submit(&context, &response);
    WriteSpecAndData(*writer, 0, data_.size() / 3);
    context.TryCancel();
    writer->Finish();
  }
  ExpectNoJobLeft("a cancelled upload");

  client::TomoClient client(server());
  std::vector<uint64_t> progress;
  // Two files concatenated are one upload.
  const std::string head = phantom_ + "/head.raw", tail = phantom_ + "/tail.raw";
  WriteBytes(head, data_.substr(0, 1000));
  WriteBytes(tail, data_.substr(1000));
  absl::StatusOr<v1::Job> job =
      client.Submit(spec_, {head, tail}, [&](uint64_t sent, uint64_t total) {
        EXPECT_EQ(total, data_.size());
        progress.push_back(sent);
      });
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->id().empty());
  EXPECT_NE(job->state(), v1::JOB_STATE_UPLOADING);
  EXPECT_EQ(job->input_bytes(), data_.size());
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.front(), 0u);
  EXPECT_EQ(progress.back(), data_.size());

  std::vector<v1::JobEvent> events;
  absl::Status watched =
      client.Watch(job->id(), [&](const v1::JobEvent& e) { events.push_back(e); });
  ASSERT_TRUE(watched.ok()) << watched;
  ASSERT_FALSE(events.empty());
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_GT(events[i].sequence(), events[i - 1].sequence());
  }
  EXPECT_EQ(events.back().state(), v1::JOB_STATE_SUCCEEDED);

  const std::string out = dir() + "/volume.raw";
  absl::StatusOr<v1::ResultFile> file = client.Fetch(job->id(), "", out);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->size_bytes(), 128u * 128u * 4u);
  absl::StatusOr<uint32_t> crc = client::FileCrc32(out);
  ASSERT_TRUE(crc.ok());
  EXPECT_EQ(*crc, file->crc32());

  absl::StatusOr<std::vector<v1::Job>> jobs = client.ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ(jobs->front().id(), job->id());

  // The spec's size must match the files: nothing is sent otherwise.
  v1::JobSpec wrong = spec_;
  wrong.mutable_input()->set_size_bytes(data_.size() + 1);
  absl::StatusOr<v1::Job> refused = client.Submit(wrong, {phantom_ + "/sinogram.raw"});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  absl::StatusOr<v1::Job> unknown = client.GetJob("no-such-job");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();
}

// ---------------------------------------------------------------- striped uploads

// The phantom's sinogram (133920 bytes) as a striped upload over 2 streams in units of
// 64 KiB: stripe 0 (the Submit call) holds units 0 and 2 (2784 bytes), stripe 1 unit 1.
constexpr uint64_t kStripeUnit = 64 << 10;

class StripedUploadTest : public UploadTest {
 protected:
  // Writes the striped spec; the job id from the initial metadata ("" when none came).
  std::string BeginStriped(grpc::ClientContext& context,
                           grpc::ClientWriter<v1::SubmitRequest>& writer, uint32_t count = 2) {
    v1::SubmitRequest request;
    *request.mutable_spec() = spec_;
    request.mutable_striping()->set_count(count);
    request.mutable_striping()->set_unit_bytes(kStripeUnit);
    if (!writer.Write(request)) return "";
    writer.WaitForInitialMetadata();
    const auto& metadata = context.GetServerInitialMetadata();
    auto id = metadata.find("tomo-job-id");
    return id == metadata.end() ? "" : std::string(id->second.data(), id->second.size());
  }
  // Stripe 0's unit u (0 or 2).
  bool WriteUnit(grpc::ClientWriter<v1::SubmitRequest>& writer, uint64_t u) {
    v1::SubmitRequest request;
    request.set_data(data_.substr(u * kStripeUnit, kStripeUnit));
    return writer.Write(request);
  }
  static v1::SubmitStripeRequest Open(const std::string& job_id, uint32_t index) {
    v1::SubmitStripeRequest request;
    request.mutable_open()->set_job_id(job_id);
    request.mutable_open()->set_stripe_index(index);
    return request;
  }
  v1::SubmitStripeRequest Unit1(uint64_t offset) const {
    v1::SubmitStripeRequest request;
    request.mutable_data()->set_offset(offset);
    request.mutable_data()->set_data(data_.substr(kStripeUnit, kStripeUnit));
    return request;
  }
  bool WriteEnd(grpc::ClientWriter<v1::SubmitRequest>& writer) {
    v1::SubmitRequest end;
    end.mutable_upload_end()->set_total_bytes(data_.size());
    end.mutable_upload_end()->set_crc32(client::Crc32Update(0, data_.data(), data_.size()));
    return writer.Write(end);
  }
};

TEST_F(StripedUploadTest, TwoStripesByHandMakeTheJobWithTheSameBytes) {
  ASSERT_EQ(data_.size(), 133920u);
  grpc::ClientContext context;
  v1::SubmitResponse response;
  auto writer = stub_->Submit(&context, &response);
  const std::string id = BeginStriped(context, *writer);
  ASSERT_FALSE(id.empty()) << "no tomo-job-id in the initial metadata";
  // Stripe 1 first: its unit waits in tomod until unit 0 comes.
  {
    grpc::ClientContext stripe_context;
    v1::SubmitStripeResponse stripe_response;
    auto stripe = stub_->SubmitStripe(&stripe_context, &stripe_response);
    ASSERT_TRUE(stripe->Write(Open(id, 1)));
    ASSERT_TRUE(stripe->Write(Unit1(kStripeUnit)));
    stripe->WritesDone();
    grpc::Status status = stripe->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(stripe_response.received_bytes(), kStripeUnit);
  }
  ASSERT_TRUE(WriteUnit(*writer, 0));
  ASSERT_TRUE(WriteUnit(*writer, 2));
  ASSERT_TRUE(WriteEnd(*writer));
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.job().id(), id);
  EXPECT_EQ(response.job().input_bytes(), data_.size());
  EXPECT_EQ(FileBytes(spool_dir() + "/jobs/" + id + "/input.bin"), data_);
}

TEST_F(StripedUploadTest, TheClientLibraryStripesALargeUploadOverThreeConnections) {
  const std::string phantom = MakePhantom("large", 1024, 800);  // 3.3 MB: 4 units of 1 MiB
  absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(phantom + "/job.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string data = FileBytes(phantom + "/sinogram.raw");
  // Two files, split inside unit 1: that unit is sent as one message all the same.
  const std::string head = phantom + "/head.raw", tail = phantom + "/tail.raw";
  WriteBytes(head, data.substr(0, (3 << 19) + 100));
  WriteBytes(tail, data.substr((3 << 19) + 100));
  client::ClientOptions options;  // upload_streams left automatic: 3
  options.striped_upload_min_bytes = 0;
  client::TomoClient client(server(), options);
  std::vector<uint64_t> progress;
  absl::StatusOr<v1::Job> job =
      client.Submit(*spec, {head, tail}, [&](uint64_t sent, uint64_t total) {
        EXPECT_EQ(total, data.size());
        progress.push_back(sent);
      });
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->input_bytes(), data.size());
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), data.size());
  EXPECT_EQ(FileBytes(spool_dir() + "/jobs/" + job->id() + "/input.bin"), data);
  EXPECT_NE(FileBytes(tomod_log()).find("job " + job->id() + " upload striped over 3 streams"),
            std::string::npos);
  EXPECT_TRUE(client.Cancel(job->id()).ok());
}

TEST_F(StripedUploadTest, AStripeCancelledBeforeItsUnitLeavesNoJob) {
  grpc::ClientContext context;
  v1::SubmitResponse response;
  auto writer = stub_->Submit(&context, &response);
  const std::string id = BeginStriped(context, *writer);
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WriteUnit(*writer, 0));
  {
    grpc::ClientContext stripe_context;
    v1::SubmitStripeResponse stripe_response;
    auto stripe = stub_->SubmitStripe(&stripe_context, &stripe_response);
    ASSERT_TRUE(stripe->Write(Open(id, 1)));
    absl::SleepFor(absl::Milliseconds(200));  // tomod has taken the open
    stripe_context.TryCancel();
    EXPECT_EQ(stripe->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  WriteEnd(*writer);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_FALSE(status.ok());
  std::cout << "stripe cancelled: " << status.error_code() << " " << status.error_message() << "\n";
  ExpectNoJobLeft("a striped upload with a cancelled stripe");
}

TEST_F(StripedUploadTest, RefusalsNameTheFieldAndLeaveNoJob) {
  {  // A stripe of a job that has no striped upload.
    grpc::ClientContext context;
    v1::SubmitStripeResponse response;
    auto stripe = stub_->SubmitStripe(&context, &response);
    stripe->Write(Open("20260101-000000-000000-000000000000", 1));
    stripe->WritesDone();
    grpc::Status status = stripe->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(status.error_message().find("has no striped upload in progress"), std::string::npos)
        << status.error_message();
  }
  {  // Too many stripes: refused before any job exists.
    grpc::ClientContext context;
    v1::SubmitResponse response;
    auto writer = stub_->Submit(&context, &response);
    EXPECT_EQ(BeginStriped(context, *writer, 17), "");
    grpc::Status status = writer->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("striping.count: 17"), std::string::npos)
        << status.error_message();
  }
  {  // upload_end while stripe 1 has not ended.
    grpc::ClientContext context;
    v1::SubmitResponse response;
    auto writer = stub_->Submit(&context, &response);
    const std::string id = BeginStriped(context, *writer);
    ASSERT_FALSE(id.empty());
    ASSERT_TRUE(WriteUnit(*writer, 0));
    ASSERT_TRUE(WriteUnit(*writer, 2));
    WriteEnd(*writer);
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("upload_end: stripe 1 of 2 of job " + id +
                                          " has not ended"),
              std::string::npos)
        << status.error_message();
  }
  {  // A unit at the wrong offset fails its stripe and the Submit call.
    grpc::ClientContext context;
    v1::SubmitResponse response;
    auto writer = stub_->Submit(&context, &response);
    const std::string id = BeginStriped(context, *writer);
    ASSERT_FALSE(id.empty());
    grpc::ClientContext stripe_context;
    v1::SubmitStripeResponse stripe_response;
    auto stripe = stub_->SubmitStripe(&stripe_context, &stripe_response);
    stripe->Write(Open(id, 1));
    stripe->Write(Unit1(0));
    stripe->WritesDone();
    grpc::Status stripe_status = stripe->Finish();
    EXPECT_EQ(stripe_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(stripe_status.error_message().find("data.offset: 0; stripe 1 of 2 of job " + id +
                                                 " expects its next unit at 65536"),
              std::string::npos)
        << stripe_status.error_message();
    WriteUnit(*writer, 0);
    writer->WritesDone();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  ExpectNoJobLeft("refused striped uploads");
}

}  // namespace
}  // namespace tomo::testing
