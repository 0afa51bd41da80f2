#include "server/upload_stream.h"

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
#include "server/job_execution.h"
#include "server/job_spec.h"
#include "test_jobs.h"
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

  // Appends bytes to the input file in pieces of `piece` bytes, reporting each to feed, as
  // an upload's writer does; then ends the feed with `end` (kNone: leaves it open).
  std::thread Upload(const std::string& bytes, size_t piece, UploadFeed& feed,
                     UploadFeed::End end, size_t stop_after = std::string::npos) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc);  // exists before the reader opens it
    return std::thread([this, bytes, piece, &feed, end, stop_after] {
      std::ofstream out(path_, std::ios::binary | std::ios::app);
      for (size_t at = 0; at < std::min(bytes.size(), stop_after); at += piece) {
        const size_t n = std::min(piece, bytes.size() - at);
        out.write(bytes.data() + at, static_cast<std::streamsize>(n));
        out.flush();
        feed.Written(at + n);
        absl::SleepFor(absl::Microseconds(200));
      }
      if (end != UploadFeed::End::kNone) feed.Finish(end);
    });
  }

  // Pieces of three views (the input arrives in pieces that split views), so that the
  // views are fed while the file still grows.
  absl::StatusOr<core::Array3D> Follow(const ValidatedJob& job, const UploadFeed& feed,
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

// Views read back as the file grows (pieces that split views) give exactly the volume of
// the run on the whole input, which is within the FDK bound of the analytic phantom.
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

  // ExecuteJob on the spooled input (what a worker runs otherwise) writes the same bytes.
  const std::string output_dir = NewTempDir("upload_stream_results");
  absl::StatusOr<std::vector<pb::ResultFile>> results =
      ExecuteJob(job, path_, output_dir, *backend_, registry_, core::RunContext());
  ASSERT_TRUE(results.ok()) << results.status();
  const std::string whole = testing::ReadFile(output_dir + "/volume.raw");
  ASSERT_EQ(whole.size(), followed->size_bytes());
  EXPECT_EQ(std::memcmp(followed->data(), whole.data(), whole.size()), 0)
      << "the followed volume differs from the run on the spooled input";
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

}  // namespace
}  // namespace tomo::server
