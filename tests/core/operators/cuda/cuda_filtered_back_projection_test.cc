// Tests of the CUDA FilterAndBackProject (core/operators/cuda/cuda_filtered_back_projection.cc,
// through CudaBackend and directly) against the CPU backend's composition of the same
// operators, and of FDK on the GPU (core/algorithms/filtered_back_projection.cc takes this fused path for
// CUDA backends) against the CPU and the analytic phantom: cone beams (flat and
// cylindrical, a whole volume and an off-centre z-slab whose row band is part of the
// detector), 3D and 2D parallel beams and a 2D fan, shared and per-view pixel weights,
// many chunks through the two buffers, one and two backends.
//
// Every test skips without a CUDA device. Random inputs (seed printed; TOMO_TEST_SEED
// replays); outputs poisoned with NaN and checked finite.
//
// Tolerance on max |cuda - cpu| / max |cpu|: the back projection reads textures (8-bit
// interpolation weights, float16 texels for the FDK weight): kTextureTolerance = 4e-3, as
// in cuda_vector_projector_test.cc. Between two device runs that differ only in the
// chunking (the float sum over views in another order): kChunkTolerance = 1e-5.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/algorithms/filtered_back_projection.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/data/host_block_pool.h"
#include "core/devices/host_pinning.h"
#include "core/geometry/geometry_builders.h"
#include "core/geometry/detector_row_band.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "core/operators/cuda/cuda_filtered_back_projection.h"
#include "core/operators/cuda/cuda_resources.h"
#include "gtest/gtest.h"
#include "tests/core/operators/cuda/cuda_vs_cpu_fixture.h"
#include "tests/core/random_arrays.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

constexpr double kTextureTolerance = 4e-3;
constexpr double kChunkTolerance = 1e-5;
constexpr double kPi = 3.14159265358979323846;
constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

using testing::RandomAngles;
using testing::RandomArray;

struct Case {
  std::string name;
  VectorGeometry geometry;
  VolumeGeometry volume;
};

std::vector<Case> Cases(std::mt19937_64& random) {
  std::vector<Case> cases;
  const VolumeGeometry whole =
      VolumeGeometry::Create({31, 27, 22}, {1.0, 0.9, 1.1}, {0.6, -0.8, 0.3}).value();
  const VolumeGeometry slab =
      VolumeGeometry::Create({31, 27, 7}, {1.0, 0.9, 1.1}, {0.6, -0.8, 7.0}).value();
  FanConeOptions cone;
  cone.detector = {36, 45, 1.2, 1.1, 1.4, -0.9};
  cone.source_origin_mm = 70;
  cone.origin_detector_mm = 40;
  cone.angles_rad = RandomAngles(23, random);
  cases.push_back({"cone-flat", MakeCircularCone(cone).value(), whole});
  cases.push_back({"cone-flat-slab", MakeCircularCone(cone).value(), slab});
  FanConeOptions arc = cone;
  arc.shape = DetectorShape::kCylindrical;
  cases.push_back({"cone-cylindrical-slab", MakeCircularCone(arc).value(), slab});
  cases.push_back({"parallel-3d-slab",
                   MakeParallel3D({30, 41, 1.0, 1.0, 0.7, 0.4}, RandomAngles(17, random)).value(),
                   slab});
  const VolumeGeometry image =
      VolumeGeometry::Create({40, 35, 1}, {1.0, 1.1, 1.0}, {0.5, 0.2, 0}).value();
  FanConeOptions fan;
  fan.detector = {1, 67, 1.0, 1.3, -0.6, 0};
  fan.source_origin_mm = 80;
  fan.origin_detector_mm = 50;
  fan.angles_rad = RandomAngles(29, random);
  cases.push_back({"fan-2d", MakeFan2D(fan).value(), image});
  cases.push_back({"parallel-2d",
                   MakeParallel2D({1, 61, 1.0, 0.9, 0.3, 0}, RandomAngles(19, random)).value(),
                   image});
  return cases;
}

std::vector<float> RandomValues(size_t count, std::mt19937_64& random) {
  std::uniform_real_distribution<float> uniform(0.5f, 1.5f);
  std::vector<float> values(count);
  for (float& v : values) v = uniform(random);
  return values;
}

// Random column (views x columns) and pixel (rows x columns) weights for projections of
// `dims`.
FilteredBackProjectionWeights RandomWeights(const Dims3& dims, std::mt19937_64& random) {
  FilteredBackProjectionWeights weights;
  weights.column = RandomValues(static_cast<size_t>(dims.d0 * dims.d2), random);
  weights.pixel = RandomValues(static_cast<size_t>(dims.d1 * dims.d2), random);
  return weights;
}

