// Launch functions of the CUDA kernels of ICD (core/statistical/cuda/icd_cuda.h runs them).
// Plain structs and cudaError_t only: included by g++ host code and by nvcc. Each returns
// cudaGetLastError() taken right after its launch.
//
// Layouts (core/statistical/icd_problem.h): volume z fastest, voxel (ix, iy, iz) at
// (iy nx + ix) nz + iz; residual and weights (view, column, row), rows fastest.
//
// The step kernels take no per-step arguments: they read the step (one to four groups,
// core/statistical/update_schedule.h) from tasks[*cursor], and the update advances *cursor. Every launch of a run is therefore
// the same, which lets the runner record a chain of them once as a CUDA graph and replay it
// (a 512^3 iteration is about 10^6 groups, each two launches).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/statistical/qggmrf_math.h"
#include "core/statistical/separable_footprint_math.h"

namespace tomo::core::statistical::cuda {

// One group: slices first_slice, first_slice + stride, ... (size of them) of a column.
struct IcdGroupTask {
  int32_t column;  // iy nx + ix
  int32_t first_slice;
  int32_t stride;
  int32_t size;
};

// One step: the voxels of groups[0], then those of groups[1], ... (size 0 when absent).
constexpr int kIcdMaxGroupsPerStep = 4;
struct IcdStepTask {
  IcdGroupTask groups[kIcdMaxGroupsPerStep];
};

struct IcdDeviceProblem {
  float* volume = nullptr;
  float* residual = nullptr;        // e = A x - y
  const float* weights = nullptr;
  const SfViewT<float>* views = nullptr;
  int nx = 0, ny = 0, nz = 0;
  int num_views = 0, rows = 0, columns = 0;
  float voxel_x = 0, voxel_y = 0, voxel_z = 0;
  float x0 = 0, y0 = 0, z0 = 0;     // centre of voxel (0, 0, 0), mm
  QggmrfCoefficientsT<float> prior{};
  float neighbour_weights[26] = {};
};

// The launch shape of the step kernels, fixed for a run from the largest step:
// block (kx, ky) with kx = min(32, next power of two >= largest step) voxels by
// ky = 256 / kx views, grid (ceil(largest / kx), ceil(views / ky)).
struct IcdGroupShape {
  int kx = 1, ky = 256, grid_x = 1, grid_y = 1;
};
IcdGroupShape MakeIcdGroupShape(int largest_group, int num_views);

// Scratch of the group kernels, owned by the runner: partial sums of theta1 and theta2
// (2 * grid_y * grid_x * kx floats), the voxel changes (grid_x * kx floats), the block
// ticket (one unsigned, 0 at start) and the cursor (one unsigned: index of the group).
struct IcdGroupScratch {
  float* partial_theta = nullptr;
  float* delta = nullptr;
  unsigned* ticket = nullptr;
  unsigned* cursor = nullptr;
  const IcdStepTask* tasks = nullptr;
};

// theta1 = sum w a e and theta2 = sum w a^2 of every voxel of the step, summed over the
// views by the blocks; the last block to finish updates the voxels (SurrogateVoxelUpdate),
// writes the changes to scratch.delta and advances the cursor.
cudaError_t LaunchIcdGroupBackProjectAndUpdate(const IcdDeviceProblem& problem,
                                               const IcdGroupScratch& scratch,
                                               const IcdGroupShape& shape, cudaStream_t stream);
// e += a_j delta_j for the step just updated (tasks[*cursor - 1]); no atomics: the
// voxels of a step share no detector pixel, and each (voxel, view) is one thread.
cudaError_t LaunchIcdGroupForward(const IcdDeviceProblem& problem, const IcdGroupScratch& scratch,
                                  const IcdGroupShape& shape, cudaStream_t stream);

// The persistent path (icd_persistent_kernels.cu): one cooperative launch runs the steps
// [first_step, last_step) of tasks with grid-wide barriers between their phases, instead
// of two launches per step. Each block owns the views blockIdx.x, blockIdx.x + gridDim.x,
// ...; per step and owned view it computes the transaxial footprint of each of the step's
// columns once (shared memory) and visits the pixels of all the step's voxels. Phases:
//   A  theta partials of step s, per (view, voxel): theta_partial[view * slots + voxel];
//   B  voxel update, one warp per voxel: the partials summed over the views by the lanes,
//      the 26 neighbours' surrogate terms one per lane, the new value and its change;
//   C  e += a delta in each owned view for step s, then (same block, same view, no
//      barrier needed: a view's pixels are only touched by its owner) A for step s + 1.
// So a step costs two grid barriers; e is updated without atomics (a step's voxels share
// no pixel). Requires a device with cooperative launch and a grid of co-resident blocks.
//
// The partials of (view v, voxel j) lie at PartialIndex (icd_step_footprints.cuh): the
// views in groups of 2^view_group_shift, each group's partials voxel by voxel and, within
// a voxel, view by view. Shift 0 is [num_views][slots]: A's stores of a warp fill two lines,
// but B's warp, which reads one voxel's partials of all views, touches one 32-byte sector per
// view (391 in the literature case). Shift 3, the runner's default (IcdCudaTuning), puts 8
// views of a voxel in one 64-byte piece: B reads 49 pieces, and A's stores touch a sector per
// lane instead of sharing them, off the step's critical path.
struct IcdPersistentScratch {
  float2* theta_partial = nullptr;  // [RoundUp(num_views, 2^view_group_shift) * slots]
  float* delta = nullptr;           // [slots]
  const IcdStepTask* tasks = nullptr;
  int slots = 0;                    // >= the voxels of the largest step
  int view_group_shift = 0;         // in [0, kIcdMaxViewGroupShift] (icd_options.h)
};
// Blocks of a cooperative grid of `kernel` (either persistent kernel) with `threads` per
// block on the current device: min(num_views, co-resident blocks); 0 with
// cudaErrorNotSupported when the device has no cooperative launch.
cudaError_t IcdCooperativeGridBlocks(const void* kernel, int threads, int num_views,
                                     int* blocks);
// Threads per block for steps of at most largest_step voxels: 128, or 256 above 128.
int IcdPersistentThreads(int64_t largest_step);
// Blocks of the persistent grid on the current device: min(num_views, co-resident blocks);
// 0 with cudaErrorNotSupported when the device has no cooperative launch.
cudaError_t IcdPersistentGridBlocks(int num_views, int threads, int* blocks);
cudaError_t LaunchIcdPersistentSteps(const IcdDeviceProblem& problem,
                                     const IcdPersistentScratch& scratch, int threads, int blocks,
                                     int first_step, int last_step, cudaStream_t stream);

// Version 4 of the persistent path (icd_persistent_v4_kernels.cu; bench/NOTES.md "### v4"):
// the same phases and scratch, each thread's voxels in one round of loads, and the grid
// barriers optionally replaced by flags. Its own state (zeroed once at allocation, kept
// across launches and iterations):
struct IcdV4Sync {
  unsigned long long* change = nullptr;  // [slots]: (epoch << 32) | bits of the voxel's change
  unsigned* view_done = nullptr;         // [blocks]: epoch of the block's last back projection
};
struct IcdV4Launch {
  int first_step = 0, last_step = 0;
  unsigned epoch_base = 0;  // step s has epoch epoch_base + 1 + (s - first_step); the next
                            // launch's base is this one's + (last_step - first_step)
  int flags = 1;            // 1: flags between the phases; 0: cooperative grid barriers
  int prefetch = 1;         // 1: L2 prefetch of the next set's pixels
  int l1_prefetch = 0;      // 1: the blocks waiting for the update ask L1 for the next back
                            // projection's pixels
  int voxels_per_thread = 1;  // 1 (128 or 256 threads) or 2 (128, 256, 288 or 320 threads):
                              // the voxels whose pixels' loads a thread issues together
  int poll_sleep = 0;         // 1: a failed poll of a flag sleeps a few tens of ns (0: spins)
};
// Threads per block for steps of at most largest_step voxels: with one voxel per thread 128
// (steps up to 128 voxels) or 256; with two 128, 256, 288 (up to 576) or 320. Any of 128,
// 256, 288 and 320 may be asked for; others are refused (cudaErrorInvalidValue).
int IcdPersistentV4Threads(int64_t largest_step, int voxels_per_thread);
cudaError_t IcdPersistentV4GridBlocks(int num_views, int threads, int voxels_per_thread,
                                      int* blocks);
cudaError_t LaunchIcdPersistentV4Steps(const IcdDeviceProblem& problem,
                                       const IcdPersistentScratch& scratch, const IcdV4Sync& sync,
                                       const IcdV4Launch& launch, int threads, int blocks,
                                       cudaStream_t stream);

// e += A x for the whole volume (the start), with atomic adds: one thread per column and
// view.
cudaError_t LaunchIcdForwardVolume(const IcdDeviceProblem& problem, cudaStream_t stream);

// Per-block partial sums (double, kIcdCostBlocks each) of 1/2 sum w e^2, of sum e^2 and of
// the prior over the volume's neighbour pairs: partials[0 .. 3 * kIcdCostBlocks).
constexpr int kIcdCostBlocks = 512;
cudaError_t LaunchIcdCostTerms(const IcdDeviceProblem& problem, double* partials,
                               cudaStream_t stream);

}  // namespace tomo::core::statistical::cuda
