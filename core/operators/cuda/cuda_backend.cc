// CudaBackend: the Backend operators (core/operators/backend.h) on one CUDA device.
//
// Host side of the CUDA backend, compiled by g++: validation, the per-view parameters
// (in double, by the same formulas and the same case decision as the CPU reference), the
// device buffers, copies, cuFFT and the kernel launches (plain functions from
// parallel_2d_kernels.h and vector_kernels.h), with every CUDA and cuFFT call wrapped by
// TOMO_CUDA_RETURN_IF_ERROR. Also the device-resident VectorGeometry projectors
// (cuda_vector_projector.h) that the backend's VectorGeometry operators wrap.
//
// VectorGeometry operators: texture samplers (hardware bilinear/trilinear interpolation,
// 8-bit fractional weights) when the sizes allow it, else exact float interpolation from
// plain loads: forward projection from layered 2D textures (volumes up to 256^3) or a 3D
// texture; back projection from a layered 2D texture, float16 for kFdk, float32 for kNone.
// The tests in tests/core/operators/cuda state the differences to the CPU reference.
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
#include "core/operators/vector_operands.h"
#include "core/operators/cuda/cuda_backend_internal.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_filtered_back_projection.h"
#include "core/operators/cuda/cuda_resident_operators.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/cuda_vector_projector.h"
#include "core/operators/cuda/parallel_2d_kernels.h"
#include "core/operators/cuda/vector_kernels.h"

namespace tomo::core::cuda {
namespace {


// Index coordinates of the volume (as cpu_vector_projector.cc): index = p / voxel + origin.
struct IndexFrame {
  double voxel[3];
  double origin[3];
};

IndexFrame MakeIndexFrame(const VolumeGeometry& volume) {
  const Size3& size = volume.size();
  const double counts[3] = {static_cast<double>(size.x), static_cast<double>(size.y),
                            static_cast<double>(size.z)};
  const double voxels[3] = {volume.voxel_size_mm().x, volume.voxel_size_mm().y,
                            volume.voxel_size_mm().z};
  const double centers[3] = {volume.center_mm().x, volume.center_mm().y, volume.center_mm().z};
  IndexFrame frame;
  for (int k = 0; k < 3; ++k) {
    frame.voxel[k] = voxels[k];
    frame.origin[k] = -centers[k] / voxels[k] + 0.5 * (counts[k] - 1.0);
  }
  return frame;
}

void PointToIndex(const IndexFrame& f, const Vec3& p, float out[3]) {
  out[0] = static_cast<float>(p.x / f.voxel[0] + f.origin[0]);
  out[1] = static_cast<float>(p.y / f.voxel[1] + f.origin[1]);
  out[2] = static_cast<float>(p.z / f.voxel[2] + f.origin[2]);
}

void VectorToIndex(const IndexFrame& f, const Vec3& v, float out[3]) {
  out[0] = static_cast<float>(v.x / f.voxel[0]);
  out[1] = static_cast<float>(v.y / f.voxel[1]);
  out[2] = static_cast<float>(v.z / f.voxel[2]);
}

// The linear form X -> g . p(X) + g0 with p(X) the mm position of voxel index X, as
// coefficients on the index: p_k = (X_k - origin_k) * voxel_k.
float4 IndexForm(const IndexFrame& f, const Vec3& g, double g0) {
  const double gk[3] = {g.x, g.y, g.z};
  double constant = g0;
  double coefficient[3];
  for (int k = 0; k < 3; ++k) {
    coefficient[k] = gk[k] * f.voxel[k];
    constant -= coefficient[k] * f.origin[k];
  }
  return make_float4(static_cast<float>(coefficient[0]), static_cast<float>(coefficient[1]),
                     static_cast<float>(coefficient[2]), static_cast<float>(constant));
}


// Rows filtered per cuFFT batch at most, counted in padded real samples (64 Mi samples:
// 256 MiB real plus 256 MiB complex on the device); larger sinograms go in chunks.
constexpr int64_t kMaxFilterSamplesPerBatch = int64_t{1} << 26;
// cuFFT plans kept per backend; the oldest (lowest key) goes first beyond this.
constexpr size_t kMaxCachedPlans = 8;

}  // namespace

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

namespace {

Parallel2dShape MakeShape(const ParallelGeometry2D& geometry,
                          const VolumeGeometry& volume_geometry) {
  Parallel2dShape shape;
  shape.nx = static_cast<int32_t>(volume_geometry.size().x);
  shape.ny = static_cast<int32_t>(volume_geometry.size().y);
  shape.num_views = static_cast<int32_t>(geometry.num_views());
  shape.num_detectors = static_cast<int32_t>(geometry.num_detectors());
  return shape;
}

// A stream that keeps its backend locked while it lives (declared first: unlocked last).
class LockedStream final : public FilterAndBackProjectStream {
 public:
  LockedStream(std::unique_lock<std::mutex> lock, std::unique_ptr<FilterAndBackProjectStream> pass)
      : lock_(std::move(lock)), pass_(std::move(pass)) {}
  absl::Status AddViews(int64_t first_view, const float* views, int64_t count) override {
    return pass_->AddViews(first_view, views, count);
  }
  absl::Status Finish(Array3D& volume) override { return pass_->Finish(volume); }
  int64_t views_added() const override { return pass_->views_added(); }

