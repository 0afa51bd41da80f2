// Early fetch on the real tomod (issue 4): a fetch of the raw result that starts on the
// job's "write results" event streams the volume from tomod's memory while the files are
// written, and ends only when the job does:
//   - SUCCEEDED: its bytes arrive before the SUCCEEDED event, and the file is the one a
//     plain fetch after SUCCEEDED gives, with the recorded CRC-32;
//   - cancelled or failed while it streams: ABORTED naming the job and its state, and no
//     output file (not even a partial one);
//   - a job whose volume is not finite fails before the volume is shared: no byte of it
//     is streamed, and no file is left.
// Each job writes a slow output after the raw one (gzip-compressed NIfTI of a 128^3
// volume, a good fraction of a second on the CPU) so that the fetch is surely in while the
// outputs are written; the tests check that it was (bytes before the job's end).
#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/job_spec_json.h"
#include "client/tomo_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/end_to_end/daemon_fixture.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::testing {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::tomoserve::v1;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Times (since the test's start) of the first fetched bytes and of the job's end event.
struct Timeline {
  absl::Mutex mu;
  absl::Time first_bytes ABSL_GUARDED_BY(mu) = absl::InfiniteFuture();
  absl::Time ended ABSL_GUARDED_BY(mu) = absl::InfiniteFuture();

  void Bytes(uint64_t done) {
    absl::MutexLock lock(&mu);
    if (done > 0 && first_bytes == absl::InfiniteFuture()) first_bytes = absl::Now();
  }
  void Event(const v1::JobEvent& event) {
    absl::MutexLock lock(&mu);
    if (client::IsFinal(event.state())) ended = absl::Now();
  }
  bool BytesBeforeTheEnd() {
    absl::MutexLock lock(&mu);
    return first_bytes < ended;
  }
};

class EarlyFetchTest : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(StopDaemon(), 0);
    StartDaemon({"--devices=cpu"});
    ASSERT_FALSE(HasFatalFailure());
    phantom_ = MakePhantom("cone", 128, 64, {"--geometry", "cone"});
    ASSERT_FALSE(HasFailure());
    absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(phantom_ + "/job.json");
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    spec_.clear_outputs();
    spec_.add_outputs(v1::OUTPUT_FORMAT_RAW_FLOAT32);
    spec_.add_outputs(v1::OUTPUT_FORMAT_NIFTI_GZ);
  }

  std::string sinogram() const { return phantom_ + "/sinogram.raw"; }

  std::string phantom_;
  v1::JobSpec spec_;
};

TEST_F(EarlyFetchTest, FetchOnWriteResultsIsThePlainFetchAfterSucceeded) {
  client::TomoClient client(server());
  absl::StatusOr<v1::Job> job = client.Submit(spec_, {sinogram()});
  ASSERT_TRUE(job.ok()) << job.status();
  Timeline timeline;
  const std::string early_path = dir() + "/early.raw";
  absl::StatusOr<client::WatchedFetch> fetched = client.WatchAndFetch(
      job->id(), "volume.raw", early_path,
      [&](const v1::JobEvent& event) { timeline.Event(event); }, /*resume=*/false,
      [&](uint64_t done, uint64_t) { timeline.Bytes(done); });
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  ASSERT_EQ(fetched->job.state(), v1::JOB_STATE_SUCCEEDED) << fetched->job.error();
  EXPECT_TRUE(fetched->started_early);
  EXPECT_TRUE(timeline.BytesBeforeTheEnd()) << "the fetch did not stream while writing";
  ASSERT_TRUE(fetched->file.has_value());

  const std::string plain_path = dir() + "/plain.raw";
  absl::StatusOr<v1::ResultFile> plain =
      client.Fetch(job->id(), "volume.raw", plain_path, /*resume=*/false);
  ASSERT_TRUE(plain.ok()) << plain.status();
  const std::string early_bytes = FileBytes(early_path), plain_bytes = FileBytes(plain_path);
  EXPECT_EQ(early_bytes.size(), 128u * 128u * 128u * 4u);
  EXPECT_TRUE(early_bytes == plain_bytes) << "the early fetch's file differs";
  const v1::ResultFile& recorded = fetched->job.results(0);
  EXPECT_EQ(recorded.name(), "volume.raw");
  EXPECT_EQ(fetched->file->crc32(), recorded.crc32());
  absl::StatusOr<uint32_t> crc = client::FileCrc32(early_path);
  ASSERT_TRUE(crc.ok()) << crc.status();
  EXPECT_EQ(*crc, recorded.crc32());
  EXPECT_FALSE(fs::exists(early_path + ".partial"));
  // The volume has the phantom in it, not zeros.
  float peak = 0;
  for (size_t at = 0; at + 4 <= early_bytes.size(); at += 4) {
    float value;
    std::memcpy(&value, early_bytes.data() + at, 4);
    peak = std::max(peak, value);
  }
  EXPECT_GT(peak, 0.5f);
}

