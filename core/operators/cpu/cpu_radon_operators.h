// CpuRadonOperators: RadonOperators (core/operators/radon_operators.h) on the CPU
// reference: FFTW row filtering (CpuBackend::FilterRows) and RadonBackScaledCpu
// (cpu_radon_projector.h). Stateless apart from the thread count.
//
//   CpuRadonOperators operators(/*threads=*/0);
//   auto volume = RadonFbp(geometry, volume_geometry, projections, {}, operators);
#pragma once

#include <vector>

#include "core/operators/radon_operators.h"

namespace tomo::core {

class CpuRadonOperators final : public RadonOperators {
 public:
  // threads <= 0: DefaultThreadCount().
  explicit CpuRadonOperators(int threads) : threads_(threads) {}
  absl::Status FilterRows(const RampFilter& filter, Array3D& projections) override;
  absl::Status BackProject(const RadonGeometry& geometry, const VolumeGeometry& volume_geometry,
                           const Array3D& projections, const std::vector<double>& direction_scales,
                           Array3D& volume) override;

 private:
  int threads_;
};

}  // namespace tomo::core