BackProjectionWeighting WeightingFor(const VectorGeometry& geometry) {
  return geometry.beam() == BeamKind::kCone ? BackProjectionWeighting::kFdk
                                            : BackProjectionWeighting::kNone;
}

class CudaFilteredBackProjectionTest : public CudaVsCpuTest {};

TEST_F(CudaFilteredBackProjectionTest, MatchesTheCpuComposition) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  EXPECT_TRUE(cuda_->PrefersFilterAndBackProject());
  for (const Case& c : Cases(random_)) {
    const Dims3 dims = c.geometry.projection_dims();
    const Array3D projections = RandomArray(dims, random_);
    const RampFilter filter =
        RampFilter::Create(FilterOptions{FilterWindow::kHann, 0.9}, dims.d2, 0.8).value();
    for (int pixel_maps : {0, 1, 2}) {  // none, one shared map, one map per view
      SCOPED_TRACE(c.name + " pixel maps " + std::to_string(pixel_maps));
      FilteredBackProjectionWeights weights;
      weights.column = RandomValues(static_cast<size_t>(dims.d0 * dims.d2), random_);
      if (pixel_maps > 0) {
        weights.pixel = RandomValues(
            static_cast<size_t>((pixel_maps == 1 ? 1 : dims.d0) * dims.d1 * dims.d2), random_);
      }
      const BackProjectionWeighting weighting = WeightingFor(c.geometry);
      Array3D expected(c.volume.dims(), kPoison), actual(c.volume.dims(), kPoison);
      ASSERT_TRUE(cpu_.FilterAndBackProject(c.geometry, c.volume, projections, filter, weights,
                                            weighting, expected)
                      .ok());
      const absl::Status status = cuda_->FilterAndBackProject(
          c.geometry, c.volume, projections, filter, weights, weighting, actual);
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_TRUE(AllFinite(actual));
      const double diff = RelativeMaxDifference(actual, expected);
      const RowBand band = DetectorRowBand(c.geometry, c.volume);
      std::printf("[ measure  ] fused %-22s maps %d rows [%lld, %lld) of %lld: %.3g\n",
                  c.name.c_str(), pixel_maps, static_cast<long long>(band.first),
                  static_cast<long long>(band.first + band.count),
                  static_cast<long long>(dims.d1), diff);
      EXPECT_LE(diff, kTextureTolerance);
    }
  }
}

// Small chunks: many passes through the two pinned and the two device buffers (the host
// waits for a copy to free a pinned buffer, the copy stream for the compute stream to free
// a device buffer), a short last chunk, accumulation over chunks; against one chunk copied
// from pageable memory.
TEST_F(CudaFilteredBackProjectionTest, ManyChunksMatchOneChunk) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  for (const Case& c : Cases(random_)) {
    SCOPED_TRACE(c.name);
    const Dims3 dims = c.geometry.projection_dims();
    const Array3D projections = RandomArray(dims, random_);
    const RampFilter filter = RampFilter::Create(FilterOptions{}, dims.d2, 1.1).value();
    const FilteredBackProjectionWeights weights = RandomWeights(dims, random_);
    const BackProjectionWeighting weighting = WeightingFor(c.geometry);
    const int64_t view_bytes = dims.d1 * dims.d2 * static_cast<int64_t>(sizeof(float));
    Array3D one(c.volume.dims(), kPoison), many(c.volume.dims(), kPoison);
    const absl::Status status = [&]() -> absl::Status {
      TOMO_ASSIGN_OR_RETURN(cuda::ScopedDevice device, cuda::ScopedDevice::Enter(0));
      TOMO_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create());
      // Pageable copies, one chunk.
      TOMO_RETURN_IF_ERROR(cuda::FilterAndBackProjectOnDevice(stream.get(), c.geometry,
                                                              c.volume, projections, filter,
                                                              weights, weighting, one, nullptr));
      // Through pinned staging, 3 views per chunk (the band's rows are at most the
      // detector's), twice: the second call reuses the staging buffers.
      cuda::PinnedStaging staging;
      for (int call = 0; call < 2; ++call) {
        TOMO_RETURN_IF_ERROR(cuda::FilterAndBackProjectOnDevice(
            stream.get(), c.geometry, c.volume, projections, filter, weights, weighting, many,
            &staging, 3 * view_bytes));
      }
      return absl::OkStatus();
    }();
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_TRUE(AllFinite(one));
    ASSERT_TRUE(AllFinite(many));
    const double diff = RelativeMaxDifference(many, one);
    std::printf("[ measure  ] chunks %-22s 3 views per chunk vs one chunk: %.3g\n",
                c.name.c_str(), diff);
    EXPECT_LE(diff, kChunkTolerance);
  }
}

