// tomo-bench: GPU timings of the VectorGeometry projectors (issue 3's benchmark cases),
// printed as a table and written as JSON (--json PATH).
//
// Cases (voxel 1 mm, source-origin 3N, origin-detector N, detector pixel 2N / detector
// for the cone cases; issue 3, case 2), plus the back projection of FDK case 1:
//   cone-fp-256   256^3 -> 360 x 384^2          cone-bp-256   the transpose direction
//   cone-fp-512   512^3 -> 720 x 768^2          cone-bp-512
//   fdk1-bp       496 x 960 rows x 1248 columns (0.32 mm) -> 512^3 (0.5 mm), SO 780,
//                 OD 420, FDK weight
//   fdk1-total    the same FDK case 1 in total, GPU-resident: cosine (and full-scan 1/2)
//                 weighting and Ram-Lak ramp filter on the device (DeviceRowFilter: weight
//                 and zero-pad kernel, cuFFT R2C, multiply, C2R, unpad), then the back
//                 projection with float16 texels (as CudaBackend); "filter" = the first part
//                 alone
//   2d-par-bp     2D parallel, 180 views (over pi) x 729 detectors (1 mm) -> 729^2 (1 mm),
//                 the vector back projector (one slice: its 2D kernel, variants v0..v3)
//   2d-par-bp-tr  the same with the exact-transpose 2D parallel back projector (the one
//                 CudaBackend uses for ParallelGeometry2D, what SIRT/CGLS need)
//   2d-fan-bp     2D fan, 720 views (over 2 pi) x 1024 detectors (2 mm), SO 2048, OD 1024
//                 -> 1024^2 (1 mm)
// GPU-resident: inputs are random data already on the device; each case is run once to warm
// up (texture arrays are made then, and kept), then timed --repeats times with CUDA events
// around one operator call (the device-to-device copy into the texture array plus the
// kernel; for the layered forward sampler also the two volume transposes and three array
// copies); the table shows the median and the minimum. Forward: the layered sampler (what
// CudaBackend uses up to 512^3) and the 3D-texture one, each also with v0.2's block order
// (views slowest, "-vslow"); back: the launch-shape variants of
// vector_kernels.h (the default first), each also with float16 projections ("-f16"), and
// the exact sampler. GUPS = voxels x views / median
// time. End to end (--e2e, on by default): one call of CudaBackend's operator from pageable
// host arrays after a warm-up, wall time (allocation, copies, kernel).
//
// Iterative cases (issue 6), seconds per iteration with the data on the device: the
// algorithms themselves (core/algorithms/sirt.h, block_iterative.h) on CudaBackend's
// resident operators, random projections, timed from the end of the first iteration to
// the end of the last (host clock after cudaDeviceSynchronize; setup and transfers
// excluded), --iterations of them:
//   sirt-par-256  SIRT, parallel 3D 256^3 from 133 views of 256^2 (over pi)   <= 8 ms
//   sirt-cone-256 SIRT, cone 256^3 from 360 views of 384^2 (as cone-fp-256)   <= 32 ms
//   sart-par-256  SART (133 blocks), as sirt-par-256                          <= 40 ms
//   os-sart-par-256  the block-iterative method with 10 interleaved blocks, as sirt-par-256
//   cgls-par-256  CGLS, as sirt-par-256
//   os-sart-cone-256, cgls-cone-256  the block-iterative method (10 interleaved blocks) and
//                 CGLS, as sirt-cone-256
// With --iterative-devices 1,2 each iterative case runs on 1 and on 2 devices in the same
// run (core::SeveralDevicesResidentOperators over the first N devices' backends: views
// split, volume replicated, one volume reduced and broadcast per back projection): the
// median over --repeats runs of the time per iteration (host clock after synchronising
// every device used, first iteration excluded), and the speedup over the first count. The
// peer copy of one volume between devices 1 and 0 (CopyFromPeer, what each back projection
// pays twice) is timed beside it ("peer-copy").
//
//   build/bin/tomo-bench --json bench.json [--repeats 5] [--cases fdk1-bp,cone-fp-512]
// fdk1-total's end to end is its own line ("fdk1-e2e"): core::Fdk from pageable host arrays
// on one device and on all devices (several GPUs share the slabs), with the time of one
// plain pageable upload of the projections beside it; 2d-par-bp-tr has no end-to-end
// column (2D parallel from host arrays is covered by cuda_backend_test). With --pinned (on
// by default) the same again from page-locked projections (registered where they lie with
// core::PinHostMemory, as tomod's prefetcher does for CUDA workers: the operator then
// copies them straight to the device instead of through its staging buffers), with the
// registration's own time and whether the volume is the same bit for bit ("fdk1-pinned").
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"
#include "core/algorithms/filtered_back_projection.h"
#include "core/devices/host_pinning.h"
#include "core/algorithms/block_iterative.h"
#include "core/algorithms/cgls.h"
#include "core/algorithms/sirt.h"
#include "core/base/parallel_for.h"
#include "core/data/host_block_pool.h"
#include "core/operators/several_devices_resident_operators.h"
#include "core/algorithms/slab_plan.h"
#include "core/devices/devices.h"
#include "core/filters/ramp_filter.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/geometry_builders.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_filtered_back_projection.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/cuda_host_projector.h"
#include "core/operators/cuda/cuda_row_filter.h"
#include "core/operators/cuda/cuda_vector_projector.h"
#include "core/operators/cuda/parallel_2d_kernels.h"

