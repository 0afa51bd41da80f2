#include "runner/job_execution.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/algorithms/reconstruction.h"
#include "core/io/raw_io.h"
#include "core/operators/cpu/cpu_backend.h"
#include "core/phantom/ellipse_phantom.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runner/job_spec.h"
#include "tests/runner/test_jobs.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
using ::testing::HasSubstr;
using testing::Crc32;
using testing::NewTempDir;
using testing::PhantomSinogramBytes;
using testing::ReadFile;
using testing::SmallSpec;

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class JobExecutionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTempDir("execution");
    spec_ = SmallSpec(64, 90, 64);
    auto job = ValidateJobSpec(spec_, {});
    ASSERT_TRUE(job.ok()) << job.status();
    job_ = std::make_unique<ValidatedJob>(std::move(*job));
    input_ = dir_ + "/input.bin";
  }

  std::string dir_;
  pb::JobSpec spec_;
  std::unique_ptr<ValidatedJob> job_;
  std::string input_;
  core::CpuBackend backend_{2};
  core::AlgorithmRegistry registry_ = core::AlgorithmRegistry::WithBuiltins();
};

TEST(EffectiveMemoryBudgetTest, SmallestNonZero) {
  EXPECT_EQ(EffectiveMemoryBudget(0, 0, 0), 0u);  // no limit (the CPU)
  EXPECT_EQ(EffectiveMemoryBudget(0, 0, 80), 80u);
  EXPECT_EQ(EffectiveMemoryBudget(50, 0, 80), 50u);
  EXPECT_EQ(EffectiveMemoryBudget(90, 60, 80), 60u);
  EXPECT_EQ(EffectiveMemoryBudget(0, 70, 0), 70u);
  EXPECT_EQ(EffectiveMemoryBudget(100, 0, 0), 100u);
}

TEST_F(JobExecutionTest, SmallFbpWritesVolumeRawWithItsCrc) {
  WriteBytes(input_, PhantomSinogramBytes(spec_));
  std::vector<core::ProgressUpdate> progress;
  core::RunContext context;
  context.on_progress = [&](const core::ProgressUpdate& p) { progress.push_back(p); };
  auto results = ExecuteJob(*job_, input_, dir_ + "/results", backend_, registry_, context);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 2u);  // the volume, then its JSON sidecar
  EXPECT_EQ((*results)[1].name(), "volume.json");
  const pb::ResultFile& file = (*results)[0];
  EXPECT_EQ(file.name(), "volume.raw");
  EXPECT_EQ(file.name(), ResultFileName(pb::OUTPUT_FORMAT_RAW_FLOAT32));
  EXPECT_EQ(file.format(), pb::OUTPUT_FORMAT_RAW_FLOAT32);
  EXPECT_EQ(file.size_bytes(), 64u * 64u * 4u);
  const std::string bytes = ReadFile(dir_ + "/results/volume.raw");
  ASSERT_EQ(bytes.size(), file.size_bytes());
  EXPECT_EQ(file.crc32(), Crc32(bytes));
  EXPECT_FALSE(progress.empty());

  // The image resembles the phantom: small error relative to its contrast.
  auto volume = core::ReadRawFloat32(dir_ + "/results/volume.raw", {1, 64, 64});
  ASSERT_TRUE(volume.ok()) << volume.status();
  auto truth = core::EllipsePhantom::ModifiedSheppLogan(0.45 * 64).Rasterize(
      job_->request.volume, 2);
  double sum = 0;
  for (int64_t i = 0; i < truth.size(); ++i) {
    const double d = volume->data()[i] - truth.data()[i];
    sum += d * d;
  }
  const double rmse = std::sqrt(sum / static_cast<double>(truth.size()));
  RecordProperty("rmse", std::to_string(rmse));
  // Densities are in [0, 1]; measured 0.055 for this 64 x 64, 90-view case (edges of a
  // coarse grid dominate). The core's tests own the accuracy claims; this checks the
  // plumbing (right geometry, right scale, right byte order).
  EXPECT_LT(rmse, 0.08) << "rmse " << rmse;
}

// RMSE of a 64 x 64 result against the small phantom.
double PhantomRmse(const std::string& raw, const core::VolumeGeometry& volume) {
  auto image = core::ReadRawFloat32(raw, {1, 64, 64});
  EXPECT_TRUE(image.ok()) << image.status();
  if (!image.ok()) return 1e9;
  auto truth = core::EllipsePhantom::ModifiedSheppLogan(0.45 * 64).Rasterize(volume, 2);
  double sum = 0;
  for (int64_t i = 0; i < truth.size(); ++i) {
    const double d = image->data()[i] - truth.data()[i];
    sum += d * d;
  }
  return std::sqrt(sum / static_cast<double>(truth.size()));
}

