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
#include "core/statistical/icd_update_math.h"

namespace tomo::core::statistical::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kCachedColumns = 32;
static_assert(128 >= kIcdMaxGroupsPerStep * kCachedColumns,
              "one thread per (column slot, cached detector column) in blocks of 128 or 256");

struct StepFootprints {
  SfColumnT<float> column[kIcdMaxGroupsPerStep];
  float weight[kIcdMaxGroupsPerStep][kCachedColumns];
};

__device__ __forceinline__ int StepSize(const IcdStepTask& task) {
  int size = 0;
#pragma unroll
  for (int g = 0; g < kIcdMaxGroupsPerStep; ++g) size += task.groups[g].size;
  return size;
}

// Voxel k (< StepSize) of a step: its column slot and slice.
__device__ __forceinline__ void StepVoxel(const IcdStepTask& task, int k, int& slot, int& iz) {
  int g = 0;
  while (g < kIcdMaxGroupsPerStep - 1 && k >= task.groups[g].size) {
    k -= task.groups[g].size;
    ++g;
  }
  slot = g;
  iz = task.groups[g].first_slice + k * task.groups[g].stride;
}

// Read-only inputs (views, weights, tasks) through the non-coherent cache: they stay cached
// across the grid barriers. What other blocks write within a launch (volume, partials,
// changes) is read with __ldcg (L2), never through a possibly stale L1 line.
template <typename T>
__device__ __forceinline__ T LoadReadOnly(const T* from) {
  static_assert(sizeof(T) % sizeof(int) == 0, "whole words");
  T out;
  const int* words = reinterpret_cast<const int*>(from);
  int* to = reinterpret_cast<int*>(&out);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(T) / sizeof(int)); ++i) to[i] = __ldg(words + i);
  return out;
}

// Fills f for view v of the step (all threads take part; ends with a barrier).
__device__ void LoadFootprints(const IcdDeviceProblem& p, const IcdStepTask& task, int v,
                               StepFootprints& f) {
  const int t = threadIdx.x;
  if (t < kIcdMaxGroupsPerStep * kCachedColumns) {
    const int g = t / kCachedColumns, offset = t % kCachedColumns;
    if (task.groups[g].size > 0) {
      const int column = task.groups[g].column;
      const int ix = column % p.nx, iy = column / p.nx;
      const SfColumnT<float> col =
          MakeColumn<float>(LoadReadOnly(p.views + v), p.x0 + ix * p.voxel_x, p.y0 + iy * p.voxel_y,
                            p.voxel_x, p.voxel_y, p.columns);
      if (offset == 0) f.column[g] = col;
      const int c = col.first_column + offset;
      if (c <= col.last_column) f.weight[g][offset] = ColumnWeight(col, c);
    }
  }
  __syncthreads();
}

// Calls visit(index into residual/weights, a_ij) for each pixel of voxel (slot, iz) in view v.
template <typename Visit>
__device__ __forceinline__ void VisitVoxel(const IcdDeviceProblem& p, const StepFootprints& f,
                                           int v, int slot, int iz, Visit&& visit) {
  const SfColumnT<float>& col = f.column[slot];
  if (col.first_column > col.last_column) return;
  const SfAxialT<float> ax = MakeAxial<float>(col, p.z0 + iz * p.voxel_z, p.voxel_z, p.rows);
  if (ax.first_row > ax.last_row) return;
  for (int c = col.first_column; c <= col.last_column; ++c) {
    const int offset = c - col.first_column;
    const float column_weight =
        offset < kCachedColumns ? f.weight[slot][offset] : ColumnWeight(col, c);
    const float column_part = ax.amplitude * column_weight;
    const int64_t base = (static_cast<int64_t>(v) * p.columns + c) * p.rows;
    for (int r = ax.first_row; r <= ax.last_row; ++r) {
      visit(base + r, column_part * RowWeight(ax, r));
    }
  }
}

// Phase A for one view: theta partials of every voxel of the step.
// f: the step's footprints in view v (LoadFootprints).
__device__ void BackProjectView(const IcdDeviceProblem& p, const IcdPersistentScratch& s,
                                const IcdStepTask& task, int size, int v,
                                const StepFootprints& f) {
  float2* out = s.theta_partial + static_cast<int64_t>(v) * s.slots;
  for (int j = threadIdx.x; j < size; j += blockDim.x) {
    int slot, iz;
    StepVoxel(task, j, slot, iz);
    float t1 = 0, t2 = 0;
    VisitVoxel(p, f, v, slot, iz, [&](int64_t i, float a) {
      const float wa = __ldg(p.weights + i) * a;
      t1 += wa * p.residual[i];
      t2 += wa * a;
    });
    out[j] = make_float2(t1, t2);
  }
  __syncthreads();  // f may be rewritten next
}

// Phase C for one view: e += a delta for every voxel of the step.
__device__ void ForwardView(const IcdDeviceProblem& p, const IcdPersistentScratch& s,
                            const IcdStepTask& task, int size, int v, const StepFootprints& f) {
  for (int j = threadIdx.x; j < size; j += blockDim.x) {
    const float delta = __ldcg(&s.delta[j]);
    if (delta == 0.0f) continue;
    int slot, iz;
    StepVoxel(task, j, slot, iz);
    VisitVoxel(p, f, v, slot, iz, [&](int64_t i, float a) { p.residual[i] += a * delta; });
  }
  __syncthreads();  // the next phase reads what other threads of the block wrote
}

