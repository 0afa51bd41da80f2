// CudaRadonProjector: the Radon plane-integral projector pair (the model of
// core/operators/cpu/cpu_radon_projector.h) on one CUDA device, for arrays resident there:
// the direction table (float32 forms, radon_sample_forms.h) and the per-direction scales
// (the adjoint's V / dt and the quadrature weights) are uploaded once by Create; Forward and
// Back enqueue kernels (radon_forward.cu, radon_back.cu) on the projector's stream and do
// not wait. The RadonForwardCuda / RadonBackCuda functions are thin host-array helpers.
//
// Contract: created, used and destroyed with its device current (ScopedDevice); `stream`
// must outlive it; not thread-safe. Device pointers must hold the geometry's dims:
// volumes (z, y, x), projections (directions, samples).
//
// Errors: INVALID_ARGUMENT for an invalid geometry (ValidateRadonGeometry), sizes beyond
// int32, or (Forward) samples too fine for the forward kernel's shared-memory bins
// (sample_spacing_mm below about 1/100 of the voxel size); RESOURCE_EXHAUSTED / INTERNAL
// from CUDA (cuda_check.h).
//
//   TOMO_ASSIGN_OR_RETURN(ScopedDevice device, ScopedDevice::Enter(0));
//   TOMO_ASSIGN_OR_RETURN(Stream stream, Stream::Create());
//   TOMO_ASSIGN_OR_RETURN(auto projector,
//                         CudaRadonProjector::Create(geometry, volume_geometry, stream.get()));
//   TOMO_RETURN_IF_ERROR(projector.BackWeighted(d_filtered, d_volume));   // FBP's stage 2
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/geometry/radon_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/radon_kernels.h"

namespace tomo::core::cuda {

class CudaRadonProjector {
 public:
  static absl::StatusOr<CudaRadonProjector> Create(const RadonGeometry& geometry,
                                                   const VolumeGeometry& volume_geometry,
                                                   cudaStream_t stream);
  CudaRadonProjector(CudaRadonProjector&&) noexcept = default;
  CudaRadonProjector& operator=(CudaRadonProjector&&) noexcept = default;

  // d_projections = A d_volume.
  absl::Status Forward(const float* d_volume, float* d_projections);
  // d_volume (+)= A^T d_projections (every s_i = V / dt).
  absl::Status Back(const float* d_projections, float* d_volume, bool accumulate = false);
  // d_volume (+)= B d_projections with s_i = the directions' weights (weight_sr): the back
  // projection of Radon FBP (core/algorithms/radon_fbp.h).
  absl::Status BackWeighted(const float* d_projections, float* d_volume, bool accumulate = false);
  // d_volume (+)= B d_projections with s_i = d_scales[i] (device memory, num_directions).
  absl::Status BackScaled(const float* d_projections, const float* d_scales, float* d_volume,
                          bool accumulate = false);

  // For the benchmark: the back projector's voxels per thread along z (0: chosen from the
  // volume's size; 1, 2, 4, 8, 16).
  void set_back_voxels_per_thread(int32_t voxels) { back_voxels_per_thread_ = voxels; }
  cudaStream_t stream() const { return stream_; }
  int64_t num_directions() const { return samples_.num_directions; }
  int64_t num_samples() const { return samples_.num_samples; }
  int64_t voxel_count() const { return static_cast<int64_t>(volume_.nx) * volume_.ny * volume_.nz; }

 private:
  CudaRadonProjector() = default;
  cudaStream_t stream_ = nullptr;
  RadonVolumeShape volume_;
  RadonSamplesShape samples_;
  RadonFormBounds bounds_;
  float mass_per_sample_ = 0;
  int32_t back_voxels_per_thread_ = 0;
  DeviceBuffer<float4> forms_;
  DeviceBuffer<float> adjoint_scales_, weights_;
};

// Host-array helpers on device `device` (their own stream and buffers; synchronous). Dims
// as RadonForwardCpu / RadonBackCpu / RadonBackScaledCpu, with the same INVALID_ARGUMENT
// messages, and every element of the output written.
absl::Status RadonForwardCuda(int device, const RadonGeometry& geometry,
                              const VolumeGeometry& volume_geometry, const Array3D& volume,
                              Array3D& projections);
absl::Status RadonBackCuda(int device, const RadonGeometry& geometry,
                           const VolumeGeometry& volume_geometry, const Array3D& projections,
                           Array3D& volume);
absl::Status RadonBackScaledCuda(int device, const RadonGeometry& geometry,
                                 const VolumeGeometry& volume_geometry, const Array3D& projections,
                                 const std::vector<double>& direction_scales, Array3D& volume);

}  // namespace tomo::core::cuda
