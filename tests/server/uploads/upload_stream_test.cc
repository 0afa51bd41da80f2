#include "server/uploads/upload_stream.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/algorithms/reconstruction.h"
#include "core/devices/devices.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runner/job_execution.h"
#include "runner/job_spec.h"
#include "tests/runner/test_jobs.h"
#include "tests/core/random_seed.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
using ::testing::HasSubstr;
using testing::NewTempDir;
using testing::PhantomConeProjectionBytes;
using testing::SmallConeSpec;

class UploadStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = core::MakeBackend(core::CpuDevice());
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    path_ = NewTempDir("upload_stream") + "/input.bin";
  }

  // Fails the test (and aborts it at its use) when the spec is invalid.
  static ValidatedJob Validate(const pb::JobSpec& spec) {
    absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
    EXPECT_TRUE(job.ok()) << job.status();
    return std::move(job).value();
  }

  // Receives bytes in chunks of `piece` bytes as an upload does: shares each chunk with the
  // feed, then appends it to the input file (or, when given, the same range of
  // file_bytes: what the follower would read from the file instead) and reports it
  // written; then ends the feed with `end` (kNone: leaves it open).
  std::thread Upload(const std::string& bytes, size_t piece, UploadFeed& feed,
                     UploadFeed::End end, size_t stop_after = std::string::npos,
                     std::optional<std::string> file_bytes = std::nullopt) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc);  // exists before the reader opens it
    return std::thread([this, bytes, piece, &feed, end, stop_after, file_bytes] {
      std::ofstream out(path_, std::ios::binary | std::ios::app);
      for (size_t at = 0; at < std::min(bytes.size(), stop_after); at += piece) {
        const size_t n = std::min(piece, bytes.size() - at);
        feed.Received(std::make_shared<const std::string>(bytes.substr(at, n)));
        out.write((file_bytes ? *file_bytes : bytes).data() + at, static_cast<std::streamsize>(n));
        out.flush();
        feed.Written(at + n);
        absl::SleepFor(absl::Microseconds(200));
      }
      if (end != UploadFeed::End::kNone) feed.Finish(end);
    });
  }

  // Whether volume has exactly the bytes ExecuteJob writes from `bytes` as the spooled
  // input (what a worker runs when it does not follow).
  ::testing::AssertionResult SameAsTheRunOnTheSpool(const ValidatedJob& job,
                                                    const std::string& bytes,
                                                    const core::Array3D& volume) {
    const std::string spooled = NewTempDir("upload_stream_spool") + "/input.bin";
    std::ofstream(spooled, std::ios::binary) << bytes;
    const std::string output_dir = NewTempDir("upload_stream_results");
    absl::StatusOr<std::vector<pb::ResultFile>> results =
        ExecuteJob(job, spooled, output_dir, *backend_, registry_, core::RunContext());
    if (!results.ok()) return ::testing::AssertionFailure() << results.status();
    const std::string whole = testing::ReadFile(output_dir + "/volume.raw");
    if (whole.size() != volume.size_bytes() ||
        std::memcmp(volume.data(), whole.data(), whole.size()) != 0) {
      return ::testing::AssertionFailure()
             << "the followed volume differs from the run on the spooled input";
    }
    return ::testing::AssertionSuccess();
  }

  // Pieces of three views (the input arrives in pieces that split views), so that the
  // views are fed while the file still grows.
  absl::StatusOr<core::Array3D> Follow(const ValidatedJob& job, UploadFeed& feed,
                                       uint64_t budget = 0) {
    core::RunContext context;
    context.memory_budget_bytes = budget;
    const core::Dims3 dims = core::ProjectionDims(job.request.geometry);
    const uint64_t piece_bytes = 3 * dims.d1 * dims.d2 * sizeof(float) + 1;
    return ReconstructWhileUploading(job, path_, feed, registry_, *backend_, context,
                                     piece_bytes);
  }

  core::AlgorithmRegistry registry_ = core::AlgorithmRegistry::WithBuiltins();
  std::unique_ptr<core::Backend> backend_;
  std::string path_;
};

