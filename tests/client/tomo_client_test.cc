// Unit tests of the client library (client/tomo_client.h, client/job_spec_json.h) against an
// in-process fake of the service, so that the wire behaviour the real daemon never shows
// (a stream that breaks halfway, a wrong final checksum) is covered too.
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <sstream>
#include <string>
#include <vector>

#include "client/job_spec_json.h"
#include "client/tomo_client.h"
#include "tests/core/random_seed.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace tomo::client {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::tomoserve::v1;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string TempDir() {
  std::string pattern = (fs::temp_directory_path() / "tomo-client-XXXXXX").string();
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  return ::mkdtemp(buffer.data()) ? std::string(buffer.data()) : "";
}

// ----------------------------------------------------------------------------- fake service

class FakeService final : public v1::Reconstruction::Service {
 public:
  // FetchResult serves `file` in 1000-byte chunks; after break_after bytes it fails the
  // stream with UNAVAILABLE (once); a final CRC of wrong_crc ^ real when wrong_crc != 0.
  std::string file;
  uint64_t break_after = 0;
  uint32_t wrong_crc = 0;
  std::vector<uint64_t> fetch_offsets;
  // With abort_after > 0, FetchResult ends with ABORTED after that many bytes (as tomod
  // does when the job whose result it streams while written fails).
  uint64_t abort_after = 0;
  // The first FetchResult is FAILED_PRECONDITION (a result tomod does not stream early).
  bool refuse_first = false;
  std::atomic<int> fetch_calls{0};
  // The first message of every FetchResult call carries file_bytes (false: a tomod older
  // than that field).
  bool announce_size = true;

  // WatchJob sends these events; after one whose stage is "write results" it waits (up to
  // 5 s) for a FetchResult call before the next. GetJob answers job when set.
  std::vector<v1::JobEvent> events;
  std::optional<v1::Job> job;

  // What Submit received.
  std::vector<std::string> submit_kinds;  // "spec", "data:<size>", "end"
  std::string submitted_data;
  v1::UploadEnd submitted_end;
  v1::JobSpec submitted_spec;
  bool submitted_striping = false;

  std::mutex mu;

