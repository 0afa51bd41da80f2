// CudaRadonFbp: filtered back projection of the 3D Radon transform (core/algorithms/
// radon_fbp.h for the method) with the data kept on one CUDA device: the projections are
// uploaded, filtered with the parabola filter (cuFFT, DeviceRowFilter), back projected with
// the directions' weights (CudaRadonProjector::BackWeighted) and the volume downloaded, on
// one stream, with the buffers, cuFFT plans and direction table made once by Create and
// reused by every Run. Run gives the same volume as RadonFbp with CpuRadonOperators, to the
// CUDA/CPU tolerance of tests/core/operators/cuda/cuda_radon_test.cc.
//
// Host copies go at the link's speed when the caller's arrays are page-locked
// (core::PinHostMemory); pageable arrays work too, through the driver's staging.
//
// Not thread-safe; the device is made current inside each call (any thread may call).
// Errors: INVALID_ARGUMENT for an invalid geometry, filter options RampFilter refuses, or
// arrays whose dims are not the geometry's; RESOURCE_EXHAUSTED / INTERNAL from CUDA.
//
//   TOMO_ASSIGN_OR_RETURN(auto fbp, CudaRadonFbp::Create(0, geometry, volume_geometry, {}));
//   TOMO_RETURN_IF_ERROR(fbp->Run(projections, volume));
#pragma once

#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/filters/ramp_filter.h"
#include "core/geometry/radon_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/cuda/cuda_radon_projector.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/cuda_row_filter.h"

namespace tomo::core::cuda {

class CudaRadonFbp {
 public:
  static absl::StatusOr<std::unique_ptr<CudaRadonFbp>> Create(int device,
                                                              const RadonGeometry& geometry,
                                                              const VolumeGeometry& volume_geometry,
                                                              const FilterOptions& filter);
  ~CudaRadonFbp();
  CudaRadonFbp(const CudaRadonFbp&) = delete;
  CudaRadonFbp& operator=(const CudaRadonFbp&) = delete;

  // volume = Radon FBP of projections (host arrays), synchronous.
  absl::Status Run(const Array3D& projections, Array3D& volume);
  // The device part alone, for the benchmark: filters device_projections() in place and
  // back projects into device_volume(), enqueued on stream() (no wait).
  absl::Status RunOnDevice();
  float* device_projections() const { return projections_.get(); }
  float* device_volume() const { return volume_.get(); }
  cudaStream_t stream() const { return stream_.get(); }
  CudaRadonProjector& projector() { return *projector_; }

 private:
  CudaRadonFbp() = default;
  int device_ = 0;
  Dims3 projection_dims_, volume_dims_;
  Stream stream_;
  DeviceBuffer<float> projections_, volume_;
  std::optional<DeviceRowFilter> row_filter_;
  std::optional<CudaRadonProjector> projector_;
};

}  // namespace tomo::core::cuda
