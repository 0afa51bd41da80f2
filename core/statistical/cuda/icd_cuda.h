// ReconstructIcdCuda: PWLS with the q-GGMRF prior by ICD with the multi-voxel update on one
// CUDA device; the same method, order of columns and groups, and cost as the CPU reference
// (core/statistical/icd_cpu.h), in float32 on the device.
//
// Per step of the UpdateSchedule (one group, or the groups of two columns that never meet)
// two kernels (core/statistical/cuda/icd_kernels.h): the back projection of w e and w into
// theta1, theta2 with the voxel update in the last block, then the forward update of the
// residual e without atomics. The volume (z fastest), residual and weights stay on the
// device for the whole run; the steps of an iteration are a task list on the device,
// replayed as CUDA graphs of tuning.groups_per_graph steps.
//
// Thread and stream: the calling thread only; the device is entered for the call (and
// left as it was) and all work runs on one stream of its own.
// Errors: PrepareIcdProblem's (INVALID_ARGUMENT); RESOURCE_EXHAUSTED, before any device
// allocation, when IcdDeviceBytes (with the run's steps) exceeds context.memory_budget_bytes
// (0: the device's free memory), naming both; CANCELLED (checked between graph launches,
// at most tuning.graphs_in_flight graphs of steps after the request); INTERNAL for CUDA
// failures (naming the call).
//
//   TOMO_ASSIGN_OR_RETURN(IcdResult result, ReconstructIcdCuda(sf, y, w, nullptr, options,
//                                                              /*device=*/0, {}, context));
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/statistical/icd_options.h"
#include "core/statistical/separable_footprint.h"

namespace tomo::core::statistical {

struct IcdCudaTuning {
  // Steps per CUDA graph; 0: plain launches (two per step), for comparison.
  int groups_per_graph = 256;
  int graphs_in_flight = 8;
  // Benchmarks only. step_limit > 0: each iteration stops after that many steps (the time
  // of a partial iteration, to extrapolate the single-voxel update of large volumes).
  int64_t step_limit = 0;
  // Called after each iteration with the volume (z, y, x), downloaded for it.
  std::function<void(int64_t iteration, const Array3D& volume)> on_iteration_volume;
};

absl::StatusOr<IcdResult> ReconstructIcdCuda(const SeparableFootprintProjector& projector,
                                             const Array3D& line_integrals,
                                             const Array3D& weights,
                                             const Array3D* start_volume,
                                             const IcdOptions& options, int device,
                                             const IcdCudaTuning& tuning,
                                             const RunContext& context);

}  // namespace tomo::core::statistical