TEST_F(UploadStreamTest, WhichJobsCanBeFollowed) {
  const pb::JobSpec cone = SmallConeSpec();
  EXPECT_TRUE(CanReconstructWhileUploading(Validate(cone), registry_));
  EXPECT_FALSE(CanReconstructWhileUploading(Validate(testing::SmallSpec()), registry_))
      << "2D parallel FBP is not streamed";
  pb::JobSpec sirt = cone;
  sirt.mutable_algorithm()->mutable_sirt()->set_iterations(3);
  EXPECT_FALSE(CanReconstructWhileUploading(Validate(sirt), registry_));
  pb::JobSpec big_endian = cone;
  big_endian.mutable_input()->set_encoding(pb::DATA_ENCODING_FLOAT32_BE);
  EXPECT_FALSE(CanReconstructWhileUploading(Validate(big_endian), registry_));
  pb::JobSpec logged = cone;
  logged.mutable_input()->mutable_preprocessing()->set_negative_log(true);
  EXPECT_FALSE(CanReconstructWhileUploading(Validate(logged), registry_));
}

// Views assembled from the chunks as they arrive (pieces that split views) give exactly
// the volume of the run on the whole input, which is within the FDK bound of the analytic phantom.
TEST_F(UploadStreamTest, VolumeEqualsTheRunOnTheWholeInput) {
  const pb::JobSpec spec = SmallConeSpec(96, 40, 64, 32);
  const ValidatedJob job = Validate(spec);
  const std::string bytes = PhantomConeProjectionBytes(spec);
  ASSERT_EQ(bytes.size(), job.input_bytes);
  UploadFeed feed;
  std::thread upload = Upload(bytes, 10007, feed, UploadFeed::End::kCommitted);
  absl::StatusOr<core::Array3D> followed = Follow(job, feed);
  upload.join();
  ASSERT_TRUE(followed.ok()) << followed.status();

  EXPECT_TRUE(SameAsTheRunOnTheSpool(job, bytes, *followed));
  // The phantom's own voxels are the oracle: over the central slices (small cone angle),
  // the volume is far closer to them than an empty volume is.
  const int64_t n = spec.volume().size().x();
  const core::Array3D truth = core::EllipsoidPhantom::SheppLogan3D(0.4 * n)
                                  .Rasterize(job.request.volume, /*supersampling=*/2);
  double error = 0, empty = 0;
  int64_t count = 0;
  for (int64_t z = n / 2 - n / 8; z < n / 2 + n / 8; ++z) {
    for (int64_t y = 0; y < n; ++y) {
      for (int64_t x = 0; x < n; ++x) {
        const double d = followed->at(z, y, x) - truth.at(z, y, x);
        error += d * d;
        empty += double(truth.at(z, y, x)) * truth.at(z, y, x);
        ++count;
      }
    }
  }
  const double rmse = std::sqrt(error / count), rms = std::sqrt(empty / count);
  std::printf("followed FDK: central RMSE %.4f, phantom RMS %.4f\n", rmse, rms);
  EXPECT_LT(rmse, 0.35 * rms);
}

TEST_F(UploadStreamTest, AnAbortedOrLeftUploadIsCancelledNamingWhy) {
  const pb::JobSpec spec = SmallConeSpec();
  const ValidatedJob job = Validate(spec);
  const std::string bytes = PhantomConeProjectionBytes(spec);
  for (UploadFeed::End end : {UploadFeed::End::kAborted, UploadFeed::End::kYielded}) {
    UploadFeed feed;
    // Half the views arrive, then the upload ends without its commit.
    std::thread upload = Upload(bytes, 4096, feed, end, bytes.size() / 2);
    absl::StatusOr<core::Array3D> followed = Follow(job, feed);
    upload.join();
    ASSERT_FALSE(followed.ok());
    EXPECT_EQ(followed.status().code(), absl::StatusCode::kCancelled);
    EXPECT_THAT(followed.status().message(), HasSubstr(UploadFeedEndName(end)));
    EXPECT_THAT(followed.status().message(), HasSubstr("of 48 views"));
  }
}