// The operator as a stream (views added in random pieces, as an upload delivers them): with
// pinned staging the pieces are gathered into the same chunks as the one-shot call's, so the
// volume is the same bit for bit; without staging each piece is its own chunk (another float
// summation order). Through CudaBackend against the CPU backend's stream as well.
TEST_F(CudaFilteredBackProjectionTest, StreamOfRandomPiecesMatchesTheWholeCall) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  for (const Case& c : Cases(random_)) {
    SCOPED_TRACE(c.name);
    const Dims3 dims = c.geometry.projection_dims();
    const Array3D projections = RandomArray(dims, random_);
    // The filter of MatchesTheCpuComposition, for which kTextureTolerance was measured.
    const RampFilter filter =
        RampFilter::Create(FilterOptions{FilterWindow::kHann, 0.9}, dims.d2, 0.8).value();
    const FilteredBackProjectionWeights weights = RandomWeights(dims, random_);
    const BackProjectionWeighting weighting = WeightingFor(c.geometry);
    const int64_t view_bytes = dims.d1 * dims.d2 * static_cast<int64_t>(sizeof(float));
    const int64_t view_values = dims.d1 * dims.d2;
    auto feed = [&](FilterAndBackProjectStream& stream) -> absl::Status {
      for (int64_t v = 0; v < dims.d0;) {
        const int64_t count = std::min<int64_t>(dims.d0 - v, 1 + random_() % 5);
        TOMO_RETURN_IF_ERROR(stream.AddViews(v, projections.data() + v * view_values, count));
        v += count;
      }
      return absl::OkStatus();
    };
    Array3D whole(c.volume.dims(), kPoison), staged(c.volume.dims(), kPoison),
        pageable(c.volume.dims(), kPoison);
    const absl::Status status = [&]() -> absl::Status {
      TOMO_ASSIGN_OR_RETURN(cuda::ScopedDevice device, cuda::ScopedDevice::Enter(0));
      TOMO_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create());
      cuda::PinnedStaging staging;
      TOMO_RETURN_IF_ERROR(cuda::FilterAndBackProjectOnDevice(
          stream.get(), c.geometry, c.volume, projections, filter, weights, weighting, whole,
          &staging, 4 * view_bytes));
      TOMO_ASSIGN_OR_RETURN(auto through_staging,
                            cuda::DeviceFilterAndBackProject::Create(
                                0, stream.get(), c.geometry, c.volume, filter, weights,
                                weighting, &staging, 4 * view_bytes));
      TOMO_RETURN_IF_ERROR(feed(*through_staging));
      TOMO_RETURN_IF_ERROR(through_staging->Finish(staged));
      through_staging.reset();
      TOMO_ASSIGN_OR_RETURN(auto without_staging,
                            cuda::DeviceFilterAndBackProject::Create(
                                0, stream.get(), c.geometry, c.volume, filter, weights,
                                weighting, nullptr, 4 * view_bytes));
      TOMO_RETURN_IF_ERROR(feed(*without_staging));
      return without_staging->Finish(pageable);
    }();
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_TRUE(AllFinite(whole));
    ASSERT_TRUE(AllFinite(staged));
    ASSERT_TRUE(AllFinite(pageable));
    EXPECT_EQ(RelativeMaxDifference(staged, whole), 0.0);
    const double pieces = RelativeMaxDifference(pageable, whole);
    std::printf("[ measure  ] stream %-22s random pieces without staging vs whole: %.3g\n",
                c.name.c_str(), pieces);
    EXPECT_LE(pieces, kChunkTolerance);

    // Through the backends: CUDA's stream against the CPU's.
    Array3D expected(c.volume.dims(), kPoison), actual(c.volume.dims(), kPoison);
    auto cpu_stream =
        cpu_.BeginFilterAndBackProject(c.geometry, c.volume, filter, weights, weighting);
    ASSERT_TRUE(cpu_stream.ok()) << cpu_stream.status();
    ASSERT_TRUE(feed(**cpu_stream).ok());
    ASSERT_TRUE((*cpu_stream)->Finish(expected).ok());
    auto cuda_stream =
        cuda_->BeginFilterAndBackProject(c.geometry, c.volume, filter, weights, weighting);
    ASSERT_TRUE(cuda_stream.ok()) << cuda_stream.status();
    ASSERT_TRUE(feed(**cuda_stream).ok());
    const absl::Status finished = (*cuda_stream)->Finish(actual);
    EXPECT_TRUE(finished.ok()) << finished;
    cuda_stream->reset();
    ASSERT_TRUE(AllFinite(actual));
    EXPECT_LE(RelativeMaxDifference(actual, expected), kTextureTolerance);
  }
}

