// MatrixCache with the "art" algorithm: a second job of the same scan and grid reuses the
// matrix (counted, not timed) and gives the same image; another grid or format builds anew;
// least recently used matrices go first when the bytes run out; the tiled layout's bytes
// (admission's count) are counted once per scan; a matrix over the budget is refused naming
// its bytes; ART reconstructs the analytic fan-beam phantom.
#include "server/jobs/matrix_cache.h"

#include <cmath>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/algorithms/reconstruction.h"
#include "core/algorithms/stored_matrix_art.h"
#include "core/geometry/geometry_builders.h"
#include "core/operators/cpu/cpu_backend.h"
#include "core/phantom/ellipse_phantom.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "core/system_matrix/tiled_runs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::server {
namespace {

using ::testing::HasSubstr;
namespace sm = ::tomo::core::system_matrix;

constexpr double kArtRmseBound = 0.069;

// A full fan-beam scan of 64 views (a multiple of 8: the symmetric format applies) of a
// size x size grid of 0.6 mm pixels; the phantom's exact line integrals.
struct FanJob {
  core::ReconstructionRequest request;
  core::Array3D projections;
  core::Array3D truth;
};

FanJob MakeFanJob(int64_t size, sm::MatrixFormat format, int64_t iterations = 4) {
  const double voxel = 0.6;
  const double side = static_cast<double>(size) * voxel;
  core::FanConeOptions fan;
  fan.source_origin_mm = 2.0 * side;
  fan.origin_detector_mm = side;
  const int64_t columns = size + size / 2 + 5;  // odd: symmetric about the centre ray
  fan.detector = {1, columns, 1.0, voxel * 1.5, 0.0, 0.0};
  fan.angles_rad = core::UniformAnglesRad(64, 0.0, 2.0 * M_PI);
  core::VectorGeometry geometry = core::MakeFan2D(fan).value();
  core::VolumeGeometry volume =
      core::VolumeGeometry::Create({size, size, 1}, {voxel, voxel, voxel}, {}).value();
  const auto flat = core::EllipsePhantom::ModifiedSheppLogan(side / 2.0);
  const auto extruded = core::EllipsoidPhantom::ExtrudedFrom(flat);
  core::StoredArtOptions art;
  art.art.iterations = iterations;
  art.format = format;
  FanJob job{{geometry, volume, art}, extruded.Project(geometry, 2),
             extruded.Rasterize(volume, 2)};
  return job;
}

double Rmse(const core::Array3D& a, const core::Array3D& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a.data()[i]) - b.data()[i];
    sum += d * d;
  }
  return std::sqrt(sum / static_cast<double>(a.size()));
}

// Runs the job through a registry whose "art" takes its matrices from `cache`, collecting
// the progress stages.
absl::StatusOr<core::Array3D> RunArt(const FanJob& job, std::shared_ptr<MatrixCache> cache,
                                  std::vector<std::string>* stages = nullptr,
                                  uint64_t budget = 0) {
  core::AlgorithmRegistry registry = core::AlgorithmRegistry::WithBuiltins();
  registry.Register("art", core::MakeStoredMatrixArtAlgorithm(std::move(cache)));
  core::CpuBackend backend;
  core::RunContext context;
  context.memory_budget_bytes = budget;
  context.on_progress = [stages](const core::ProgressUpdate& update) {
    if (stages != nullptr) stages->push_back(update.stage);
  };
  return registry.Run(job.request, job.projections, backend, context);
}

TEST(MatrixCacheTest, TheSecondJobOfTheSameScanReusesTheMatrix) {
  auto cache = std::make_shared<MatrixCache>(64ull << 20);
  const FanJob job = MakeFanJob(48, sm::MatrixFormat::kAutomatic);
  std::vector<std::string> first_stages, second_stages;
  auto first = RunArt(job, cache, &first_stages);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(cache->hits(), 0);
  EXPECT_EQ(cache->misses(), 1);
  EXPECT_EQ(cache->kept_matrices(), 1);
  ASSERT_FALSE(first_stages.empty());
  EXPECT_THAT(first_stages.front(), HasSubstr("art: symmetric format (eight-fold)"));
  EXPECT_THAT(first_stages.front(), HasSubstr("built in"));

  // The same scan again, as a new job (its own copy of the geometry).
  const FanJob again = MakeFanJob(48, sm::MatrixFormat::kAutomatic);
  auto second = RunArt(again, cache, &second_stages);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(cache->hits(), 1);
  EXPECT_EQ(cache->misses(), 1);
  ASSERT_FALSE(second_stages.empty());
  EXPECT_THAT(second_stages.front(), HasSubstr("reused from an earlier job"));
  ASSERT_EQ(first->size(), second->size());
  for (int64_t i = 0; i < first->size(); ++i) ASSERT_EQ(first->data()[i], second->data()[i]);

  // Another grid, or another format: built anew.
  ASSERT_TRUE(RunArt(MakeFanJob(40, sm::MatrixFormat::kAutomatic), cache).ok());
  ASSERT_TRUE(RunArt(MakeFanJob(48, sm::MatrixFormat::kCsr), cache).ok());
  EXPECT_EQ(cache->hits(), 1);
  EXPECT_EQ(cache->misses(), 3);
  EXPECT_EQ(cache->kept_matrices(), 3);
}