// An early fetch that resumes from a partial file (offset > 0) streams the rest from
// memory the same way: the same job run twice (the CPU's FDK gives the same bytes), the
// start of the first's file left as the second's partial download.
TEST_F(EarlyFetchTest, EarlyFetchResumesFromAnOffset) {
  client::TomoClient client(server());
  absl::StatusOr<v1::Job> first = client.Submit(spec_, {sinogram()});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string first_path = dir() + "/first.raw";
  absl::StatusOr<client::WatchedFetch> whole =
      client.WatchAndFetch(first->id(), "volume.raw", first_path);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(whole->file.has_value()) << whole->job.error();
  const std::string bytes = FileBytes(first_path);
  const size_t kept = (3 << 20) + 5;  // not a chunk boundary
  ASSERT_GT(bytes.size(), kept);

  absl::StatusOr<v1::Job> second = client.Submit(spec_, {sinogram()});
  ASSERT_TRUE(second.ok()) << second.status();
  const std::string path = dir() + "/second.raw";
  WriteBytes(path + ".partial", bytes.substr(0, kept));
  Timeline timeline;
  uint64_t first_progress = 0;
  absl::StatusOr<client::WatchedFetch> resumed = client.WatchAndFetch(
      second->id(), "volume.raw", path, [&](const v1::JobEvent& event) { timeline.Event(event); },
      /*resume=*/true, [&](uint64_t done, uint64_t) {
        if (first_progress == 0) first_progress = done;
        timeline.Bytes(done);
      });
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE(resumed->file.has_value()) << resumed->job.error();
  EXPECT_TRUE(resumed->started_early);
  EXPECT_TRUE(timeline.BytesBeforeTheEnd());
  EXPECT_EQ(first_progress, kept + (1 << 20)) << "not resumed from the partial file";
  EXPECT_TRUE(FileBytes(path) == bytes);
  EXPECT_EQ(resumed->file->crc32(), whole->job.results(0).crc32());
}

// A cancel while the result streams (asked on its first bytes; the job ends once its
// outputs are written): the fetch ends ABORTED, naming the job and CANCELLED, and leaves
// no file.
TEST_F(EarlyFetchTest, CancelWhileFetchingAbortsTheFetchAndKeepsNoFile) {
  client::TomoClient client(server());
  absl::StatusOr<v1::Job> job = client.Submit(spec_, {sinogram()});
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string path = dir() + "/cancelled.raw";
  std::thread fetcher;
  std::atomic<bool> cancel_asked{false};
  absl::Status fetch_status;
  Timeline timeline;
  absl::Status watched = client.Watch(job->id(), [&](const v1::JobEvent& event) {
    timeline.Event(event);
    if (event.state() != v1::JOB_STATE_RUNNING ||
        event.progress().stage() != client::kWriteResultsStage || fetcher.joinable()) {
      return;
    }
    fetcher = std::thread([&] {
      fetch_status = client
                         .Fetch(job->id(), "volume.raw", path, /*resume=*/true,
                                [&](uint64_t done, uint64_t) {
                                  timeline.Bytes(done);
                                  if (done > 0 && !cancel_asked.exchange(true)) {
                                    absl::StatusOr<v1::Job> cancelled = client.Cancel(job->id());
                                    EXPECT_TRUE(cancelled.ok()) << cancelled.status();
                                  }
                                })
                         .status();
    });
  });
  ASSERT_TRUE(fetcher.joinable()) << "no write results event";
  fetcher.join();
  ASSERT_TRUE(watched.ok()) << watched;
  EXPECT_TRUE(cancel_asked);
  EXPECT_TRUE(timeline.BytesBeforeTheEnd());
  EXPECT_EQ(fetch_status.code(), absl::StatusCode::kAborted) << fetch_status;
  EXPECT_THAT(fetch_status.message(), AllOf(HasSubstr(job->id()), HasSubstr("CANCELLED")));
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".partial"));
  absl::StatusOr<v1::Job> ended = client.GetJob(job->id());
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(ended->state(), v1::JOB_STATE_CANCELLED);
}