__device__ __forceinline__ float WarpSum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// Phase B: one warp per voxel of the step.
__device__ void UpdateVoxels(const IcdDeviceProblem& p, const IcdPersistentScratch& s,
                             const IcdStepTask& task, int size) {
  const int lane = threadIdx.x % 32;
  const int warps_per_block = blockDim.x / 32;
  const int warp = blockIdx.x * warps_per_block + threadIdx.x / 32;
  const int warps = gridDim.x * warps_per_block;
  for (int j = warp; j < size; j += warps) {
    // The voxel's and its neighbours' values first (independent of the partial sums, so
    // that both sets of loads are in flight together).
    int slot, iz;
    StepVoxel(task, j, slot, iz);
    const int column = task.groups[slot].column;
    const int ix = column % p.nx, iy = column / p.nx;
    float* voxel = p.volume + static_cast<int64_t>(column) * p.nz + iz;
    const float x = __ldcg(voxel);
    float other = 0, b = 0;
    if (lane < 26) {
      const int raster = lane < 13 ? lane : lane + 1;
      const int dz = raster / 9 - 1, dy = (raster / 3) % 3 - 1, dx = raster % 3 - 1;
      const int jx = ix + dx, jy = iy + dy, jz = iz + dz;
      if (jx >= 0 && jx < p.nx && jy >= 0 && jy < p.ny && jz >= 0 && jz < p.nz) {
        b = p.neighbour_weights[lane];
        if (b != 0.0f) {
          other = __ldcg(&p.volume[(static_cast<int64_t>(jy) * p.nx + jx) * p.nz + jz]);
        }
      }
    }
    float t1 = 0, t2 = 0;
#pragma unroll 4
    for (int v = lane; v < p.num_views; v += 32) {
      const float2 partial = __ldcg(&s.theta_partial[static_cast<int64_t>(v) * s.slots + j]);
      t1 += partial.x;
      t2 += partial.y;
    }
    const float theta1 = WarpSum(t1), theta2 = WarpSum(t2);
    float numerator = 0, denominator = 0;
    if (b != 0.0f) {
      const float curvature = SurrogateNeighbourCurvature<float>(x, other, b, p.prior);
      numerator = curvature * other;
      denominator = curvature;
    }
    numerator = WarpSum(numerator);
    denominator = WarpSum(denominator);
    if (lane == 0) {
      const float r = SurrogateSolve<float>(x, theta1, theta2, numerator, denominator);
      *voxel = r;
      s.delta[j] = r - x;
    }
  }
}

// Footprints are double-buffered: with one view per block (the usual case) the next
// step's are computed after the block's part of the update, while other blocks still
// work towards the barrier, so that neither C nor A waits for them.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    PersistentSteps(IcdDeviceProblem p, IcdPersistentScratch s, int first_step, int last_step) {
  __shared__ StepFootprints footprints[2];
  cg::grid_group grid = cg::this_grid();
  const bool one_view = gridDim.x >= p.num_views;  // block b owns view b only
  IcdStepTask task = LoadReadOnly(s.tasks + first_step);
  int size = StepSize(task);
  int buffer = 0;
  for (int v = blockIdx.x; v < p.num_views; v += gridDim.x) {
    LoadFootprints(p, task, v, footprints[buffer]);
    BackProjectView(p, s, task, size, v, footprints[buffer]);
  }
  grid.sync();
  for (int step = first_step; step < last_step; ++step) {
    // The next step's task is fetched before the barriers (tasks are read-only).
    const bool more = step + 1 < last_step;
    const IcdStepTask next = more ? LoadReadOnly(s.tasks + step + 1) : task;
    const int next_size = StepSize(next);
    UpdateVoxels(p, s, task, size);
    if (one_view && more) LoadFootprints(p, next, blockIdx.x, footprints[buffer ^ 1]);
    grid.sync();
    for (int v = blockIdx.x; v < p.num_views; v += gridDim.x) {
      if (!one_view) LoadFootprints(p, task, v, footprints[buffer]);
      ForwardView(p, s, task, size, v, footprints[buffer]);
      if (more) {
        if (!one_view) LoadFootprints(p, next, v, footprints[buffer ^ 1]);
        BackProjectView(p, s, next, next_size, v, footprints[buffer ^ 1]);
      }
    }
    if (more) grid.sync();
    task = next;
    size = next_size;
    buffer ^= 1;
  }
}

}  // namespace

int IcdPersistentThreads(int64_t largest_step) { return largest_step > 128 ? 256 : 128; }

cudaError_t IcdPersistentGridBlocks(int num_views, int threads, int* blocks) {
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
  error = threads == 256
              ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, PersistentSteps<256>, 256, 0)
              : cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, PersistentSteps<128>, 128, 0);
  if (error != cudaSuccess) return error;
  const int resident = per_sm * sms;
  *blocks = resident < num_views ? resident : num_views;
  return *blocks > 0 ? cudaSuccess : cudaErrorNotSupported;
}

cudaError_t LaunchIcdPersistentSteps(const IcdDeviceProblem& problem,
                                     const IcdPersistentScratch& scratch, int threads, int blocks,
                                     int first_step, int last_step, cudaStream_t stream) {
  IcdDeviceProblem p = problem;
  IcdPersistentScratch s = scratch;
  void* args[] = {&p, &s, &first_step, &last_step};
  const void* kernel = threads == 256 ? reinterpret_cast<const void*>(PersistentSteps<256>)
                                      : reinterpret_cast<const void*>(PersistentSteps<128>);
  const cudaError_t error =
      cudaLaunchCooperativeKernel(kernel, dim3(blocks), dim3(threads), args, 0, stream);
  if (error != cudaSuccess) return error;
  return cudaGetLastError();
}

}  // namespace tomo::core::statistical::cuda
