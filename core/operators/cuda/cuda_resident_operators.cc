#include "core/operators/cuda/cuda_resident_operators.h"

#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_memory_pool.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/cuda_host_projector.h"
#include "core/operators/cuda/cuda_vector_projector.h"
#include "core/operators/projector_plan.h"
#include "core/operators/cuda/resident_kernels.h"

namespace tomo::core::cuda {
namespace {

class CudaArray final : public ResidentArray {
 public:
  CudaArray(Dims3 dims, const void* owner, int device, DeviceBuffer<float> buffer)
      : ResidentArray(dims, owner), device_(device), buffer_(std::move(buffer)) {}
  ~CudaArray() override {
    absl::StatusOr<ScopedDevice> scope = ScopedDevice::Enter(device_);
    buffer_.Reset();
  }
  float* data() const { return buffer_.get(); }

 private:
  int device_;
  DeviceBuffer<float> buffer_;
};

float* Data(ResidentArray& a) { return static_cast<CudaArray&>(a).data(); }
const float* Data(const ResidentArray& a) { return static_cast<const CudaArray&>(a).data(); }

absl::Status CheckOwned(const char* operation, const void* owner, const ResidentArray& a) {
  return CheckResidentOperands(operation, owner, a, a);
}

class CudaProjector final : public ResidentProjector {
 public:
  // few_view_views: for kExact, the views' parameters for LaunchFewViewForward.
  CudaProjector(int device, const void* owner, DeviceVectorProjector projector,
                VectorSampler forward_sampler, DeviceBuffer<VectorFpView> few_view_views,
                cudaStream_t stream, Dims3 volume_dims, Dims3 projection_dims,
                BackProjectionWeighting back_weighting)
      : back_weighting_(back_weighting),
        device_(device),
        owner_(owner),
        projector_(std::in_place, std::move(projector)),
        forward_sampler_(forward_sampler),
        few_view_views_(std::move(few_view_views)),
        stream_(stream),
        volume_dims_(volume_dims),
        projection_dims_(projection_dims) {}
  ~CudaProjector() override {
    // The projector's textures and buffers belong to device_.
    absl::StatusOr<ScopedDevice> scope = ScopedDevice::Enter(device_);
    projector_.reset();
    few_view_views_.Reset();
  }

  absl::Status Forward(const ResidentArray& volume, ResidentArray& projections) override {
    TOMO_RETURN_IF_ERROR(Check("Forward", volume, projections));
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    if (forward_sampler_ == VectorSampler::kExact) {
      TOMO_CUDA_RETURN_IF_ERROR(LaunchFewViewForward(
          projector_->volume_shape(), projector_->detector_shape(), few_view_views_.get(),
          Data(volume), Data(projections), stream_));
      return absl::OkStatus();
    }
    return projector_->Forward(Data(volume), Data(projections), forward_sampler_);
  }
  absl::Status Back(const ResidentArray& projections, ResidentArray& volume) override {
    TOMO_RETURN_IF_ERROR(Check("Back", volume, projections));
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    const VectorSampler sampler =
        projector_->TextureFitsBack() ? VectorSampler::kTexture : VectorSampler::kExact;
    return projector_->Back(Data(projections), back_weighting_, Data(volume), sampler);
  }

 private:
  absl::Status Check(const char* operation, const ResidentArray& volume,
                     const ResidentArray& projections) const {
    TOMO_RETURN_IF_ERROR(CheckOwned(operation, owner_, volume));
    TOMO_RETURN_IF_ERROR(CheckOwned(operation, owner_, projections));
    TOMO_RETURN_IF_ERROR(CheckDimsMatch(absl::StrCat(operation, ": volume"), volume.dims(),
                                        volume_dims_, "(z, y, x)"));
    return CheckDimsMatch(absl::StrCat(operation, ": projections"), projections.dims(),
                          projection_dims_, "(views, rows, columns)");
  }