namespace tomo::bench {
namespace {

using core::BackProjectionWeighting;
using core::cuda::DeviceBuffer;
using core::cuda::DeviceVectorProjector;
using core::cuda::VectorSampler;

constexpr double kPi = 3.14159265358979323846;

struct BenchCase {
  std::string name;
  bool forward;
  BackProjectionWeighting weighting;
  int64_t n;  // volume side
  double voxel_mm;
  int64_t views, rows, columns;
  double pixel_mm, source_origin_mm, origin_detector_mm;
  std::string target;  // issue 3's target, in words
  enum Kind { kCone, kFdkTotal, kParallel2d, kParallel2dTranspose, kFan2d };
  Kind kind = kCone;
  bool two_d() const { return kind == kParallel2d || kind == kParallel2dTranspose || kind == kFan2d; }
};

std::vector<BenchCase> AllCases() {
  auto cone = [](std::string name, bool forward, int64_t n, int64_t views, int64_t det,
                 std::string target) {
    return BenchCase{std::move(name), forward, BackProjectionWeighting::kNone, n, 1.0, views,
                     det, det, 2.0 * n / det, 3.0 * n, 1.0 * n, std::move(target)};
  };
  return {
      cone("cone-fp-256", true, 256, 360, 384, "-"),
      cone("cone-bp-256", false, 256, 360, 384, "-"),
      cone("cone-fp-512", true, 512, 720, 768, "<= 250 ms"),
      cone("cone-bp-512", false, 512, 720, 768, "-"),
      BenchCase{"fdk1-bp", false, BackProjectionWeighting::kFdk, 512, 0.5, 496, 960, 1248, 0.32,
                780, 420, ">= 800 GUPS"},
      BenchCase{"fdk1-total", false, BackProjectionWeighting::kFdk, 512, 0.5, 496, 960, 1248,
                0.32, 780, 420, "<= 100 ms", BenchCase::kFdkTotal},
      BenchCase{"2d-par-bp", false, BackProjectionWeighting::kNone, 729, 1.0, 180, 1, 729, 1.0,
                0, 0, "<= 0.12 ms", BenchCase::kParallel2d},
      BenchCase{"2d-par-bp-tr", false, BackProjectionWeighting::kNone, 729, 1.0, 180, 1, 729,
                1.0, 0, 0, "-", BenchCase::kParallel2dTranspose},
      BenchCase{"2d-fan-bp", false, BackProjectionWeighting::kNone, 1024, 1.0, 720, 1, 1024, 2.0,
                2048, 1024, "-", BenchCase::kFan2d},
  };
}

struct Result {
  BenchCase c;
  std::string sampler;
  double median_s = 0, min_s = 0, gups = 0, e2e_s = -1;
};

// Fills a device buffer with uniform random values in [0.25, 1.25) (a 16 Mi-value random
// block, tiled).
absl::Status FillRandom(float* device, int64_t count, std::mt19937_64& random,
                        cudaStream_t stream) {
  static constexpr int64_t kBlock = int64_t{1} << 24;
  std::vector<float> block(static_cast<size_t>(std::min(count, kBlock)));
  std::uniform_real_distribution<float> uniform(0.25f, 1.25f);
  for (float& v : block) v = uniform(random);
  for (int64_t i = 0; i < count; i += kBlock) {
    const int64_t n = std::min(kBlock, count - i);
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device + i, block.data(),
                                              static_cast<size_t>(n) * sizeof(float),
                                              cudaMemcpyHostToDevice, stream));
  }
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

absl::StatusOr<core::VectorGeometry> MakeGeometry(const BenchCase& c) {
  if (c.kind == BenchCase::kParallel2d || c.kind == BenchCase::kParallel2dTranspose) {
    return core::MakeParallel2D({1, c.columns, 1.0, c.pixel_mm, 0, 0},
                                core::UniformAnglesRad(c.views, 0, kPi));
  }
  if (c.kind == BenchCase::kFan2d) {
    core::FanConeOptions fan;
    fan.detector = {1, c.columns, 1.0, c.pixel_mm, 0, 0};
    fan.source_origin_mm = c.source_origin_mm;
    fan.origin_detector_mm = c.origin_detector_mm;
    fan.angles_rad = core::UniformAnglesRad(c.views, 0, 2 * kPi);
    return core::MakeFan2D(fan);
  }
  core::FanConeOptions cone;
  cone.detector.rows = c.rows;
  cone.detector.columns = c.columns;
  cone.detector.row_spacing_mm = c.pixel_mm;
  cone.detector.column_spacing_mm = c.pixel_mm;
  cone.source_origin_mm = c.source_origin_mm;
  cone.origin_detector_mm = c.origin_detector_mm;
  cone.angles_rad = core::UniformAnglesRad(c.views, 0, 2 * kPi);
  return core::MakeCircularCone(cone);
}

std::string SamplerName(VectorSampler sampler, int variant) {
  switch (sampler) {
    case VectorSampler::kLayered: return "layered";
    case VectorSampler::kExact: return "exact";
    default: return variant < 0 ? "tex3d" : absl::StrCat("tex-v", variant);
  }
}

// FDK case 1's pre-weights per detector pixel (the same for every view of a full circular
// scan): cosine D / sqrt(D^2 + a^2 + b^2) times the full-scan 1/2 (core/algorithms/filtered_back_projection.cc).
std::vector<float> FdkPixelWeights(const BenchCase& c) {
  const double d = c.source_origin_mm + c.origin_detector_mm;
  std::vector<float> weight(static_cast<size_t>(c.rows * c.columns));
  for (int64_t r = 0; r < c.rows; ++r) {
    const double b = (static_cast<double>(r) - 0.5 * static_cast<double>(c.rows - 1)) * c.pixel_mm;
    for (int64_t k = 0; k < c.columns; ++k) {
      const double a =
          (static_cast<double>(k) - 0.5 * static_cast<double>(c.columns - 1)) * c.pixel_mm;
      weight[static_cast<size_t>(r * c.columns + k)] =
          static_cast<float>(0.5 * d / std::sqrt(d * d + a * a + b * b));
    }
  }
  return weight;
}

// variant: the back projector's launch shape (vector_kernels.h); -1 for the forward one
// (-2: the forward one with the v0.2 block order, views slowest);
// for fdk1-total, -3 = the weighting and filter alone. one_row: how the back projector reads
// one-row detectors (the 2D cases): kStaged stages detector windows in shared memory (v0.5,
// "staged" in the sampler name where it does), kTexture1d a layered 1D texture (v0.4, "-1d"),
// kTexture2d the layered 2D texture of v0.3.
enum class OneRow { kStaged, kTexture1d, kTexture2d };
absl::StatusOr<Result> RunCase(const BenchCase& c, VectorSampler sampler, int variant, bool half,
                               int repeats, bool e2e, std::mt19937_64& random,
                               OneRow one_row = OneRow::kStaged) {
  TOMO_ASSIGN_OR_RETURN(core::VectorGeometry geometry, MakeGeometry(c));
  TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry volume_geometry,
                        core::VolumeGeometry::Create({c.n, c.n, c.two_d() ? 1 : c.n},
                                                     {c.voxel_mm, c.voxel_mm, c.voxel_mm}, {}));
  TOMO_ASSIGN_OR_RETURN(core::cuda::Stream stream, core::cuda::Stream::Create());
  Result result{c, SamplerName(sampler, variant) + (half ? "-f16" : "") +
                       (variant == -2 ? "-vslow" : "")};
  if (c.kind == BenchCase::kParallel2dTranspose) result.sampler = "transpose";
  if (c.kind == BenchCase::kFdkTotal) {
    result.sampler = variant == -3 ? "filter" : absl::StrCat("total-f16-v", variant);
  }
  {
    const cudaStream_t s = stream.get();
    TOMO_ASSIGN_OR_RETURN(DeviceVectorProjector projector,
                          DeviceVectorProjector::Create(geometry, volume_geometry, s));
    if (variant >= 0) projector.set_back_variant(variant);
    if (variant == -2) projector.set_forward_views_inner(false);
    projector.set_back_half(half);
    projector.set_back_staged(one_row == OneRow::kStaged);
    projector.set_back_one_row(one_row != OneRow::kTexture2d);
    if (sampler == VectorSampler::kTexture && !c.forward) {
      if (projector.BackUsesStaged()) {
        result.sampler = absl::StrCat("staged-v", variant);
      } else if (projector.BackUsesOneRowTexture()) {
        result.sampler += "-1d";
      }
    }
    const int64_t voxels = volume_geometry.voxel_count();
    const int64_t samples = geometry.projection_dims().count();
    TOMO_ASSIGN_OR_RETURN(auto d_volume, DeviceBuffer<float>::Allocate(voxels, s));
    TOMO_ASSIGN_OR_RETURN(auto d_projections, DeviceBuffer<float>::Allocate(samples, s));
    if (c.forward) {
      TOMO_RETURN_IF_ERROR(FillRandom(d_volume.get(), voxels, random, s));
    } else {
      TOMO_RETURN_IF_ERROR(FillRandom(d_projections.get(), samples, random, s));
    }
    // fdk1-total: the device-resident weighting and ramp filter into d_filtered.
    std::optional<core::cuda::DeviceRowFilter> row_filter;
    DeviceBuffer<float> d_filtered;
    if (c.kind == BenchCase::kFdkTotal) {
      const double spacing = c.pixel_mm * c.source_origin_mm / (c.source_origin_mm + c.origin_detector_mm);
      TOMO_ASSIGN_OR_RETURN(core::RampFilter ramp,
                            core::RampFilter::Create(core::FilterOptions{}, c.columns, spacing));
      TOMO_ASSIGN_OR_RETURN(row_filter,
                            core::cuda::DeviceRowFilter::Create(ramp, c.views * c.rows, c.rows,
                                                                FdkPixelWeights(c), s));
      TOMO_ASSIGN_OR_RETURN(d_filtered, DeviceBuffer<float>::Allocate(samples, s));
    }
    // 2d-par-bp-tr: the exact-transpose 2D parallel projector's views.
    DeviceBuffer<core::cuda::JosephView> d_joseph;
    core::cuda::Parallel2dShape shape2d;
    if (c.kind == BenchCase::kParallel2dTranspose) {
      TOMO_ASSIGN_OR_RETURN(core::ParallelGeometry2D geometry2d,
                            core::ParallelGeometry2D::Create(
                                c.columns, c.pixel_mm, 0,
                                core::ParallelGeometry2D::UniformAngles(c.views, 0, kPi)));
      const std::vector<core::cuda::JosephView> views =
          core::cuda::MakeDeviceJosephViews(geometry2d, volume_geometry);
      TOMO_ASSIGN_OR_RETURN(d_joseph, DeviceBuffer<core::cuda::JosephView>::Allocate(views.size(), s));
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_joseph.get(), views.data(),
                                                d_joseph.size_bytes(), cudaMemcpyHostToDevice, s));
      shape2d.nx = static_cast<int32_t>(c.n);
      shape2d.ny = static_cast<int32_t>(c.n);
      shape2d.num_views = static_cast<int32_t>(c.views);
      shape2d.num_detectors = static_cast<int32_t>(c.columns);
    }
    auto call = [&]() -> absl::Status {
      if (c.forward) return projector.Forward(d_volume.get(), d_projections.get(), sampler);
      if (c.kind == BenchCase::kParallel2dTranspose) {
        TOMO_CUDA_RETURN_IF_ERROR(core::cuda::LaunchParallel2dBack(
            shape2d, d_joseph.get(), d_projections.get(), d_volume.get(), s));
        return absl::OkStatus();
      }
      if (c.kind == BenchCase::kFdkTotal) {
        TOMO_RETURN_IF_ERROR(row_filter->Apply(d_projections.get(), d_filtered.get()));
        if (variant == -3) return absl::OkStatus();
        return projector.Back(d_filtered.get(), c.weighting, d_volume.get(), sampler);
      }
      return projector.Back(d_projections.get(), c.weighting, d_volume.get(), sampler);
    };
    TOMO_RETURN_IF_ERROR(call());  // warm-up
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    cudaEvent_t start = nullptr, stop = nullptr;
    TOMO_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
    TOMO_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
    std::vector<double> times;
    absl::Status status;
    for (int i = 0; i < repeats && status.ok(); ++i) {
      status.Update(core::cuda::CudaCallStatus(cudaEventRecord(start, s), "cudaEventRecord",
                                               __FILE__, __LINE__));
      status.Update(call());
      status.Update(core::cuda::CudaCallStatus(cudaEventRecord(stop, s), "cudaEventRecord",
                                               __FILE__, __LINE__));
      status.Update(core::cuda::CudaCallStatus(cudaEventSynchronize(stop),
                                               "cudaEventSynchronize", __FILE__, __LINE__));
      float ms = 0;
      status.Update(core::cuda::CudaCallStatus(cudaEventElapsedTime(&ms, start, stop),
                                               "cudaEventElapsedTime", __FILE__, __LINE__));
      times.push_back(ms * 1e-3);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    TOMO_RETURN_IF_ERROR(status);
    std::sort(times.begin(), times.end());
    result.median_s = times[times.size() / 2];
    result.min_s = times.front();
    result.gups = static_cast<double>(voxels) * static_cast<double>(c.views) / result.median_s * 1e-9;
  }
  if (e2e && c.kind != BenchCase::kParallel2dTranspose && c.kind != BenchCase::kFdkTotal) {
    const std::vector<core::DeviceInfo> devices = core::ListCudaDevices();
    TOMO_ASSIGN_OR_RETURN(std::unique_ptr<core::Backend> backend, core::MakeBackend(devices[0]));
    core::Array3D volume(volume_geometry.dims(), 0.5f);
    core::Array3D projections(geometry.projection_dims(), 0.5f);
    std::uniform_real_distribution<float> uniform(0.25f, 1.25f);
    core::Array3D& input = c.forward ? volume : projections;
    for (int64_t i = 0; i < input.size(); i += 7) input.data()[i] = uniform(random);
    auto call = [&]() -> absl::Status {
      if (c.forward) return backend->ForwardProject(geometry, volume_geometry, volume, projections);
      return backend->BackProject(geometry, volume_geometry, projections, c.weighting, volume);
    };
    TOMO_RETURN_IF_ERROR(call());  // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    TOMO_RETURN_IF_ERROR(call());
    result.e2e_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return result;
}