  grpc::Status Submit(grpc::ServerContext*, grpc::ServerReader<v1::SubmitRequest>* reader,
                      v1::SubmitResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    v1::SubmitRequest request;
    while (reader->Read(&request)) {
      switch (request.part_case()) {
        case v1::SubmitRequest::kSpec:
          submit_kinds.push_back("spec");
          submitted_spec = request.spec();
          submitted_striping = request.has_striping();
          if (request.spec().priority() == 99) {
            return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                "priority: 99 is not liked here");
          }
          break;
        case v1::SubmitRequest::kData:
          submit_kinds.push_back("data:" + std::to_string(request.data().size()));
          submitted_data += request.data();
          break;
        case v1::SubmitRequest::kUploadEnd:
          submit_kinds.push_back("end");
          submitted_end = request.upload_end();
          break;
        default:
          break;
      }
    }
    response->mutable_job()->set_id("job-1");
    response->mutable_job()->set_state(v1::JOB_STATE_QUEUED);
    return grpc::Status::OK;
  }

  // Striped fetches (stripe_count > 1): stripe break_stripe fails with UNAVAILABLE (once)
  // after sending break_stripe_after bytes, once the other stripes have sent everything.
  int break_stripe = -1;
  uint64_t break_stripe_after = 0;
  std::atomic<int> stripes_done{0};

  grpc::Status FetchResult(grpc::ServerContext* context, const v1::FetchResultRequest* request,
                           grpc::ServerWriter<v1::FetchResultResponse>* writer) override {
    ++fetch_calls;
    if (request->stripe_count() > 1) return FetchStripe(context, *request, writer);
    std::lock_guard<std::mutex> lock(mu);
    fetch_offsets.push_back(request->offset());
    if (refuse_first) {
      refuse_first = false;
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "job job-1 is RUNNING; results exist only for SUCCEEDED jobs");
    }
    if (request->offset() > file.size()) {
      return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "offset beyond the end");
    }
    uint64_t at = request->offset();
    while (true) {
      if (break_after > 0 && at >= break_after) {
        break_after = 0;
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection lost (fake)");
      }
      if (abort_after > 0 && at >= abort_after) {
        return grpc::Status(grpc::StatusCode::ABORTED, "job job-1 is FAILED: INTERNAL: boom");
      }
      v1::FetchResultResponse response;
      const uint64_t n = std::min<uint64_t>(1000, file.size() - at);
      if (announce_size && at == request->offset()) response.set_file_bytes(file.size());
      response.set_offset(at);
      response.set_data(file.substr(at, n));
      at += n;
      if (at == file.size()) {
        response.set_last(true);
        response.set_total_bytes(file.size());
        response.set_crc32(Crc32Update(0, file.data(), file.size()) ^ wrong_crc);
        writer->Write(response);
        return grpc::Status::OK;
      }
      writer->Write(response);
    }
  }

  // One stripe, worked out here on its own: units of stripe_bytes from offset, unit u in
  // stripe u % stripe_count, each sent in messages of at most 64 KiB.
  grpc::Status FetchStripe(grpc::ServerContext* context, const v1::FetchResultRequest& request,
                           grpc::ServerWriter<v1::FetchResultResponse>* writer) {
    bool breaks = false, announce = false;
    uint64_t break_at = 0;
    uint32_t crc_xor = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      announce = announce_size;
      fetch_offsets.push_back(request.offset());
      breaks = static_cast<int>(request.stripe_index()) == break_stripe;
      if (breaks) break_stripe = -1;
      break_at = break_stripe_after;
      crc_xor = wrong_crc;
    }
    if (request.offset() > file.size()) {
      return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "offset beyond the end");
    }
    const uint64_t unit = request.stripe_bytes();
    uint64_t sent = 0;
    for (uint64_t u = request.stripe_index();
         request.offset() + u * unit < file.size(); u += request.stripe_count()) {
      const uint64_t unit_end = std::min<uint64_t>(file.size(), request.offset() + (u + 1) * unit);
      for (uint64_t at = request.offset() + u * unit; at < unit_end;) {
        if (breaks && sent >= break_at) {
          // Let the other stripes' bytes reach the client first.
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
          while (stripes_done + 1 < static_cast<int>(request.stripe_count()) &&
                 std::chrono::steady_clock::now() < deadline && !context->IsCancelled()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection lost (fake)");
        }
        const uint64_t n = std::min<uint64_t>(64 << 10, unit_end - at);
        v1::FetchResultResponse response;
        if (announce && sent == 0) response.set_file_bytes(file.size());
        response.set_offset(at);
        response.set_data(file.substr(at, n));
        writer->Write(response);
        at += n;
        sent += n;
      }
    }
    if (!breaks) ++stripes_done;
    v1::FetchResultResponse last;
    if (announce && sent == 0) last.set_file_bytes(file.size());  // a stripe without a unit
    last.set_offset(file.size());
    last.set_last(true);
    last.set_total_bytes(file.size());
    last.set_crc32(Crc32Update(0, file.data(), file.size()) ^ crc_xor);
    writer->Write(last);
    return grpc::Status::OK;
  }

  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::Job* response) override {
    if (job.has_value()) {
      *response = *job;
      return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "job " + request->job_id() + " not found");
  }

  grpc::Status WatchJob(grpc::ServerContext*, const v1::WatchJobRequest*,
                        grpc::ServerWriter<v1::JobEvent>* writer) override {
    for (const v1::JobEvent& event : events) {
      writer->Write(event);
      if (event.progress().stage() != kWriteResultsStage) continue;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (fetch_calls == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override {
    // Three pages of one job each.
    int page = request->page_token().empty() ? 0 : std::stoi(request->page_token());
    response->add_jobs()->set_id("job-" + std::to_string(page));
    if (page < 2) response->set_next_page_token(std::to_string(page + 1));
    return grpc::Status::OK;
  }
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    ASSERT_FALSE(dir_.empty());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_ != nullptr);
    ASSERT_GT(port, 0);
    target_ = "127.0.0.1:" + std::to_string(port);
    // One download stream whatever file system holds dir_, so that the calls counted in
    // fetch_offsets do not depend on it (automatic counts: AutomaticDownloadStreams...).
    ClientOptions options;
    options.download_streams = 1;
    client_ = std::make_unique<TomoClient>(target_, options);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  std::string dir_;
  FakeService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<TomoClient> client_;
  std::string target_;
};

// A client fetching as `streams` striped streams.
std::unique_ptr<TomoClient> StripedClient(const std::string& target, int streams) {
  ClientOptions options;
  options.download_streams = streams;
  return std::make_unique<TomoClient>(target, options);
}

std::string RandomBytes(uint64_t seed, size_t size) {
  std::mt19937_64 random(seed);
  std::string bytes(size, '\0');
  for (char& byte : bytes) byte = static_cast<char>(random());
  return bytes;
}

std::string Pattern(size_t size) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 7919u) >> 3);
  return bytes;
}

