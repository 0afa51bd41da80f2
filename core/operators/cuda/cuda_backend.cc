// CudaBackend: the Backend operators (core/operators/backend.h) on one CUDA device.
//
// Host side of the CUDA backend, compiled by g++: validation, the per-view parameters
// (in double, by the same formulas and the same case decision as the CPU reference), the
// device buffers, copies, cuFFT and the kernel launches (plain functions from
// parallel_2d_kernels.h), with every CUDA and cuFFT call wrapped by
// TOMO_CUDA_RETURN_IF_ERROR.
//
// Each call makes the backend's device current for its duration (ScopedDevice restores the
// previous one), allocates what it needs in stream order on the backend's own stream,
// uploads, computes, downloads and synchronises: results are complete on return. Per-call
// data (views, filter response) live in buffers owned by the call; nothing is shared with
// other backends. cuFFT plans are made once per (padded length, batch) and kept in this
// instance (at most kMaxCachedPlans).
//
// Agreement with CpuBackend: same operator and same weights, float accumulation on both
// sides in a different order, so results differ by float rounding (relative ~1e-5; the
// tests in tests/core/operators/cuda state the bounds).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <cufft.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/operators/backend.h"
#include "core/operators/parallel_2d_joseph.h"
#include "core/operators/cuda/cuda_backend_internal.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/parallel_2d_kernels.h"

namespace tomo::core::cuda {
namespace {

// Rows filtered per cuFFT batch at most, counted in padded real samples (64 Mi samples:
// 256 MiB real plus 256 MiB complex on the device); larger sinograms go in chunks.
constexpr int64_t kMaxFilterSamplesPerBatch = int64_t{1} << 26;
// cuFFT plans kept per backend; the oldest (lowest key) goes first beyond this.
constexpr size_t kMaxCachedPlans = 8;

// The kernels' per-view parameters: the shared float64 ones (parallel_2d_joseph.h), with
// float copies for the inner loops.
std::vector<JosephView> MakeDeviceJosephViews(const ParallelGeometry2D& geometry,
                                              const VolumeGeometry& volume_geometry) {
  std::vector<JosephView> views;
  for (const JosephViewParameters& p : MakeJosephViews(geometry, volume_geometry)) {
    JosephView view{};
    view.step_along_x = p.step_rows ? 0 : 1;
    view.across0 = p.offset;
    view.across_per_step = p.per_line;
    view.across_per_detector = p.per_detector;
    view.step_weight = static_cast<float>(p.path_length);
    view.across_per_step_f = static_cast<float>(p.per_line);
    view.across_per_detector_f = static_cast<float>(p.per_detector);
    view.detector_per_across_f = static_cast<float>(1.0 / p.per_detector);
    views.push_back(view);
  }
  return views;
}

Parallel2dShape MakeShape(const ParallelGeometry2D& geometry,
                          const VolumeGeometry& volume_geometry) {
  Parallel2dShape shape;
  shape.nx = static_cast<int32_t>(volume_geometry.size().x);
  shape.ny = static_cast<int32_t>(volume_geometry.size().y);
  shape.num_views = static_cast<int32_t>(geometry.num_views());
  shape.num_detectors = static_cast<int32_t>(geometry.num_detectors());
  return shape;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, Stream stream) : device_(device), stream_(std::move(stream)) {}
  ~CudaBackend() override {
    // Plans and the stream belong to device_: destroy them with it current.
    absl::StatusOr<ScopedDevice> scope = ScopedDevice::Enter(device_);
    plans_.clear();
    stream_.Reset();
  }

  std::string name() const override { return absl::StrCat("cuda:", device_); }