// FDK case 1 end to end from host memory: core::Fdk (the product's path: weights on the
// host, then per slab one Backend::FilterAndBackProject, which streams the slab's detector
// rows to the device while it filters and back projects) on the first `num_devices` CUDA
// devices, pageable host arrays in and out. Wall time, median of `repeats` after a warm-up.
// Also the floor it is measured against: one plain pageable copy of the projections to
// device 0 (upload_s).
struct EndToEndFdk {
  int64_t side = 0;  // volume side
  int devices = 0;
  double median_s = 0, upload_s = 0;
  // The first backend's FilterAndBackProject alone (whole volume, the weights given), i.e.
  // without the host's weight computation and the result's allocation.
  double operator_s = 0;
  // Of the last run: from the start to Fdk's "back projection" stage (host weights).
  double weights_s = 0;
  core::cuda::FilterAndBackProjectProfile profile, half_profile;
  std::string events;  // Fdk's progress events of the last run, with their times
  // All the projections' bytes copied by the host's threads into page-locked memory, and
  // from page-locked memory to device 0.
  double gather_s = 0, pinned_copy_s = 0;
  // core::BeginFdk on the first device, fed 4 views at a time as an upload would deliver
  // them: as fast as they can be added (stream_s, total), and paced at kStreamArrivalGBs
  // (the wire's speed) where stream_tail_s is what is left after the last view arrived:
  // the reconstruction not hidden behind the upload. Median of `repeats`.
  double stream_s = 0, stream_paced_s = 0, stream_tail_s = 0;
  // With --pinned: the projections registered (pin_s: PinHostMemory; unpin_s: the
  // region's destruction), then as median_s, operator_s and profile from them, and how far
  // Fdk's volume is from the pageable run's (the largest difference over the largest
  // magnitude: 0 when the same sub-slabs were chosen; page-locked views may get a smaller
  // head, whose view vectors differ in their last bits).
  bool pinned = false;
  double pin_s = 0, unpin_s = 0, pinned_median_s = 0, pinned_operator_s = 0;
  core::cuda::FilterAndBackProjectProfile pinned_profile;
  double pinned_difference = -1;
  // With several devices: each device's z-slab at once, as Fdk's slabs (one host thread per
  // device, each into its place in one fresh result; the weights given): the wall time and
  // each device's profile, from pageable and (with --pinned) page-locked projections.
  double together_s = 0, pinned_together_s = 0;
  std::vector<core::cuda::FilterAndBackProjectProfile> together, pinned_together;
};

// The rate the paced stream's views arrive at: tomod's upload target (issue 4).
constexpr double kStreamArrivalGBs = 2.5;

// The first device's FilterAndBackProject alone on the whole volume (*seconds, one run),
// then the same through the device function twice for its profile (own staging, made
// first) and, when half_profile is given, twice on the upper half of the volume alone (what
// each of two devices gets).
absl::Status TimeOperatorAlone(const BenchCase& c, const core::VectorGeometry& geometry,
                               const core::VolumeGeometry& volume,
                               const core::Array3D& projections, core::Backend& backend,
                               double* seconds, core::cuda::FilterAndBackProjectProfile* profile,
                               core::cuda::FilterAndBackProjectProfile* half_profile) {
  core::FilteredBackProjectionWeights weights;
  weights.pixel.assign(static_cast<size_t>(c.rows * c.columns), 0.9f);
  weights.column.assign(static_cast<size_t>(c.views * c.columns), 0.5f);
  TOMO_ASSIGN_OR_RETURN(core::RampFilter ramp,
                        core::RampFilter::Create(core::FilterOptions{}, c.columns, c.pixel_mm));
  core::Array3D reconstruction(volume.dims());
  const auto t0 = std::chrono::steady_clock::now();
  TOMO_RETURN_IF_ERROR(backend.FilterAndBackProject(geometry, volume, projections, ramp, weights,
                                                    BackProjectionWeighting::kFdk,
                                                    reconstruction));
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  TOMO_ASSIGN_OR_RETURN(core::cuda::Stream stream, core::cuda::Stream::Create());
  core::cuda::PinnedStaging staging;
  for (int run = 0; run < 2; ++run) {
    TOMO_RETURN_IF_ERROR(core::cuda::FilterAndBackProjectOnDevice(
        stream.get(), geometry, volume, projections, ramp, weights,
        BackProjectionWeighting::kFdk, reconstruction, &staging,
        core::cuda::kFilterAndBackProjectChunkBytes, profile));
  }
  if (half_profile == nullptr) return absl::OkStatus();
  TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry half,
                        core::SlabVolume(volume, core::Slab{c.n / 2, c.n / 2}));
  core::Array3D half_volume(half.dims());
  for (int run = 0; run < 2; ++run) {
    TOMO_RETURN_IF_ERROR(core::cuda::FilterAndBackProjectOnDevice(
        stream.get(), geometry, half, projections, ramp, weights, BackProjectionWeighting::kFdk,
        half_volume, &staging, core::cuda::kFilterAndBackProjectChunkBytes, half_profile));
  }
  return absl::OkStatus();
}

