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

}  // namespace
}  // namespace tomo::testing