TEST_F(ClientTest, SubmitSendsSpecChunksAndEnd) {
  const std::string data = Pattern((5u << 19) + 123);  // 2.5 MiB + 123
  WriteAll(dir_ + "/a.raw", data.substr(0, 100));
  WriteAll(dir_ + "/b.raw", data.substr(100));
  v1::JobSpec spec;
  spec.set_name("fake");
  std::vector<uint64_t> progress;
  absl::StatusOr<v1::Job> job = client_->Submit(
      spec, {dir_ + "/a.raw", dir_ + "/b.raw"},
      [&](uint64_t sent, uint64_t total) {
        EXPECT_EQ(total, data.size());
        progress.push_back(sent);
      });
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->id(), "job-1");
  std::lock_guard<std::mutex> lock(service_.mu);
  ASSERT_GE(service_.submit_kinds.size(), 3u);
  EXPECT_EQ(service_.submit_kinds.front(), "spec");
  EXPECT_EQ(service_.submit_kinds.back(), "end");
  // Files are read one after the other; no chunk is over 1 MiB.
  for (size_t i = 1; i + 1 < service_.submit_kinds.size(); ++i) {
    const std::string& kind = service_.submit_kinds[i];
    ASSERT_EQ(kind.rfind("data:", 0), 0u) << kind;
    EXPECT_LE(std::stoul(kind.substr(5)), kUploadChunkBytes);
  }
  EXPECT_EQ(service_.submit_kinds[2], "data:" + std::to_string(kUploadChunkBytes));
  EXPECT_TRUE(service_.submitted_data == data);
  EXPECT_EQ(service_.submitted_end.total_bytes(), data.size());
  EXPECT_EQ(service_.submitted_end.crc32(), Crc32Update(0, data.data(), data.size()));
  // size_bytes 0 is filled in from the files.
  EXPECT_EQ(service_.submitted_spec.input().size_bytes(), data.size());
  EXPECT_EQ(progress.front(), 0u);
  EXPECT_EQ(progress.back(), data.size());
}

TEST_F(ClientTest, UploadStreamsWithATomodThatTakesNoneSendOneStream) {
  // The fake answers GetServerInfo without max_upload_streams, as a tomod from before
  // striped uploads does: a striped spec would leave such a tomod waiting.
  const std::string data = Pattern((5u << 20) + 5);
  WriteAll(dir_ + "/a.raw", data);
  ClientOptions options;
  options.upload_streams = 4;
  options.striped_upload_min_bytes = 0;
  TomoClient client(target_, options);
  absl::StatusOr<v1::Job> job = client.Submit(v1::JobSpec(), {dir_ + "/a.raw"});
  ASSERT_TRUE(job.ok()) << job.status();
  std::lock_guard<std::mutex> lock(service_.mu);
  EXPECT_FALSE(service_.submitted_striping);
  EXPECT_EQ(service_.submitted_data, data);
}

TEST_F(ClientTest, UploadStreamsOutOfRangeIsInvalidArgument) {
  WriteAll(dir_ + "/a.raw", "data");
  for (int streams : {-1, kMaxUploadStreams + 1}) {
    ClientOptions options;
    options.upload_streams = streams;
    absl::StatusOr<v1::Job> job = TomoClient(target_, options).Submit(v1::JobSpec(), {dir_ + "/a.raw"});
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(job.status().message().find("upload_streams: " + std::to_string(streams)),
              std::string::npos)
        << job.status();
  }
}

TEST_F(ClientTest, SubmitRefusalsKeepCodeAndMessage) {
  WriteAll(dir_ + "/a.raw", Pattern(10));
  v1::JobSpec spec;
  spec.set_priority(99);
  absl::StatusOr<v1::Job> job = client_->Submit(spec, {dir_ + "/a.raw"});
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(), "priority: 99 is not liked here");

  spec.set_priority(0);
  spec.mutable_input()->set_size_bytes(11);
  job = client_->Submit(spec, {dir_ + "/a.raw"});
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(job.status().message().find("input.size_bytes"), absl::string_view::npos);

  job = client_->Submit(spec, {dir_ + "/missing.raw"});
  EXPECT_EQ(job.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(job.status().message().find("missing.raw"), absl::string_view::npos);
}

TEST_F(ClientTest, FetchResumesAfterABrokenStream) {
  service_.file = Pattern(25000);
  service_.break_after = 12000;
  const std::string out = dir_ + "/volume.raw";
  absl::StatusOr<v1::ResultFile> first = client_->Fetch("job-1", "volume.raw", out);
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(fs::file_size(out + ".partial"), 12000u);  // kept for the next try

  absl::StatusOr<v1::ResultFile> second = client_->Fetch("job-1", "volume.raw", out);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(service_.fetch_offsets, (std::vector<uint64_t>{0, 12000}));
  EXPECT_TRUE(ReadAll(out) == service_.file);
  EXPECT_FALSE(fs::exists(out + ".partial"));
  EXPECT_EQ(second->size_bytes(), 25000u);
}