// Each of `devices` devices back projects its z-slab (Fdk's equal split) at the same time,
// one host thread per device, into one fresh result: the median wall time of `repeats` runs
// after a warm-up, and the last run's profile per device. Against "the upper half alone",
// this shows which part of a device's pass the other devices slow down.
absl::Status TimeSlabsTogether(const BenchCase& c, const core::VectorGeometry& geometry,
                               const core::VolumeGeometry& volume,
                               const core::Array3D& projections, int devices, int repeats,
                               double* seconds,
                               std::vector<core::cuda::FilterAndBackProjectProfile>* profiles) {
  core::FilteredBackProjectionWeights weights;
  weights.pixel.assign(static_cast<size_t>(c.rows * c.columns), 0.9f);
  weights.column.assign(static_cast<size_t>(c.views * c.columns), 0.5f);
  TOMO_ASSIGN_OR_RETURN(core::RampFilter ramp,
                        core::RampFilter::Create(core::FilterOptions{}, c.columns, c.pixel_mm));
  std::vector<core::cuda::Stream> streams;
  std::vector<core::cuda::PinnedStaging> staging(static_cast<size_t>(devices));
  std::vector<core::VolumeGeometry> slabs;
  std::vector<int64_t> first_slices;
  for (int d = 0; d < devices; ++d) {
    TOMO_ASSIGN_OR_RETURN(core::cuda::ScopedDevice scope, core::cuda::ScopedDevice::Enter(d));
    TOMO_ASSIGN_OR_RETURN(core::cuda::Stream stream, core::cuda::Stream::Create());
    streams.push_back(std::move(stream));
    const int64_t first = c.n * d / devices, end = c.n * (d + 1) / devices;
    TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry slab,
                          core::SlabVolume(volume, core::Slab{first, end - first}));
    slabs.push_back(slab);
    first_slices.push_back(first);
  }
  profiles->assign(static_cast<size_t>(devices), {});
  std::vector<double> times;
  const int64_t slice_values = c.n * c.n;
  for (int run = 0; run <= repeats; ++run) {  // the first is the warm-up
    core::Array3D result = core::Array3D::Uninitialized(volume.dims());
    std::vector<absl::Status> status(static_cast<size_t>(devices));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int d = 0; d < devices; ++d) {
      threads.emplace_back([&, d] {
        const size_t i = static_cast<size_t>(d);
        absl::StatusOr<core::cuda::ScopedDevice> scope = core::cuda::ScopedDevice::Enter(d);
        if (!scope.ok()) {
          status[i] = scope.status();
          return;
        }
        status[i] = core::cuda::FilterAndBackProjectOnDevice(
            streams[i].get(), geometry, slabs[i], projections, ramp, weights,
            BackProjectionWeighting::kFdk, result.data() + first_slices[i] * slice_values,
            &staging[i], core::cuda::kFilterAndBackProjectChunkBytes, &(*profiles)[i]);
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (const absl::Status& one : status) TOMO_RETURN_IF_ERROR(one);
    if (run > 0) {
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::sort(times.begin(), times.end());
  *seconds = times[times.size() / 2];
  return absl::OkStatus();
}

absl::StatusOr<EndToEndFdk> TimeFdkFromHost(const BenchCase& c, int num_devices, int repeats,
                                            bool pinned, bool stream,
                                            std::mt19937_64& random) {
  TOMO_ASSIGN_OR_RETURN(core::VectorGeometry geometry, MakeGeometry(c));
  TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry volume,
                        core::VolumeGeometry::Create({c.n, c.n, c.n},
                                                     {c.voxel_mm, c.voxel_mm, c.voxel_mm}, {}));
  const std::vector<core::DeviceInfo> devices = core::ListCudaDevices();
  std::vector<std::unique_ptr<core::Backend>> owned;
  std::vector<core::Backend*> backends;
  for (int d = 0; d < num_devices && d < static_cast<int>(devices.size()); ++d) {
    TOMO_ASSIGN_OR_RETURN(std::unique_ptr<core::Backend> backend, core::MakeBackend(devices[d]));
    backends.push_back(backend.get());
    owned.push_back(std::move(backend));
  }
  core::Array3D projections(geometry.projection_dims());
  std::uniform_real_distribution<float> uniform(0.25f, 1.25f);
  std::vector<float> block(1 << 20);
  for (float& v : block) v = uniform(random);
  for (int64_t i = 0; i < projections.size(); i += static_cast<int64_t>(block.size())) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(block.size()), projections.size() - i);
    std::copy(block.begin(), block.begin() + n, projections.data() + i);
  }
  EndToEndFdk result;
  result.devices = static_cast<int>(backends.size());
  std::vector<double> times;
  core::Array3D pageable_volume;  // the last run's, for the page-locked runs to match
  for (int i = 0; i <= repeats; ++i) {  // the first is the warm-up
    // Fdk's own progress events split the time: weights on the host until "back
    // projection" starts, then the slabs.
    core::RunContext context;
    double back_projection_starts = -1;
    const auto t0 = std::chrono::steady_clock::now();
    std::string events;
    std::mutex events_mu;
    context.on_progress = [&](const core::ProgressUpdate& update) {
      const double at = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::lock_guard<std::mutex> lock(events_mu);
      absl::StrAppend(&events, " ", update.stage, " ", update.fraction, " @", at * 1e3, "ms;");
      if (back_projection_starts < 0 && update.stage == "back projection") {
        back_projection_starts = at;
      }
    };
    TOMO_ASSIGN_OR_RETURN(core::Array3D reconstruction,
                          core::Fdk(geometry, volume, projections, {}, backends, context));
    if (i > 0) {
      times.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      result.weights_s = back_projection_starts;
      result.events = events;
    }
    pageable_volume = std::move(reconstruction);
  }
  std::sort(times.begin(), times.end());
  result.median_s = times[times.size() / 2];
  if (backends.size() > 1) {
    TOMO_RETURN_IF_ERROR(TimeSlabsTogether(c, geometry, volume, projections,
                                           static_cast<int>(backends.size()), repeats,
                                           &result.together_s, &result.together));
  }
  TOMO_RETURN_IF_ERROR(TimeOperatorAlone(c, geometry, volume, projections, *backends[0],
                                         &result.operator_s, &result.profile,
                                         &result.half_profile));
  {
    TOMO_ASSIGN_OR_RETURN(core::cuda::Stream stream, core::cuda::Stream::Create());
    TOMO_ASSIGN_OR_RETURN(auto d_projections,
                          DeviceBuffer<float>::Allocate(projections.size(), stream.get()));
    const auto t0 = std::chrono::steady_clock::now();
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_projections.get(), projections.data(),
                                              projections.size_bytes(), cudaMemcpyHostToDevice,
                                              stream.get()));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream.get()));
    result.upload_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The two halves of a staged upload, each over all the projections' bytes: the
    // threads' copy into a page-locked buffer, and the copy engine's copy out of it.
    constexpr int64_t kStage = int64_t{64} << 20;  // floats (256 MiB)
    TOMO_ASSIGN_OR_RETURN(auto pinned, core::cuda::PinnedBuffer<float>::Allocate(kStage));
    const auto t1 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < projections.size(); i += kStage) {
      core::ParallelCopy(projections.data() + i, std::min(kStage, projections.size() - i),
                         pinned.get());
    }
    const auto t2 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < projections.size(); i += kStage) {
      const int64_t n = std::min(kStage, projections.size() - i);
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_projections.get() + i, pinned.get(),
                                                static_cast<size_t>(n) * sizeof(float),
                                                cudaMemcpyHostToDevice, stream.get()));
    }
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream.get()));
    const auto t3 = std::chrono::steady_clock::now();
    result.gather_s = std::chrono::duration<double>(t2 - t1).count();
    result.pinned_copy_s = std::chrono::duration<double>(t3 - t2).count();
  }
  if (stream) {
    const int64_t view_values = geometry.rows() * geometry.columns();
    const double view_bytes = static_cast<double>(view_values) * sizeof(float);
    std::vector<double> fast, paced, tails;
    for (int i = 0; i <= repeats; ++i) {  // the first is the warm-up
      for (bool pace : {false, true}) {
        const auto t0 = std::chrono::steady_clock::now();
        TOMO_ASSIGN_OR_RETURN(std::unique_ptr<core::FdkStream> stream,
                              core::BeginFdk(geometry, volume, {}, *backends[0], {}));
        for (int64_t v = 0; v < geometry.num_views(); v += 4) {
          const int64_t count = std::min<int64_t>(4, geometry.num_views() - v);
          if (pace) {
            std::this_thread::sleep_until(
                t0 + std::chrono::duration<double>(static_cast<double>(v + count) * view_bytes /
                                                   (kStreamArrivalGBs * 1e9)));
          }
          TOMO_RETURN_IF_ERROR(
              stream->AddViews(v, projections.data() + v * view_values, count));
        }
        const auto last_view = std::chrono::steady_clock::now();
        TOMO_ASSIGN_OR_RETURN(core::Array3D reconstruction, stream->Finish());
        const auto done = std::chrono::steady_clock::now();
        if (i == 0) continue;
        (pace ? paced : fast).push_back(std::chrono::duration<double>(done - t0).count());
        if (pace) tails.push_back(std::chrono::duration<double>(done - last_view).count());
      }
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    result.stream_s = median(fast);
    result.stream_paced_s = median(paced);
    result.stream_tail_s = median(tails);
  }
  if (pinned) {
    // The same from page-locked projections: registered where they lie (destroyed before
    // them: declared after).
    const auto p0 = std::chrono::steady_clock::now();
    TOMO_ASSIGN_OR_RETURN(std::unique_ptr<core::PinnedHostRegion> region,
                          core::PinHostMemory(projections.data(), projections.size_bytes()));
    result.pin_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
    if (!region->pinned()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the projections were not page-locked: ", region->why_not()));
    }
    result.pinned = true;
    std::vector<double> pinned_times;
    core::Array3D pinned_volume;
    for (int i = 0; i <= repeats; ++i) {  // the first is the warm-up
      const auto t0 = std::chrono::steady_clock::now();
      // Into a new array, as the pageable runs: freeing the previous run's volume (unmapping
      // up to 4.3 GB) is not part of this one.
      TOMO_ASSIGN_OR_RETURN(core::Array3D reconstruction,
                            core::Fdk(geometry, volume, projections, {}, backends, {}));
      if (i > 0) {
        pinned_times.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      pinned_volume = std::move(reconstruction);
    }
    std::sort(pinned_times.begin(), pinned_times.end());
    result.pinned_median_s = pinned_times[pinned_times.size() / 2];
    if (pinned_volume.dims() == pageable_volume.dims()) {
      double largest = 0, difference = 0;
      for (int64_t v = 0; v < pinned_volume.size(); ++v) {
        largest = std::max(largest, std::fabs(static_cast<double>(pageable_volume.data()[v])));
        difference = std::max(difference, std::fabs(static_cast<double>(pinned_volume.data()[v]) -
                                                    pageable_volume.data()[v]));
      }
      result.pinned_difference = largest > 0 ? difference / largest : difference;
    }
    TOMO_RETURN_IF_ERROR(TimeOperatorAlone(c, geometry, volume, projections, *backends[0],
                                           &result.pinned_operator_s, &result.pinned_profile,
                                           /*half_profile=*/nullptr));
    if (backends.size() > 1) {
      TOMO_RETURN_IF_ERROR(TimeSlabsTogether(c, geometry, volume, projections,
                                             static_cast<int>(backends.size()), repeats,
                                             &result.pinned_together_s, &result.pinned_together));
    }
    const auto u0 = std::chrono::steady_clock::now();
    region.reset();
    result.unpin_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - u0).count();
  }
  return result;
}

