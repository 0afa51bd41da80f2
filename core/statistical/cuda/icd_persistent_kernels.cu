// The persistent multi-voxel update of ICD (core/statistical/cuda/icd_kernels.h describes
// the phases): one cooperative launch runs many steps, the grid waiting at two barriers per
// step instead of the host launching two kernels per step, whose fixed latency (launch,
// task fetch, the last block's serial update) bounded the per-step path.
//
// Per step and view the block first puts each of the step's columns' transaxial footprint
// and its detector-column weights in shared memory: thread t < 128 belongs to column slot
// t / 32 and computes the weight of the footprint's detector column t % 32 (wider
// footprints compute the rest on the fly), so the trapezoid is evaluated once per (column,
// view) and shared by every slice of the groups. Then thread j walks voxel j's pixels
// (detector columns outer, rows inner): consecutive threads are consecutive voxels of a
// group, a few rows apart in the same detector column of the (view, column, row) residual.
#include <cooperative_groups.h>

#include "core/statistical/cuda/icd_kernels.h"
#include "core/statistical/cuda/icd_step_footprints.cuh"
#include "core/statistical/icd_update_math.h"

namespace tomo::core::statistical::cuda {
namespace {

namespace cg = cooperative_groups;
using namespace icd_device;  // NOLINT: the helpers of both persistent kernels

// Phase A for one view: theta partials of every voxel of the step.
// f: the step's footprints in view v (LoadFootprints).
__device__ void BackProjectView(const IcdDeviceProblem& p, const IcdPersistentScratch& s,
                                const IcdStepTask& task, int size, int v,
                                const StepFootprints& f) {
  const int64_t view_offset = static_cast<int64_t>(v) * p.columns * p.rows;
  const float* weights = p.weights + view_offset;
  const float* residual = p.residual + view_offset;
  for (int j = threadIdx.x; j < size; j += blockDim.x) {
    int slot, iz;
    StepVoxel(task, j, slot, iz);
    const VoxelPixels x = MakeVoxelPixels(p, f.column[slot], iz);
    float t1 = 0, t2 = 0;
    AddVoxelThetas(p, f, slot, x, weights, residual, t1, t2);
    s.theta_partial[PartialIndex(s, v, j)] = make_float2(t1, t2);
  }
  __syncthreads();  // f may be rewritten next
}

// Phase C for one view: e += a delta for every voxel of the step.
__device__ void ForwardView(const IcdDeviceProblem& p, const IcdPersistentScratch& s,
                            const IcdStepTask& task, int size, int v, const StepFootprints& f) {
  float* residual = p.residual + static_cast<int64_t>(v) * p.columns * p.rows;
  for (int j = threadIdx.x; j < size; j += blockDim.x) {
    // The change and the first batch of e are loaded together (a voxel whose value did not
    // change writes nothing).
    const float delta = __ldcg(&s.delta[j]);
    int slot, iz;
    StepVoxel(task, j, slot, iz);
    const VoxelPixels x = MakeVoxelPixels(p, f.column[slot], iz);
    for (int first = 0; first < x.count; first += kBatch) {
      int index[kBatch];
      float a[kBatch], e[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (first + k < x.count) {
          PixelOf(p, f, slot, x, first + k, index[k], a[k]);
          e[k] = residual[index[k]];
        }
      }
      if (delta == 0.0f) break;
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (first + k < x.count) residual[index[k]] = e[k] + a[k] * delta;
      }
    }
  }
  __syncthreads();  // the next phase reads what other threads of the block wrote
}

// Phase B: one warp per voxel of the step.
__device__ void UpdateVoxels(const IcdDeviceProblem& p, const IcdPersistentScratch& s,
                             const IcdStepTask& task, int size) {
  const int lane = threadIdx.x % 32;
  const int warps_per_block = blockDim.x / 32;
  const int warp = blockIdx.x * warps_per_block + threadIdx.x / 32;
  const int warps = gridDim.x * warps_per_block;
  for (int j = warp; j < size; j += warps) {
    float x = 0, r = 0;
    float* voxel = SolveStepVoxel<8>(p, s, task, j, lane, x, r);
    if (lane == 0) {
      *voxel = r;
      s.delta[j] = r - x;
    }
  }
}

// Footprints are double-buffered: with one view per block (the usual case) the next
// step's are computed after the block's part of the update, while other blocks still
// work towards the barrier, so that neither C nor A waits for them.
// At least 768 threads per SM resident (H100: 132 SMs x 6 or 3 blocks, more than the 391
// views of the literature case, so that each block owns one view).
template <int kThreads>
__global__ void __launch_bounds__(kThreads, 768 / kThreads)
    PersistentSteps(IcdDeviceProblem p, IcdPersistentScratch s, int first_step, int last_step) {
  __shared__ StepFootprints footprints[2];
  // The current and the next step's task, in shared memory (not registers: the groups are
  // indexed by voxel).
  __shared__ IcdStepTask step_tasks[2];
  constexpr int kTaskWords = sizeof(IcdStepTask) / sizeof(int);
  static_assert(kTaskWords <= 128, "a task is loaded by one thread per word");
  auto load_task = [&](int step, IcdStepTask& to) {
    if (threadIdx.x < kTaskWords) {
      reinterpret_cast<int*>(&to)[threadIdx.x] =
          __ldg(reinterpret_cast<const int*>(s.tasks + step) + threadIdx.x);
    }
    __syncthreads();
  };
  cg::grid_group grid = cg::this_grid();
  const bool one_view = gridDim.x >= p.num_views;  // block b owns view b only
  int current = 0;  // index into step_tasks and footprints
  load_task(first_step, step_tasks[current]);
  for (int v = blockIdx.x; v < p.num_views; v += gridDim.x) {
    LoadFootprints(p, step_tasks[current], v, footprints[current]);
    BackProjectView(p, s, step_tasks[current], StepSize(step_tasks[current]), v,
                    footprints[current]);
  }
  grid.sync();
  for (int step = first_step; step < last_step; ++step) {
    const IcdStepTask& task = step_tasks[current];
    const IcdStepTask& next = step_tasks[current ^ 1];
    const int size = StepSize(task);
    // The next step's task: its load is issued before the update and lands in shared
    // memory after it (tasks are read-only).
    const bool more = step + 1 < last_step;
    int next_word = 0;
    if (more && threadIdx.x < kTaskWords) {
      next_word = __ldg(reinterpret_cast<const int*>(s.tasks + step + 1) + threadIdx.x);
    }
    UpdateVoxels(p, s, task, size);
    if (more) {
      if (threadIdx.x < kTaskWords) {
        reinterpret_cast<int*>(&step_tasks[current ^ 1])[threadIdx.x] = next_word;
      }
      __syncthreads();
    }
    if (one_view && more) LoadFootprints(p, next, blockIdx.x, footprints[current ^ 1]);
    grid.sync();
    for (int v = blockIdx.x; v < p.num_views; v += gridDim.x) {
      if (!one_view) LoadFootprints(p, task, v, footprints[current]);
      ForwardView(p, s, task, size, v, footprints[current]);
      if (more) {
        if (!one_view) LoadFootprints(p, next, v, footprints[current ^ 1]);
        BackProjectView(p, s, next, StepSize(next), v, footprints[current ^ 1]);
      }
    }
    if (more) grid.sync();
    current ^= 1;
  }
}

// The kernel of 256 threads per block, else the one of 128.
const void* PersistentStepsFor(int threads) {
  return threads == 256 ? reinterpret_cast<const void*>(PersistentSteps<256>)
                        : reinterpret_cast<const void*>(PersistentSteps<128>);
}

}  // namespace

