#include "core/operators/cuda/cuda_radon_projector.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/radon_sample_forms.h"

namespace tomo::core::cuda {
namespace {

absl::Status CheckDims(const RadonGeometry& geometry, const VolumeGeometry& volume_geometry,
                       const Array3D& volume, const Array3D& projections) {
  TOMO_RETURN_IF_ERROR(ValidateRadonGeometry(geometry));
  TOMO_RETURN_IF_ERROR(
      CheckDimsMatch("volume", volume.dims(), volume_geometry.dims(), "(z, y, x)"));
  return CheckDimsMatch("projections", projections.dims(), geometry.projection_dims(),
                        "(directions, 1, samples)");
}

absl::StatusOr<DeviceBuffer<float>> Upload(const std::vector<float>& values, cudaStream_t stream) {
  TOMO_ASSIGN_OR_RETURN(auto buffer, DeviceBuffer<float>::Allocate(values.size(), stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buffer.get(), values.data(), buffer.size_bytes(),
                                            cudaMemcpyHostToDevice, stream));
  return buffer;
}

// One call's device, stream and buffers for the host-array helpers.
struct HostCall {
  ScopedDevice device;
  Stream stream;
  DeviceBuffer<float> volume, projections;
};

absl::StatusOr<HostCall> StartHostCall(int device, const VolumeGeometry& volume_geometry,
                                       const RadonGeometry& geometry) {
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device));
  TOMO_ASSIGN_OR_RETURN(Stream stream, Stream::Create());
  TOMO_ASSIGN_OR_RETURN(
      auto volume, DeviceBuffer<float>::Allocate(static_cast<size_t>(volume_geometry.voxel_count()),
                                                 stream.get()));
  TOMO_ASSIGN_OR_RETURN(auto projections,
                        DeviceBuffer<float>::Allocate(
                            static_cast<size_t>(geometry.projection_dims().count()), stream.get()));
  return HostCall{std::move(scope), std::move(stream), std::move(volume), std::move(projections)};
}

}  // namespace

absl::StatusOr<CudaRadonProjector> CudaRadonProjector::Create(const RadonGeometry& geometry,
                                                              const VolumeGeometry& volume_geometry,
                                                              cudaStream_t stream) {
  TOMO_RETURN_IF_ERROR(ValidateRadonGeometry(geometry));
  const Size3 size = volume_geometry.size();
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (volume_geometry.voxel_count() > kMax || geometry.projection_dims().count() > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume: ", volume_geometry.voxel_count(), " voxels and ",
                     geometry.projection_dims().count(),
                     " samples; the CUDA Radon projector takes at most ", kMax, " of each"));
  }
  CudaRadonProjector p;
  p.stream_ = stream;
  p.volume_ = {static_cast<int32_t>(size.x), static_cast<int32_t>(size.y),
               static_cast<int32_t>(size.z)};
  p.samples_ = {static_cast<int32_t>(geometry.num_directions()),
                static_cast<int32_t>(geometry.num_samples)};
  const Vec3 h = volume_geometry.voxel_size_mm();
  const double mass_per_sample = h.x * h.y * h.z / geometry.sample_spacing_mm;
  p.mass_per_sample_ = static_cast<float>(mass_per_sample);

  const std::vector<RadonSampleForm> forms = MakeRadonSampleForms(geometry, volume_geometry);
  std::vector<float4> host_forms;
  host_forms.reserve(forms.size());
  for (const RadonSampleForm& f : forms) {
    host_forms.push_back(make_float4(static_cast<float>(f.x), static_cast<float>(f.y),
                                     static_cast<float>(f.z), static_cast<float>(f.w)));
    p.bounds_.max_abs_x = std::max(p.bounds_.max_abs_x, std::abs(static_cast<float>(f.x)));
    p.bounds_.max_abs_y = std::max(p.bounds_.max_abs_y, std::abs(static_cast<float>(f.y)));
    p.bounds_.max_abs_z = std::max(p.bounds_.max_abs_z, std::abs(static_cast<float>(f.z)));
  }
  TOMO_ASSIGN_OR_RETURN(p.forms_, DeviceBuffer<float4>::Allocate(host_forms.size(), stream));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(p.forms_.get(), host_forms.data(),
                                            p.forms_.size_bytes(), cudaMemcpyHostToDevice, stream));
  std::vector<float> weights;
  weights.reserve(geometry.directions.size());
  for (const RadonDirection& d : geometry.directions) {
    weights.push_back(static_cast<float>(d.weight_sr));
  }
  TOMO_ASSIGN_OR_RETURN(p.weights_, Upload(weights, stream));
  TOMO_ASSIGN_OR_RETURN(
      p.adjoint_scales_,
      Upload(std::vector<float>(weights.size(), static_cast<float>(mass_per_sample)), stream));
  // The host vectors die here: wait for the copies.
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return p;
}

