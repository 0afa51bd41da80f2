// The host-array projectors of the CUDA backend (cuda_host_projector.h). Host code,
// compiled by g++: each call uploads its operands in stream order, runs the kernels,
// downloads the result and synchronises.
#include "core/operators/cuda/cuda_host_projector.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <variant>
#include <vector>

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_radon_projector.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/cuda_vector_projector.h"
#include "core/operators/cuda/parallel_2d_kernels.h"
#include "core/operators/cuda/vector_kernels.h"
#include "core/operators/parallel_2d_joseph.h"
#include "core/operators/vector_operands.h"

namespace tomo::core::cuda {

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

absl::Status Parallel2DForward(const CudaContext& context, const ParallelGeometry2D& geometry,
                               const VolumeGeometry& volume_geometry, const Array3D& volume,
                               Array3D& projections) {
  TOMO_RETURN_IF_ERROR(
      CheckProjectorOperands(geometry, volume_geometry, volume, projections));
  std::lock_guard<std::mutex> lock(*context.mutex);
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(context.device));
  const cudaStream_t stream = context.stream;
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

absl::Status Parallel2DBack(const CudaContext& context, const ParallelGeometry2D& geometry,
                            const VolumeGeometry& volume_geometry, const Array3D& projections,
                            Array3D& volume) {
  TOMO_RETURN_IF_ERROR(
      CheckProjectorOperands(geometry, volume_geometry, volume, projections));
  std::lock_guard<std::mutex> lock(*context.mutex);
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(context.device));
  const cudaStream_t stream = context.stream;
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

absl::Status VectorForward(const CudaContext& context, const VectorGeometry& geometry,
                           const VolumeGeometry& volume_geometry, const Array3D& volume,
                           Array3D& projections) {
  TOMO_RETURN_IF_ERROR(CheckVectorOperands(geometry, volume_geometry, volume, projections));
  std::lock_guard<std::mutex> lock(*context.mutex);
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(context.device));
  const cudaStream_t stream = context.stream;
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

absl::Status VectorBack(const CudaContext& context, const VectorGeometry& geometry,
                        const VolumeGeometry& volume_geometry, const Array3D& projections,
                        BackProjectionWeighting weighting, Array3D& volume) {
  TOMO_RETURN_IF_ERROR(CheckVectorOperands(geometry, volume_geometry, volume, projections));
  std::lock_guard<std::mutex> lock(*context.mutex);
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(context.device));
  const cudaStream_t stream = context.stream;
  TOMO_ASSIGN_OR_RETURN(DeviceVectorProjector projector,
                        DeviceVectorProjector::Create(geometry, volume_geometry, stream));
  if (weighting == BackProjectionWeighting::kMatched) {
    TOMO_RETURN_IF_ERROR(projector.PrepareMatchedBack(geometry, volume_geometry));
  }
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

// Radon plane integrals (cuda_radon_projector.h), under the backend's lock.
absl::Status RadonForward(const CudaContext& context, const RadonGeometry& geometry,
                          const VolumeGeometry& volume_geometry, const Array3D& volume,
                          Array3D& projections) {
  std::lock_guard<std::mutex> lock(*context.mutex);
  return RadonForwardCuda(context.device, geometry, volume_geometry, volume, projections);
}

absl::Status RadonBack(const CudaContext& context, const RadonGeometry& geometry,
                       const VolumeGeometry& volume_geometry, const Array3D& projections,
                       Array3D& volume) {
  std::lock_guard<std::mutex> lock(*context.mutex);
  return RadonBackCuda(context.device, geometry, volume_geometry, projections, volume);
}

// A projector plan (projector_plan.h) run by the functions above on the backend's device.
class CudaHostProjector final : public Projector {
 public:
  CudaHostProjector(const CudaContext& context, ProjectorModel model, ProjectorPlan plan,
                    const VolumeGeometry& volume)
      : context_(context), model_(model), plan_(std::move(plan)), volume_(volume) {}

  ProjectorModel model() const override { return model_; }

  absl::Status Forward(const Array3D& volume, Array3D& projections) override {
    struct Visit {
      const CudaHostProjector& p;
      const Array3D& volume;
      Array3D& projections;
      absl::Status operator()(const VectorProjectorPlan& plan) const {
        return VectorForward(p.context_, plan.geometry, p.volume_, volume, projections);
      }
      absl::Status operator()(const ExactParallel2DProjectorPlan& plan) const {
        return Parallel2DForward(p.context_, plan.geometry, p.volume_, volume, projections);
      }
      absl::Status operator()(const RadonProjectorPlan& plan) const {
        return RadonForward(p.context_, plan.geometry, p.volume_, volume, projections);
      }
    };
    return std::visit(Visit{*this, volume, projections}, plan_);
  }

  absl::Status Back(const Array3D& projections, Array3D& volume) override {
    struct Visit {
      const CudaHostProjector& p;
      const Array3D& projections;
      Array3D& volume;
      absl::Status operator()(const VectorProjectorPlan& plan) const {
        return VectorBack(p.context_, plan.geometry, p.volume_, projections,
                          plan.back_weighting, volume);
      }
      absl::Status operator()(const ExactParallel2DProjectorPlan& plan) const {
        return Parallel2DBack(p.context_, plan.geometry, p.volume_, projections, volume);
      }
      absl::Status operator()(const RadonProjectorPlan& plan) const {
        return RadonBack(p.context_, plan.geometry, p.volume_, projections, volume);
      }
    };
    return std::visit(Visit{*this, projections, volume}, plan_);
  }

 private:
  const CudaContext context_;
  const ProjectorModel model_;
  const ProjectorPlan plan_;
  const VolumeGeometry volume_;
};

}  // namespace

std::unique_ptr<Projector> MakeCudaHostProjector(const CudaContext& context,
                                                 ProjectorModel model, ProjectorPlan plan,
                                                 const VolumeGeometry& volume) {
  return std::make_unique<CudaHostProjector>(context, model, std::move(plan), volume);
}

}  // namespace tomo::core::cuda