void PrintSlabsTogether(const char* memory, double seconds,
                        const std::vector<core::cuda::FilterAndBackProjectProfile>& profiles) {
  if (profiles.empty()) return;
  std::printf("             the %zu slabs at once from %s projections: %.1f ms median;",
              profiles.size(), memory, seconds * 1e3);
  for (size_t d = 0; d < profiles.size(); ++d) {
    std::printf(" device %zu: set-up %.1f, chunks %.1f, download %.1f ms (%s), %d sub-slab(s), "
                "%.0f MB mapped ahead;",
                d, profiles[d].setup_s * 1e3, profiles[d].chunks_s * 1e3,
                profiles[d].download_s * 1e3,
                profiles[d].straight_download ? "straight" : "through staging",
                profiles[d].sub_slabs,
                static_cast<double>(profiles[d].touched_bytes) / 1e6);
  }
  std::printf("\n");
}

std::string Json(const std::vector<Result>& results, const std::string& device,
                 const std::vector<EndToEndFdk>& fdk_e2e) {
  std::string out = absl::StrCat("{\n  \"device\": \"", device, "\",\n  \"results\": [\n");
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    absl::StrAppend(&out, "    {\"case\": \"", r.c.name, "\", \"operator\": \"",
                    r.c.forward ? "forward" : "back", "\", \"weighting\": \"",
                    r.c.weighting == BackProjectionWeighting::kFdk ? "fdk" : "none",
                    "\", \"sampler\": \"", r.sampler, "\", \"volume\": ", r.c.n,
                    ", \"views\": ", r.c.views, ", \"rows\": ", r.c.rows,
                    ", \"columns\": ", r.c.columns, ", \"median_s\": ", r.median_s,
                    ", \"min_s\": ", r.min_s, ", \"gups\": ", r.gups,
                    ", \"end_to_end_s\": ", r.e2e_s, ", \"target\": \"", r.c.target, "\"}",
                    i + 1 < results.size() ? ",\n" : "\n");
  }
  absl::StrAppend(&out, "  ],\n  \"fdk1_end_to_end\": [");
  for (size_t i = 0; i < fdk_e2e.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", "{\"volume\": ", fdk_e2e[i].side,
                    ", \"devices\": ", fdk_e2e[i].devices,
                    ", \"median_s\": ", fdk_e2e[i].median_s, ", \"weights_s\": ",
                    fdk_e2e[i].weights_s, ", \"operator_s\": ",
                    fdk_e2e[i].operator_s, ", \"upload_s\": ", fdk_e2e[i].upload_s,
                    ", \"gather_s\": ", fdk_e2e[i].gather_s, ", \"pinned_copy_s\": ",
                    fdk_e2e[i].pinned_copy_s, ", \"stream_s\": ", fdk_e2e[i].stream_s,
                    ", \"stream_paced_s\": ", fdk_e2e[i].stream_paced_s,
                    ", \"stream_tail_s\": ", fdk_e2e[i].stream_tail_s);
    if (fdk_e2e[i].pinned) {
      absl::StrAppend(&out, ", \"pin_s\": ", fdk_e2e[i].pin_s, ", \"unpin_s\": ",
                      fdk_e2e[i].unpin_s, ", \"pinned_median_s\": ", fdk_e2e[i].pinned_median_s,
                      ", \"pinned_operator_s\": ", fdk_e2e[i].pinned_operator_s,
                      ", \"pinned_chunks_s\": ", fdk_e2e[i].pinned_profile.chunks_s,
                      ", \"pinned_direct_views\": ", fdk_e2e[i].pinned_profile.direct_views,
                      ", \"pinned_sub_slabs\": ", fdk_e2e[i].pinned_profile.sub_slabs,
                      ", \"pinned_difference\": ", fdk_e2e[i].pinned_difference);
    }
    absl::StrAppend(&out, "}");
  }
  absl::StrAppend(&out, "]\n}\n");
  return out;
}

// ---- iterative cases (issue 6) ----

struct IterativeCase {
  std::string name;
  enum Method { kSirt, kSart, kOsSart, kCgls } method;
  bool cone;
  int64_t n, views, detector;
  std::string target;
};

std::vector<IterativeCase> IterativeCases() {
  return {
      {"sirt-par-256", IterativeCase::kSirt, false, 256, 133, 256, "<= 8 ms"},
      {"sirt-cone-256", IterativeCase::kSirt, true, 256, 360, 384, "<= 32 ms"},
      {"sart-par-256", IterativeCase::kSart, false, 256, 133, 256, "<= 40 ms"},
      {"os-sart-par-256", IterativeCase::kOsSart, false, 256, 133, 256, "-"},
      {"cgls-par-256", IterativeCase::kCgls, false, 256, 133, 256, "-"},
      {"os-sart-cone-256", IterativeCase::kOsSart, true, 256, 360, 384, "-"},
      {"cgls-cone-256", IterativeCase::kCgls, true, 256, 360, 384, "-"},
  };
}

struct IterativeResult {
  IterativeCase c;
  double per_iteration_s = 0, setup_s = 0, total_s = 0;
  int64_t iterations = 0;
  int devices = 1;
};

// Waits for every CUDA device in `ordinals` (device 0 current afterwards).
void SynchroniseDevices(const std::vector<int>& ordinals) {
  for (int ordinal : ordinals) {
    cudaSetDevice(ordinal);
    cudaDeviceSynchronize();
  }
  cudaSetDevice(0);
}