TEST(MatrixCacheTest, LeastRecentlyUsedGoFirstAndNothingIsKeptOverCapacity) {
  // Learn the sizes from a cache that keeps everything.
  auto probe = std::make_shared<MatrixCache>(1ull << 30);
  ASSERT_TRUE(RunArt(MakeFanJob(40, sm::MatrixFormat::kSymmetric), probe).ok());
  const uint64_t small = probe->kept_bytes();
  ASSERT_TRUE(RunArt(MakeFanJob(44, sm::MatrixFormat::kSymmetric), probe).ok());
  const uint64_t medium = probe->kept_bytes() - small;
  ASSERT_GT(small, 0u);

  // Room for the two, not for a third of the larger size.
  auto cache = std::make_shared<MatrixCache>(small + medium + medium / 2);
  ASSERT_TRUE(RunArt(MakeFanJob(40, sm::MatrixFormat::kSymmetric), cache).ok());
  ASSERT_TRUE(RunArt(MakeFanJob(44, sm::MatrixFormat::kSymmetric), cache).ok());
  ASSERT_TRUE(RunArt(MakeFanJob(40, sm::MatrixFormat::kSymmetric), cache).ok());  // 40 most recent
  EXPECT_EQ(cache->hits(), 1);
  ASSERT_TRUE(RunArt(MakeFanJob(48, sm::MatrixFormat::kSymmetric), cache).ok());  // evicts 44
  EXPECT_LE(cache->kept_bytes(), cache->capacity_bytes());
  ASSERT_TRUE(RunArt(MakeFanJob(40, sm::MatrixFormat::kSymmetric), cache).ok());
  EXPECT_EQ(cache->hits(), 2);  // 40 stayed
  ASSERT_TRUE(RunArt(MakeFanJob(44, sm::MatrixFormat::kSymmetric), cache).ok());
  EXPECT_EQ(cache->hits(), 2);  // 44 was dropped

  auto none = std::make_shared<MatrixCache>(0);
  ASSERT_TRUE(RunArt(MakeFanJob(40, sm::MatrixFormat::kSymmetric), none).ok());
  ASSERT_TRUE(RunArt(MakeFanJob(40, sm::MatrixFormat::kSymmetric), none).ok());
  EXPECT_EQ(none->hits(), 0);
  EXPECT_EQ(none->kept_matrices(), 0);
}

TEST(MatrixCacheTest, ATiledLayoutBuiltFromAKeptMatrixIsKeptAndCounted) {
  const FanJob job = MakeFanJob(44, sm::MatrixFormat::kSymmetric);
  const auto& geometry = std::get<core::VectorGeometry>(job.request.geometry);
  const core::VolumeGeometry& volume = job.request.volume;
  auto cache = std::make_shared<MatrixCache>(1ull << 30);
  const MatrixCache::Found first =
      cache->Get(geometry, volume, sm::MatrixFormat::kSymmetric, 0).value();
  const uint64_t matrix_bytes = cache->kept_bytes();
  EXPECT_EQ(matrix_bytes, first.matrix->bytes());

  // What an upload for the tiled kernels does: the layout is built from the kept matrix...
  const std::shared_ptr<const sm::TiledRuns> layout =
      first.matrix->symmetric()->TiledLayout(16).value();
  EXPECT_EQ(cache->kept_bytes(), matrix_bytes + layout->bytes());
  // ...and the next job of the scan gets it with the matrix, not built again.
  const MatrixCache::Found second =
      cache->Get(geometry, volume, sm::MatrixFormat::kSymmetric, 0).value();
  EXPECT_TRUE(second.reused);
  EXPECT_EQ(second.matrix->symmetric()->TiledLayout(16).value(), layout);

  // A cache with room for the matrix alone lets go of the layout at the next Get (kept
  // matrices are counted as they are then) and keeps the matrix.
  auto tight = std::make_shared<MatrixCache>(matrix_bytes + layout->bytes() / 2);
  const MatrixCache::Found kept =
      tight->Get(geometry, volume, sm::MatrixFormat::kSymmetric, 0).value();
  EXPECT_EQ(tight->kept_matrices(), 1);
  const std::shared_ptr<const sm::TiledRuns> held =
      kept.matrix->symmetric()->TiledLayout(16).value();
  EXPECT_GT(tight->kept_bytes(), tight->capacity_bytes());  // until the next Get
  const MatrixCache::Found again =
      tight->Get(geometry, volume, sm::MatrixFormat::kSymmetric, 0).value();
  EXPECT_TRUE(again.reused);
  EXPECT_EQ(again.matrix, kept.matrix);
  EXPECT_EQ(tight->kept_bytes(), matrix_bytes);
  EXPECT_LE(tight->kept_bytes(), tight->capacity_bytes());
  // The job that held the layout still has it; the next upload builds it again.
  EXPECT_EQ(held->bytes(), layout->bytes());
  EXPECT_NE(again.matrix->symmetric()->TiledLayout(16).value(), held);
}

