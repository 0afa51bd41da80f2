#include "core/operators/cpu/cpu_radon_operators.h"

#include "core/operators/cpu/cpu_backend.h"
#include "core/operators/cpu/cpu_radon_projector.h"

namespace tomo::core {

absl::Status CpuRadonOperators::FilterRows(const RampFilter& filter, Array3D& projections) {
  CpuBackend backend(threads_);
  return backend.FilterRows(filter, projections);
}

absl::Status CpuRadonOperators::BackProject(const RadonGeometry& geometry,
                                            const VolumeGeometry& volume_geometry,
                                            const Array3D& projections,
                                            const std::vector<double>& direction_scales,
                                            Array3D& volume) {
  return RadonBackScaledCpu(geometry, volume_geometry, projections, direction_scales, volume,
                            threads_);
}

}  // namespace tomo::core