TEST_F(ClientTest, FetchRejectsAWrongChecksumAndRemovesThePartialFile) {
  service_.file = Pattern(5000);
  service_.wrong_crc = 0x10;
  const std::string out = dir_ + "/volume.raw";
  absl::StatusOr<v1::ResultFile> file = client_->Fetch("job-1", "volume.raw", out);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".partial"));
}

TEST_F(ClientTest, FetchStartsOverWhenThePartialFileIsTooLong) {
  service_.file = Pattern(3000);
  const std::string out = dir_ + "/volume.raw";
  WriteAll(out + ".partial", Pattern(4000));
  absl::StatusOr<v1::ResultFile> file = client_->Fetch("job-1", "volume.raw", out);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(service_.fetch_offsets, (std::vector<uint64_t>{4000, 0}));
  EXPECT_TRUE(ReadAll(out) == service_.file);
}

// ----------------------------------------------------------------------------- striped

// 3 streams give the file and CRC-32 that 1 gives, over destinations poisoned beforehand.
TEST_F(ClientTest, StripedFetchGivesTheSameFileAsOneStream) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  service_.file = RandomBytes(seed, (7u << 19) + 4321);  // 3.5 MiB + 4321: 4 units
  const std::string one = dir_ + "/one.raw", three = dir_ + "/three.raw";
  WriteAll(one, RandomBytes(seed + 1, 1000));
  WriteAll(three, RandomBytes(seed + 2, 1000));
  WriteAll(three + ".partial", RandomBytes(seed + 3, service_.file.size() + 10));
  absl::StatusOr<v1::ResultFile> by_one = client_->Fetch("job-1", "volume.raw", one);
  ASSERT_TRUE(by_one.ok()) << by_one.status();
  std::unique_ptr<TomoClient> striped = StripedClient(target_, 3);
  uint64_t last_done = 0, last_total = 0;
  absl::StatusOr<v1::ResultFile> by_three =
      striped->Fetch("job-1", "volume.raw", three, /*resume=*/false,
                     [&](uint64_t done, uint64_t total) {
                       EXPECT_GE(done, last_done);
                       last_done = done;
                       last_total = total;
                     });
  ASSERT_TRUE(by_three.ok()) << by_three.status();
  EXPECT_TRUE(ReadAll(three) == service_.file);
  EXPECT_TRUE(ReadAll(one) == service_.file);
  EXPECT_EQ(by_three->crc32(), by_one->crc32());
  EXPECT_EQ(by_three->crc32(), Crc32Update(0, service_.file.data(), service_.file.size()));
  EXPECT_EQ(by_three->size_bytes(), service_.file.size());
  EXPECT_EQ(last_done, service_.file.size());
  EXPECT_EQ(last_total, service_.file.size());
  EXPECT_FALSE(fs::exists(three + ".partial"));
  // Three calls from offset 0 (the first fetch was one call).
  EXPECT_EQ(service_.fetch_offsets, (std::vector<uint64_t>{0, 0, 0, 0}));
  // The channels are kept: a second fetch works the same.
  ASSERT_TRUE(striped->Fetch("job-1", "volume.raw", three, /*resume=*/false).ok());
  EXPECT_TRUE(ReadAll(three) == service_.file);
}

// Stream 1 fails halfway through its unit (unit 1) after the others have sent units 0, 2
// and 3: the partial file is cut to units 0 and the half of 1 that came, the right bytes,
// and a resumed fetch completes it from there.
TEST_F(ClientTest, StripedFetchCutsThePartialFileToAPrefixAndResumes) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  service_.file = RandomBytes(seed, (7u << 19) + 4321);
  service_.break_stripe = 1;
  service_.break_stripe_after = 512 << 10;
  const std::string out = dir_ + "/volume.raw";
  WriteAll(out, RandomBytes(seed + 1, 1000));
  std::unique_ptr<TomoClient> striped = StripedClient(target_, 3);
  absl::StatusOr<v1::ResultFile> first = striped->Fetch("job-1", "volume.raw", out);
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
  const std::string partial = ReadAll(out + ".partial");
  EXPECT_EQ(partial.size(), (1u << 20) + (512u << 10));
  EXPECT_TRUE(partial == service_.file.substr(0, partial.size())) << "not the file's bytes";

  absl::StatusOr<v1::ResultFile> second = striped->Fetch("job-1", "volume.raw", out);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(service_.fetch_offsets,
            (std::vector<uint64_t>{0, 0, 0, partial.size(), partial.size(), partial.size()}));
  EXPECT_TRUE(ReadAll(out) == service_.file);
  EXPECT_FALSE(fs::exists(out + ".partial"));
  EXPECT_EQ(second->crc32(), Crc32Update(0, service_.file.data(), service_.file.size()));
}

