// CudaBackend: the Backend operators (core/operators/backend.h) on one CUDA device: a
// facade over the parts that do the work, each in its own file (host code, g++ only):
//   - projectors on host arrays (MakeProjector): cuda_host_projector.h, over the
//     device-resident VectorGeometry projector (cuda_vector_projector.h), the 2D parallel
//     kernels (parallel_2d_kernels.h) and the Radon kernels (radon_kernels.h);
//   - row filtering (FilterRows): cuda_row_filter.h (cuFFT);
//   - the fused filtered back projection, one-shot and fed with views:
//     cuda_filtered_back_projection.h;
//   - operators on device-resident arrays for the iterative methods:
//     cuda_resident_operators.h.
//
// VectorGeometry projectors use texture samplers (hardware bilinear/trilinear
// interpolation, 8-bit fractional weights) when the sizes allow it, else exact float
// interpolation from plain loads: forward projection from layered 2D textures (volumes up
// to 256^3) or a 3D texture; back projection from a layered 2D texture, float16 for kFdk,
// float32 otherwise. The tests in tests/core/operators/cuda state the differences to the
// CPU reference.
//
// Each call makes the backend's device current for its duration (ScopedDevice restores the
// previous one), holds the backend's lock (one call at a time), allocates what it needs in
// stream order on the backend's own stream, uploads, computes, downloads and synchronises:
// results are complete on return. cuFFT plans are made once per (padded length, batch) and
// kept in this instance.
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

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/operators/backend.h"
#include "core/operators/cuda/cuda_backend_internal.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_memory_pool.h"
#include "core/operators/cuda/cuda_filtered_back_projection.h"
#include "core/operators/cuda/cuda_host_projector.h"
#include "core/operators/cuda/cuda_radon_operators.h"
#include "core/operators/cuda/cuda_resident_operators.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/cuda_row_filter.h"
#include "core/operators/projector_plan.h"
#include "core/data/dims_check.h"
#include "core/operators/vector_operands.h"

namespace tomo::core::cuda {
namespace {

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
    host_row_filter_.Clear();
    staging_.buffers = {};
    stream_.Reset();
  }

  std::string name() const override { return absl::StrCat("cuda:", device_); }

  absl::StatusOr<std::unique_ptr<Projector>> MakeProjector(const Geometry& geometry,
                                                           const VolumeGeometry& volume_geometry,
                                                           ProjectorModel model) override {
    TOMO_ASSIGN_OR_RETURN(ProjectorPlan plan, PlanProjector(geometry, volume_geometry, model));
    return MakeCudaHostProjector(CudaContext{device_, stream_.get(), &mu_}, model,
                                 std::move(plan), volume_geometry);
  }

  absl::Status FilterAndBackProject(const VectorGeometry& geometry,
                                    const VolumeGeometry& volume_geometry,
                                    const Array3D& projections, const RampFilter& filter,
                                    const FilteredBackProjectionWeights& weights,
                                    BackProjectionWeighting weighting, Array3D& volume) override {
    TOMO_RETURN_IF_ERROR(CheckVectorOperands(geometry, volume_geometry, volume, projections));
    return FilterAndBackProjectChecked(geometry, volume_geometry, projections, filter, weights,
                                       weighting, volume.data(), &volume);
  }

  // Downloads straight into the caller's memory (a slab of a larger result).
  absl::Status FilterAndBackProjectInto(const VectorGeometry& geometry,
                                        const VolumeGeometry& volume_geometry,
                                        const Array3D& projections, const RampFilter& filter,
                                        const FilteredBackProjectionWeights& weights,
                                        BackProjectionWeighting weighting,
                                        float* volume_values) override {
    TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(),
                                        geometry.projection_dims(), "(views, rows, columns)"));
    TOMO_RETURN_IF_ERROR(geometry.CheckAgainstVolume(volume_geometry));
    return FilterAndBackProjectChecked(geometry, volume_geometry, projections, filter, weights,
                                       weighting, volume_values, nullptr);
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
    // No sub-slabs: the views arrive as an upload delivers them, slower than the device
    // back projects, so the device keeps up with the whole volume and only the download is
    // left after the last view (sub-slabs would leave the tail's back projection too).
    TOMO_ASSIGN_OR_RETURN(std::unique_ptr<DeviceFilterAndBackProject> pass,
                          DeviceFilterAndBackProject::Create(
                              device_, stream_.get(), geometry, volume_geometry, filter,
                              weights, weighting, &staging_, kFilterAndBackProjectChunkBytes,
                              /*profile=*/nullptr, /*head_eighths=*/0));
    return std::unique_ptr<FilterAndBackProjectStream>(
        std::make_unique<LockedStream>(std::move(lock), std::move(pass)));
  }

  bool PrefersFilterAndBackProject() const override { return true; }

  // cuda_radon_operators.h, on this backend's device.
  std::unique_ptr<RadonOperators> MakeRadonOperators() override {
    return std::make_unique<CudaRadonOperators>(device_);
  }

  // Device memory on this backend's device and stream (cuda_resident_operators.h).
  absl::StatusOr<std::unique_ptr<ResidentOperators>> MakeResidentOperators() override {
    return MakeCudaResidentOperators(device_, stream_.get(), name());
  }

  absl::Status FilterRows(const RampFilter& filter, Array3D& projections) override {
    std::lock_guard<std::mutex> lock(mu_);
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    return host_row_filter_.Apply(filter, projections);
  }

 private:
  // FilterAndBackProject and ...Into after their operand checks: into volume_values, which
  // is volume's data when the caller passed an array (volume not null).
  absl::Status FilterAndBackProjectChecked(const VectorGeometry& geometry,
                                           const VolumeGeometry& volume_geometry,
                                           const Array3D& projections, const RampFilter& filter,
                                           const FilteredBackProjectionWeights& weights,
                                           BackProjectionWeighting weighting,
                                           float* volume_values, Array3D* volume) {
    TOMO_RETURN_IF_ERROR(weights.Check(projections.dims()));
    if (!weights.pixel.empty() && !weights.pixel_shared_by_views(projections.dims())) {
      // One pixel map per view (a detector that does not turn with the source): weighted
      // on the host, then the operators.
      if (volume != nullptr) {
        return Backend::FilterAndBackProject(geometry, volume_geometry, projections, filter,
                                             weights, weighting, *volume);
      }
      return Backend::FilterAndBackProjectInto(geometry, volume_geometry, projections, filter,
                                               weights, weighting, volume_values);
    }
    std::lock_guard<std::mutex> lock(mu_);
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    return FilterAndBackProjectOnDevice(stream_.get(), geometry, volume_geometry, projections,
                                        filter, weights, weighting, volume_values, &staging_);
  }

  const int device_;
  std::mutex mu_;  // one call at a time (the Backend contract), also when misused
  Stream stream_;
  HostRowFilter host_row_filter_{stream_.get()};
  // FilterAndBackProject's page-locked chunk buffers (2 x 256 MiB at most), kept between
  // jobs: locking them costs about as much as copying through them once.
  PinnedStaging staging_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> NewCudaBackend(int device) {
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device));
  // Creating the stream initialises the device's context, so that a broken device fails
  // here and not in the first job.
  TOMO_ASSIGN_OR_RETURN(Stream stream, Stream::Create());
  // Job after job, the memory a call frees stays mapped for the next (cuda_memory_pool.h).
  TOMO_RETURN_IF_ERROR(KeepFreedDeviceMemory(device));
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(device, std::move(stream)));
}

}  // namespace tomo::core::cuda
