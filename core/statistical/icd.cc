#include "core/statistical/icd.h"

#include "absl/strings/str_cat.h"
#include "core/statistical/icd_cpu.h"
#if TOMO_HAVE_CUDA
#include "core/statistical/cuda/icd_cuda.h"
#endif

namespace tomo::core::statistical {

absl::StatusOr<IcdResult> ReconstructIcd(const SeparableFootprintProjector& projector,
                                         const Array3D& line_integrals, const Array3D& weights,
                                         const Array3D* start_volume, const IcdOptions& options,
                                         const DeviceInfo& device, const RunContext& context) {
  if (device.kind == DeviceKind::kCpu) {
    return ReconstructIcdCpu(projector, line_integrals, weights, start_volume, options, context);
  }
#if TOMO_HAVE_CUDA
  return ReconstructIcdCuda(projector, line_integrals, weights, start_volume, options,
                            device.index, IcdCudaTuning{}, context);
#else
  return absl::FailedPreconditionError(
      absl::StrCat("device ", device.id, ": this build has no CUDA backend"));
#endif
}

}  // namespace tomo::core::statistical