// Bit for bit: every value equal (NaN poison would differ).
bool SameBits(const Array3D& a, const Array3D& b) {
  return a.dims() == b.dims() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.size()) * sizeof(float)) == 0;
}

// Page-locked projections (registered with core::PinHostMemory, as tomod's prefetcher does)
// go straight from the caller's memory to the device, skipping the staging buffers: the
// same volume bit for bit as from pageable memory, whole (3-view chunks, one call and
// through CudaBackend) and as a stream of random pieces, some from page-locked memory
// and some from pageable memory (chunks that start either way). The profile and
// direct_views() show which way the views went; IsPageLocked tells the two memories apart.
TEST_F(CudaFilteredBackProjectionTest, PageLockedProjectionsMatchPageableBitForBit) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  for (const Case& c : Cases(random_)) {
    SCOPED_TRACE(c.name);
    const Dims3 dims = c.geometry.projection_dims();
    const Array3D pageable = RandomArray(dims, random_);
    const Array3D locked = pageable.Clone();
    absl::StatusOr<std::unique_ptr<PinnedHostRegion>> pin =
        PinHostMemory(locked.data(), locked.size_bytes());
    ASSERT_TRUE(pin.ok()) << pin.status();
    ASSERT_TRUE((*pin)->pinned()) << (*pin)->why_not();
    absl::StatusOr<bool> is_locked = cuda::IsPageLocked(locked.data(), locked.size_bytes());
    ASSERT_TRUE(is_locked.ok()) << is_locked.status();
    EXPECT_TRUE(*is_locked);
    is_locked = cuda::IsPageLocked(pageable.data(), pageable.size_bytes());
    ASSERT_TRUE(is_locked.ok()) << is_locked.status();
    EXPECT_FALSE(*is_locked);

    const RampFilter filter =
        RampFilter::Create(FilterOptions{FilterWindow::kHann, 0.9}, dims.d2, 0.8).value();
    const FilteredBackProjectionWeights weights = RandomWeights(dims, random_);
    const BackProjectionWeighting weighting = WeightingFor(c.geometry);
    const int64_t view_bytes = dims.d1 * dims.d2 * static_cast<int64_t>(sizeof(float));
    const int64_t view_values = dims.d1 * dims.d2;
    const RowBand band = DetectorRowBand(c.geometry, c.volume);
    std::printf("[ measure  ] page-locked %-22s band rows %lld of %lld (%s copy)\n",
                c.name.c_str(), static_cast<long long>(band.count),
                static_cast<long long>(dims.d1), band.count == dims.d1 ? "1D" : "2D");

    Array3D from_pageable(c.volume.dims(), kPoison), from_locked(c.volume.dims(), kPoison),
        backend_pageable(c.volume.dims(), kPoison), backend_locked(c.volume.dims(), kPoison),
        stream_locked(c.volume.dims(), kPoison), stream_mixed(c.volume.dims(), kPoison);
    cuda::FilterAndBackProjectProfile pageable_profile, locked_profile;
    int64_t stream_direct = 0, mixed_direct = 0;
    const absl::Status status = [&]() -> absl::Status {
      TOMO_ASSIGN_OR_RETURN(cuda::ScopedDevice device, cuda::ScopedDevice::Enter(0));
      TOMO_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create());
      cuda::PinnedStaging staging;
      TOMO_RETURN_IF_ERROR(cuda::FilterAndBackProjectOnDevice(
          stream.get(), c.geometry, c.volume, pageable, filter, weights, weighting,
          from_pageable, &staging, 3 * view_bytes, &pageable_profile));
      TOMO_RETURN_IF_ERROR(cuda::FilterAndBackProjectOnDevice(
          stream.get(), c.geometry, c.volume, locked, filter, weights, weighting, from_locked,
          &staging, 3 * view_bytes, &locked_profile));
      // Page-locked: random pieces. Mixed: pieces of 2 views, from the page-locked and the
      // pageable copy in turn (the same values); with 3-view chunks, chunk 0 starts
      // page-locked (direct) and takes a pageable view, chunk 1 starts pageable (gathered)
      // and takes page-locked views, and so on.
      auto feed = [&](FilterAndBackProjectStream& pass, bool mixed) -> absl::Status {
        for (int64_t v = 0, piece = 0; v < dims.d0; ++piece) {
          const int64_t count = std::min<int64_t>(dims.d0 - v, mixed ? 2 : 1 + random_() % 5);
          const Array3D& source = !mixed || piece % 2 == 0 ? locked : pageable;
          TOMO_RETURN_IF_ERROR(pass.AddViews(v, source.data() + v * view_values, count));
          v += count;
        }
        return absl::OkStatus();
      };
      for (bool mixed : {false, true}) {
        TOMO_ASSIGN_OR_RETURN(auto pass, cuda::DeviceFilterAndBackProject::Create(
                                             0, stream.get(), c.geometry, c.volume, filter,
                                             weights, weighting, &staging, 3 * view_bytes));
        TOMO_RETURN_IF_ERROR(feed(*pass, mixed));
        TOMO_RETURN_IF_ERROR(pass->Finish(mixed ? stream_mixed : stream_locked));
        (mixed ? mixed_direct : stream_direct) = pass->direct_views();
      }
      return absl::OkStatus();
    }();
    ASSERT_TRUE(status.ok()) << status;
    // Through the backend (its own staging, 256 MiB chunks: one chunk here).
    absl::Status run = cuda_->FilterAndBackProject(c.geometry, c.volume, pageable, filter,
                                                   weights, weighting, backend_pageable);
    ASSERT_TRUE(run.ok()) << run;
    run = cuda_->FilterAndBackProject(c.geometry, c.volume, locked, filter, weights, weighting,
                                      backend_locked);
    ASSERT_TRUE(run.ok()) << run;

    EXPECT_EQ(pageable_profile.direct_views, 0);
    EXPECT_EQ(locked_profile.direct_views, dims.d0);
    EXPECT_EQ(stream_direct, dims.d0);
    EXPECT_GT(mixed_direct, 0);
    EXPECT_LT(mixed_direct, dims.d0);
    ASSERT_TRUE(AllFinite(from_pageable));
    EXPECT_TRUE(SameBits(from_locked, from_pageable));
    EXPECT_TRUE(SameBits(stream_locked, from_pageable));
    EXPECT_TRUE(SameBits(stream_mixed, from_pageable));
    ASSERT_TRUE(AllFinite(backend_pageable));
    EXPECT_TRUE(SameBits(backend_locked, backend_pageable));
    // The pages stay locked until the region goes, then the memory is pageable again.
    pin->reset();
    is_locked = cuda::IsPageLocked(locked.data(), locked.size_bytes());
    ASSERT_TRUE(is_locked.ok()) << is_locked.status();
    EXPECT_FALSE(*is_locked);
  }
}