TEST_F(ClientTest, StripedFetchRejectsAWrongChecksumAndRemovesThePartialFile) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  service_.file = RandomBytes(seed, (5u << 19) + 77);
  service_.wrong_crc = 0x10;
  const std::string out = dir_ + "/volume.raw";
  absl::StatusOr<v1::ResultFile> file = StripedClient(target_, 3)->Fetch("job-1", "", out);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss) << file.status();
  EXPECT_NE(file.status().message().find("CRC-32"), std::string::npos) << file.status();
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".partial"));
}

// ----------------------------------------------------------------------------- mapped

// A directory on tmpfs (/dev/shm: tmpfs on every Linux machine we build on), made for one
// test and removed after it: downloads there are written through a mapping.
class TmpfsDirectory {
 public:
  TmpfsDirectory()
      : path_("/dev/shm/tomo_client_test-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name()) {
    fs::remove_all(path_);
    fs::create_directories(path_);
    struct statfs info;
    EXPECT_EQ(::statfs(path_.c_str(), &info), 0);
    EXPECT_EQ(info.f_type, TMPFS_MAGIC) << path_ << " is not on tmpfs";
  }
  ~TmpfsDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A client that writes downloads of any size on tmpfs through a mapping.
std::unique_ptr<TomoClient> MappingClient(const std::string& target, int streams) {
  ClientOptions options;
  options.download_streams = streams;
  options.mapped_download_min_bytes = 0;
  return std::make_unique<TomoClient>(target, options);
}

// With the default (automatic) download_streams a fetch into tmpfs is three striped calls
// through the mapping; into a directory elsewhere, one call.
TEST_F(ClientTest, AutomaticDownloadStreamsAreThreeIntoTmpfsAndOneElsewhere) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  const TmpfsDirectory tmpfs;
  service_.file = RandomBytes(seed, (5u << 19) + 99);
  ClientOptions options;
  options.mapped_download_min_bytes = 0;
  TomoClient client(target_, options);
  const std::string out = tmpfs.path() + "/volume.raw";
  ASSERT_TRUE(client.Fetch("job-1", "volume.raw", out, /*resume=*/false).ok());
  EXPECT_EQ(service_.fetch_offsets, (std::vector<uint64_t>{0, 0, 0}));
  EXPECT_EQ(client.mapped_fetches(), 1u);
  EXPECT_TRUE(ReadAll(out) == service_.file) << "the file's bytes differ";

  struct statfs info;
  ASSERT_EQ(::statfs(dir_.c_str(), &info), 0);
  if (info.f_type == TMPFS_MAGIC) {
    std::printf("%s is on tmpfs: the one-call half is not checked here\n", dir_.c_str());
    return;
  }
  service_.fetch_offsets.clear();
  const std::string on_disk = dir_ + "/volume.raw";
  ASSERT_TRUE(client.Fetch("job-1", "volume.raw", on_disk, /*resume=*/false).ok());
  EXPECT_EQ(service_.fetch_offsets, (std::vector<uint64_t>{0}));
  EXPECT_TRUE(ReadAll(on_disk) == service_.file) << "the file's bytes differ";
}

// One stream and three striped streams into tmpfs take the mapped path (counted) and give
// the file, over a poisoned partial file; a tomod that does not send file_bytes gets the
// old path and the same file.
TEST_F(ClientTest, DownloadIntoTmpfsIsWrittenThroughAMapping) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  const TmpfsDirectory tmpfs;
  service_.file = RandomBytes(seed, (7u << 19) + 4321);  // 3.5 MiB + 4321: 4 units
  const uint32_t crc = Crc32Update(0, service_.file.data(), service_.file.size());
  for (int streams : {1, 3}) {
    SCOPED_TRACE(::testing::Message() << streams << " streams");
    const std::string out = tmpfs.path() + "/volume-" + std::to_string(streams) + ".raw";
    WriteAll(out + ".partial", RandomBytes(seed + 1, service_.file.size() + 10));
    std::unique_ptr<TomoClient> client = MappingClient(target_, streams);
    absl::StatusOr<v1::ResultFile> file =
        client->Fetch("job-1", "volume.raw", out, /*resume=*/false);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(client->mapped_fetches(), 1u) << "the mapped path was not taken";
    EXPECT_TRUE(ReadAll(out) == service_.file) << "the file's bytes differ";
    EXPECT_EQ(file->crc32(), crc);
    EXPECT_EQ(file->size_bytes(), service_.file.size());
    EXPECT_FALSE(fs::exists(out + ".partial"));

    service_.announce_size = false;
    const std::string old_path = tmpfs.path() + "/old-" + std::to_string(streams) + ".raw";
    absl::StatusOr<v1::ResultFile> old = client->Fetch("job-1", "volume.raw", old_path);
    service_.announce_size = true;
    ASSERT_TRUE(old.ok()) << old.status();
    EXPECT_EQ(client->mapped_fetches(), 1u) << "mapped without the file's size";
    EXPECT_TRUE(ReadAll(old_path) == service_.file);
  }
  // Below the size limit (64 MiB by default): not mapped.
  const std::string small = tmpfs.path() + "/small.raw";
  ASSERT_TRUE(client_->Fetch("job-1", "volume.raw", small).ok());
  EXPECT_EQ(client_->mapped_fetches(), 0u);
  EXPECT_TRUE(ReadAll(small) == service_.file);
}