 private:
  std::unique_lock<std::mutex> lock_;
  std::unique_ptr<FilterAndBackProjectStream> pass_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, Stream stream) : device_(device), stream_(std::move(stream)) {}
  ~CudaBackend() override {
    // Plans and the stream belong to device_: destroy them with it current.
    absl::StatusOr<ScopedDevice> scope = ScopedDevice::Enter(device_);
    plans_.clear();
    staging_.buffers = {};
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

  absl::Status ForwardProject(const VectorGeometry& geometry,
                              const VolumeGeometry& volume_geometry, const Array3D& volume,
                              Array3D& projections) override {
    TOMO_RETURN_IF_ERROR(CheckVectorOperands(geometry, volume_geometry, volume, projections));
    std::lock_guard<std::mutex> lock(mu_);
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    const cudaStream_t stream = stream_.get();
    TOMO_ASSIGN_OR_RETURN(DeviceVectorProjector projector,
                          DeviceVectorProjector::Create(geometry, volume_geometry, stream));
    const VectorSampler sampler = projector.BestForwardSampler();
    TOMO_ASSIGN_OR_RETURN(auto d_volume,
                          DeviceBuffer<float>::Allocate(static_cast<size_t>(volume.size()), stream));
    TOMO_ASSIGN_OR_RETURN(auto d_projections, DeviceBuffer<float>::Allocate(
                                                  static_cast<size_t>(projections.size()), stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_volume.get(), volume.data(), volume.size_bytes(),
                                              cudaMemcpyHostToDevice, stream));
    TOMO_RETURN_IF_ERROR(projector.Forward(d_volume.get(), d_projections.get(), sampler));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(projections.data(), d_projections.get(),
                                              projections.size_bytes(), cudaMemcpyDeviceToHost,
                                              stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  }

  absl::Status BackProject(const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
                           const Array3D& projections, BackProjectionWeighting weighting,
                           Array3D& volume) override {
    TOMO_RETURN_IF_ERROR(CheckVectorOperands(geometry, volume_geometry, volume, projections));
    std::lock_guard<std::mutex> lock(mu_);
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    const cudaStream_t stream = stream_.get();
    TOMO_ASSIGN_OR_RETURN(DeviceVectorProjector projector,
                          DeviceVectorProjector::Create(geometry, volume_geometry, stream));
    const VectorSampler sampler =
        projector.TextureFitsBack() ? VectorSampler::kTexture : VectorSampler::kExact;
    // FDK: float16 projections in the texture (863 vs 705 GUPS on FDK case 1, H100; the
    // difference to the CPU reference stays that of the 8-bit interpolation weights, about
    // 1e-3 of the maximum, bench/NOTES.md v0.2). Iterative methods (kNone) keep float32.
    projector.set_back_half(weighting == BackProjectionWeighting::kFdk);
    if (weighting == BackProjectionWeighting::kFdk && projector.volume_shape().nz > 1) {
      projector.set_back_variant(kBpVariantFdk);
    }
    TOMO_ASSIGN_OR_RETURN(auto d_projections, DeviceBuffer<float>::Allocate(
                                                  static_cast<size_t>(projections.size()), stream));
    TOMO_ASSIGN_OR_RETURN(auto d_volume,
                          DeviceBuffer<float>::Allocate(static_cast<size_t>(volume.size()), stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_projections.get(), projections.data(),
                                              projections.size_bytes(), cudaMemcpyHostToDevice,
                                              stream));
    TOMO_RETURN_IF_ERROR(
        projector.Back(d_projections.get(), weighting, d_volume.get(), sampler));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(volume.data(), d_volume.get(), volume.size_bytes(),
                                              cudaMemcpyDeviceToHost, stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  }

  absl::Status FilterAndBackProject(const VectorGeometry& geometry,
                                    const VolumeGeometry& volume_geometry,
                                    const Array3D& projections, const RampFilter& filter,
                                    const FilteredBackProjectionWeights& weights,
                                    BackProjectionWeighting weighting, Array3D& volume) override {
    TOMO_RETURN_IF_ERROR(CheckVectorOperands(geometry, volume_geometry, volume, projections));
    TOMO_RETURN_IF_ERROR(weights.Check(projections.dims()));
    if (!weights.pixel.empty() && !weights.pixel_shared_by_views(projections.dims())) {
      // One pixel map per view (a detector that does not turn with the source): weighted
      // on the host, then the operators.
      return Backend::FilterAndBackProject(geometry, volume_geometry, projections, filter,
                                           weights, weighting, volume);
    }
    std::lock_guard<std::mutex> lock(mu_);
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    return FilterAndBackProjectOnDevice(stream_.get(), geometry, volume_geometry, projections,
                                        filter, weights, weighting, volume, &staging_);
  }

  // A DeviceFilterAndBackProject on this backend's device, stream and staging, holding the
  // backend's lock until the stream is destroyed (the backend serves one job at a time).
  absl::StatusOr<std::unique_ptr<FilterAndBackProjectStream>> BeginFilterAndBackProject(
      const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
      const RampFilter& filter, const FilteredBackProjectionWeights& weights,
      BackProjectionWeighting weighting) override {
    const Dims3 dims = geometry.projection_dims();
    TOMO_RETURN_IF_ERROR(weights.Check(dims));
    if (!weights.pixel.empty() && !weights.pixel_shared_by_views(dims)) {
      return Backend::BeginFilterAndBackProject(geometry, volume_geometry, filter, weights,
                                                weighting);
    }
    std::unique_lock<std::mutex> lock(mu_);
    TOMO_ASSIGN_OR_RETURN(std::unique_ptr<DeviceFilterAndBackProject> pass,
                          DeviceFilterAndBackProject::Create(device_, stream_.get(), geometry,
                                                             volume_geometry, filter, weights,
                                                             weighting, &staging_));
    return std::unique_ptr<FilterAndBackProjectStream>(
        std::make_unique<LockedStream>(std::move(lock), std::move(pass)));
  }

  bool PrefersFilterAndBackProject() const override { return true; }

  // Device memory on this backend's device and stream (cuda_resident_operators.h).
  absl::StatusOr<std::unique_ptr<ResidentOperators>> MakeResidentOperators() override {
    return MakeCudaResidentOperators(device_, stream_.get(), name());
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
  // FilterAndBackProject's page-locked chunk buffers (2 x 256 MiB at most), kept between
  // jobs: locking them costs about as much as copying through them once.
  PinnedStaging staging_;
};

}  // namespace

// ---- VectorGeometry projectors on device data (cuda_vector_projector.h) ----

std::vector<VectorFpView> MakeVectorFpViews(const VectorGeometry& geometry,
                                            const VolumeGeometry& volume_geometry) {
  const IndexFrame frame = MakeIndexFrame(volume_geometry);
  const bool cone = geometry.beam() == BeamKind::kCone;
  const bool cylindrical = geometry.detector() == DetectorShape::kCylindrical;
  std::vector<VectorFpView> views;
  views.reserve(geometry.views().size());
  for (const ViewVectors& vectors : geometry.views()) {
    VectorFpView view{};
    if (cone) {
      PointToIndex(frame, vectors.source, view.source);
    } else {
      VectorToIndex(frame, vectors.source, view.source);
    }
    PointToIndex(frame, vectors.detector_center, view.center);
    VectorToIndex(frame, vectors.v, view.v);
    if (cylindrical) {
      const CylindricalDetectorFrame c = MakeCylindricalDetectorFrame(vectors);
      VectorToIndex(frame, c.radius_mm * c.w, view.u);
      VectorToIndex(frame, (c.radius_mm / c.u_norm_mm) * vectors.u, view.w);
      view.gamma_per_column = static_cast<float>(c.u_norm_mm / c.radius_mm);
    } else {
      VectorToIndex(frame, vectors.u, view.u);
    }
    views.push_back(view);
  }
  return views;
}

std::vector<VectorBpView> MakeVectorBpViews(const VectorGeometry& geometry,
                                            const VolumeGeometry& volume_geometry) {
  const IndexFrame frame = MakeIndexFrame(volume_geometry);
  const bool cone = geometry.beam() == BeamKind::kCone;
  const bool cylindrical = geometry.detector() == DetectorShape::kCylindrical;
  const double column_center = 0.5 * static_cast<double>(geometry.columns() - 1);
  const double row_center = 0.5 * static_cast<double>(geometry.rows() - 1);
  std::vector<VectorBpView> views;
  views.reserve(geometry.views().size());
  for (const ViewVectors& vectors : geometry.views()) {
    VectorBpView view{};
    const Vec3& s = vectors.source;
    if (cylindrical) {
      const CylindricalDetectorFrame c = MakeCylindricalDetectorFrame(vectors);
      // a = (p - s) . w / R, b = (p - s) . e / R, d = (p - s) . v^ / |v|.
      const Vec3 ga = (1.0 / c.radius_mm) * c.w;
      const Vec3 gb = (1.0 / c.radius_mm) * c.e;
      const Vec3 gd = (1.0 / c.v_norm_mm) * c.v_unit;
      view.a = IndexForm(frame, ga, -Dot(ga, s));
      view.b = IndexForm(frame, gb, -Dot(gb, s));
      view.d = IndexForm(frame, gd, -Dot(gd, s));
      view.extra = make_float4(static_cast<float>(c.radius_mm / c.u_norm_mm),
                               static_cast<float>(column_center),
                               static_cast<float>(row_center - c.height_center_mm / c.v_norm_mm), 0.0f);
      views.push_back(view);
      continue;
    }
    const Vec3 n = Cross(vectors.u, vectors.v);
    const Vec3 v_cross_n = Cross(vectors.v, n);
    const Vec3 n_cross_u = Cross(n, vectors.u);
    const Vec3 u_dual = (1.0 / Dot(vectors.u, v_cross_n)) * v_cross_n;
    const Vec3 v_dual = (1.0 / Dot(vectors.v, n_cross_u)) * n_cross_u;
    const Vec3& c = vectors.detector_center;
    if (cone) {
      // t = ((c - s) . n) / ((p - s) . n); d = 1 / t = (p - s) . n / D'.
      // column = (s - c) . u* + cc + t (p - s) . u*, so column * d = K d + (p - s) . u*.
      const double big_d = Dot(c - s, n);
      const Vec3 gd = (1.0 / big_d) * n;
      const double ka = Dot(s - c, u_dual) + column_center;
      const double kb = Dot(s - c, v_dual) + row_center;
      const Vec3 ga = ka * gd + u_dual;
      const Vec3 gb = kb * gd + v_dual;
      view.a = IndexForm(frame, ga, -Dot(ga, s));
      view.b = IndexForm(frame, gb, -Dot(gb, s));
      view.d = IndexForm(frame, gd, -Dot(gd, s));
    } else {
      // q = p + t r on the plane: column = (p - c) . (u* - n (r . u*) / (r . n)) + cc.
      const Vec3& r = vectors.source;
      const double rn = Dot(r, n);
      const Vec3 ga = u_dual - (Dot(r, u_dual) / rn) * n;
      const Vec3 gb = v_dual - (Dot(r, v_dual) / rn) * n;
      view.a = IndexForm(frame, ga, -Dot(ga, c) + column_center);
      view.b = IndexForm(frame, gb, -Dot(gb, c) + row_center);
      view.d = make_float4(0.0f, 0.0f, 0.0f, 1.0f);
    }
    views.push_back(view);
  }
  return views;
}

absl::StatusOr<TextureArray> TextureArray::Create(int64_t width, int64_t height, int64_t depth,
                                                  bool layered, bool half) {
  TextureArray result;
  result.element_bytes_ = half ? 2 : 4;
  const cudaChannelFormatDesc format =
      half ? cudaCreateChannelDescHalf() : cudaCreateChannelDesc<float>();
  TOMO_CUDA_RETURN_IF_ERROR(cudaMalloc3DArray(
      &result.array_, &format,
      make_cudaExtent(static_cast<size_t>(width), static_cast<size_t>(height),
                      static_cast<size_t>(depth)),
      layered ? cudaArrayLayered : 0));
  result.width_ = width;
  result.height_ = height;
  result.depth_ = depth;
  cudaResourceDesc resource{};
  resource.resType = cudaResourceTypeArray;
  resource.res.array.array = result.array_;
  cudaTextureDesc description{};
  description.addressMode[0] = cudaAddressModeBorder;
  description.addressMode[1] = cudaAddressModeBorder;
  description.addressMode[2] = cudaAddressModeBorder;
  description.filterMode = cudaFilterModeLinear;
  description.readMode = cudaReadModeElementType;
  description.normalizedCoords = 0;
  TOMO_CUDA_RETURN_IF_ERROR(
      cudaCreateTextureObject(&result.texture_, &resource, &description, nullptr));
  return result;
}

absl::Status TextureArray::Load(const void* source, int64_t first, int64_t depth,
                                cudaMemcpyKind kind, cudaStream_t stream) const {
  if (first < 0 || depth < 0 || first + depth > depth_) {
    return absl::InternalError(absl::StrCat("TextureArray::Load: slices [", first, ", ",
                                            first + depth, ") outside [0, ", depth_, ")"));
  }
  if (depth == 0) return absl::OkStatus();
  // A layered 1D array (height 0) holds slices of one row.
  const size_t height = static_cast<size_t>(std::max<int64_t>(height_, 1));
  cudaMemcpy3DParms copy{};
  copy.srcPtr = make_cudaPitchedPtr(const_cast<void*>(source),
                                    static_cast<size_t>(width_ * element_bytes_),
                                    static_cast<size_t>(width_), height);
  copy.dstArray = array_;
  copy.dstPos = make_cudaPos(0, 0, static_cast<size_t>(first));
  copy.extent = make_cudaExtent(static_cast<size_t>(width_), height, static_cast<size_t>(depth));
  copy.kind = kind;
  cudaError_t error = cudaMemcpy3DAsync(&copy, stream);
  if (error == cudaErrorInvalidValue && height_ == 0) {
    // Should a driver want the layered 1D array's own height (0) in the extent.
    (void)cudaGetLastError();
    copy.extent.height = 0;
    error = cudaMemcpy3DAsync(&copy, stream);
  }
  TOMO_CUDA_RETURN_IF_ERROR(error);
  return absl::OkStatus();
}

void TextureArray::Reset() {
  if (texture_ != 0) cudaDestroyTextureObject(texture_);
  if (array_ != nullptr) cudaFreeArray(array_);
  texture_ = 0;
  array_ = nullptr;
}

absl::StatusOr<DeviceVectorProjector> DeviceVectorProjector::Create(
    const VectorGeometry& geometry, const VolumeGeometry& volume_geometry, cudaStream_t stream) {
  constexpr int64_t kMaxInt32 = 2147483647;
  const Size3& size = volume_geometry.size();
  if (size.x * size.y >= kMaxInt32 || geometry.rows() * geometry.columns() >= kMaxInt32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "volume slice of ", size.x, " x ", size.y, " or detector of ", geometry.rows(), " x ",
        geometry.columns(), " exceeds the CUDA kernels' 2^31 elements per slice"));
  }
  DeviceVectorProjector p;
  p.stream_ = stream;
  p.volume_shape_.nx = static_cast<int32_t>(size.x);
  p.volume_shape_.ny = static_cast<int32_t>(size.y);
  p.volume_shape_.nz = static_cast<int32_t>(size.z);
  p.volume_shape_.voxel_mm[0] = static_cast<float>(volume_geometry.voxel_size_mm().x);
  p.volume_shape_.voxel_mm[1] = static_cast<float>(volume_geometry.voxel_size_mm().y);
  p.volume_shape_.voxel_mm[2] = static_cast<float>(volume_geometry.voxel_size_mm().z);
  p.detector_shape_.num_views = static_cast<int32_t>(geometry.num_views());
  p.detector_shape_.rows = static_cast<int32_t>(geometry.rows());
  p.detector_shape_.columns = static_cast<int32_t>(geometry.columns());
  p.detector_shape_.cone = geometry.beam() == BeamKind::kCone ? 1 : 0;
  p.detector_shape_.cylindrical = geometry.detector() == DetectorShape::kCylindrical ? 1 : 0;
  const std::vector<VectorFpView> fp = MakeVectorFpViews(geometry, volume_geometry);
  const std::vector<VectorBpView> bp = MakeVectorBpViews(geometry, volume_geometry);
  TOMO_ASSIGN_OR_RETURN(p.fp_views_, DeviceBuffer<VectorFpView>::Allocate(fp.size(), stream));
  TOMO_ASSIGN_OR_RETURN(p.bp_views_, DeviceBuffer<VectorBpView>::Allocate(bp.size(), stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(p.fp_views_.get(), fp.data(),
                                            p.fp_views_.size_bytes(), cudaMemcpyHostToDevice,
                                            stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(p.bp_views_.get(), bp.data(),
                                            p.bp_views_.size_bytes(), cudaMemcpyHostToDevice,
                                            stream));
  // One slice from a one-row detector whose every pixel maps onto the row's centre line
  // (row coordinate 0 exactly, as the 2D geometries give): the back projector may read a
  // layered 1D texture (LaunchVectorBack's one_row_texture). The kernel evaluates the forms
  // at iz = 0, so the z coefficients do not matter.
  const bool cylindrical = p.detector_shape_.cylindrical != 0;
  p.one_row_back_ =
      p.volume_shape_.nz == 1 && p.detector_shape_.rows == 1 &&
      std::all_of(bp.begin(), bp.end(), [cylindrical](const VectorBpView& v) {
        return cylindrical ? (v.d.x == 0.0f && v.d.y == 0.0f && v.d.w == 0.0f &&
                              v.extra.z == 0.0f)
                           : (v.b.x == 0.0f && v.b.y == 0.0f && v.b.w == 0.0f);
      });
  // The host vectors die at return: the copies from pageable memory are staged before
  // cudaMemcpyAsync returns, so this is safe.
  return p;
}

bool DeviceVectorProjector::TextureFitsForward() const {
  constexpr int32_t kMax3d = 16384;
  return volume_shape_.nx <= kMax3d && volume_shape_.ny <= kMax3d && volume_shape_.nz <= kMax3d;
}

bool DeviceVectorProjector::TextureFitsBack() const {
  constexpr int32_t kMaxLayered = 32768;
  return detector_shape_.rows <= kMaxLayered && detector_shape_.columns <= kMaxLayered;
}

bool DeviceVectorProjector::LayeredFitsForward() const {
  return volume_shape_.nx <= kMaxTextureLayers && volume_shape_.ny <= kMaxTextureLayers &&
         volume_shape_.nz <= kMaxTextureLayers;
}

VectorSampler DeviceVectorProjector::BestForwardSampler() const {
  // Measured on the H100 (bench/NOTES.md, v0.3, the block order with many views' same
  // rows in flight): layered 10.2 vs 3D texture 13.5 ms for 256^3 -> 360 x 384^2, 161 vs
  // 213 ms for 512^3 -> 720 x 768^2. (v0.2, one view after another: 3D texture faster at
  // 512^3.) Layered needs 5 times the volume's memory (three arrays, two transposes), so
  // it is used up to the largest size measured, 512^3; the 3D texture (1x) above.
  constexpr int64_t kLayeredMaxVoxels = int64_t{512} * 512 * 512;
  const int64_t voxels = static_cast<int64_t>(volume_shape_.nx) * volume_shape_.ny *
                         volume_shape_.nz;
  if (LayeredFitsForward() && voxels <= kLayeredMaxVoxels) return VectorSampler::kLayered;
  if (TextureFitsForward()) return VectorSampler::kTexture;
  return VectorSampler::kExact;
}

absl::Status DeviceVectorProjector::Forward(const float* d_volume, float* d_projections,
                                            VectorSampler sampler) {
  VectorFpTextures textures{};
  const int64_t nx = volume_shape_.nx, ny = volume_shape_.ny, nz = volume_shape_.nz;
  if (sampler == VectorSampler::kTexture) {
    if (!TextureFitsForward()) {
      return absl::InvalidArgumentError("volume too large for the 3D texture sampler");
    }
    if (!volume_texture_.valid()) {
      TOMO_ASSIGN_OR_RETURN(volume_texture_,
                            TextureArray::Create(nx, ny, nz, /*layered=*/false));
    }
    TOMO_RETURN_IF_ERROR(
        volume_texture_.Load(d_volume, 0, nz, cudaMemcpyDeviceToDevice, stream_));
    textures.volume3d = volume_texture_.texture();
  } else if (sampler == VectorSampler::kLayered) {
    if (!LayeredFitsForward()) {
      return absl::InvalidArgumentError("volume too large for the layered texture sampler");
    }
    if (!along_z_.valid()) {
      const size_t count = static_cast<size_t>(nx * ny * nz);
      TOMO_ASSIGN_OR_RETURN(scratch_x_, DeviceBuffer<float>::Allocate(count, stream_));
      TOMO_ASSIGN_OR_RETURN(scratch_y_, DeviceBuffer<float>::Allocate(count, stream_));
      TOMO_ASSIGN_OR_RETURN(along_x_, TextureArray::Create(ny, nz, nx, /*layered=*/true));
      TOMO_ASSIGN_OR_RETURN(along_y_, TextureArray::Create(nx, nz, ny, /*layered=*/true));
      TOMO_ASSIGN_OR_RETURN(along_z_, TextureArray::Create(nx, ny, nz, /*layered=*/true));
    }
    TOMO_CUDA_RETURN_IF_ERROR(LaunchVolumeTransposes(
        d_volume, volume_shape_.nx, volume_shape_.ny, volume_shape_.nz, scratch_x_.get(),
        scratch_y_.get(), stream_));
    TOMO_RETURN_IF_ERROR(along_x_.Load(scratch_x_.get(), 0, nx, cudaMemcpyDeviceToDevice, stream_));
    TOMO_RETURN_IF_ERROR(along_y_.Load(scratch_y_.get(), 0, ny, cudaMemcpyDeviceToDevice, stream_));
    TOMO_RETURN_IF_ERROR(along_z_.Load(d_volume, 0, nz, cudaMemcpyDeviceToDevice, stream_));
    textures.along_x = along_x_.texture();
    textures.along_y = along_y_.texture();
    textures.along_z = along_z_.texture();
  }
  TOMO_CUDA_RETURN_IF_ERROR(LaunchVectorForward(volume_shape_, detector_shape_, fp_views_.get(),
                                                sampler, textures, d_volume, d_projections,
                                                stream_, forward_views_inner_ ? 1 : 0));
  return absl::OkStatus();
}

absl::Status DeviceVectorProjector::Back(const float* d_projections,
                                         BackProjectionWeighting weighting, float* d_volume,
                                         VectorSampler sampler) {
  return BackViews(d_projections, 0, detector_shape_.num_views, weighting,
                   /*accumulate=*/false, d_volume, sampler);
}

absl::Status DeviceVectorProjector::BackViews(const float* d_projections, int64_t first_view,
                                              int64_t count, BackProjectionWeighting weighting,
                                              bool accumulate, float* d_volume,
                                              VectorSampler sampler) {
  const bool fdk = weighting == BackProjectionWeighting::kFdk;
  if (fdk && detector_shape_.cone == 0) {
    return absl::InvalidArgumentError(
        "weighting: kFdk (the FDK distance weight) needs a cone beam; this geometry is a "
        "parallel beam");
  }
  if (first_view < 0 || count < 1 || first_view + count > detector_shape_.num_views) {
    return absl::InvalidArgumentError(absl::StrCat("views [", first_view, ", ",
                                                   first_view + count, ") outside [0, ",
                                                   detector_shape_.num_views, ")"));
  }
  const VectorBpView* views = bp_views_.get() + first_view;
  VectorDetectorShape shape = detector_shape_;
  shape.num_views = static_cast<int32_t>(count);
  const int32_t add = accumulate ? 1 : 0;
  if (sampler == VectorSampler::kLayered) sampler = VectorSampler::kTexture;
  if (sampler == VectorSampler::kExact) {
    TOMO_CUDA_RETURN_IF_ERROR(LaunchVectorBack(volume_shape_, shape, views, sampler,
                                               fdk ? 1 : 0, add, 0, d_projections, d_volume,
                                               stream_, kBpVariantDefault));
    return absl::OkStatus();
  }
  if (BackUsesStaged()) {
    TOMO_CUDA_RETURN_IF_ERROR(LaunchOneRowStagedBack(volume_shape_, shape, views, fdk ? 1 : 0,
                                                     add, d_projections, d_volume, stream_,
                                                     back_variant_));
    return absl::OkStatus();
  }
  if (!TextureFitsBack()) {
    return absl::InvalidArgumentError("detector too large for the layered texture sampler");
  }
  const int64_t layers = std::min<int64_t>(count, kMaxTextureLayers);
  const int64_t view_size = static_cast<int64_t>(detector_shape_.rows) * detector_shape_.columns;
  // One-row detectors: a layered 1D array (height 0), else layered 2D. The array is kept
  // while it is large enough.
  const bool one_row = BackUsesOneRowTexture();
  const int64_t height = one_row ? 0 : detector_shape_.rows;
  if (!projection_texture_.valid() || projection_texture_.depth() < layers ||
      projection_texture_.half() != back_half_ || projection_texture_.height() != height) {
    projection_texture_.Reset();
    TOMO_ASSIGN_OR_RETURN(projection_texture_,
                          TextureArray::Create(detector_shape_.columns, height, layers,
                                               /*layered=*/true, back_half_));
    if (back_half_) {
      TOMO_ASSIGN_OR_RETURN(half_scratch_, DeviceBuffer<uint16_t>::Allocate(
                                               static_cast<size_t>(layers * view_size), stream_));
    }
  }
  for (int64_t v0 = 0; v0 < count; v0 += layers) {
    const int64_t pass = std::min(layers, count - v0);
    if (back_half_) {
      TOMO_CUDA_RETURN_IF_ERROR(LaunchFloatToHalf(d_projections + v0 * view_size,
                                                  pass * view_size, half_scratch_.get(),
                                                  stream_));
      TOMO_RETURN_IF_ERROR(projection_texture_.Load(half_scratch_.get(), 0, pass,
                                                    cudaMemcpyDeviceToDevice, stream_));
    } else {
      TOMO_RETURN_IF_ERROR(projection_texture_.Load(d_projections + v0 * view_size, 0, pass,
                                                    cudaMemcpyDeviceToDevice, stream_));
    }
    VectorDetectorShape chunk = shape;
    chunk.num_views = static_cast<int32_t>(pass);
    TOMO_CUDA_RETURN_IF_ERROR(LaunchVectorBack(
        volume_shape_, chunk, views + v0, sampler, fdk ? 1 : 0, v0 > 0 ? 1 : add,
        projection_texture_.texture(), nullptr, d_volume, stream_, back_variant_,
        one_row ? 1 : 0));
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceRowFilter> DeviceRowFilter::Create(const RampFilter& filter, int64_t rows,
                                                         int64_t weight_rows,
                                                         const std::vector<float>& weight,
                                                         cudaStream_t stream) {
  DeviceRowFilter f;
  f.stream_ = stream;
  f.rows_ = rows;
  f.columns_ = filter.num_detectors();
  f.length_ = filter.padded_length();
  const int64_t bins = f.length_ / 2 + 1;
  if (rows < 1 || f.length_ < f.columns_ || f.length_ > (int64_t{1} << 30) ||
      static_cast<int64_t>(filter.response().size()) != bins) {
    return absl::InvalidArgumentError(absl::StrCat("DeviceRowFilter: ", rows, " rows of ",
                                                   f.columns_, " padded to ", f.length_));
  }
  if (weight_rows < 1 || weight_rows > kMaxRowsPerBatch || rows % weight_rows != 0 ||
      (!weight.empty() && static_cast<int64_t>(weight.size()) != weight_rows * f.columns_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DeviceRowFilter: ", rows, " rows in views of ", weight_rows, " rows with ",
        weight.size(), " pixel weights (expected 0 or ", weight_rows * f.columns_, ")"));
  }
  f.weight_rows_ = weight_rows;
  // At most kMaxRowsPerBatch rows (the kernels' grid y) and 2^28 padded samples (1 GiB real
  // plus 1 GiB complex) per batch, a multiple of the weight's rows so that every batch
  // starts at weight row 0.
  int64_t batch = std::min({rows, kMaxRowsPerBatch,
                            std::max<int64_t>(1, (int64_t{1} << 28) / f.length_)});
  if (batch < rows && batch >= f.weight_rows_) batch -= batch % f.weight_rows_;
  if (batch < rows && batch % f.weight_rows_ != 0) {
    return absl::InvalidArgumentError("DeviceRowFilter: weight rows exceed one batch");
  }
  f.batch_ = batch;
  TOMO_ASSIGN_OR_RETURN(f.response_, DeviceBuffer<float>::Allocate(bins, stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(f.response_.get(), filter.response().data(),
                                            f.response_.size_bytes(), cudaMemcpyHostToDevice,
                                            stream));
  if (!weight.empty()) {
    TOMO_ASSIGN_OR_RETURN(f.weight_, DeviceBuffer<float>::Allocate(weight.size(), stream));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(f.weight_.get(), weight.data(),
                                              f.weight_.size_bytes(), cudaMemcpyHostToDevice,
                                              stream));
  }
  // real_: the weighted rows with their zero padding (zeroed once here; the weighting
  // kernel writes only the first `columns` of each row, and the out-of-place R2C keeps its
  // input); result_: the C2R output.
  TOMO_ASSIGN_OR_RETURN(f.real_, DeviceBuffer<float>::Allocate(f.batch_ * f.length_, stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(f.real_.get(), 0, f.real_.size_bytes(), stream));
  TOMO_ASSIGN_OR_RETURN(f.result_, DeviceBuffer<float>::Allocate(f.batch_ * f.length_, stream));
  TOMO_ASSIGN_OR_RETURN(f.spectrum_, DeviceBuffer<float2>::Allocate(f.batch_ * bins, stream));
  const int length = static_cast<int>(f.length_);
  TOMO_ASSIGN_OR_RETURN(f.forward_, FftPlan::Create1d(length, static_cast<int>(f.batch_),
                                                      CUFFT_R2C, stream));
  TOMO_ASSIGN_OR_RETURN(f.inverse_, FftPlan::Create1d(length, static_cast<int>(f.batch_),
                                                      CUFFT_C2R, stream));
  const int64_t tail = rows % f.batch_;
  if (tail > 0) TOMO_RETURN_IF_ERROR(f.TailPlans(tail).status());
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return f;
}

absl::StatusOr<DeviceRowFilter::TailPlan*> DeviceRowFilter::TailPlans(int64_t rows) {
  auto it = tail_plans_.find(rows);
  if (it != tail_plans_.end()) return &it->second;
  const int length = static_cast<int>(length_);
  TailPlan plans;
  TOMO_ASSIGN_OR_RETURN(plans.forward,
                        FftPlan::Create1d(length, static_cast<int>(rows), CUFFT_R2C, stream_));
  TOMO_ASSIGN_OR_RETURN(plans.inverse,
                        FftPlan::Create1d(length, static_cast<int>(rows), CUFFT_C2R, stream_));
  return &tail_plans_.emplace(rows, std::move(plans)).first->second;
}

absl::Status DeviceRowFilter::Apply(const float* d_in, float* d_out,
                                    const float* d_column_weight, int64_t rows) {
  if (rows < 0) rows = rows_;
  if (rows > rows_ || rows % weight_rows_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat("DeviceRowFilter::Apply: ", rows,
                                                   " rows; at most ", rows_, " in views of ",
                                                   weight_rows_));
  }
  const int64_t bins = length_ / 2 + 1;
  const int32_t columns = static_cast<int32_t>(columns_);
  const int32_t length = static_cast<int32_t>(length_);
  for (int64_t r0 = 0; r0 < rows; r0 += batch_) {
    const int64_t count = std::min(batch_, rows - r0);
    const FftPlan* forward = &forward_;
    const FftPlan* inverse = &inverse_;
    if (count != batch_) {
      TOMO_ASSIGN_OR_RETURN(TailPlan * tail, TailPlans(count));
      forward = &tail->forward;
      inverse = &tail->inverse;
    }
    // Every batch starts at weight row 0 (Create makes batch_ a multiple of weight_rows_).
    TOMO_CUDA_RETURN_IF_ERROR(LaunchWeightPadRows(
        d_in + r0 * columns_, weight_.get(),
        d_column_weight == nullptr ? nullptr : d_column_weight + (r0 / weight_rows_) * columns_,
        static_cast<int32_t>(weight_rows_), count, columns, length, real_.get(), stream_));
    TOMO_CUDA_RETURN_IF_ERROR(cufftExecR2C(forward->get(), real_.get(),
                                           reinterpret_cast<cufftComplex*>(spectrum_.get())));
    TOMO_CUDA_RETURN_IF_ERROR(LaunchMultiplySpectrum(spectrum_.get(), response_.get(), count,
                                                     static_cast<int32_t>(bins), stream_));
    TOMO_CUDA_RETURN_IF_ERROR(cufftExecC2R(inverse->get(),
                                           reinterpret_cast<cufftComplex*>(spectrum_.get()),
                                           result_.get()));
    TOMO_CUDA_RETURN_IF_ERROR(
        LaunchUnpadRows(result_.get(), count, columns, length, d_out + r0 * columns_, stream_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Backend>> NewCudaBackend(int device) {
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device));
  // Creating the stream initialises the device's context, so that a broken device fails
  // here and not in the first job.
  TOMO_ASSIGN_OR_RETURN(Stream stream, Stream::Create());
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(device, std::move(stream)));
}

}  // namespace tomo::core::cuda
