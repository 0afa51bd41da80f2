#include "core/operators/cuda/cuda_radon_operators.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/operators/cuda/cuda_check.h"
#include "core/operators/cuda/cuda_radon_projector.h"
#include "core/operators/cuda/cuda_resources.h"
#include "core/operators/cuda/cuda_row_filter.h"

namespace tomo::core::cuda {

absl::Status CudaRadonOperators::FilterRows(const RampFilter& filter, Array3D& projections) {
  const Dims3 dims = projections.dims();
  if (dims.d2 != filter.num_detectors()) {
    return absl::InvalidArgumentError(
        absl::StrCat("projections: ", dims.d2, " detector columns, but the filter was made for ",
                     filter.num_detectors()));
  }
  const int64_t rows = dims.d0 * dims.d1;
  if (rows == 0) return absl::OkStatus();
  TOMO_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::Enter(device_));
  TOMO_ASSIGN_OR_RETURN(Stream stream, Stream::Create());
  {
    TOMO_ASSIGN_OR_RETURN(auto data, DeviceBuffer<float>::Allocate(
                                         static_cast<size_t>(projections.size()), stream.get()));
    TOMO_ASSIGN_OR_RETURN(DeviceRowFilter row_filter,
                          DeviceRowFilter::Create(filter, rows, 1, {}, stream.get()));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(data.get(), projections.data(),
                                              projections.size_bytes(), cudaMemcpyHostToDevice,
                                              stream.get()));
    TOMO_RETURN_IF_ERROR(row_filter.Apply(data.get(), data.get()));
    TOMO_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(projections.data(), data.get(),
                                              projections.size_bytes(), cudaMemcpyDeviceToHost,
                                              stream.get()));
    TOMO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream.get()));
  }
  return absl::OkStatus();
}

absl::Status CudaRadonOperators::BackProject(const RadonGeometry& geometry,
                                             const VolumeGeometry& volume_geometry,
                                             const Array3D& projections,
                                             const std::vector<double>& direction_scales,
                                             Array3D& volume) {
  return RadonBackScaledCuda(device_, geometry, volume_geometry, projections, direction_scales,
                             volume);
}

}  // namespace tomo::core::cuda