// backends: one (the method on its backend, as tomod runs it on one device) or several
// (SeveralDevicesResidentOperators over their resident operators); ordinals: their CUDA
// devices, synchronised at the end of every iteration.
absl::StatusOr<IterativeResult> RunIterativeCase(const IterativeCase& c, int64_t iterations,
                                                 const std::vector<core::Backend*>& backends,
                                                 const std::vector<int>& ordinals,
                                                 std::mt19937_64& random) {
  core::Backend& backend = *backends.front();
  std::unique_ptr<core::SeveralDevicesResidentOperators> several;
  if (backends.size() > 1) {
    std::vector<std::unique_ptr<core::ResidentOperators>> devices;
    for (core::Backend* b : backends) {
      TOMO_ASSIGN_OR_RETURN(std::unique_ptr<core::ResidentOperators> ops,
                            b->MakeResidentOperators());
      devices.push_back(std::move(ops));
    }
    TOMO_ASSIGN_OR_RETURN(several, core::SeveralDevicesResidentOperators::Create(std::move(devices)));
  }
  core::VectorGeometry geometry = [&] {
    const std::vector<double> angles =
        core::UniformAnglesRad(c.views, 0, c.cone ? 2 * kPi : kPi);
    if (c.cone) {
      core::FanConeOptions cone;
      const double pixel = 2.0 * c.n / c.detector;
      cone.detector = {c.detector, c.detector, pixel, pixel, 0, 0};
      cone.source_origin_mm = 3.0 * c.n;
      cone.origin_detector_mm = 1.0 * c.n;
      cone.angles_rad = angles;
      return core::MakeCircularCone(cone).value();
    }
    core::DetectorLayout detector{c.detector, c.detector, 1.0, 1.0, 0, 0};
    return core::MakeParallel3D(detector, angles).value();
  }();
  TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry volume,
                        core::VolumeGeometry::Create({c.n, c.n, c.n}, {1, 1, 1}, {}));
  core::Array3D projections(geometry.projection_dims());
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (int64_t i = 0; i < projections.size(); ++i) projections.data()[i] = uniform(random);

  std::vector<std::chrono::steady_clock::time_point> ends;
  core::IterativeOptions options;
  options.iterations = iterations;
  options.on_iteration = [&ends, &ordinals](const core::IterationReport&) {
    SynchroniseDevices(ordinals);
    ends.push_back(std::chrono::steady_clock::now());
    return absl::OkStatus();
  };
  // The method on the one backend or on the several devices' operators.
  auto run_on = [&](auto& target) -> absl::StatusOr<core::IterativeResult> {
    switch (c.method) {
      case IterativeCase::kSirt:
        return core::Sirt(core::Geometry(geometry), volume, projections, options, target,
                          core::RunContext{});
      case IterativeCase::kSart:
        return core::BlockIterative(core::Geometry(geometry), volume, projections, options,
                                    c.views, core::ViewOrder::kInterleaved, target,
                                    core::RunContext{});
      case IterativeCase::kOsSart:
        return core::BlockIterative(core::Geometry(geometry), volume, projections, options, 10,
                                    core::ViewOrder::kInterleaved, target, core::RunContext{});
      case IterativeCase::kCgls:
        return core::Cgls(core::Geometry(geometry), volume, projections, options, target,
                          core::RunContext{});
    }
    return absl::InternalError("iterative case: unknown method");
  };
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<core::IterativeResult> run =
      several != nullptr ? run_on(*several) : run_on(backend);
  const auto end = std::chrono::steady_clock::now();
  TOMO_RETURN_IF_ERROR(run.status());
  if (ends.size() != static_cast<size_t>(iterations) || iterations < 2) {
    return absl::InternalError("iterative case: not every iteration was reported");
  }
  IterativeResult r;
  r.c = c;
  r.iterations = iterations;
  r.per_iteration_s = std::chrono::duration<double>(ends.back() - ends.front()).count() /
                      static_cast<double>(iterations - 1);
  r.total_s = std::chrono::duration<double>(end - start).count();
  r.setup_s = std::chrono::duration<double>(ends.front() - start).count() - r.per_iteration_s;
  return r;
}

// "sart-profile": what one SART block of sart-par-256 costs, operation by operation
// (CUDA events around 50 calls each, GPU-resident): the one-view forward projection with
// plain loads and with the 3D texture (its volume copy included), the one-view back
// projection, the volume update, and the small per-view operations.
absl::Status ProfileSartBlock(core::Backend& backend) {
  const int64_t n = 256;
  core::DetectorLayout detector{n, n, 1.0, 1.0, 0, 0};
  TOMO_ASSIGN_OR_RETURN(core::VectorGeometry one_view, core::MakeParallel3D(detector, {0.7}));
  TOMO_ASSIGN_OR_RETURN(core::VolumeGeometry volume,
                        core::VolumeGeometry::Create({n, n, n}, {1, 1, 1}, {}));
  TOMO_ASSIGN_OR_RETURN(auto ops, backend.MakeResidentOperators());
  TOMO_ASSIGN_OR_RETURN(auto projector, ops->MakeProjector(one_view, volume, core::ProjectorModel::kJoseph));
  TOMO_ASSIGN_OR_RETURN(auto x, ops->Allocate(volume.dims()));
  TOMO_ASSIGN_OR_RETURN(auto y, ops->Allocate(volume.dims()));
  TOMO_ASSIGN_OR_RETURN(auto c, ops->Allocate(volume.dims()));
  TOMO_ASSIGN_OR_RETURN(auto p, ops->Allocate(one_view.projection_dims()));
  TOMO_ASSIGN_OR_RETURN(auto q, ops->Allocate(one_view.projection_dims()));
  TOMO_RETURN_IF_ERROR(ops->Fill(0.5f, *x));
  TOMO_RETURN_IF_ERROR(ops->Fill(1.0f, *c));
  TOMO_RETURN_IF_ERROR(ops->Fill(0.25f, *p));
  TOMO_RETURN_IF_ERROR(ops->Fill(0.25f, *q));
  TOMO_ASSIGN_OR_RETURN(double warm, ops->Dot(*p, *p));
  (void)warm;
  auto time = [&](const char* what, const std::function<absl::Status()>& op) -> absl::Status {
    TOMO_RETURN_IF_ERROR(op());
    cudaDeviceSynchronize();
    constexpr int kCalls = 50;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) TOMO_RETURN_IF_ERROR(op());
    cudaDeviceSynchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("sart-profile     %-40s %8.1f us per call\n", what, s / kCalls * 1e6);
    return absl::OkStatus();
  };
  TOMO_RETURN_IF_ERROR(time("forward, one view (resident projector)",
                            [&] { return projector->Forward(*x, *p); }));
  TOMO_RETURN_IF_ERROR(time("back, one view (resident projector)",
                            [&] { return projector->Back(*p, *y); }));
  TOMO_RETURN_IF_ERROR(time("AddScaledQuotient (volume update)", [&] {
    return ops->AddScaledQuotient(1.0f, *y, *c, 1e-3f, -1e30f, 1e30f, *x);
  }));
  TOMO_RETURN_IF_ERROR(time("Axpby + Multiply + AccumulateDot (one view)", [&] {
    TOMO_RETURN_IF_ERROR(ops->Axpby(1.0f, *q, -1.0f, *p));
    TOMO_RETURN_IF_ERROR(ops->Multiply(*q, *p));
    return ops->AccumulateDot(*p, *p);
  }));
  TOMO_RETURN_IF_ERROR(time("Dot (one view, waits)", [&] { return ops->Dot(*p, *p).status(); }));
  // The projector directly, with each sampler.
  TOMO_ASSIGN_OR_RETURN(core::cuda::Stream stream, core::cuda::Stream::Create());
  TOMO_ASSIGN_OR_RETURN(auto direct,
                        DeviceVectorProjector::Create(one_view, volume, stream.get()));
  TOMO_ASSIGN_OR_RETURN(auto d_volume, DeviceBuffer<float>::Allocate(volume.voxel_count(),
                                                                     stream.get()));
  TOMO_ASSIGN_OR_RETURN(auto d_view, DeviceBuffer<float>::Allocate(n * n, stream.get()));
  cudaMemsetAsync(d_volume.get(), 0, d_volume.size_bytes(), stream.get());
  for (VectorSampler sampler : {VectorSampler::kExact, VectorSampler::kTexture,
                                VectorSampler::kLayered}) {
    TOMO_RETURN_IF_ERROR(time(SamplerName(sampler, -1).append(" forward, one view").c_str(), [&] {
      return direct.Forward(d_volume.get(), d_view.get(), sampler);
    }));
  }
  return absl::OkStatus();
}

// "peer-copy": CopyFromPeer of one n^3 volume between devices 1 and 0 each way (what a
// back projection on two devices moves: device 1's partial to device 0, the sum back),
// 20 copies after one, host clock around them after synchronising both devices.
absl::Status TimePeerCopy(const std::vector<core::DeviceInfo>& devices, int64_t n) {
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<core::Backend> b0, core::MakeBackend(devices[0]));
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<core::Backend> b1, core::MakeBackend(devices[1]));
  TOMO_ASSIGN_OR_RETURN(auto ops0, b0->MakeResidentOperators());
  TOMO_ASSIGN_OR_RETURN(auto ops1, b1->MakeResidentOperators());
  const core::Dims3 dims{n, n, n};
  TOMO_ASSIGN_OR_RETURN(auto a0, ops0->Allocate(dims));
  TOMO_ASSIGN_OR_RETURN(auto a1, ops1->Allocate(dims));
  TOMO_RETURN_IF_ERROR(ops0->Fill(1.0f, *a0));
  TOMO_RETURN_IF_ERROR(ops1->Fill(2.0f, *a1));
  const std::vector<int> ordinals = {devices[0].index, devices[1].index};
  const double gigabytes = static_cast<double>(dims.count()) * sizeof(float) * 1e-9;
  struct Way {
    const char* name;
    core::ResidentOperators& to;
    core::ResidentOperators& from;
    const core::ResidentArray& source;
    core::ResidentArray& target;
  };
  for (const Way& way : {Way{"device 1 -> 0", *ops0, *ops1, *a1, *a0},
                         Way{"device 0 -> 1", *ops1, *ops0, *a0, *a1}}) {
    TOMO_RETURN_IF_ERROR(way.to.CopyFromPeer(way.from, way.source, way.target));
    SynchroniseDevices(ordinals);
    constexpr int kCopies = 20;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCopies; ++i) {
      TOMO_RETURN_IF_ERROR(way.to.CopyFromPeer(way.from, way.source, way.target));
    }
    SynchroniseDevices(ordinals);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kCopies;
    std::printf("peer-copy        %lld^3 volume %s: %.3f ms per copy, %.1f GB/s\n",
                static_cast<long long>(n), way.name, s * 1e3, gigabytes / s);
  }
  int can_access = 0;
  cudaDeviceCanAccessPeer(&can_access, devices[0].index, devices[1].index);
  std::printf("peer-copy        cudaDeviceCanAccessPeer(0, 1) = %d\n", can_access);
  std::fflush(stdout);
  return absl::OkStatus();
}