// A 360-degree scan whose axis projects onto column 35.3 of 64 (3.8 columns right of the
// centre): given as that column, or estimated, the reconstruction matches the phantom as a
// centred scan's does (rmse 0.055 measured, < 0.08); the mirrored column 27.7 (the sign
// error the docs warn of) does not. The estimate is in the notes.
TEST_F(JobExecutionTest, CentreOfRotationGivenOrEstimated) {
  constexpr double kColumn = 35.3;
  pb::JobSpec data_spec = SmallSpec(64, 120, 64);
  data_spec.mutable_geometry()->mutable_parallel_2d()->mutable_angles()->mutable_uniform()
      ->set_span_deg(360);
  data_spec.mutable_geometry()->mutable_parallel_2d()->set_detector_offset_mm(31.5 - kColumn);
  WriteBytes(input_, PhantomSinogramBytes(data_spec));
  for (const char* mode : {"column", "estimate", "mirrored"}) {
    SCOPED_TRACE(mode);
    pb::JobSpec spec = data_spec;
    pb::ParallelBeam2D* parallel = spec.mutable_geometry()->mutable_parallel_2d();
    parallel->clear_detector_offset_mm();
    if (std::string(mode) == "estimate") {
      parallel->mutable_center_of_rotation()->mutable_estimate();
    } else {
      parallel->mutable_center_of_rotation()->set_column(
          std::string(mode) == "column" ? kColumn : 63.0 - kColumn);
    }
    absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->center_estimate.has_value(), std::string(mode) == "estimate");
    EXPECT_FALSE(InputIsPlainProjections(*job) && job->center_estimate.has_value());
    std::vector<std::string> notes;
    core::RunContext context;
    context.on_progress = [&](const core::ProgressUpdate& p) {
      if (!p.note.empty()) notes.push_back(p.note);
    };
    const std::string out = dir_ + "/" + mode;
    auto results = ExecuteJob(*job, input_, out, backend_, registry_, context);
    ASSERT_TRUE(results.ok()) << results.status();
    const double rmse = PhantomRmse(out + "/volume.raw", job->request.volume);
    std::printf("    %s: rmse %.4f\n", mode, rmse);
    if (std::string(mode) == "mirrored") {
      EXPECT_GT(rmse, 0.12);
      continue;
    }
    EXPECT_LT(rmse, 0.08);
    if (std::string(mode) == "estimate") {
      ASSERT_EQ(notes.size(), 1u);
      // Within 0.05 column of 35.3.
      EXPECT_THAT(notes[0], ::testing::ContainsRegex(
                                "centre of rotation: column 35\\.(2[5-9]|3[0-5]) estimated by "
                                "opposing rays \\(60 views compared\\)"));
    }
  }
  // Refusals name the field.
  pb::JobSpec spec = data_spec;
  spec.mutable_geometry()->mutable_parallel_2d()->mutable_center_of_rotation()->set_column(64);
  EXPECT_THAT(ValidateJobSpec(spec, {}).status().message(),
              HasSubstr("geometry.parallel_2d.center_of_rotation: set with "
                        "geometry.parallel_2d.detector_offset_mm -3.8"));
  spec.mutable_geometry()->mutable_parallel_2d()->clear_detector_offset_mm();
  EXPECT_THAT(ValidateJobSpec(spec, {}).status().message(),
              HasSubstr("geometry.parallel_2d.center_of_rotation.column: 64 is out of range "
                        "[0, 63]"));
  spec.mutable_geometry()->mutable_parallel_2d()->mutable_center_of_rotation()
      ->mutable_estimate()->set_search_radius_columns(40);
  EXPECT_THAT(ValidateJobSpec(spec, {}).status().message(),
              HasSubstr("estimate.search_radius_columns: 40 is out of range [0, 32.5)"));
}

TEST_F(JobExecutionTest, NanInInputIsInvalidArgumentNamingTheIndex) {
  std::string bytes = PhantomSinogramBytes(spec_);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&bytes[4 * 130], &nan, 4);  // view 2, detector 2
  WriteBytes(input_, bytes);
  auto results = ExecuteJob(*job_, input_, dir_ + "/results", backend_, registry_, {});
  EXPECT_EQ(results.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(results.status().message(), HasSubstr("index 130 (view 2, row 0, detector 2)"));
}

TEST_F(JobExecutionTest, ShortInputIsInvalidArgument) {
  WriteBytes(input_, std::string(100, '\0'));
  auto results = ExecuteJob(*job_, input_, dir_ + "/results", backend_, registry_, {});
  EXPECT_EQ(results.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JobExecutionTest, MissingInputIsNotFound) {
  auto results = ExecuteJob(*job_, dir_ + "/nothing.bin", dir_ + "/results", backend_,
                            registry_, {});
  EXPECT_EQ(results.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobExecutionTest, CancelledContextStops) {
  WriteBytes(input_, PhantomSinogramBytes(spec_));
  core::RunContext context;
  context.is_cancelled = [] { return true; };
  auto results = ExecuteJob(*job_, input_, dir_ + "/results", backend_, registry_, context);
  EXPECT_EQ(results.status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/results/volume.raw"));
}

// Finite projections whose filtered sums overflow float32 make a volume of infinities and
// NaN: the job fails saying so and writes nothing, never succeeds with it.
TEST_F(JobExecutionTest, NonFiniteResultIsOutOfRangeAndWritesNothing) {
  const int64_t values = static_cast<int64_t>(spec_.input().size_bytes() / 4);
  std::string bytes(static_cast<size_t>(values) * 4, '\0');
  for (int64_t i = 0; i < values; ++i) {
    const float value = (i % 2 == 0 ? 1 : -1) * 3e38f;  // finite, near float32's maximum
    std::memcpy(&bytes[4 * i], &value, 4);
  }
  WriteBytes(input_, bytes);
  bool shared = false;
  auto results = ExecuteJob(*job_, input_, JobInputStage(), dir_ + "/results", {&backend_},
                            registry_, {}, [&](std::shared_ptr<const core::Array3D>) {
                              shared = true;
                            });
  EXPECT_EQ(results.status().code(), absl::StatusCode::kOutOfRange) << results.status();
  EXPECT_THAT(results.status().message(),
              HasSubstr("result: the reconstructed volume is not finite (voxel z 0, y "));
  EXPECT_FALSE(shared);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/results/volume.raw"));
}

}  // namespace
}  // namespace tomo::server