TEST_F(UploadStreamTest, AllViewsButNoCommitDropsTheVolume) {
  const pb::JobSpec spec = SmallConeSpec();
  const ValidatedJob job = Validate(spec);
  const std::string bytes = PhantomConeProjectionBytes(spec);
  UploadFeed feed;
  std::thread upload = Upload(bytes, 8192, feed, UploadFeed::End::kAborted);  // a bad CRC
  absl::StatusOr<core::Array3D> followed = Follow(job, feed);
  upload.join();
  EXPECT_EQ(followed.status().code(), absl::StatusCode::kCancelled) << followed.status();
}

TEST_F(UploadStreamTest, NonFiniteValueIsRefusedNamingItsView) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  const pb::JobSpec spec = SmallConeSpec(48, 20, 32, 16);
  const ValidatedJob job = Validate(spec);
  std::string bytes = PhantomConeProjectionBytes(spec);
  std::mt19937_64 random(seed);
  const int64_t view = 1 + static_cast<int64_t>(random() % 46);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + (view * 20 * 32 + 5 * 32 + 7) * 4, &nan, 4);
  UploadFeed feed;
  std::thread upload = Upload(bytes, 5000, feed, UploadFeed::End::kCommitted);
  absl::StatusOr<core::Array3D> followed = Follow(job, feed);
  upload.join();
  ASSERT_EQ(followed.status().code(), absl::StatusCode::kInvalidArgument) << followed.status();
  EXPECT_THAT(followed.status().message(),
              HasSubstr(absl::StrCat("(view ", view, ", row 5, detector 7)")));
}

// Views of 133120 values span three of the follower's copy-and-check blocks; chunks of an
// odd size split values. Followed during the upload (pieces of three views on two
// threads) and after it (the backlog in one piece on eight threads), the volume is the
// spool run's, and of two bad values in different views the first is named, whichever
// thread meets the other one first.
TEST_F(UploadStreamTest, ViewsLargerThanACopyBlockDuringAndAfterTheUpload) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const pb::JobSpec spec = SmallConeSpec(8, 130, 1024, 16);
  const ValidatedJob job = Validate(spec);
  const std::string bytes = PhantomConeProjectionBytes(spec);
  auto follow = [&](const std::string& input, bool after_the_upload) {
    UploadFeed feed;
    std::thread upload = Upload(input, 100003, feed, UploadFeed::End::kCommitted);
    if (after_the_upload) upload.join();
    absl::StatusOr<core::Array3D> followed = Follow(job, feed);
    if (!after_the_upload) upload.join();
    return followed;
  };
  const int64_t view = 1 + static_cast<int64_t>(random() % 5);
  const int64_t row = 70 + static_cast<int64_t>(random() % 60);
  const int64_t later_view = view + 1 + static_cast<int64_t>(random() % (7 - view));
  std::string broken = bytes;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float infinity = std::numeric_limits<float>::infinity();
  std::memcpy(broken.data() + ((view * 130 + row) * 1024 + 3) * 4, &nan, 4);
  std::memcpy(broken.data() + (later_view * 130 * 1024) * 4, &infinity, 4);
  for (const bool after_the_upload : {false, true}) {
    SCOPED_TRACE(after_the_upload ? "followed after the upload" : "followed during the upload");
    absl::StatusOr<core::Array3D> followed = follow(bytes, after_the_upload);
    ASSERT_TRUE(followed.ok()) << followed.status();
    EXPECT_TRUE(SameAsTheRunOnTheSpool(job, bytes, *followed));
    absl::StatusOr<core::Array3D> refused = follow(broken, after_the_upload);
    ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
    EXPECT_THAT(refused.status().message(),
                HasSubstr(absl::StrCat("(view ", view, ", row ", row, ", detector 3)")));
  }
}