std::string IterativeJson(const std::vector<IterativeResult>& results, const std::string& device) {
  std::string out = absl::StrCat("{\n  \"device\": \"", device, "\",\n  \"iterative\": [\n");
  for (size_t i = 0; i < results.size(); ++i) {
    const IterativeResult& r = results[i];
    absl::StrAppend(&out, "    {\"case\": \"", r.c.name, "\", \"devices\": ", r.devices,
                    ", \"iterations\": ", r.iterations,
                    ", \"seconds_per_iteration\": ", r.per_iteration_s,
                    ", \"setup_seconds\": ", r.setup_s, ", \"total_seconds\": ", r.total_s,
                    ", \"target\": \"", r.c.target, "\"}", i + 1 < results.size() ? "," : "",
                    "\n");
  }
  absl::StrAppend(&out, "  ]\n}\n");
  return out;
}

int Main(int argc, char** argv) {
  CLI::App app{"tomo-bench: GPU-resident timings of the tomoserve projectors"};
  std::string json_path;
  int repeats = 5;
  std::string cases_text;
  bool e2e = true;
  bool exact = true;
  app.add_option("--json", json_path, "write the results as JSON to this path");
  app.add_option("--repeats", repeats, "timed runs per case (median reported)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--cases", cases_text, "comma-separated case names (default: all)");
  app.add_flag("--e2e,!--no-e2e", e2e, "also time CudaBackend from host arrays");
  bool pinned = true;
  app.add_flag("--pinned,!--no-pinned", pinned,
               "also time FDK case 1 end to end from page-locked (registered) projections");
  std::vector<int> fdk_devices;
  app.add_option("--fdk-devices", fdk_devices,
                 "device counts for the FDK end-to-end runs (default: 1 and all devices)")
      ->delimiter(',');
  bool fdk_stream = true;
  app.add_flag("--fdk-stream,!--no-fdk-stream", fdk_stream,
               "also time the FDK stream (views added as an upload delivers them)");
  std::vector<int64_t> fdk_sides = {512};
  app.add_option("--fdk-sides", fdk_sides,
                 "volume sides for FDK case 1 end to end (same field of view), e.g. 512,1024")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{16}, int64_t{2048}));
  app.add_flag("--exact,!--no-exact", exact,
               "also time the exact (plain-load) sampler of the back projector");
  int64_t iterative_iterations = 10;
  std::string iterative_json_path;
  app.add_option("--iterations", iterative_iterations,
                 "iterations per iterative case (the first is not timed)")
      ->check(CLI::Range(int64_t{2}, int64_t{10000}));
  app.add_option("--iterative-json", iterative_json_path,
                 "write the iterative cases' results as JSON to this path");
  std::vector<int> iterative_devices;
  app.add_option("--iterative-devices", iterative_devices,
                 "time the iterative cases on each of these device counts (e.g. 1,2: the "
                 "first device, then the first two), median of --repeats runs, with speedups")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  int64_t kept_host_memory_bytes = -1;
  app.add_option("--kept-host-memory-bytes", kept_host_memory_bytes,
                 "freed large host arrays kept for reuse, as tomod's flag of that name (-1: "
                 "the default, an eighth of the machine's memory; 0: none, every volume in "
                 "new memory, downloaded through staging)")
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()));
  CLI11_PARSE(app, argc, argv);
  if (kept_host_memory_bytes >= 0) {
    core::HostBlockPool::Get().SetKeptBytesLimit(static_cast<size_t>(kept_host_memory_bytes));
  }

  const std::vector<core::DeviceInfo> devices = core::ListCudaDevices();
  if (devices.empty()) {
    std::fprintf(stderr, "tomo-bench: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const std::string device = prop.name;
  std::vector<std::string> wanted;
  if (!cases_text.empty()) wanted = absl::StrSplit(cases_text, ',');

  std::mt19937_64 random(12345);
  std::vector<Result> results;
  std::printf("%-12s %-8s %-8s %12s %12s %9s %12s  %s\n", "case", "op", "sampler", "median ms",
              "min ms", "GUPS", "e2e ms", "target");
  for (const BenchCase& c : AllCases()) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), c.name) == wanted.end()) {
      continue;
    }
    // (sampler, back variant): the first is what CudaBackend uses and is also timed end
    // to end.
    struct Run {
      VectorSampler sampler;
      int variant;
      bool half;
      OneRow one_row = OneRow::kStaged;
    };
    std::vector<Run> runs;
    if (c.forward) {
      // -2: the v0.2 block order (views slowest, "-vslow").
      runs = {{VectorSampler::kLayered, -1, false}, {VectorSampler::kTexture, -1, false},
              {VectorSampler::kLayered, -2, false}, {VectorSampler::kTexture, -2, false}};
    } else if (c.kind == BenchCase::kFdkTotal) {
      // The back projection as CudaBackend does it for kFdk; -3: the filter alone.
      runs = {{VectorSampler::kTexture, core::cuda::kBpVariantFdk, true},
              {VectorSampler::kTexture, core::cuda::kBpVariantDefault, true},
              {VectorSampler::kTexture, -3, true}};
    } else if (c.kind == BenchCase::kParallel2dTranspose) {
      runs = {{VectorSampler::kExact, -1, false}};
    } else {
      runs.push_back({VectorSampler::kTexture, core::cuda::kBpVariantDefault, false});
      for (int v = 0; v < core::cuda::kBpVariantCount; ++v) {
        if (v != core::cuda::kBpVariantDefault) runs.push_back({VectorSampler::kTexture, v, false});
      }
      const bool two_d = c.kind == BenchCase::kParallel2d || c.kind == BenchCase::kFan2d;
      // The 2D cases: the staged runs above; v0.4's layered 1D texture (float32 and float16)
      // and v0.3's layered 2D texture, for comparison in the same run.
      const OneRow texture_mode = two_d ? OneRow::kTexture1d : OneRow::kStaged;
      if (two_d) {
        for (int v = 0; v < core::cuda::kBpVariantCount; ++v) {
          runs.push_back({VectorSampler::kTexture, v, false, texture_mode});
        }
      }
      for (int v = 0; v < core::cuda::kBpVariantCount; ++v) {
        runs.push_back({VectorSampler::kTexture, v, true, texture_mode});
      }
      if (two_d) {
        for (int v = 0; v < core::cuda::kBpVariantCount; ++v) {
          runs.push_back({VectorSampler::kTexture, v, false, OneRow::kTexture2d});
        }
      }
      if (exact) runs.push_back({VectorSampler::kExact, core::cuda::kBpVariantDefault, false});
    }
    for (size_t k = 0; k < runs.size(); ++k) {
      const VectorSampler sampler = runs[k].sampler;
      absl::StatusOr<Result> r = RunCase(c, sampler, runs[k].variant, runs[k].half, repeats,
                                         e2e && k == 0, random, runs[k].one_row);
      if (!r.ok()) {
        std::fprintf(stderr, "tomo-bench: %s: %s\n", c.name.c_str(),
                     std::string(r.status().message()).c_str());
        return 1;
      }
      std::printf("%-12s %-8s %-8s %12.3f %12.3f %9.1f %12s  %s\n", c.name.c_str(),
                  c.forward ? "forward" : (c.weighting == BackProjectionWeighting::kFdk ? "back-fdk" : "back"),
                  r->sampler.c_str(), r->median_s * 1e3, r->min_s * 1e3, r->gups,
                  r->e2e_s >= 0 ? absl::StrCat(static_cast<int64_t>(r->e2e_s * 1e3 + 0.5)).c_str()
                                : "-",
                  c.target.c_str());
      std::fflush(stdout);
      results.push_back(*r);
    }
  }
  // The iterative cases (issue 6), on the first device's backend.
  if (std::find(wanted.begin(), wanted.end(), "sart-profile") != wanted.end()) {
    absl::StatusOr<std::unique_ptr<core::Backend>> backend = core::MakeBackend(devices[0]);
    absl::Status profiled = backend.ok() ? ProfileSartBlock(**backend) : backend.status();
    if (!profiled.ok()) {
      std::fprintf(stderr, "tomo-bench: sart-profile: %s\n",
                   std::string(profiled.message()).c_str());
      return 1;
    }
  }
  std::vector<IterativeResult> iterative_results;
  // Device counts: as given, or the first device alone.
  std::vector<int> counts = iterative_devices.empty() ? std::vector<int>{1} : iterative_devices;
  for (int count : counts) {
    if (count > static_cast<int>(devices.size())) {
      std::fprintf(stderr, "tomo-bench: --iterative-devices: %d devices asked for, %zu present\n",
                   count, devices.size());
      return 1;
    }
  }
  for (const IterativeCase& c : IterativeCases()) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), c.name) == wanted.end()) {
      continue;
    }
    double first_median = 0;
    for (int count : counts) {
      std::vector<std::unique_ptr<core::Backend>> owned;
      std::vector<core::Backend*> backends;
      std::vector<int> ordinals;
      for (int d = 0; d < count; ++d) {
        absl::StatusOr<std::unique_ptr<core::Backend>> backend = core::MakeBackend(devices[d]);
        if (!backend.ok()) {
          std::fprintf(stderr, "tomo-bench: %s\n", std::string(backend.status().message()).c_str());
          return 1;
        }
        owned.push_back(std::move(backend).value());
        backends.push_back(owned.back().get());
        ordinals.push_back(devices[d].index);
      }
      // One run as before (no --iterative-devices), else a warm-up and --repeats runs.
      const int runs = iterative_devices.empty() ? 1 : repeats + 1;
      std::vector<IterativeResult> timed;
      for (int run = 0; run < runs; ++run) {
        const bool warm_up = runs > 1 && run == 0;
        absl::StatusOr<IterativeResult> r = RunIterativeCase(
            c, warm_up ? 2 : iterative_iterations, backends, ordinals, random);
        if (!r.ok()) {
          std::fprintf(stderr, "tomo-bench: %s on %d device(s): %s\n", c.name.c_str(), count,
                       std::string(r.status().message()).c_str());
          return 1;
        }
        if (!warm_up) timed.push_back(*r);
      }
      std::sort(timed.begin(), timed.end(), [](const IterativeResult& a, const IterativeResult& b) {
        return a.per_iteration_s < b.per_iteration_s;
      });
      IterativeResult r = timed[timed.size() / 2];
      r.devices = count;
      if (first_median == 0) first_median = r.per_iteration_s;
      if (iterative_devices.empty()) {
        std::printf("%-16s %8.2f ms per iteration (%lld iterations; setup %.0f ms, total %.0f ms "
                    "from host data)  target %s\n",
                    c.name.c_str(), r.per_iteration_s * 1e3, static_cast<long long>(r.iterations),
                    r.setup_s * 1e3, r.total_s * 1e3, c.target.c_str());
      } else {
        std::printf("%-16s %d device(s): %8.2f ms per iteration median of %zu (min %.2f ms; "
                    "%lld iterations; setup %.0f ms)  speedup %.2fx over %d device(s)\n",
                    c.name.c_str(), count, r.per_iteration_s * 1e3, timed.size(),
                    timed.front().per_iteration_s * 1e3, static_cast<long long>(r.iterations),
                    r.setup_s * 1e3, first_median / r.per_iteration_s, counts.front());
      }
      std::fflush(stdout);
      iterative_results.push_back(r);
    }
  }
  if (std::any_of(counts.begin(), counts.end(), [](int count) { return count > 1; })) {
    const absl::Status copied = TimePeerCopy(devices, 256);
    if (!copied.ok()) {
      std::fprintf(stderr, "tomo-bench: peer-copy: %s\n", std::string(copied.message()).c_str());
      return 1;
    }
  }
  if (!iterative_json_path.empty()) {
    std::ofstream file(iterative_json_path);
    file << IterativeJson(iterative_results, device);
    if (!file) {
      std::fprintf(stderr, "tomo-bench: cannot write %s\n", iterative_json_path.c_str());
      return 1;
    }
  }
  // FDK case 1 end to end from host memory, on one device and on all of them.
  std::vector<EndToEndFdk> fdk_e2e;
  const bool want_fdk = e2e && (wanted.empty() || std::find(wanted.begin(), wanted.end(),
                                                            "fdk1-total") != wanted.end());
  for (int64_t side : fdk_sides) {
    if (!want_fdk) break;
    const std::vector<BenchCase> all = AllCases();
    BenchCase fdk_case = *std::find_if(
        all.begin(), all.end(), [](const BenchCase& c) { return c.name == "fdk1-total"; });
    // The same field of view (256 mm) at a finer grid: the back projection grows with the
    // voxels, the transfers stay.
    fdk_case.voxel_mm *= static_cast<double>(fdk_case.n) / static_cast<double>(side);
    fdk_case.n = side;
    std::vector<int> counts = fdk_devices;
    if (counts.empty()) {
      counts.push_back(1);
      if (devices.size() > 1) counts.push_back(static_cast<int>(devices.size()));
    }
    for (int count : counts) {
      absl::StatusOr<EndToEndFdk> r =
          TimeFdkFromHost(fdk_case, count, repeats, pinned, fdk_stream, random);
      if (!r.ok()) {
        std::fprintf(stderr, "tomo-bench: fdk1 end to end: %s\n",
                     std::string(r.status().message()).c_str());
        return 1;
      }
      std::printf("fdk1-e2e     %lld^3, %d device(s): Fdk from host arrays %.1f ms median (host weights "
                  "%.1f ms; the first device's FilterAndBackProject alone %.1f ms); the "
                  "projections' upload: pageable %.1f ms, or host threads into pinned %.1f ms "
                  "and pinned to device %.1f ms\n",
                  static_cast<long long>(side), r->devices, r->median_s * 1e3,
                  r->weights_s * 1e3, r->operator_s * 1e3,
                  r->upload_s * 1e3, r->gather_s * 1e3, r->pinned_copy_s * 1e3);
      r->side = side;
      std::printf("             the operator's parts (device 0, whole volume, band of %lld rows, "
                  "%lld views per chunk, %d sub-slab(s)): set-up %.1f ms, chunks %.1f ms "
                  "(into the head sub-slab), download %.1f ms (%s; with the tail sub-slabs' "
                  "back projections); %.0f MB of the result's pages mapped while the device "
                  "computed\n",
                  static_cast<long long>(r->profile.band_rows),
                  static_cast<long long>(r->profile.chunk_views), r->profile.sub_slabs,
                  r->profile.setup_s * 1e3, r->profile.chunks_s * 1e3,
                  r->profile.download_s * 1e3,
                  r->profile.straight_download ? "straight" : "through staging",
                  static_cast<double>(r->profile.touched_bytes) / 1e6);
      std::printf("             the upper half alone (band of %lld rows): set-up %.1f ms, chunks "
                  "%.1f ms, download %.1f ms\n",
                  static_cast<long long>(r->half_profile.band_rows),
                  r->half_profile.setup_s * 1e3, r->half_profile.chunks_s * 1e3,
                  r->half_profile.download_s * 1e3);
      std::printf("             progress:%s\n", r->events.c_str());
      PrintSlabsTogether("pageable", r->together_s, r->together);
      if (fdk_stream) std::printf("             as a stream (core::BeginFdk, 4 views per AddViews): %.1f ms "
                  "as fast as views can be added; views arriving at %.1f GB/s: %.1f ms, of "
                  "which %.1f ms after the last view arrived\n",
                  r->stream_s * 1e3, kStreamArrivalGBs, r->stream_paced_s * 1e3,
                  r->stream_tail_s * 1e3);
      if (r->pinned) {
        std::printf("fdk1-pinned  %lld^3, %d device(s): the projections page-locked where they "
                    "lie (registering took %.1f ms, unregistering %.1f ms): Fdk %.1f ms median "
                    "(pageable %.1f ms), largest difference to the pageable volume %.2g of its "
                    "peak; FilterAndBackProject alone %.1f ms (pageable %.1f ms): set-up %.1f "
                    "ms, chunks %.1f ms (pageable %.1f ms), download %.1f ms, %d sub-slab(s); "
                    "%lld of the views uploaded straight from them\n",
                    static_cast<long long>(side), r->devices, r->pin_s * 1e3, r->unpin_s * 1e3,
                    r->pinned_median_s * 1e3, r->median_s * 1e3, r->pinned_difference,
                    r->pinned_operator_s * 1e3, r->operator_s * 1e3,
                    r->pinned_profile.setup_s * 1e3, r->pinned_profile.chunks_s * 1e3,
                    r->profile.chunks_s * 1e3, r->pinned_profile.download_s * 1e3,
                    r->pinned_profile.sub_slabs,
                    static_cast<long long>(r->pinned_profile.direct_views));
        PrintSlabsTogether("page-locked", r->pinned_together_s, r->pinned_together);
      }
      fdk_e2e.push_back(*r);
    }
  }
  if (!json_path.empty()) {
    std::ofstream file(json_path);
    file << Json(results, device, fdk_e2e);
    if (!file) {
      std::fprintf(stderr, "tomo-bench: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace tomo::bench

int main(int argc, char** argv) { return tomo::bench::Main(argc, argv); }