  absl::Status ForwardProject(const ParallelGeometry2D& geometry,
                              const VolumeGeometry& volume_geometry, const Array3D& volume,
                              Array3D& projections) override {
    TOMO_RETURN_IF_ERROR(
        CheckProjectorOperands(geometry, volume_geometry, volume, projections));
    std::lock_guard<std::mutex> lock(mu_);
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    const cudaStream_t stream = stream_.get();
    const Parallel2dShape shape = MakeShape(geometry, volume_geometry);
    const std::vector<JosephView> views = MakeDeviceJosephViews(geometry, volume_geometry);
    bool any_along_x = false;
    for (const JosephView& v : views) any_along_x = any_along_x || v.step_along_x != 0;

    TOMO_ASSIGN_OR_RETURN(auto d_views, DeviceBuffer<JosephView>::Allocate(views.size(), stream));
    TOMO_ASSIGN_OR_RETURN(auto d_volume,
                          DeviceBuffer<float>::Allocate(static_cast<size_t>(volume.size()), stream));
    DeviceBuffer<float> d_volume_t;
    if (any_along_x) {
      TOMO_ASSIGN_OR_RETURN(
          d_volume_t, DeviceBuffer<float>::Allocate(static_cast<size_t>(volume.size()), stream));
    }
    TOMO_ASSIGN_OR_RETURN(auto d_projections, DeviceBuffer<float>::Allocate(
                                                  static_cast<size_t>(projections.size()), stream));

    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_views.get(), views.data(), d_views.size_bytes(),
                                              cudaMemcpyHostToDevice, stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_volume.get(), volume.data(), volume.size_bytes(),
                                              cudaMemcpyHostToDevice, stream));
    if (any_along_x) {
      TOMO_CUDA_RETURN_IF_ERROR(
          LaunchTranspose(d_volume.get(), shape.nx, shape.ny, d_volume_t.get(), stream));
    }
    TOMO_CUDA_RETURN_IF_ERROR(LaunchParallel2dForward(shape, d_views.get(), d_volume.get(),
                                                      d_volume_t.get(), d_projections.get(),
                                                      stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(projections.data(), d_projections.get(),
                                              projections.size_bytes(), cudaMemcpyDeviceToHost,
                                              stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  }

  absl::Status BackProject(const ParallelGeometry2D& geometry,
                           const VolumeGeometry& volume_geometry, const Array3D& projections,
                           Array3D& volume) override {
    TOMO_RETURN_IF_ERROR(
        CheckProjectorOperands(geometry, volume_geometry, volume, projections));
    std::lock_guard<std::mutex> lock(mu_);
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    const cudaStream_t stream = stream_.get();
    const Parallel2dShape shape = MakeShape(geometry, volume_geometry);
    const std::vector<JosephView> views = MakeDeviceJosephViews(geometry, volume_geometry);

    TOMO_ASSIGN_OR_RETURN(auto d_views, DeviceBuffer<JosephView>::Allocate(views.size(), stream));
    TOMO_ASSIGN_OR_RETURN(auto d_projections, DeviceBuffer<float>::Allocate(
                                                  static_cast<size_t>(projections.size()), stream));
    TOMO_ASSIGN_OR_RETURN(auto d_volume,
                          DeviceBuffer<float>::Allocate(static_cast<size_t>(volume.size()), stream));

    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_views.get(), views.data(), d_views.size_bytes(),
                                              cudaMemcpyHostToDevice, stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_projections.get(), projections.data(),
                                              projections.size_bytes(), cudaMemcpyHostToDevice,
                                              stream));
    TOMO_CUDA_RETURN_IF_ERROR(LaunchParallel2dBack(shape, d_views.get(), d_projections.get(),
                                                   d_volume.get(), stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(volume.data(), d_volume.get(), volume.size_bytes(),
                                              cudaMemcpyDeviceToHost, stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  }

  absl::Status FilterRows(const RampFilter& filter, Array3D& projections) override {
    const int64_t nd = projections.dims().d2;
    if (nd != filter.num_detectors()) {
      return absl::InvalidArgumentError(
          absl::StrCat("projections: ", nd, " detector columns, but the filter was made for ",
                       filter.num_detectors()));
    }
    const int64_t length = filter.padded_length();
    const int64_t bins = length / 2 + 1;
    if (length < nd || static_cast<int64_t>(filter.response().size()) != bins) {
      return absl::InternalError(absl::StrCat("ramp filter with padded length ", length, " and ",
                                              filter.response().size(),
                                              " response values is inconsistent"));
    }
    const int64_t rows = projections.dims().d0 * projections.dims().d1;
    if (rows == 0 || nd == 0) return absl::OkStatus();
    if (length > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError(
          absl::StrCat("padded filter length ", length, " exceeds 2^30"));
    }

    std::lock_guard<std::mutex> lock(mu_);
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    const cudaStream_t stream = stream_.get();
    const int64_t batch = std::max<int64_t>(
        1, std::min<int64_t>(rows, kMaxFilterSamplesPerBatch / length));

    TOMO_ASSIGN_OR_RETURN(auto d_response,
                          DeviceBuffer<float>::Allocate(static_cast<size_t>(bins), stream));
    TOMO_ASSIGN_OR_RETURN(auto d_real,
                          DeviceBuffer<float>::Allocate(static_cast<size_t>(batch * length), stream));
    TOMO_ASSIGN_OR_RETURN(auto d_spectrum,
                          DeviceBuffer<float2>::Allocate(static_cast<size_t>(batch * bins), stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_response.get(), filter.response().data(),
                                              d_response.size_bytes(), cudaMemcpyHostToDevice,
                                              stream));

    const size_t row_bytes = static_cast<size_t>(nd) * sizeof(float);
    const size_t padded_row_bytes = static_cast<size_t>(length) * sizeof(float);
    for (int64_t r0 = 0; r0 < rows; r0 += batch) {
      const int64_t count = std::min(batch, rows - r0);
      TOMO_ASSIGN_OR_RETURN(const RowPlans* plans, GetPlans(length, count));
      float* host = projections.data() + r0 * nd;
      // Zero the padding, then copy the rows in: padded row r is [row r, 0, ..., 0].
      if (length > nd) {
        TOMO_CUDA_RETURN_IF_ERROR(cudaMemset2DAsync(d_real.get() + nd, padded_row_bytes, 0,
                                                    padded_row_bytes - row_bytes,
                                                    static_cast<size_t>(count), stream));
      }
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(d_real.get(), padded_row_bytes, host,
                                                  row_bytes, row_bytes, static_cast<size_t>(count),
                                                  cudaMemcpyHostToDevice, stream));
      TOMO_CUDA_RETURN_IF_ERROR(cufftExecR2C(plans->forward.get(), d_real.get(),
                                             reinterpret_cast<cufftComplex*>(d_spectrum.get())));
      TOMO_CUDA_RETURN_IF_ERROR(LaunchMultiplySpectrum(d_spectrum.get(), d_response.get(), count,
                                                       static_cast<int32_t>(bins), stream));
      TOMO_CUDA_RETURN_IF_ERROR(cufftExecC2R(plans->inverse.get(),
                                             reinterpret_cast<cufftComplex*>(d_spectrum.get()),
                                             d_real.get()));
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(host, row_bytes, d_real.get(), padded_row_bytes,
                                                  row_bytes, static_cast<size_t>(count),
                                                  cudaMemcpyDeviceToHost, stream));
    }
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  }

 private:
  struct RowPlans {
    FftPlan forward;  // R2C
    FftPlan inverse;  // C2R
  };

  // The cached plans for `batch` rows of `length` samples; made on first use. Called with
  // mu_ held and device_ current.
  absl::StatusOr<const RowPlans*> GetPlans(int64_t length, int64_t batch) {
    const std::pair<int64_t, int64_t> key(length, batch);
    auto it = plans_.find(key);
    if (it != plans_.end()) return &it->second;
    RowPlans plans;
    TOMO_ASSIGN_OR_RETURN(plans.forward,
                          FftPlan::Create1d(static_cast<int>(length), static_cast<int>(batch),
                                            CUFFT_R2C, stream_.get()));
    TOMO_ASSIGN_OR_RETURN(plans.inverse,
                          FftPlan::Create1d(static_cast<int>(length), static_cast<int>(batch),
                                            CUFFT_C2R, stream_.get()));
    if (plans_.size() >= kMaxCachedPlans) {
      // Work queued with the plan to evict must finish before it is destroyed.
      TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_.get()));
      plans_.erase(plans_.begin());
    }
    it = plans_.emplace(key, std::move(plans)).first;
    return &it->second;
  }

  const int device_;
  std::mutex mu_;  // one call at a time (the Backend contract), also when misused
  Stream stream_;
  std::map<std::pair<int64_t, int64_t>, RowPlans> plans_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> NewCudaBackend(int device) {
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device));
  // Creating the stream initialises the device's context, so that a broken device fails
  // here and not in the first job.
  TOMO_ASSIGN_OR_RETURN(Stream stream, Stream::Create());
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(device, std::move(stream)));
}

}  // namespace tomo::core::cuda