// Enough slices for sub-slabs (kSubSlabUnits eighths of at least kMinSubSlabSlices):
// through staging the volume comes down in z-slabs, the head while the device back
// projects the kept views into the tail ones. Against the CPU composition (texture tolerance), against
// the same call from pageable memory without staging (one slab), and a stream of random
// pieces against the one-shot call (the same chunks and sub-slabs: the same bits). An odd
// slice count, so that the sub-slabs differ in size, and a slab off the volume's centre.
TEST_F(CudaFilteredBackProjectionTest, SubSlabDownloadsMatchOneSlab) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  FanConeOptions cone;
  cone.detector = {83, 41, 0.9, 1.2, 1.1, -0.7};
  cone.source_origin_mm = 90;
  cone.origin_detector_mm = 45;
  cone.angles_rad = RandomAngles(19, random_);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const VolumeGeometry volume =
      VolumeGeometry::Create({29, 23, cuda::kSubSlabUnits * cuda::kMinSubSlabSlices + 3},
                             {1.1, 0.9, 0.6},
                             {0.4, -0.3, 1.7})
          .value();
  const Dims3 dims = geometry.projection_dims();
  const Array3D projections = RandomArray(dims, random_);
  const RampFilter filter =
      RampFilter::Create(FilterOptions{FilterWindow::kHann, 0.9}, dims.d2, 0.8).value();
  const FilteredBackProjectionWeights weights = RandomWeights(dims, random_);
  const BackProjectionWeighting weighting = BackProjectionWeighting::kFdk;
  const int64_t view_values = dims.d1 * dims.d2;
  const int64_t chunk_bytes = 4 * view_values * static_cast<int64_t>(sizeof(float));

  Array3D expected(volume.dims(), kPoison), staged(volume.dims(), kPoison),
      pageable(volume.dims(), kPoison), streamed(volume.dims(), kPoison);
  ASSERT_TRUE(cpu_.FilterAndBackProject(geometry, volume, projections, filter, weights,
                                        weighting, expected)
                  .ok());
  cuda::FilterAndBackProjectProfile staged_profile, pageable_profile;
  const absl::Status status = [&]() -> absl::Status {
    TOMO_ASSIGN_OR_RETURN(cuda::ScopedDevice device, cuda::ScopedDevice::Enter(0));
    TOMO_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create());
    cuda::PinnedStaging staging;
    // A head of five eighths: tail sub-slabs of 17, 16 and 17 slices. (From the sizes, a
    // case this small would have none: its views take longer to arrive than to project.)
    TOMO_RETURN_IF_ERROR(cuda::FilterAndBackProjectOnDevice(
        stream.get(), geometry, volume, projections, filter, weights, weighting, staged,
        &staging, chunk_bytes, &staged_profile, /*head_eighths=*/5));
    TOMO_RETURN_IF_ERROR(cuda::FilterAndBackProjectOnDevice(
        stream.get(), geometry, volume, projections, filter, weights, weighting, pageable,
        nullptr, chunk_bytes, &pageable_profile, /*head_eighths=*/5));
    TOMO_ASSIGN_OR_RETURN(auto pass,
                          cuda::DeviceFilterAndBackProject::Create(
                              0, stream.get(), geometry, volume, filter, weights, weighting,
                              &staging, chunk_bytes, nullptr, /*head_eighths=*/5));
    for (int64_t v = 0; v < dims.d0;) {
      const int64_t count = std::min<int64_t>(dims.d0 - v, 1 + random_() % 6);
      TOMO_RETURN_IF_ERROR(pass->AddViews(v, projections.data() + v * view_values, count));
      v += count;
    }
    return pass->Finish(streamed);
  }();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(staged_profile.sub_slabs, 4);  // the head and three tail sub-slabs
  EXPECT_EQ(pageable_profile.sub_slabs, 1);  // without staging: one
  ASSERT_TRUE(AllFinite(staged));
  ASSERT_TRUE(AllFinite(pageable));
  const double against_cpu = RelativeMaxDifference(staged, expected);
  const double against_one_slab = RelativeMaxDifference(staged, pageable);
  std::printf("[ measure  ] sub-slabs vs cpu %.3g, vs one slab %.3g\n", against_cpu,
              against_one_slab);
  EXPECT_LE(against_cpu, kTextureTolerance);
  EXPECT_LE(against_one_slab, kTextureTolerance);
  EXPECT_TRUE(SameBits(streamed, staged));
}