// One stream broken mid-way: the mapped partial file (sized for the whole file at first) is
// cut to the bytes that came, which are the file's; the resumed fetch is mapped too and
// keeps that prefix.
TEST_F(ClientTest, MappedDownloadBrokenMidwayKeepsAPrefixAndResumes) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  const TmpfsDirectory tmpfs;
  service_.file = RandomBytes(seed, (3u << 20) + 777);
  const uint64_t break_after = 1200000 + 1000 * (seed % 1000);
  service_.break_after = break_after;
  const std::string out = tmpfs.path() + "/volume.raw";
  std::unique_ptr<TomoClient> client = MappingClient(target_, 1);
  absl::StatusOr<v1::ResultFile> first = client->Fetch("job-1", "volume.raw", out);
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
  EXPECT_EQ(client->mapped_fetches(), 1u) << "the mapped path was not taken";
  const std::string partial = ReadAll(out + ".partial");
  EXPECT_EQ(partial.size(), break_after);
  EXPECT_TRUE(partial == service_.file.substr(0, partial.size())) << "not the file's bytes";

  absl::StatusOr<v1::ResultFile> second = client->Fetch("job-1", "volume.raw", out);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(client->mapped_fetches(), 2u) << "the resumed fetch was not mapped";
  EXPECT_EQ(service_.fetch_offsets, (std::vector<uint64_t>{0, partial.size()}));
  EXPECT_TRUE(ReadAll(out) == service_.file) << "the file's bytes differ";
  EXPECT_EQ(second->crc32(), Crc32Update(0, service_.file.data(), service_.file.size()));
}

// Striped into tmpfs, stream 1 failing halfway through unit 1 after units 0, 2 and 3 came:
// the partial file is cut to unit 0 and the half of unit 1, the right bytes; the resumed
// striped fetch (mapped, from that offset) completes it.
TEST_F(ClientTest, MappedStripedDownloadWithAFailedStreamKeepsAPrefixAndResumes) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  const TmpfsDirectory tmpfs;
  service_.file = RandomBytes(seed, (7u << 19) + 4321);
  service_.break_stripe = 1;
  service_.break_stripe_after = 512 << 10;
  const std::string out = tmpfs.path() + "/volume.raw";
  std::unique_ptr<TomoClient> client = MappingClient(target_, 3);
  absl::StatusOr<v1::ResultFile> first = client->Fetch("job-1", "volume.raw", out);
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
  EXPECT_EQ(client->mapped_fetches(), 1u) << "the mapped path was not taken";
  const std::string partial = ReadAll(out + ".partial");
  EXPECT_EQ(partial.size(), (1u << 20) + (512u << 10));
  EXPECT_TRUE(partial == service_.file.substr(0, partial.size())) << "not the file's bytes";

  absl::StatusOr<v1::ResultFile> second = client->Fetch("job-1", "volume.raw", out);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(client->mapped_fetches(), 2u) << "the resumed fetch was not mapped";
  EXPECT_EQ(service_.fetch_offsets,
            (std::vector<uint64_t>{0, 0, 0, partial.size(), partial.size(), partial.size()}));
  EXPECT_TRUE(ReadAll(out) == service_.file) << "the file's bytes differ";
  EXPECT_FALSE(fs::exists(out + ".partial"));
}

TEST_F(ClientTest, DownloadStreamsOutOfRangeIsInvalidArgument) {
  for (int streams : {-1, 17}) {
    absl::StatusOr<v1::ResultFile> file =
        StripedClient(target_, streams)->Fetch("job-1", "", dir_ + "/x.raw");
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(file.status().message().find("download_streams: " + std::to_string(streams)),
              std::string::npos)
        << file.status();
  }
}