  BackProjectionWeighting back_weighting_;
  int device_;
  const void* owner_;
  std::optional<DeviceVectorProjector> projector_;  // reset with device_ current
  VectorSampler forward_sampler_;
  DeviceBuffer<VectorFpView> few_view_views_;
  cudaStream_t stream_;
  Dims3 volume_dims_, projection_dims_;
};

// A host-array Projector (cuda_host_projector.h) on resident arrays: each call copies its
// input to the host, projects (the host projector uploads, computes and downloads) and
// copies the result back. For the models that have no device-resident implementation yet
// (kJosephExactTranspose2D, kRadonPlaneIntegral): correct, with a host round trip per call.
class HostBouncedProjector final : public ResidentProjector {
 public:
  HostBouncedProjector(int device, const void* owner, cudaStream_t stream,
                       std::unique_ptr<Projector> projector, Dims3 volume_dims,
                       Dims3 projection_dims)
      : device_(device), owner_(owner), stream_(stream), projector_(std::move(projector)),
        volume_(Array3D::Uninitialized(volume_dims)),
        projections_(Array3D::Uninitialized(projection_dims)) {}

  absl::Status Forward(const ResidentArray& volume, ResidentArray& projections) override {
    TOMO_RETURN_IF_ERROR(Check("Forward", volume, projections));
    TOMO_RETURN_IF_ERROR(ToHost(volume, volume_));
    TOMO_RETURN_IF_ERROR(projector_->Forward(volume_, projections_));
    return ToDevice(projections_, projections);
  }
  absl::Status Back(const ResidentArray& projections, ResidentArray& volume) override {
    TOMO_RETURN_IF_ERROR(Check("Back", volume, projections));
    TOMO_RETURN_IF_ERROR(ToHost(projections, projections_));
    TOMO_RETURN_IF_ERROR(projector_->Back(projections_, volume_));
    return ToDevice(volume_, volume);
  }

 private:
  absl::Status Check(const char* operation, const ResidentArray& volume,
                     const ResidentArray& projections) const {
    TOMO_RETURN_IF_ERROR(CheckOwned(operation, owner_, volume));
    TOMO_RETURN_IF_ERROR(CheckOwned(operation, owner_, projections));
    TOMO_RETURN_IF_ERROR(CheckDimsMatch(absl::StrCat(operation, ": volume"), volume.dims(),
                                        volume_.dims(), "(z, y, x)"));
    return CheckDimsMatch(absl::StrCat(operation, ": projections"), projections.dims(),
                          projections_.dims(), "(views, rows, columns)");
  }
  absl::Status ToHost(const ResidentArray& device, Array3D& host) {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.data(), Data(device), host.size_bytes(),
                                              cudaMemcpyDeviceToHost, stream_));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }
  absl::Status ToDevice(const Array3D& host, ResidentArray& device) {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(Data(device), host.data(), host.size_bytes(),
                                              cudaMemcpyHostToDevice, stream_));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  int device_;
  const void* owner_;
  cudaStream_t stream_;
  std::unique_ptr<Projector> projector_;
  Array3D volume_, projections_;
};

// Lets `device` read and write `peer`'s memory directly (once per ordered pair in the
// process) where cudaDeviceCanAccessPeer says it can; elsewhere nothing is enabled and
// cudaMemcpyPeerAsync still copies (the driver stages it). Resident arrays come from the
// stream-ordered allocator (cudaMallocAsync: the device's current memory pool), whose
// allocations do not follow cudaDeviceEnablePeerAccess: the pool is opened to `device` too
// (cudaMemPoolSetAccess), so that peer copies of them can go device to device.
absl::Status EnablePeerAccessOnce(int device, int peer) {
  static std::mutex mutex;
  static std::set<std::pair<int, int>>* done = new std::set<std::pair<int, int>>();
  std::lock_guard<std::mutex> lock(mutex);
  if (done->count({device, peer}) > 0) return absl::OkStatus();
  int can_access = 0;
  TOMO_CUDA_RETURN_IF_ERROR(cudaDeviceCanAccessPeer(&can_access, device, peer));
  if (can_access != 0) {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device));
    const cudaError_t enabled = cudaDeviceEnablePeerAccess(peer, 0);
    if (enabled == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();  // enabled elsewhere in the process: what was wanted
    } else {
      TOMO_CUDA_RETURN_IF_ERROR(enabled);
    }
    cudaMemPool_t pool = nullptr;
    TOMO_CUDA_RETURN_IF_ERROR(cudaDeviceGetMemPool(&pool, peer));
    cudaMemAccessDesc access{};
    access.location.type = cudaMemLocationTypeDevice;
    access.location.id = device;
    access.flags = cudaMemAccessFlagsProtReadWrite;
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemPoolSetAccess(pool, &access, 1));
  }
  done->insert({device, peer});
  return absl::OkStatus();
}