// A result in a reused large-array block (core/data/host_block_pool.h) is page-locked at
// Finish and the volume comes down straight into it, sub-slab by sub-slab; a block on its
// first array goes through staging. Both give the same bits. The volume is above the pool's
// threshold and has sub-slabs (a head of five eighths), off the centre, odd sizes.
TEST_F(CudaFilteredBackProjectionTest, ReusedResultBlockTakesTheDownloadStraight) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  FanConeOptions cone;
  cone.detector = {97, 73, 0.8, 1.1, -0.6, 0.9};
  cone.source_origin_mm = 160;
  cone.origin_detector_mm = 70;
  cone.angles_rad = RandomAngles(13, random_);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  // 211 x 197 pixels of 4 bytes: 202 slices reach the pool's threshold.
  const int64_t slices = 2 * cuda::kSubSlabUnits * cuda::kMinSubSlabSlices + 1 + random_() % 60;
  const VolumeGeometry volume =
      VolumeGeometry::Create({211, 197, slices}, {0.45, 0.5, 0.35}, {0.7, -0.4, 1.3}).value();
  ASSERT_GE(volume.dims().count() * static_cast<int64_t>(sizeof(float)),
            static_cast<int64_t>(kLargeBlockBytes));
  const Dims3 dims = geometry.projection_dims();
  const Array3D projections = RandomArray(dims, random_);
  const RampFilter filter =
      RampFilter::Create(FilterOptions{FilterWindow::kHamming, 1.0}, dims.d2, 0.9).value();
  const FilteredBackProjectionWeights weights = RandomWeights(dims, random_);
  const int64_t chunk_bytes = 3 * dims.d1 * dims.d2 * static_cast<int64_t>(sizeof(float));
  HostBlockPool& pool = HostBlockPool::Get();
  const size_t limit = pool.kept_bytes_limit();
  pool.SetKeptBytesLimit(size_t{1} << 30);
  pool.Clear();

  Array3D first(volume.dims(), kPoison);
  const float* first_block = first.data();
  cuda::FilterAndBackProjectProfile first_profile, reused_profile, again_profile;
  Array3D reference;
  Array3D reused;
  const absl::Status status = [&]() -> absl::Status {
    TOMO_ASSIGN_OR_RETURN(cuda::ScopedDevice device, cuda::ScopedDevice::Enter(0));
    TOMO_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create());
    cuda::PinnedStaging staging;
    auto run = [&](Array3D& into, cuda::FilterAndBackProjectProfile* profile) {
      return cuda::FilterAndBackProjectOnDevice(
          stream.get(), geometry, volume, projections, filter, weights,
          BackProjectionWeighting::kFdk, into, &staging, chunk_bytes, profile,
          /*head_eighths=*/5);
    };
    TOMO_RETURN_IF_ERROR(run(first, &first_profile));
    reference = first.Clone();
    first = Array3D();  // its block goes back to the pool
    reused = Array3D(volume.dims(), kPoison);
    TOMO_RETURN_IF_ERROR(run(reused, &reused_profile));
    if (!SameBits(reused, reference)) return absl::InternalError("reused block differs");
    ParallelFill(reused.data(), reused.size(), kPoison);
    return run(reused, &again_profile);
  }();
  pool.SetKeptBytesLimit(limit);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(reused.data(), first_block);  // the same block, handed out again
  EXPECT_FALSE(first_profile.straight_download);
  EXPECT_GT(first_profile.touched_bytes, 0);
  EXPECT_TRUE(reused_profile.straight_download);
  EXPECT_TRUE(again_profile.straight_download);
  EXPECT_EQ(reused_profile.sub_slabs, 4);
  EXPECT_EQ(reused_profile.touched_bytes, 0);
  ASSERT_TRUE(AllFinite(reference));
  EXPECT_TRUE(SameBits(reused, reference));
  std::optional<HostBlock> block = pool.FindInUse(reused.data());
  ASSERT_TRUE(block.has_value());
  EXPECT_TRUE(block->attached);
  EXPECT_EQ(block->uses, 2);
  // The pool frees its blocks, unlocking them, only when told: leave none locked behind.
  reused = Array3D();
  pool.Clear();
  EXPECT_EQ(pool.kept_bytes(), 0u);
}