absl::Status CudaRadonProjector::Forward(const float* d_volume, float* d_projections) {
  if (!RadonForwardFits(bounds_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sample_spacing_mm: samples finer than the CUDA forward projector's bins hold (",
        bounds_.max_abs_x, " samples per voxel along x); use samples at least 1/100 of a voxel"));
  }
  TOMO_CUDA_RETURN_IF_ERROR(LaunchRadonForward(volume_, samples_, forms_.get(), bounds_,
                                               mass_per_sample_, d_volume, d_projections, stream_));
  return absl::OkStatus();
}

absl::Status CudaRadonProjector::BackScaled(const float* d_projections, const float* d_scales,
                                            float* d_volume, bool accumulate) {
  TOMO_CUDA_RETURN_IF_ERROR(LaunchRadonBack(volume_, samples_, forms_.get(), bounds_, d_scales,
                                            d_projections, accumulate ? 1 : 0, d_volume, stream_,
                                            back_voxels_per_thread_));
  return absl::OkStatus();
}

absl::Status CudaRadonProjector::Back(const float* d_projections, float* d_volume,
                                      bool accumulate) {
  return BackScaled(d_projections, adjoint_scales_.get(), d_volume, accumulate);
}

absl::Status CudaRadonProjector::BackWeighted(const float* d_projections, float* d_volume,
                                              bool accumulate) {
  return BackScaled(d_projections, weights_.get(), d_volume, accumulate);
}

absl::Status RadonForwardCuda(int device, const RadonGeometry& geometry,
                              const VolumeGeometry& volume_geometry, const Array3D& volume,
                              Array3D& projections) {
  TOMO_RETURN_IF_ERROR(CheckDims(geometry, volume_geometry, volume, projections));
  TOMO_ASSIGN_OR_RETURN(HostCall call, StartHostCall(device, volume_geometry, geometry));
  const cudaStream_t s = call.stream.get();
  TOMO_ASSIGN_OR_RETURN(auto projector, CudaRadonProjector::Create(geometry, volume_geometry, s));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(call.volume.get(), volume.data(), volume.size_bytes(),
                                            cudaMemcpyHostToDevice, s));
  TOMO_RETURN_IF_ERROR(projector.Forward(call.volume.get(), call.projections.get()));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(projections.data(), call.projections.get(),
                                            projections.size_bytes(), cudaMemcpyDeviceToHost, s));
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return absl::OkStatus();
}

absl::Status RadonBackScaledCuda(int device, const RadonGeometry& geometry,
                                 const VolumeGeometry& volume_geometry, const Array3D& projections,
                                 const std::vector<double>& direction_scales, Array3D& volume) {
  TOMO_RETURN_IF_ERROR(CheckDims(geometry, volume_geometry, volume, projections));
  if (direction_scales.size() != geometry.directions.size()) {
    return absl::InvalidArgumentError(absl::StrCat("direction_scales: ", direction_scales.size(),
                                                   " values for ", geometry.directions.size(),
                                                   " directions"));
  }
  std::vector<float> scales;
  for (size_t i = 0; i < direction_scales.size(); ++i) {
    if (!std::isfinite(direction_scales[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("direction_scales[", i, "]: ", direction_scales[i], " is not finite"));
    }
    scales.push_back(static_cast<float>(direction_scales[i]));
  }
  TOMO_ASSIGN_OR_RETURN(HostCall call, StartHostCall(device, volume_geometry, geometry));
  const cudaStream_t s = call.stream.get();
  TOMO_ASSIGN_OR_RETURN(auto projector, CudaRadonProjector::Create(geometry, volume_geometry, s));
  TOMO_ASSIGN_OR_RETURN(auto d_scales, Upload(scales, s));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(call.projections.get(), projections.data(),
                                            projections.size_bytes(), cudaMemcpyHostToDevice, s));
  TOMO_RETURN_IF_ERROR(
      projector.BackScaled(call.projections.get(), d_scales.get(), call.volume.get()));
  TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(volume.data(), call.volume.get(), volume.size_bytes(),
                                            cudaMemcpyDeviceToHost, s));
  TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return absl::OkStatus();
}

absl::Status RadonBackCuda(int device, const RadonGeometry& geometry,
                           const VolumeGeometry& volume_geometry, const Array3D& projections,
                           Array3D& volume) {
  const Vec3 h = volume_geometry.voxel_size_mm();
  return RadonBackScaledCuda(
      device, geometry, volume_geometry, projections,
      std::vector<double>(geometry.directions.size(), h.x * h.y * h.z / geometry.sample_spacing_mm),
      volume);
}

}  // namespace tomo::core::cuda