TEST(MatrixCacheTest, TheTiledLayoutsBytesAreCountedOncePerScan) {
  const FanJob job = MakeFanJob(44, sm::MatrixFormat::kSymmetric);
  const auto& geometry = std::get<core::VectorGeometry>(job.request.geometry);
  auto cache = std::make_shared<MatrixCache>(0);  // keeps no matrix: the counts stay anyway
  const uint64_t bytes = cache->TiledLayoutBytes(geometry, job.request.volume).value();
  // The count is the built layout's bytes at the default side.
  const sm::StoredMatrix built =
      sm::BuildStoredMatrix(geometry, job.request.volume, sm::MatrixFormat::kSymmetric, 0).value();
  EXPECT_EQ(bytes, built.symmetric()->TiledLayout(sm::TiledRuns::TileSideFor(44)).value()->bytes());
  EXPECT_EQ(cache->layout_counts(), 1);
  EXPECT_EQ(cache->TiledLayoutBytes(geometry, job.request.volume).value(), bytes);
  EXPECT_EQ(cache->layout_counts(), 1);  // remembered
  // Another grid is another scan: counted anew, and different.
  const FanJob other = MakeFanJob(40, sm::MatrixFormat::kSymmetric);
  const uint64_t other_bytes =
      cache->TiledLayoutBytes(std::get<core::VectorGeometry>(other.request.geometry),
                              other.request.volume)
          .value();
  EXPECT_EQ(cache->layout_counts(), 2);
  EXPECT_NE(other_bytes, bytes);
  // A scan without the symmetry (62 views: a quarter turn is no whole number of steps) has
  // no tiled layout: the count's error each time, nothing remembered.
  core::FanConeOptions fan;
  fan.source_origin_mm = 50.0;
  fan.origin_detector_mm = 30.0;
  fan.detector = {1, 71, 1.0, 0.9, 0.0, 0.0};
  fan.angles_rad = core::UniformAnglesRad(62, 0.0, 2.0 * M_PI);
  const core::VectorGeometry asymmetric = core::MakeFan2D(fan).value();
  EXPECT_FALSE(cache->TiledLayoutBytes(asymmetric, job.request.volume).ok());
  EXPECT_FALSE(cache->TiledLayoutBytes(asymmetric, job.request.volume).ok());
  EXPECT_EQ(cache->layout_counts(), 4);
  // At most kLayoutCounts scans are remembered, the oldest forgotten first: after that many
  // other grids, the first scan is counted again.
  for (size_t i = 0; i < MatrixCache::kLayoutCounts; ++i) {
    const int64_t n = 45 + static_cast<int64_t>(i);  // the same 26.4 mm field, finer
    const double voxel = 26.4 / static_cast<double>(n);
    const core::VolumeGeometry grid =
        core::VolumeGeometry::Create({n, n, 1}, {voxel, voxel, voxel}, {}).value();
    ASSERT_TRUE(cache->TiledLayoutBytes(geometry, grid).ok()) << n;
  }
  const int64_t counted = cache->layout_counts();
  EXPECT_EQ(cache->TiledLayoutBytes(geometry, job.request.volume).value(), bytes);
  EXPECT_EQ(cache->layout_counts(), counted + 1);
}

TEST(MatrixCacheTest, AMatrixOverTheBudgetIsRefusedNamingItsBytes) {
  auto cache = std::make_shared<MatrixCache>(64ull << 20);
  const FanJob job = MakeFanJob(48, sm::MatrixFormat::kCsr);
  auto refused = RunArt(job, cache, nullptr, /*budget=*/100000);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("bytes"));
  EXPECT_THAT(refused.status().message(), HasSubstr("100000"));
  std::printf("refusal: %s\n", std::string(refused.status().message()).c_str());
  EXPECT_EQ(cache->kept_matrices(), 0);
  // tomod refuses it at submission by the same count.
  const uint64_t needed =
      core::AlgorithmRegistry::WithBuiltins().MinimumDeviceBytes(job.request);
  EXPECT_GT(needed, 100000u);
}

TEST(MatrixCacheTest, ArtReconstructsTheAnalyticFanPhantom) {
  // 10 sweeps on the 48 x 48 grid, symmetric format: measured RMSE 0.0599 against the
  // rasterised phantom (maximum 1); bound 15% above.
  const FanJob job = MakeFanJob(48, sm::MatrixFormat::kAutomatic, 10);
  auto image = RunArt(job, std::make_shared<MatrixCache>(0));
  ASSERT_TRUE(image.ok()) << image.status();
  const double rmse = Rmse(*image, job.truth);
  const double zero_rmse = Rmse(core::Array3D(job.truth.dims(), 0.0f), job.truth);
  std::printf("ART on the stored matrix, 48^2 fan, 64 views, 10 sweeps: RMSE %.4f (zero "
              "image: %.4f)\n", rmse, zero_rmse);
  EXPECT_LT(rmse, kArtRmseBound);
  EXPECT_LT(rmse, 0.5 * zero_rmse);
}

}  // namespace
}  // namespace tomo::server