int IcdPersistentThreads(int64_t largest_step) { return largest_step > 128 ? 256 : 128; }

cudaError_t IcdCooperativeGridBlocks(const void* kernel, int threads, int num_views,
                                     int* blocks) {
  *blocks = 0;
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  int cooperative = 0, sms = 0, per_sm = 0;
  error = cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device);
  if (error != cudaSuccess) return error;
  if (cooperative == 0) return cudaErrorNotSupported;
  error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (error != cudaSuccess) return error;
  error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0);
  if (error != cudaSuccess) return error;
  const int resident = per_sm * sms;
  *blocks = resident < num_views ? resident : num_views;
  return *blocks > 0 ? cudaSuccess : cudaErrorNotSupported;
}

cudaError_t IcdPersistentGridBlocks(int num_views, int threads, int* blocks) {
  return IcdCooperativeGridBlocks(PersistentStepsFor(threads), threads, num_views, blocks);
}

cudaError_t LaunchIcdPersistentSteps(const IcdDeviceProblem& problem,
                                     const IcdPersistentScratch& scratch, int threads, int blocks,
                                     int first_step, int last_step, cudaStream_t stream) {
  IcdDeviceProblem p = problem;
  IcdPersistentScratch s = scratch;
  void* args[] = {&p, &s, &first_step, &last_step};
  const cudaError_t error = cudaLaunchCooperativeKernel(
      PersistentStepsFor(threads), dim3(blocks), dim3(threads), args, 0, stream);
  if (error != cudaSuccess) return error;
  return cudaGetLastError();
}

}  // namespace tomo::core::statistical::cuda