class CudaResidentOperators final : public ResidentOperators {
 public:
  CudaResidentOperators(int device, cudaStream_t stream, std::string name,
                        DeviceBuffer<double> partials, Event copy_event)
      : device_(device), stream_(stream), name_(std::move(name)),
        partials_(std::move(partials)), copy_event_(std::move(copy_event)) {}
  ~CudaResidentOperators() override {
    absl::StatusOr<ScopedDevice> scope = ScopedDevice::Enter(device_);
    partials_.Reset();
    copy_event_.Reset();
  }

  std::string name() const override { return name_; }

  uint64_t free_bytes() const override {
    absl::StatusOr<ScopedDevice> scope = ScopedDevice::Enter(device_);
    if (!scope.ok()) return 0;
    const absl::StatusOr<uint64_t> free = FreeDeviceBytes();  // with the pool's unused memory
    return free.ok() ? *free : 0;
  }

  absl::StatusOr<std::unique_ptr<ResidentArray>> Allocate(
      Dims3 dims, ResidentRole /*role*/ = ResidentRole::kVolume) override {
    if (dims.d0 < 0 || dims.d1 < 0 || dims.d2 < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Allocate: dims ", DimsText(dims)));
    }
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    TOMO_ASSIGN_OR_RETURN(auto buffer, DeviceBuffer<float>::Allocate(
                                           static_cast<size_t>(dims.count()), stream_));
    return std::unique_ptr<ResidentArray>(
        std::make_unique<CudaArray>(dims, this, device_, std::move(buffer)));
  }