// FDK fed view by view on the GPU reconstructs what Fdk does from the whole array.
TEST_F(CudaFilteredBackProjectionTest, FdkStreamMatchesFdk) {
  const VolumeGeometry volume = VolumeGeometry::Create({48, 48, 40}, {1, 1, 1}, {}).value();
  FanConeOptions cone;
  cone.detector = {48, 64, 1.2, 1.2, 0, 0};
  cone.source_origin_mm = 150;
  cone.origin_detector_mm = 100;
  cone.angles_rad = UniformAnglesRad(90, 0, 2 * kPi);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const Array3D projections = RandomArray(geometry.projection_dims(), random_);
  auto whole = Fdk(geometry, volume, projections, {}, *cuda_, {});
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto stream = BeginFdk(geometry, volume, {}, *cuda_, {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  const int64_t view_values = geometry.rows() * geometry.columns();
  for (int64_t v = 0; v < geometry.num_views(); v += 7) {
    const int64_t count = std::min<int64_t>(7, geometry.num_views() - v);
    ASSERT_TRUE((*stream)->AddViews(v, projections.data() + v * view_values, count).ok());
  }
  auto streamed = (*stream)->Finish();
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  stream->reset();
  ASSERT_TRUE(AllFinite(*streamed));
  EXPECT_LE(RelativeMaxDifference(*streamed, *whole), kChunkTolerance);
}

TEST_F(CudaFilteredBackProjectionTest, RefusesMismatchedFilterAndWeights) {
  std::mt19937_64& random = random_;
  const Case c = Cases(random).front();
  const Dims3 dims = c.geometry.projection_dims();
  const Array3D projections = RandomArray(dims, random);
  Array3D volume(c.volume.dims());
  const RampFilter wrong_filter = RampFilter::Create(FilterOptions{}, dims.d2 + 1, 1.0).value();
  absl::Status status =
      cuda_->FilterAndBackProject(c.geometry, c.volume, projections, wrong_filter, {},
                                  BackProjectionWeighting::kFdk, volume);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  FilteredBackProjectionWeights weights;
  weights.column.resize(7);
  const RampFilter filter = RampFilter::Create(FilterOptions{}, dims.d2, 1.0).value();
  status = cuda_->FilterAndBackProject(c.geometry, c.volume, projections, filter, weights,
                                       BackProjectionWeighting::kFdk, volume);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("weights.column"), std::string::npos) << status;
}

// FDK of the 3D Shepp-Logan through the fused path (whole volume; two backends on the
// same device, i.e. two slabs with their own row bands; a budget that forces view chunks,
// i.e. the classic path) against the CPU's FDK and the phantom.
TEST_F(CudaFilteredBackProjectionTest, FdkMatchesCpuAndThePhantom) {
  const VolumeGeometry volume = VolumeGeometry::Create({64, 64, 64}, {1, 1, 1}, {}).value();
  FanConeOptions cone;
  cone.detector = {64, 64, 2.0, 2.0, 0, 0};
  cone.source_origin_mm = 150;
  cone.origin_detector_mm = 150;
  cone.angles_rad = UniformAnglesRad(120, 0, 2 * kPi);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const EllipsoidPhantom phantom = EllipsoidPhantom::SheppLogan3D(28.0);
  const Array3D projections = phantom.Project(geometry, 1);
  const Array3D truth = phantom.Rasterize(volume, 2);

  auto run = [&](std::vector<Backend*> backends, uint64_t budget) {
    RunContext context;
    context.memory_budget_bytes = budget;
    auto result = Fdk(geometry, volume, projections, {}, backends, context);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? std::move(result).value() : Array3D(volume.dims(), kPoison);
  };
  const Array3D cpu = run({&cpu_}, 0);
  const Array3D gpu = run({cuda_.get()}, 0);
  auto second = MakeBackend(ListCudaDevices()[0]);
  ASSERT_TRUE(second.ok()) << second.status();
  const Array3D two = run({cuda_.get(), second->get()}, 0);
  // Projections alone do not fit: view chunks, the classic path (host filter).
  const Array3D chunked = run({cuda_.get()}, 60 * 64 * 64 * 4 + 8 * 64 * 64 * 4);
  ASSERT_TRUE(AllFinite(gpu));
  ASSERT_TRUE(AllFinite(two));
  ASSERT_TRUE(AllFinite(chunked));

  // RMSE over the central slabs (|z| <= 8 mm), where the cone angle is small.
  auto central_rmse = [&](const Array3D& image) {
    double sum = 0;
    int64_t count = 0;
    for (int64_t z = 24; z < 40; ++z) {
      for (int64_t y = 0; y < 64; ++y) {
        for (int64_t x = 0; x < 64; ++x) {
          const double e = image.at(z, y, x) - truth.at(z, y, x);
          sum += e * e;
          ++count;
        }
      }
    }
    return std::sqrt(sum / static_cast<double>(count));
  };
  const double cpu_rmse = central_rmse(cpu), gpu_rmse = central_rmse(gpu);
  std::printf("[ measure  ] fdk 64^3: rmse cpu %.5f cuda %.5f two %.5f chunked %.5f; "
              "cuda vs cpu %.3g, two vs one %.3g, chunked vs fused %.3g\n",
              cpu_rmse, gpu_rmse, central_rmse(two), central_rmse(chunked),
              RelativeMaxDifference(gpu, cpu), RelativeMaxDifference(two, gpu),
              RelativeMaxDifference(chunked, gpu));
  EXPECT_LE(RelativeMaxDifference(gpu, cpu), kTextureTolerance);
  EXPECT_LE(RelativeMaxDifference(two, gpu), kTextureTolerance);
  EXPECT_LE(RelativeMaxDifference(chunked, gpu), kTextureTolerance);
  // The GPU's error against the phantom is the CPU's (whose FDK filtered_back_projection_test.cc bounds), up to
  // the texture rounding.
  EXPECT_LE(gpu_rmse, 1.02 * cpu_rmse + 1e-4);
}

// The head's share from the sizes (no device needed): the FDK cases of the benchmark
// (496 views of 960 x 1248 floats, 2.38 GB) and what their numbers imply.
TEST(SubSlabHeadEighthsTest, FollowsTheArrivalAgainstTheBackProjection) {
  const int64_t views = 496, band_bytes = views * 960 * 1248 * 4;
  const int64_t side512 = int64_t{512} * 512 * 512, side1024 = int64_t{1024} * 1024 * 1024;
  // 1024^3 on one device: 0.20 s to arrive, 0.53 s to project: three eighths.
  EXPECT_EQ(cuda::SubSlabHeadEighths(band_bytes, side1024 * views), 3);
  // Half of it on each of two devices (each gets half the band): three eighths again.
  EXPECT_EQ(cuda::SubSlabHeadEighths(band_bytes / 2, side1024 / 2 * views), 3);
  // 512^3: the views take longer to arrive than to project: no sub-slabs.
  EXPECT_EQ(cuda::SubSlabHeadEighths(band_bytes, side512 * views), 0);
  // Far more projection than arrival: the smallest head, two eighths.
  EXPECT_EQ(cuda::SubSlabHeadEighths(band_bytes / 64, side1024 * views), 2);
  // Exactly half is still allowed; just over is not.
  const int64_t voxel_views_half = static_cast<int64_t>(8.0 / 4.0 * 1e12 / 12e9 * 1e6);
  EXPECT_EQ(cuda::SubSlabHeadEighths(1000000, voxel_views_half + 1000), 4);
  EXPECT_EQ(cuda::SubSlabHeadEighths(1000000, voxel_views_half - 1000), 0);
  EXPECT_EQ(cuda::SubSlabHeadEighths(1, 0), 0);  // nothing to project: no sub-slabs
}

}  // namespace
}  // namespace tomo::core
