// ReconstructIcdCuda: PWLS with the q-GGMRF prior by ICD with the multi-voxel update on one
// CUDA device; the same method, order of columns and groups, and cost as the CPU reference
// (core/statistical/icd_cpu.h), in float32 on the device.
//
// Per step of the UpdateSchedule (one group, or the groups of up to four columns that never
// meet): the back projection of w e and w into theta1, theta2, the voxel update, and the
// forward update of the residual e without atomics (core/statistical/cuda/icd_kernels.h;
// IcdKernel below: a persistent cooperative kernel over many steps, or two launches per
// step). The volume (z fastest), residual and weights stay on the device for the whole run;
// the steps of an iteration are a task list on the device.
//
// Thread and stream: the calling thread only; the device is entered for the call (and
// left as it was) and all work runs on one stream of its own.
// Errors: PrepareIcdProblem's (INVALID_ARGUMENT); RESOURCE_EXHAUSTED, before any device
// allocation, when IcdDeviceBytes (with the run's steps) exceeds context.memory_budget_bytes
// (0: the device's free memory), naming both; CANCELLED (checked between launches or graph
// launches, at most tuning.graphs_in_flight of them after the request); INTERNAL for CUDA
// failures (naming the call), among them kPersistent on a device without cooperative launch.
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

// How the steps run on the device (icd_kernels.h):
//  kPersistentV4   one cooperative launch per steps_per_launch steps (the default): a block
//                  per view, each step's (column, view) footprints computed once per block
//                  and shared by the group's slices, the voxels' pixels without integer
//                  division, flags instead of grid barriers between the phases, an L2
//                  prefetch of the next set's pixels (bench/NOTES.md "### v4": 5.3 s for a
//                  512^3 iteration on an H200 against kPersistent's 6.6 s);
//  kPersistent     version 3 of the same, two grid barriers per step, kept to compare;
//  kLaunchPerStep  two kernels per step (a thread per (voxel, view), the last block updating
//                  the voxels), replayed as CUDA graphs: the first design, kept to compare.
enum class IcdKernel { kPersistent, kPersistentV4, kLaunchPerStep };

struct IcdCudaTuning {
  IcdKernel kernel = IcdKernel::kPersistentV4;
  // kPersistent and kPersistentV4: steps per launch (cancellation is checked between
  // launches).
  int steps_per_launch = 2048;
  // kPersistent and kPersistentV4: blocks of the grid, at most the co-resident ones and one
  // per view (0: that most). Fewer make each block own several views (tests use it).
  int persistent_blocks = 0;
  // kPersistentV4: flags between the phases (false: cooperative grid barriers), the L2
  // prefetch, the L1 prefetch (blocks without voxels to update, while they wait for the
  // update), how flags are polled, the voxels per thread whose loads go out together (1 or
  // 2: with 2 ptxas spills, measured slower) and the threads per block (0: by the largest
  // step; else 128, 256, 288 or 320). The defaults are the fastest measured (NOTES.md).
  bool v4_flags = true;
  bool v4_prefetch = true;
  bool v4_l1_prefetch = false;
  bool v4_poll_sleep = false;  // flags: sleep between polls (false: spin; measured faster)
  // Persistent kernels: the theta partials of 2^shift views of a voxel side by side
  // (IcdPersistentScratch::view_group_shift), in [0, 4]. 3 (8 views, 64 bytes) measured
  // fastest: 512^3 steps of 3 columns 15.8 us against 19.3 us with 0 on an H200 (2, 4 and 16
  // views: 16.8, 16.1 and 16.0 us; bench/NOTES.md).
  int partial_view_group_shift = 3;
  int v4_voxels_per_thread = 1;
  int v4_threads = 0;
  // kLaunchPerStep: steps per CUDA graph; 0: plain launches (two per step), for comparison.
  int groups_per_graph = 256;
  // Launches (kPersistent, kPersistentV4) or graphs queued at most.
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