// A job that fails while its raw result streams: its volume has non-finite voxels (one
// detector row of 3.4e38 overflows the filter), which the raw file takes but the DICOM
// series after it refuses. WatchAndFetch returns the job FAILED with that error and no file.
TEST_F(EarlyFetchTest, JobFailingWhileFetchedLeavesNoFileAndItsError) {
  std::string bytes = FileBytes(sinogram());
  const uint32_t rows = spec_.geometry().cone().detector().rows();
  const uint32_t columns = spec_.geometry().cone().detector().columns();
  ASSERT_EQ(bytes.size(), size_t{64} * rows * columns * 4);
  const float huge = 3.4e38f;
  for (uint32_t column = 0; column < columns; ++column) {  // view 0, the middle row
    std::memcpy(bytes.data() + (size_t{rows / 2} * columns + column) * 4, &huge, 4);
  }
  const std::string broken = dir() + "/overflowing.raw";
  WriteBytes(broken, bytes);
  spec_.add_outputs(v1::OUTPUT_FORMAT_DICOM_CT_SERIES);
  spec_.mutable_output_options()->set_water_attenuation_per_mm(0.02);

  client::TomoClient client(server());
  absl::StatusOr<v1::Job> job = client.Submit(spec_, {broken});
  ASSERT_TRUE(job.ok()) << job.status();
  Timeline timeline;
  const std::string path = dir() + "/failed.raw";
  absl::StatusOr<client::WatchedFetch> fetched = client.WatchAndFetch(
      job->id(), "volume.raw", path, [&](const v1::JobEvent& event) { timeline.Event(event); },
      /*resume=*/true, [&](uint64_t done, uint64_t) { timeline.Bytes(done); });
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->job.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(fetched->job.error(), HasSubstr("not finite"));
  // A volume that is not finite is refused before it is shared (docs/limits.md): the
  // fetch that waited for it gets no byte of it.
  EXPECT_FALSE(timeline.BytesBeforeTheEnd()) << "a volume that is not finite was streamed";
  EXPECT_FALSE(fetched->file.has_value());
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".partial"));
}

// A job that fails while its outputs are written, after its volume was shared: here the
// DICOM series, whose writer needs DCMTK's data dictionary, which this tomod cannot load.
// The fetch streamed the raw volume meanwhile; it ends ABORTED and leaves no file.
TEST_F(EarlyFetchTest, JobFailingWhileStreamedLeavesNoFileAndItsError) {
  ASSERT_EQ(StopDaemon(), 0);
  StartDaemon({"--devices=cpu"}, {"DCMDICTPATH=" + dir() + "/no-such-dicom.dic"});
  ASSERT_FALSE(HasFatalFailure());
  spec_.add_outputs(v1::OUTPUT_FORMAT_DICOM_CT_SERIES);
  spec_.mutable_output_options()->set_water_attenuation_per_mm(0.02);

  client::TomoClient client(server());
  absl::StatusOr<v1::Job> job = client.Submit(spec_, {sinogram()});
  ASSERT_TRUE(job.ok()) << job.status();
  Timeline timeline;
  const std::string path = dir() + "/failed.raw";
  absl::StatusOr<client::WatchedFetch> fetched = client.WatchAndFetch(
      job->id(), "volume.raw", path, [&](const v1::JobEvent& event) { timeline.Event(event); },
      /*resume=*/true, [&](uint64_t done, uint64_t) { timeline.Bytes(done); });
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->job.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(fetched->job.error(), HasSubstr("data dictionary"));
  EXPECT_TRUE(fetched->started_early);
  EXPECT_TRUE(timeline.BytesBeforeTheEnd()) << "the fetch did not stream while writing";
  EXPECT_FALSE(fetched->file.has_value());
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".partial"));
}

}  // namespace
}  // namespace tomo::testing