// The kept chunks are what the follower uses: a file that holds other bytes (zeros) is
// not read while the chunks are in memory.
TEST_F(UploadStreamTest, ChunksKeptInMemoryAreUsedInsteadOfTheFile) {
  const pb::JobSpec spec = SmallConeSpec(48, 20, 32, 16);
  const ValidatedJob job = Validate(spec);
  const std::string bytes = PhantomConeProjectionBytes(spec);
  UploadFeed feed;
  std::thread upload = Upload(bytes, 7001, feed, UploadFeed::End::kCommitted,
                              std::string::npos, std::string(bytes.size(), '\0'));
  absl::StatusOr<core::Array3D> followed = Follow(job, feed);
  upload.join();
  ASSERT_TRUE(followed.ok()) << followed.status();
  EXPECT_TRUE(SameAsTheRunOnTheSpool(job, bytes, *followed)) << "the follower read the file rather than the chunks it was given";
}

// A follower that starts after the whole upload, with room for three chunks: it takes
// those from memory and reads the rest (split across chunk and piece boundaries) from
// the file, and the volume is still exactly the run on the spool.
TEST_F(UploadStreamTest, WhatWasNotKeptIsReadFromTheFile) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const pb::JobSpec spec = SmallConeSpec(48, 20, 32, 16);
  const ValidatedJob job = Validate(spec);
  const std::string bytes = PhantomConeProjectionBytes(spec);
  const size_t chunk = 3000 + random() % 9000;
  UploadFeed feed(/*max_kept_bytes=*/3 * chunk);
  std::thread upload = Upload(bytes, chunk, feed, UploadFeed::End::kCommitted);
  upload.join();
  absl::StatusOr<core::Array3D> followed = Follow(job, feed);
  ASSERT_TRUE(followed.ok()) << followed.status();
  EXPECT_TRUE(SameAsTheRunOnTheSpool(job, bytes, *followed)) << "chunk " << chunk;
}

TEST_F(UploadStreamTest, ABudgetThatNeedsSlabsIsAFailedPrecondition) {
  const pb::JobSpec spec = SmallConeSpec();
  const ValidatedJob job = Validate(spec);
  UploadFeed feed;
  feed.Finish(UploadFeed::End::kCommitted);
  absl::StatusOr<core::Array3D> followed = Follow(job, feed, /*budget=*/64 << 10);
  EXPECT_EQ(followed.status().code(), absl::StatusCode::kFailedPrecondition)
      << followed.status();
}

// On a CUDA device (the GPU machine; skipped without one): more than one of the device
// pipeline's 256 MB chunks, fed while the file grows, give exactly the volume ExecuteJob
// writes from the spooled input with the worker's cancellable context.
TEST_F(UploadStreamTest, OnACudaDeviceTheVolumeEqualsTheRunOnTheSpool) {
  std::optional<core::DeviceInfo> cuda;
  for (const core::DeviceInfo& device : core::ListDevices()) {
    if (device.kind == core::DeviceKind::kCuda) {
      cuda = device;
      break;
    }
  }
  if (!cuda.has_value()) GTEST_SKIP() << "no CUDA device";
  auto backend = core::MakeBackend(*cuda);
  ASSERT_TRUE(backend.ok()) << backend.status();
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 2.0f);
  const pb::JobSpec spec = SmallConeSpec(600, 256, 512, 128);  // 315 MB
  const ValidatedJob job = Validate(spec);
  std::vector<float> values(job.input_bytes / sizeof(float));
  for (float& v : values) v = uniform(random);
  const std::string bytes(reinterpret_cast<const char*>(values.data()), job.input_bytes);
  UploadFeed feed;
  std::thread upload = Upload(bytes, 1 << 20, feed, UploadFeed::End::kCommitted);
  core::RunContext context;
  absl::StatusOr<core::Array3D> followed =
      ReconstructWhileUploading(job, path_, feed, registry_, **backend, context);
  upload.join();
  ASSERT_TRUE(followed.ok()) << followed.status();

  const std::string output_dir = NewTempDir("upload_stream_cuda_results");
  core::RunContext cancellable;
  cancellable.is_cancelled = [] { return false; };
  absl::StatusOr<std::vector<pb::ResultFile>> results =
      ExecuteJob(job, path_, output_dir, **backend, registry_, cancellable);
  ASSERT_TRUE(results.ok()) << results.status();
  const std::string whole = testing::ReadFile(output_dir + "/volume.raw");
  ASSERT_EQ(whole.size(), followed->size_bytes());
  EXPECT_EQ(std::memcmp(followed->data(), whole.data(), whole.size()), 0)
      << "the followed volume differs from the run on the spooled input";
}

