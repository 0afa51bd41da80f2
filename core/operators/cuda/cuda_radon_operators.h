// CudaRadonOperators: RadonOperators (core/operators/radon_operators.h) on one CUDA device,
// from host arrays: FilterRows with cuFFT (DeviceRowFilter, cuda_row_filter.h) and
// BackProject with RadonBackScaledCuda (cuda_radon_projector.h). Each call uploads, runs and
// downloads synchronously on a stream of its own; CudaRadonFbp (cuda_radon_fbp.h) is the
// fused path that keeps the data on the device.
//
//   CudaRadonOperators operators(/*device=*/0);
//   TOMO_ASSIGN_OR_RETURN(Array3D volume,
//                         RadonFbp(geometry, volume_geometry, projections, {}, operators));
#pragma once

#include <vector>

#include "core/operators/radon_operators.h"

namespace tomo::core::cuda {

class CudaRadonOperators final : public RadonOperators {
 public:
  explicit CudaRadonOperators(int device) : device_(device) {}
  absl::Status FilterRows(const RampFilter& filter, Array3D& projections) override;
  absl::Status BackProject(const RadonGeometry& geometry, const VolumeGeometry& volume_geometry,
                           const Array3D& projections, const std::vector<double>& direction_scales,
                           Array3D& volume) override;

 private:
  int device_;
};

}  // namespace tomo::core::cuda