  absl::Status Upload(const Array3D& host, ResidentArray& device) override {
    TOMO_RETURN_IF_ERROR(CheckOwned("Upload", this, device));
    TOMO_RETURN_IF_ERROR(CheckDimsMatch("Upload: host array", host.dims(), device.dims(),
                                        "(the resident array's)"));
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    // Pageable memory: the copy is staged before the call returns, so `host` may go.
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(Data(device), host.data(), host.size_bytes(),
                                              cudaMemcpyHostToDevice, stream_));
    return absl::OkStatus();
  }

  absl::Status Download(const ResidentArray& device, Array3D& host) override {
    TOMO_RETURN_IF_ERROR(CheckOwned("Download", this, device));
    TOMO_RETURN_IF_ERROR(CheckDimsMatch("Download: host array", host.dims(), device.dims(),
                                        "(the resident array's)"));
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.data(), Data(device), host.size_bytes(),
                                              cudaMemcpyDeviceToHost, stream_));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  // From another CudaResidentOperators: cudaMemcpyPeerAsync on this stream, after the
  // source stream's work so far (an event), and the source stream then waits for the copy
  // (so that later work there cannot overwrite the array while the copy reads it). Other
  // sources: the default (through host memory).
  absl::Status CopyFromPeer(ResidentOperators& source_ops, const ResidentArray& source,
                            ResidentArray& target) override {
    auto* peer = dynamic_cast<CudaResidentOperators*>(&source_ops);
    if (peer == nullptr) return ResidentOperators::CopyFromPeer(source_ops, source, target);
    TOMO_RETURN_IF_ERROR(CheckOwned("CopyFromPeer", peer, source));
    TOMO_RETURN_IF_ERROR(CheckOwned("CopyFromPeer", this, target));
    TOMO_RETURN_IF_ERROR(CheckDimsMatch("CopyFromPeer: target", target.dims(), source.dims(),
                                        "(the source's)"));
    const size_t bytes = static_cast<size_t>(source.size()) * sizeof(float);
    if (peer == this) {
      TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(Data(target), Data(source), bytes,
                                                cudaMemcpyDeviceToDevice, stream_));
      return absl::OkStatus();
    }
    if (peer->device_ != device_) TOMO_RETURN_IF_ERROR(EnablePeerAccessOnce(device_, peer->device_));
    {
      TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(peer->device_));
      TOMO_CUDA_RETURN_IF_ERROR(cudaEventRecord(peer->copy_event_.get(), peer->stream_));
    }
    {
      TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
      TOMO_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_, peer->copy_event_.get(), 0));
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyPeerAsync(Data(target), device_, Data(source),
                                                    peer->device_, bytes, stream_));
      TOMO_CUDA_RETURN_IF_ERROR(cudaEventRecord(copy_event_.get(), stream_));
    }
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(peer->device_));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(peer->stream_, copy_event_.get(), 0));
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<ResidentProjector>> MakeProjector(
      const Geometry& geometry, const VolumeGeometry& volume_geometry,
      ProjectorModel model) override {
    TOMO_ASSIGN_OR_RETURN(ProjectorPlan plan, PlanProjector(geometry, volume_geometry, model));
    const auto* vector_plan = std::get_if<VectorProjectorPlan>(&plan);
    if (vector_plan == nullptr) {
      const Dims3 projection_dims = ProjectionDims(geometry);
      return std::unique_ptr<ResidentProjector>(std::make_unique<HostBouncedProjector>(
          device_, this, stream_,
          MakeCudaHostProjector(CudaContext{device_, stream_, &host_projector_mutex_}, model,
                                std::move(plan), volume_geometry),
          volume_geometry.dims(), projection_dims));
    }
    return MakeVectorProjector(vector_plan->geometry, volume_geometry,
                               vector_plan->back_weighting);
  }

  absl::StatusOr<std::unique_ptr<ResidentProjector>> MakeVectorProjector(
      const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
      BackProjectionWeighting back_weighting) {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    TOMO_ASSIGN_OR_RETURN(DeviceVectorProjector projector,
                          DeviceVectorProjector::Create(geometry, volume_geometry, stream_));
    if (back_weighting == BackProjectionWeighting::kMatched) {
      TOMO_RETURN_IF_ERROR(projector.PrepareMatchedBack(geometry, volume_geometry));
    }
    VectorSampler forward = VectorSampler::kExact;
    if (geometry.num_views() >= kMinViewsForTextureForward || geometry.rows() > 65535) {
      forward = projector.BestForwardSampler();
      if (forward == VectorSampler::kLayered && layered_taken_) {
        forward = projector.TextureFitsForward() ? VectorSampler::kTexture : VectorSampler::kExact;
      }
      if (forward == VectorSampler::kLayered) layered_taken_ = true;
    }
    DeviceBuffer<VectorFpView> few_view_views;
    if (forward == VectorSampler::kExact) {
      // The split-ray kernel (few_view_forward.cu) for few views.
      const std::vector<VectorFpView> views = MakeVectorFpViews(geometry, volume_geometry);
      TOMO_ASSIGN_OR_RETURN(few_view_views,
                            DeviceBuffer<VectorFpView>::Allocate(views.size(), stream_));
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(few_view_views.get(), views.data(),
                                                few_view_views.size_bytes(),
                                                cudaMemcpyHostToDevice, stream_));
    }
    return std::unique_ptr<ResidentProjector>(std::make_unique<CudaProjector>(
        device_, this, std::move(projector), forward, std::move(few_view_views), stream_,
        volume_geometry.dims(), geometry.projection_dims(), back_weighting));
  }

  absl::Status Fill(float value, ResidentArray& x) override {
    TOMO_RETURN_IF_ERROR(CheckOwned("Fill", this, x));
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    TOMO_CUDA_RETURN_IF_ERROR(LaunchFill(value, x.size(), Data(x), stream_));
    return absl::OkStatus();
  }

  absl::Status Axpby(float a, const ResidentArray& x, float b, ResidentArray& y) override {
    TOMO_RETURN_IF_ERROR(CheckResidentOperands("Axpby", this, x, y));
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    TOMO_CUDA_RETURN_IF_ERROR(LaunchAxpby(a, Data(x), b, y.size(), Data(y), stream_));
    return absl::OkStatus();
  }

  absl::Status Multiply(const ResidentArray& w, ResidentArray& y) override {
    TOMO_RETURN_IF_ERROR(CheckResidentOperands("Multiply", this, w, y));
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    TOMO_CUDA_RETURN_IF_ERROR(LaunchMultiply(Data(w), y.size(), Data(y), stream_));
    return absl::OkStatus();
  }

  absl::Status AddScaledQuotient(float a, const ResidentArray& d, const ResidentArray& s,
                                 float epsilon, float lower, float upper,
                                 ResidentArray& x) override {
    TOMO_RETURN_IF_ERROR(CheckResidentOperands("AddScaledQuotient", this, d, x));
    TOMO_RETURN_IF_ERROR(CheckResidentOperands("AddScaledQuotient", this, s, x));
    if (!(lower <= upper)) {
      return absl::InvalidArgumentError(
          absl::StrCat("AddScaledQuotient: lower bound ", lower, " above upper bound ", upper));
    }
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    TOMO_CUDA_RETURN_IF_ERROR(LaunchAddScaledQuotient(a, Data(d), Data(s), epsilon, lower, upper,
                                                      x.size(), Data(x), stream_));
    return absl::OkStatus();
  }

  absl::Status InvertGuarded(float epsilon, ResidentArray& x) override {
    TOMO_RETURN_IF_ERROR(CheckOwned("InvertGuarded", this, x));
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    TOMO_CUDA_RETURN_IF_ERROR(LaunchInvertGuarded(epsilon, x.size(), Data(x), stream_));
    return absl::OkStatus();
  }

  absl::Status Clamp(float lower, float upper, ResidentArray& x) override {
    TOMO_RETURN_IF_ERROR(CheckOwned("Clamp", this, x));
    if (!(lower <= upper)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Clamp: lower bound ", lower, " above upper bound ", upper));
    }
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    TOMO_CUDA_RETURN_IF_ERROR(LaunchClamp(lower, upper, x.size(), Data(x), stream_));
    return absl::OkStatus();
  }

  absl::StatusOr<double> Dot(const ResidentArray& a, const ResidentArray& b) override {
    TOMO_RETURN_IF_ERROR(CheckResidentOperands("Dot", this, a, b));
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    const int32_t blocks = DotBlocks(a.size());
    TOMO_CUDA_RETURN_IF_ERROR(
        LaunchDotPartials(Data(a), Data(b), a.size(), partials_.get(), stream_));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_partials_.data(), partials_.get(),
                                              static_cast<size_t>(blocks) * sizeof(double),
                                              cudaMemcpyDeviceToHost, stream_));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    double total = 0;
    for (int32_t k = 0; k < blocks; ++k) total += host_partials_[static_cast<size_t>(k)];
    return total;
  }

  absl::Status AccumulateDot(const ResidentArray& a, const ResidentArray& b) override {
    TOMO_RETURN_IF_ERROR(CheckResidentOperands("AccumulateDot", this, a, b));
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    // partials_ = [kMaxDotBlocks partials | the running total].
    double* total = partials_.get() + kMaxDotBlocks;
    if (!total_valid_) {
      TOMO_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(total, 0, sizeof(double), stream_));
      total_valid_ = true;
    }
    TOMO_CUDA_RETURN_IF_ERROR(
        LaunchDotPartials(Data(a), Data(b), a.size(), partials_.get(), stream_));
    TOMO_CUDA_RETURN_IF_ERROR(LaunchAddPartials(partials_.get(), DotBlocks(a.size()), total,
                                                stream_));
    return absl::OkStatus();
  }

  absl::StatusOr<double> TakeAccumulatedDot() override {
    TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
    if (!total_valid_) return 0.0;
    double total = 0;
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&total, partials_.get() + kMaxDotBlocks,
                                              sizeof(double), cudaMemcpyDeviceToHost, stream_));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    total_valid_ = false;
    return total;
  }

 private:
  const int device_;
  const cudaStream_t stream_;
  const std::string name_;
  DeviceBuffer<double> partials_;
  // Recorded on stream_ by CopyFromPeer (as the source: the work before the copy; as the
  // target: the copy) for the other stream to wait on.
  Event copy_event_;
  std::vector<double> host_partials_ = std::vector<double>(kMaxDotBlocks);
  bool layered_taken_ = false;
  std::mutex host_projector_mutex_;  // the lock of the host projectors bounced through
  bool total_valid_ = false;  // the running total has been zeroed since the last take
};

}  // namespace

absl::StatusOr<std::unique_ptr<ResidentOperators>> MakeCudaResidentOperators(
    int device, cudaStream_t stream, std::string name) {
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device));
  TOMO_ASSIGN_OR_RETURN(auto partials,
                        DeviceBuffer<double>::Allocate(kMaxDotBlocks + 1, stream));
  TOMO_ASSIGN_OR_RETURN(Event copy_event, Event::Create());
  return std::unique_ptr<ResidentOperators>(std::make_unique<CudaResidentOperators>(
      device, stream, std::move(name), std::move(partials), std::move(copy_event)));
}

}  // namespace tomo::core::cuda