TEST(UploadFeedTest, FirstEndCountsAndWrittenOnlyGrows) {
  UploadFeed feed;
  feed.Written(100);
  feed.Written(50);
  EXPECT_EQ(feed.WaitForBytes(100), UploadFeed::End::kNone);
  feed.Finish(UploadFeed::End::kCommitted);
  feed.Finish(UploadFeed::End::kYielded);
  EXPECT_EQ(feed.end(), UploadFeed::End::kCommitted);
  EXPECT_EQ(feed.WaitForBytes(100), UploadFeed::End::kNone) << "bytes there are there";
  EXPECT_EQ(feed.WaitForBytes(101), UploadFeed::End::kCommitted);
  EXPECT_EQ(feed.WaitForEnd(), UploadFeed::End::kCommitted);
}

TEST(UploadFeedTest, KeepsChunksUpToItsBoundAndLetsGoOfThoseTaken) {
  UploadFeed feed(/*max_kept_bytes=*/25);
  for (int i = 0; i < 4; ++i) feed.Received(std::make_shared<const std::string>(10, 'a' + i));
  std::vector<UploadFeed::Chunk> kept;
  // Chunks [0,10) and [10,20) fit; [20,30) and [30,40) are only counted as received.
  EXPECT_EQ(feed.received_bytes(), 40u);
  ASSERT_EQ(feed.TakeReceived(5, 15, &kept), UploadFeed::End::kNone);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].offset, 0u);
  EXPECT_EQ(*kept[1].bytes, std::string(10, 'b'));
  // [0,10) was let go, [10,20) is kept (it ends after 15).
  ASSERT_EQ(feed.TakeReceived(15, 40, &kept), UploadFeed::End::kNone);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].offset, 10u);
  // Everything taken: room again for the next chunk.
  feed.Received(std::make_shared<const std::string>(20, 'e'));
  ASSERT_EQ(feed.TakeReceived(40, 60, &kept), UploadFeed::End::kNone);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].offset, 40u);
  // Bytes not received yet: the feed's end is returned instead.
  feed.Finish(UploadFeed::End::kAborted);
  EXPECT_EQ(feed.TakeReceived(60, 61, &kept), UploadFeed::End::kAborted);
}

TEST(UploadFeedTest, StoppedOrAbortedFeedsKeepNothing) {
  for (bool stop : {true, false}) {
    UploadFeed feed;
    feed.Received(std::make_shared<const std::string>(10, 'a'));
    if (stop) {
      feed.StopKeeping();
    } else {
      feed.Finish(UploadFeed::End::kYielded);
    }
    auto chunk = std::make_shared<const std::string>(10, 'b');
    feed.Received(chunk);
    EXPECT_EQ(chunk.use_count(), 1) << "kept after " << (stop ? "StopKeeping" : "a yield");
    std::vector<UploadFeed::Chunk> kept;
    if (stop) {
      ASSERT_EQ(feed.TakeReceived(0, 20, &kept), UploadFeed::End::kNone);
      EXPECT_TRUE(kept.empty());
    }
  }
}

}  // namespace
}  // namespace tomo::server
