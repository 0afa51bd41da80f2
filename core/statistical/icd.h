// ReconstructIcd: PWLS with the q-GGMRF prior by ICD on the device a job was given: the
// CPU reference (icd_cpu.h) for DeviceKind::kCpu, the CUDA runner (cuda/icd_cuda.h) for a
// CUDA device when the library was built with CUDA. The entry point a job runner calls;
// the method, options, progress and errors are those of icd_options.h and the two runners.
//
//   TOMO_ASSIGN_OR_RETURN(auto sf, SeparableFootprintProjector::Create(geometry, volume));
//   TOMO_ASSIGN_OR_RETURN(IcdResult result,
//                         ReconstructIcd(sf, y, w, &fdk_volume, options, device, context));
#pragma once

#include "absl/status/statusor.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/devices/devices.h"
#include "core/statistical/icd_options.h"
#include "core/statistical/separable_footprint.h"

namespace tomo::core::statistical {

// FAILED_PRECONDITION for a CUDA device in a library built without CUDA; otherwise the
// runner's errors.
absl::StatusOr<IcdResult> ReconstructIcd(const SeparableFootprintProjector& projector,
                                         const Array3D& line_integrals, const Array3D& weights,
                                         const Array3D* start_volume, const IcdOptions& options,
                                         const DeviceInfo& device, const RunContext& context);

}  // namespace tomo::core::statistical