v1::JobEvent Event(v1::JobState state, const std::string& stage = "") {
  v1::JobEvent event;
  event.set_job_id("job-1");
  event.set_state(state);
  event.mutable_progress()->set_stage(stage);
  return event;
}

v1::Job EndedJob(v1::JobState state, const std::string& error = "") {
  v1::Job job;
  job.set_id("job-1");
  job.set_state(state);
  job.set_error(error);
  return job;
}

// The fetch starts on the "write results" event: the fake sends SUCCEEDED only after it.
TEST_F(ClientTest, WatchAndFetchStartsTheFetchOnTheWriteResultsEvent) {
  service_.file = Pattern(25000);
  service_.events = {Event(v1::JOB_STATE_RUNNING, "fdk"),
                     Event(v1::JOB_STATE_RUNNING, kWriteResultsStage),
                     Event(v1::JOB_STATE_SUCCEEDED)};
  service_.job = EndedJob(v1::JOB_STATE_SUCCEEDED);
  const std::string out = dir_ + "/volume.raw";
  std::vector<std::string> stages;
  absl::StatusOr<WatchedFetch> fetched = client_->WatchAndFetch(
      "job-1", "volume.raw", out,
      [&](const v1::JobEvent& event) { stages.push_back(event.progress().stage()); });
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_TRUE(fetched->started_early);
  EXPECT_EQ(fetched->job.state(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_TRUE(fetched->file.has_value());
  EXPECT_EQ(fetched->file->size_bytes(), 25000u);
  EXPECT_EQ(fetched->file->crc32(), Crc32Update(0, service_.file.data(), service_.file.size()));
  EXPECT_TRUE(ReadAll(out) == service_.file);
  EXPECT_EQ(service_.fetch_offsets, (std::vector<uint64_t>{0}));
  EXPECT_EQ(stages, (std::vector<std::string>{"fdk", kWriteResultsStage, ""}));
}

// Without a "write results" event (a job that had ended before the watch) the fetch
// starts on SUCCEEDED.
TEST_F(ClientTest, WatchAndFetchFetchesOnSucceeded) {
  service_.file = Pattern(3000);
  service_.events = {Event(v1::JOB_STATE_SUCCEEDED)};
  service_.job = EndedJob(v1::JOB_STATE_SUCCEEDED);
  const std::string out = dir_ + "/volume.raw";
  absl::StatusOr<WatchedFetch> fetched = client_->WatchAndFetch("job-1", "volume.raw", out);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_FALSE(fetched->started_early);
  ASSERT_TRUE(fetched->file.has_value());
  EXPECT_TRUE(ReadAll(out) == service_.file);
}

// A result that tomod does not stream early (or a tomod without early fetch) refuses the
// early fetch; it is fetched after SUCCEEDED.
TEST_F(ClientTest, WatchAndFetchFetchesAgainAfterARefusedEarlyFetch) {
  service_.file = Pattern(5000);
  service_.refuse_first = true;
  service_.events = {Event(v1::JOB_STATE_RUNNING, kWriteResultsStage),
                     Event(v1::JOB_STATE_SUCCEEDED)};
  service_.job = EndedJob(v1::JOB_STATE_SUCCEEDED);
  const std::string out = dir_ + "/volume.nii";
  absl::StatusOr<WatchedFetch> fetched = client_->WatchAndFetch("job-1", "volume.nii", out);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  ASSERT_TRUE(fetched->file.has_value());
  EXPECT_TRUE(ReadAll(out) == service_.file);
  EXPECT_EQ(service_.fetch_offsets, (std::vector<uint64_t>{0, 0}));
}

// A job that fails while its result streams: ABORTED, nothing kept, the job's error.
TEST_F(ClientTest, WatchAndFetchOfAFailedJobKeepsNoFile) {
  service_.file = Pattern(25000);
  service_.abort_after = 12000;
  service_.events = {Event(v1::JOB_STATE_RUNNING, kWriteResultsStage),
                     Event(v1::JOB_STATE_FAILED)};
  service_.job = EndedJob(v1::JOB_STATE_FAILED, "INTERNAL: boom");
  const std::string out = dir_ + "/volume.raw";
  absl::StatusOr<WatchedFetch> fetched = client_->WatchAndFetch("job-1", "volume.raw", out);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_TRUE(fetched->started_early);
  EXPECT_EQ(fetched->job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(fetched->job.error(), "INTERNAL: boom");
  EXPECT_FALSE(fetched->file.has_value());
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".partial"));
  EXPECT_EQ(service_.fetch_offsets, (std::vector<uint64_t>{0}));
}

// A plain Fetch that tomod aborts removes its partial file too: no resume from those bytes.
TEST_F(ClientTest, AbortedFetchRemovesThePartialFile) {
  service_.file = Pattern(25000);
  service_.abort_after = 12000;
  const std::string out = dir_ + "/volume.raw";
  absl::StatusOr<v1::ResultFile> file = client_->Fetch("job-1", "volume.raw", out);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kAborted);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".partial"));
}

