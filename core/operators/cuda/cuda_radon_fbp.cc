#include "core/operators/cuda/cuda_radon_fbp.h"

#include <utility>

#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/operators/cuda/cuda_check.h"

namespace tomo::core::cuda {

absl::StatusOr<std::unique_ptr<CudaRadonFbp>> CudaRadonFbp::Create(
    int device, const RadonGeometry& geometry, const VolumeGeometry& volume_geometry,
    const FilterOptions& filter_options) {
  TOMO_RETURN_IF_ERROR(ValidateRadonGeometry(geometry));
  TOMO_ASSIGN_OR_RETURN(RampFilter filter,
                        RampFilter::Create(filter_options, geometry.num_samples,
                                           geometry.sample_spacing_mm, FilterOrder::kParabola));
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device));
  std::unique_ptr<CudaRadonFbp> fbp(new CudaRadonFbp());
  fbp->device_ = device;
  fbp->projection_dims_ = geometry.projection_dims();
  fbp->volume_dims_ = volume_geometry.dims();
  TOMO_ASSIGN_OR_RETURN(fbp->stream_, Stream::Create());
  const cudaStream_t s = fbp->stream_.get();
  TOMO_ASSIGN_OR_RETURN(
      fbp->projections_,
      DeviceBuffer<float>::Allocate(static_cast<size_t>(fbp->projection_dims_.count()), s));
  TOMO_ASSIGN_OR_RETURN(fbp->volume_, DeviceBuffer<float>::Allocate(
                                          static_cast<size_t>(fbp->volume_dims_.count()), s));
  TOMO_ASSIGN_OR_RETURN(DeviceRowFilter row_filter,
                        DeviceRowFilter::Create(filter, geometry.num_directions(), 1, {}, s));
  fbp->row_filter_.emplace(std::move(row_filter));
  TOMO_ASSIGN_OR_RETURN(CudaRadonProjector projector,
                        CudaRadonProjector::Create(geometry, volume_geometry, s));
  fbp->projector_.emplace(std::move(projector));
  return fbp;
}

CudaRadonFbp::~CudaRadonFbp() {
  // Everything is freed with its device current, before the stream it is ordered on.
  auto scope = ScopedDevice::Enter(device_);
  projector_.reset();
  row_filter_.reset();
  volume_.Reset();
  projections_.Reset();
  if (stream_.get() != nullptr) cudaStreamSynchronize(stream_.get());
  stream_.Reset();
}

absl::Status CudaRadonFbp::RunOnDevice() {
  TOMO_RETURN_IF_ERROR(row_filter_->Apply(projections_.get(), projections_.get()));
  return projector_->BackWeighted(projections_.get(), volume_.get());
}

absl::Status CudaRadonFbp::Run(const Array3D& projections, Array3D& volume) {
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(), projection_dims_,
                                      "(directions, 1, samples)"));
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("volume", volume.dims(), volume_dims_, "(z, y, x)"));
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
  const cudaStream_t s = stream_.get();
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(projections_.get(), projections.data(),
                                            projections.size_bytes(), cudaMemcpyHostToDevice, s));
  TOMO_RETURN_IF_ERROR(RunOnDevice());
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(volume.data(), volume_.get(), volume.size_bytes(),
                                            cudaMemcpyDeviceToHost, s));
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return absl::OkStatus();
}

}  // namespace tomo::core::cuda