TEST_F(ClientTest, ListJobsFollowsPagesAndErrorsKeepTheirCode) {
  absl::StatusOr<std::vector<v1::Job>> jobs = client_->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[2].id(), "job-2");

  absl::StatusOr<v1::Job> job = client_->GetJob("42");
  EXPECT_EQ(job.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(job.status().message(), "job 42 not found");
  // Not implemented by the fake: the code comes through as it is.
  absl::StatusOr<v1::ServerInfo> info = client_->GetServerInfo();
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnimplemented);
}

// ----------------------------------------------------------------------------- helpers

TEST(ClientHelpersTest, Crc32IsZlibs) {
  const std::string text = "123456789";
  EXPECT_EQ(Crc32Update(0, text.data(), text.size()), 0xCBF43926u);
  EXPECT_EQ(Crc32Update(Crc32Update(0, "1234", 4), "56789", 5), 0xCBF43926u);
}

TEST(ClientHelpersTest, FromGrpcStatusKeepsCodeAndMessage) {
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  absl::Status status =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue is full"));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(), "queue is full");
}

TEST(ClientHelpersTest, JobStateNamesRoundTrip) {
  EXPECT_EQ(JobStateName(v1::JOB_STATE_RUNNING), "RUNNING");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_RUNNING, /*lower=*/true), "running");
  for (const char* text : {"queued", "QUEUED", "job_state_queued", " Queued "}) {
    absl::StatusOr<v1::JobState> state = ParseJobState(text);
    ASSERT_TRUE(state.ok()) << text;
    EXPECT_EQ(*state, v1::JOB_STATE_QUEUED);
  }
  EXPECT_EQ(ParseJobState("sleeping").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseJobState("unspecified").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(IsFinal(v1::JOB_STATE_CANCELLED));
  EXPECT_FALSE(IsFinal(v1::JOB_STATE_QUEUED));
}

TEST(JobSpecJsonTest, RoundTripsInLowerCamelCase) {
  v1::JobSpec spec;
  spec.set_name("round trip");
  spec.mutable_geometry()->mutable_parallel_2d()->set_num_detectors(768);
  spec.mutable_geometry()->mutable_parallel_2d()->mutable_angles()->mutable_uniform()->set_count(
      720);
  spec.mutable_input()->set_size_bytes(2211840);
  spec.mutable_algorithm()->mutable_fbp()->set_window(v1::FILTER_WINDOW_HANN);
  spec.add_outputs(v1::OUTPUT_FORMAT_RAW_FLOAT32);
  const std::string json = MessageToJson(spec);
  EXPECT_NE(json.find("\"numDetectors\": 768"), std::string::npos) << json;
  EXPECT_NE(json.find("\"priority\": 0"), std::string::npos) << "primitives are printed";
  EXPECT_NE(json.find("FILTER_WINDOW_HANN"), std::string::npos);
  EXPECT_EQ(json.back(), '\n');
  absl::StatusOr<v1::JobSpec> parsed = JobSpecFromJson(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->SerializeAsString(), spec.SerializeAsString());
  // The proto's own field names are accepted too.
  absl::StatusOr<v1::JobSpec> snake =
      JobSpecFromJson(R"({"geometry": {"parallel_2d": {"num_detectors": 5}}})");
  ASSERT_TRUE(snake.ok()) << snake.status();
  EXPECT_EQ(snake->geometry().parallel_2d().num_detectors(), 5u);
}

TEST(JobSpecJsonTest, ErrorsNameTheFileAndTheField) {
  const std::string dir = TempDir();
  const std::string path = dir + "/job.json";
  WriteAll(path, R"({"algorithm": {"kaczmarz": {}}})");
  absl::StatusOr<v1::JobSpec> spec = ReadJobSpecFile(path);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find(path), absl::string_view::npos) << spec.status();
  EXPECT_NE(spec.status().message().find("kaczmarz"), absl::string_view::npos) << spec.status();

  WriteAll(path, "{\n \"priority\": \n");
  spec = ReadJobSpecFile(path);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(spec.status().message()).find('\n'), std::string::npos)
      << "one line: " << spec.status();

  spec = ReadJobSpecFile(dir + "/missing.json");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);

  v1::JobSpec written;
  written.set_priority(3);
  ASSERT_TRUE(WriteJobSpecFile(path, written).ok());
  spec = ReadJobSpecFile(path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->priority(), 3);
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

}  // namespace
}  // namespace tomo::client
