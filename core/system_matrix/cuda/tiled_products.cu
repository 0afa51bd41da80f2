// The products of one orbit block on the tiled layout (tiled_runs.h), in tasks of at most
// kTiledTaskSteps steps of one warp (tiled_tasks.h), x and the accumulators in shared
// memory, the matrix streamed in coalesced lines. Three kernels per block:
//
// TiledForwardKernel: a thread block takes up to kTiledForwardTasks consecutive tasks of
// one orbit of tiles, one per warp (block (part, orbit) of the launch). It loads x over the
// orbit's (up to) eight tiles into eight planes of shared memory, each in the
// representative tile T0's frame (plane p holds x at M_p(p0) in p0's place); then each lane
// reads its task's slots (weight, place in T0) in one batch and, for every plane p, adds
// w xs[p][place]: 8 shared-memory loads and FMAs per stored entry, at offsets fixed at
// compile time for the common tile sides. The sums stay in plane order: a lane of a warp of
// tile M_g(T0) adds them, for each of its (one or two) rays c, into
// sums at SumsPlaneIndex(g, c, p) (two 4-float global atomicAdds). Plane p of a warp of map
// g is view k of the block for p = M_k M_g (kTiledCompose).
//
// TiledCombineKernel: per ray c and view k, the sum over the maps g of the plane that is
// view k (products: A x into its place; ART: the residual, and z = step_scale r / ||a||^2),
// the sums cleared for the next block; z, for the transpose, written the same way round:
// z_maps[(g * columns + c) * 8 + p] = z_k for p = M_k M_g (0 for planes that are no view of
// the block); the largest |z| of the block by an integer atomicMax (fixed point, below).
//
// TiledBackKernel: one thread block per orbit of tiles (it owns the orbit's pixels; the
// largest orbits first), its warps taking the orbit's tasks in turn: a lane reads z in plane
// order for its rays (two 4-float loads each) and its task's slots, and adds w z_p at place
// of plane p (int32 fixed point, or float); then each distinct tile of the orbit is written
// once (x = x + the planes whose tile it is, clamped when asked): one owner per pixel, no
// global atomics.
//
// TiledSweepKernel (kTiledSweep): a whole ART sweep of the three as one cooperative launch,
// each thread block owning orbits of tiles for the whole sweep (tiled_sweep_owners.h); see
// its comment below.
#include <cooperative_groups.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "core/system_matrix/cuda/stored_matrix_kernels.h"
#include "core/system_matrix/cuda/tiled_back_threads.h"

namespace tomo::core::system_matrix::cuda {
namespace {

constexpr int kForwardThreads = 32 * kTiledForwardTasks;
constexpr int kTiledMaxBackThreads = 1024;
constexpr int kCombineThreads = 256;
// The one-launch sweep: 768 threads per multiprocessor, up to 80 registers each (no spills;
// at 1024 threads and 64 registers the kernel spilled and its sweeps were 3% (512^2) to 8%
// (1024^2) slower on an H200), as one thread block or two of half the threads
// (TiledSweepThreadBlocks).
constexpr int kSweepThreads = 768;

// The tile sides the kernels are compiled for (TiledRuns::TileSideFor's choices), as floats
// per plane (side x (side + 1)); any other side runs the kPlane = 0 instances.
constexpr int kPlane16 = 16 * 17;
constexpr int kPlane32 = 32 * 33;

// The square maps and their products, indexed by values known only at run time: in constant
// memory (as kernel arguments indexed so they would be copied to the stack).
__constant__ SquareMapTable kTiledMaps;
__constant__ ComposeTable kTiledCompose;

// Programmatic dependent launch (sm_90): wait for the previous kernel in the stream to
// finish and its writes to be visible, then let the next kernel's thread blocks start (they
// run their own prologue until their wait). No-ops for a kernel launched without the
// attribute.
__device__ __forceinline__ void WaitForPreviousKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void LetNextKernelStart() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Where the products read the slots: the layout in device memory (shift 0), or the sweep's
// copy of a block's slots in shared memory, where slot s of the orbit is at s + shift.
struct SlotSource {
  const uint16_t* local;
  const float* weights;
  int64_t shift;
};

// The task's slots (place in the tile, weight), all loads issued before any is used; slots
// at or past `steps` (counted from the task's first) read as weight 0 at place 0. kShared:
// local and weight point into shared memory (plain loads; else read-only cached loads).
template <bool kShared>
__device__ __forceinline__ void LoadTaskSlots(const uint16_t* __restrict__ local,
                                              const float* __restrict__ weight, int steps,
                                              int (&place)[kTiledTaskSteps],
                                              float (&wt)[kTiledTaskSteps]) {
#pragma unroll
  for (int j = 0; j < kTiledTaskSteps; ++j) {
    const bool in = j < steps;
    if (kShared) {
      place[j] = in ? local[32 * j] : 0;
      wt[j] = in ? weight[32 * j] : 0.0f;
    } else {
      place[j] = in ? __ldg(local + 32 * j) : 0;
      wt[j] = in ? __ldg(weight + 32 * j) : 0.0f;
    }
  }
}

// Brings the slots of layout warps [first, end) (contiguous: an orbit's warps follow each
// other) from device memory into L2 with two bulk prefetches, one thread's work.
__device__ __forceinline__ void PrefetchWarpSlots(const TiledDeviceArrays& d, int64_t first,
                                                  int64_t end) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (first == end) return;
  const TiledWarp last = d.warps[end - 1];
  const int64_t begin = d.warps[first].slot_base;
  const int64_t slots = SlotSpan(d.warps[first], last);
  // Slot bases are multiples of 32: 128-byte (weights) and 64-byte (places) aligned.
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(d.weights + begin),
               "r"(static_cast<uint32_t>(4 * slots))
               : "memory");
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(d.local + begin),
               "r"(static_cast<uint32_t>(2 * slots))
               : "memory");
#endif
}

// Bulk copies from device memory into shared memory (sm_90), counted by a thread block's
// transaction barrier: one thread arms the barrier with the bytes it is about to copy, and
// the barrier's phase completes when they have all landed. The sweep runs these only on
// devices of compute capability 9.0 and above (FitTiledSweep); elsewhere they do nothing.
__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// One thread: the barrier for one arming thread, made visible to the copies' proxy.
__device__ __forceinline__ void InitCopyBarrier(uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(SharedAddress(barrier)) : "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
// The arming thread, before its copies: the phase ends once `bytes` have landed. The fence
// orders the thread block's earlier reads of the destination (made visible to this thread
// by a barrier) before the copies' writes.
__device__ __forceinline__ void ExpectCopyBytes(uint64_t* barrier, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SharedAddress(barrier)),
      "r"(bytes)
      : "memory");
#endif
}
// bytes: a multiple of 16, from and to 16-byte aligned.
__device__ __forceinline__ void CopyToShared(void* to, const void* from, uint32_t bytes,
                                             uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(SharedAddress(to)),
      "l"(from), "r"(bytes), "r"(SharedAddress(barrier))
      : "memory");
#endif
}
// Every thread that reads the copies: until the barrier's phase `parity` (0, 1, 0, ...) ends.
__device__ __forceinline__ void WaitForCopies(uint64_t* barrier, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
        "selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(SharedAddress(barrier)), "r"(parity)
        : "memory");
  } while (done == 0);
#endif
}

// Pixel r (row-major in the tile's own rows) of the orbit's tile M_h(T0), whose rows are sx0
// long when M_h keeps the axes and sy0 long when it swaps them: its column and row there.
struct TilePixel {
  __device__ TilePixel(int r, int sx0, int sy0)
      : y_keep(r / sx0), x_keep(r - y_keep * sx0), y_swap(r / sy0), x_swap(r - y_swap * sy0) {}
  __device__ int x(int h) const { return kTiledMaps.m[h][0] == 0 ? x_swap : x_keep; }
  __device__ int y(int h) const { return kTiledMaps.m[h][0] == 0 ? y_swap : y_keep; }
  int y_keep, x_keep, y_swap, x_swap;
};

// The shared-memory bytes of one thread block: 8 planes of tile_side x stride floats.
size_t TiledSharedBytes(const TiledDeviceArrays& d) {
  return sizeof(float) * 8 * static_cast<size_t>(d.tile_side) * static_cast<size_t>(d.stride);
}

// Floats per plane: kPlane when the layout's tile side is one the kernels are compiled for
// (the shared-memory offsets of the 8 planes are then constants in the instructions), else
// the layout's.
template <int kPlane>
__device__ __forceinline__ int PlaneFloats(const TiledDeviceArrays& d) {
  return kPlane > 0 ? kPlane : d.tile_side * d.stride;
}

// The per-map buffers (TiledMapBufferFloats) by (map g, ray c, plane p), each (g, c) as two
// 4-float halves, planes 0-3 and 4-7, `half` floats apart:
// - z_maps: the 8 planes of (g, c) side by side, (g * columns + c) * 8, half 4, so that a
//   lane's two loads of the transpose fall in one 32-byte sector.
// - sums: the rays in groups of 8, each group in two 128-byte lines, planes 0-3 of its 8
//   rays in the first and planes 4-7 in the second, half 32. A warp's rays are adjacent, so
//   each of its 4-float atomics touches half the lines that 8 planes side by side would: the
//   forward's atomics cost by the lines they touch, not by the lanes (bench/NOTES.md).
constexpr int kZHalf = 4, kSumsHalf = 32;
__device__ __forceinline__ int64_t MapRayIndex(const TiledDeviceArrays& d, int g, uint32_t c) {
  return (static_cast<int64_t>(g) * d.columns + c) * 8;
}
__device__ __forceinline__ int64_t SumsRayIndex(const TiledDeviceArrays& d, int g, uint32_t c) {
  const int64_t group_columns = TiledGroupedColumns(d.columns);
  return (g * group_columns + (c & ~7u)) * 8 + (c & 7u) * 4;
}
__device__ __forceinline__ int64_t SumsPlaneIndex(const TiledDeviceArrays& d, int g, uint32_t c,
                                                  int p) {
  return SumsRayIndex(d, g, c) + (p / 4) * kSumsHalf + p % 4;
}
// v's 8 planes added into the sums of (g, c) at `at` (SumsRayIndex).
__device__ __forceinline__ void AddRaySums(float* sums, int64_t at, const float (&v)[8]) {
  atomicAdd(reinterpret_cast<float4*>(sums + at), make_float4(v[0], v[1], v[2], v[3]));
  atomicAdd(reinterpret_cast<float4*>(sums + at + kSumsHalf), make_float4(v[4], v[5], v[6], v[7]));
}
// The 8 planes of one (g, c) at `at`, halves `half` floats apart, set to 0.
__device__ __forceinline__ void ClearRayPlanes(float* buffer, int64_t at, int half) {
  *reinterpret_cast<float4*>(buffer + at) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  *reinterpret_cast<float4*>(buffer + at + half) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// What a lane takes of task t (of the orbit whose first warp is first_warp): its warp's map
// and steps, the task's first step, the lane's rays and switch step, and its slots.
struct LaneTask {
  int map, steps, first_step;
  uint32_t rays;  // first | second << 16
  int change;     // the step at which the lane moves to its second ray
  int place[kTiledTaskSteps];
  float wt[kTiledTaskSteps];
};
// The lane's task from what its warp and lane hold (header, rays, change) and the task's
// chunk: the fields, then the slots (from `slots`; kShared as LoadTaskSlots).
template <bool kShared>
__device__ __forceinline__ void FillLaneTask(const SlotSource& slots, const TiledWarp& header,
                                             int chunk, uint32_t rays, int change, int lane,
                                             LaneTask& out) {
  out.map = header.map;
  out.steps = header.steps;
  out.first_step = kTiledTaskSteps * chunk;
  out.rays = rays;
  out.change = change;
  const int64_t slot =
      header.slot_base + slots.shift + 32 * static_cast<int64_t>(out.first_step) + lane;
  LoadTaskSlots<kShared>(slots.local + slot, slots.weights + slot, out.steps - out.first_step,
                         out.place, out.wt);
}
__device__ __forceinline__ void LoadLaneTask(const TiledDeviceArrays& d, int64_t t,
                                             int64_t first_warp, int lane, LaneTask& out) {
  const TiledTask task = d.tasks[t];
  const int64_t warp = first_warp + task.warp_offset;
  FillLaneTask<false>({d.local, d.weights, 0}, d.warps[warp], task.chunk,
                      d.lane_rays[warp * 32 + lane], d.lane_switch[warp * 32 + lane], lane, out);
}

// x over the orbit's (up to) eight tiles into its eight planes of xs, each in T0's frame:
// pixel r of each tile (in the tile's own rows, which are sx0 or sy0 long) into its place
// there; the 8 tiles' loads of one thread in flight together. Threads [thread, + threads)
// of the caller's block share the work. Plain loads: in the sweep, x is written by this
// kernel.
template <int kPlane>
__device__ __forceinline__ void LoadOrbitPlanes(const TiledDeviceArrays& d, const TileOrbit& orbit,
                                                const float* x, float* xs, int thread,
                                                int threads) {
  const int plane = PlaneFloats<kPlane>(d);
  const int sx0 = orbit.size_x, sy0 = orbit.size_y, area = sx0 * sy0;
  for (int r = thread; r < area; r += threads) {
    const TilePixel pixel(r, sx0, sy0);
#pragma unroll
    for (int h = 0; h < 8; ++h) {
      const int lx = pixel.x(h), ly = pixel.y(h);
      int lx0, ly0;
      TileLocalToRepresentative(kTiledMaps.m[h][0], kTiledMaps.m[h][1], kTiledMaps.m[h][2],
                                kTiledMaps.m[h][3], sx0, sy0, lx, ly, &lx0, &ly0);
      xs[h * plane + ly0 * d.stride + lx0] =
          x[static_cast<int64_t>(orbit.corner_y[h] + ly) * d.n + orbit.corner_x[h] + lx];
    }
  }
}

// Brings x over the orbit's distinct tiles into L2, to be kept there before other lines,
// ahead of the write-back's reads: each tile row's first and last float (one line, or the
// two it spans), threads [thread, + threads) sharing the rows.
__device__ __forceinline__ void PrefetchOrbitX(const TiledDeviceArrays& d, const TileOrbit& orbit,
                                               const float* x, int thread, int threads) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int rows = max(orbit.size_x, orbit.size_y);
  for (int item = thread; item < 8 * rows; item += threads) {
    const int h = item / rows, y = item - h * rows;
    // Tile M_h(T0)'s rows are size_x long when M_h keeps the axes (TilePixel).
    const bool keep = kTiledMaps.m[h][0] != 0;
    const int width = keep ? orbit.size_x : orbit.size_y,
              height = keep ? orbit.size_y : orbit.size_x;
    if (!((orbit.distinct >> h) & 1) || y >= height) continue;
    const float* row = x + static_cast<int64_t>(orbit.corner_y[h] + y) * d.n + orbit.corner_x[h];
    asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(row));
    asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(row + width - 1));
  }
#endif
}

// A task's worth of one lane's forward: steps first_step + j of the warp (up to its `steps`),
// each slot's weight times x at its place in the 8 planes, into the sums of the lane's first
// ray (steps before `change`) and of its second.
template <int kPlane>
__device__ __forceinline__ void AddForwardSteps(const TiledDeviceArrays& d, const float* xs,
                                                const int (&place)[kTiledTaskSteps],
                                                const float (&wt)[kTiledTaskSteps], int first_step,
                                                int steps, int change, float (&first)[8],
                                                float (&second)[8]) {
  const int plane = PlaneFloats<kPlane>(d);
#pragma unroll
  for (int j = 0; j < kTiledTaskSteps; ++j) {
    if (first_step + j >= steps) break;  // past the warp's last step (BackTask)
    const float w1 = first_step + j < change ? wt[j] : 0.0f, w2 = wt[j] - w1;
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      const float xv = xs[p * plane + place[j]];
      first[p] = fmaf(w1, xv, first[p]);
      second[p] = fmaf(w2, xv, second[p]);
    }
  }
}

// One lane's share of a task's forward: the sums of its first ray (steps before `change`)
// and of its second, plane by plane (no branch and no store in the loop), added into sums
// by map (two 4-float global atomics per ray).
template <int kPlane>
__device__ __forceinline__ void ForwardTask(const TiledDeviceArrays& d, const float* xs,
                                            const LaneTask& task, float* sums) {
  float first[8] = {0, 0, 0, 0, 0, 0, 0, 0}, second[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  AddForwardSteps<kPlane>(d, xs, task.place, task.wt, task.first_step, task.steps, task.change,
                          first, second);
  const auto add = [&](uint32_t c, const float(&v)[8]) {
    if (c != kTiledNoRay) AddRaySums(sums, SumsRayIndex(d, task.map, c), v);
  };
  if (task.first_step < task.change) add(task.rays & 0xffffu, first);
  if (task.first_step + kTiledTaskSteps > task.change && task.change < task.steps) {
    add(task.rays >> 16, second);
  }
}

// ForwardTask for all the steps of one warp of the layout, a task's worth of slots at a
// time, its sums added once at the end: the sweep's global atomics, which bound its forward,
// once per warp and ray instead of once per task and ray.
// header, rays, change: the layout warp's and the lane's (the sweep's staged copies); the
// slots from `slots` (kShared as LoadTaskSlots).
template <int kPlane, bool kShared>
__device__ __forceinline__ void ForwardWarp(const TiledDeviceArrays& d, const float* xs,
                                            const SlotSource& slots, const TiledWarp& header,
                                            uint32_t rays, int change, int lane, float* sums) {
  float first[8] = {0, 0, 0, 0, 0, 0, 0, 0}, second[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int first_step = 0; first_step < header.steps; first_step += kTiledTaskSteps) {
    int place[kTiledTaskSteps];
    float wt[kTiledTaskSteps];
    const int64_t slot =
        header.slot_base + slots.shift + 32 * static_cast<int64_t>(first_step) + lane;
    LoadTaskSlots<kShared>(slots.local + slot, slots.weights + slot, header.steps - first_step,
                           place, wt);
    AddForwardSteps<kPlane>(d, xs, place, wt, first_step, header.steps, change, first, second);
  }
  const auto add = [&](uint32_t c, const float(&v)[8]) {
    if (c != kTiledNoRay) AddRaySums(sums, SumsRayIndex(d, header.map, c), v);
  };
  if (change > 0) add(rays & 0xffffu, first);
  if (change < header.steps) add(rays >> 16, second);
}

template <int kPlane>
__global__ void __launch_bounds__(kForwardThreads, 4)
    TiledForwardKernel(TiledDeviceArrays d, int32_t stored_view, const float* __restrict__ x,
                       float* __restrict__ sums) {
  extern __shared__ float xs[];
  // Block (part, orbit): the orbit's tasks [part * kTiledForwardTasks, + kTiledForwardTasks).
  const int64_t at = static_cast<int64_t>(stored_view) * d.orbits_per_view + blockIdx.y;
  const int64_t first_task = d.orbit_task_begin[at] + int64_t{blockIdx.x} * kTiledForwardTasks;
  const int64_t tasks = min(d.orbit_task_begin[at + 1] - first_task, int64_t{kTiledForwardTasks});
  if (tasks <= 0) {  // past the orbit's tasks: let the next kernel start, and leave
    LetNextKernelStart();
    return;
  }
  const int64_t first_warp = d.orbit_warp_begin[at];
  // x is the previous kernel's (the transpose of the previous block).
  WaitForPreviousKernel();
  LetNextKernelStart();
  LoadOrbitPlanes<kPlane>(d, d.orbits[blockIdx.y], x, xs, threadIdx.x, blockDim.x);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= tasks) return;
  LaneTask task;
  LoadLaneTask(d, first_task + warp, first_warp, lane, task);
  ForwardTask<kPlane>(d, xs, task, sums);
}

// What the combine of thread i reads that does not depend on the sums: loaded before them
// (the combine is a chain of round trips on the block's critical path; the sweep loads
// these before its forward).
struct CombineInputs {
  float projection = 0.0f, norm2 = 0.0f;
};
__device__ __forceinline__ int64_t CombinePlace(const TiledDeviceArrays& d, const OrbitBlock& block,
                                                int c, int k) {
  return static_cast<int64_t>(block.view[k]) * d.columns +
         (block.reversed[k] ? d.columns - 1 - c : c);
}
__device__ __forceinline__ CombineInputs LoadCombineInputs(const TiledDeviceArrays& d,
                                                           const OrbitBlock& block,
                                                           const TiledCombine& in, int64_t i) {
  const int c = static_cast<int>(i / 8), k = static_cast<int>(i % 8);
  CombineInputs inputs;
  if (c < d.columns && k < block.count && in.sums != nullptr && in.projections != nullptr) {
    inputs.projection = in.projections[CombinePlace(d, block, c, k)];
    inputs.norm2 = d.row_norm2[static_cast<int64_t>(block.stored_view) * d.columns + c];
  }
  return inputs;
}

// Thread i = 8 c + k takes (ray c, view slot k), the 8 slots of a ray in one group of 8
// lanes; every lane of the warp calls it (warp shuffles), those past the rays too. Plain
// loads of the sums: in the sweep they are written by this kernel.
__device__ __forceinline__ void CombineRay(const TiledDeviceArrays& d, const OrbitBlock& block,
                                           const TiledCombine& in, int64_t i,
                                           const CombineInputs& inputs) {
  const int c = static_cast<int>(i / 8), k = static_cast<int>(i % 8);
  const bool on = c < d.columns;  // whole groups of 8: 8 divides 32
  const bool has_view = on && k < block.count;
  const int map = has_view ? block.map_index[k] : 0;
  const int64_t place = has_view ? CombinePlace(d, block, c, k) : 0;
  const float projection = inputs.projection, norm2 = inputs.norm2;
  float z = 0.0f;
  if (in.sums != nullptr) {
    float total = 0.0f;
    if (has_view) {
#pragma unroll
      for (int g = 0; g < 8; ++g) {
        total += in.sums[SumsPlaneIndex(d, g, c, kTiledCompose.h[map][g])];
      }
    }
    __syncwarp();  // the ray's 8 threads have read its sums
    // Thread k clears map k's 8 sums of the ray.
    if (on) ClearRayPlanes(in.sums, SumsRayIndex(d, k, c), kSumsHalf);
    if (has_view && in.out != nullptr) in.out[place] = total;
    if (has_view && in.projections != nullptr) {
      const float r = projection - total;
      in.residual[place] = r;
      z = norm2 > 1e-20f ? block.step_scale * r / norm2 : 0.0f;
    }
  } else if (has_view) {
    z = __ldg(in.z_full + place);
  }
  if (in.z_maps == nullptr) return;
  // Thread k: map k's planes, so that those of no view of the block are 0.
  if (on) ClearRayPlanes(in.z_maps, MapRayIndex(d, k, c), kZHalf);
  __syncwarp();
  if (has_view) {
#pragma unroll
    for (int g = 0; g < 8; ++g) in.z_maps[MapRayIndex(d, g, c) + kTiledCompose.h[map][g]] = z;
  }
  float largest = fabsf(z);
  for (int offset = 16; offset > 0; offset /= 2) {
    largest = fmaxf(largest, __shfl_xor_sync(0xffffffffu, largest, offset));
  }
  if (threadIdx.x % 32 == 0 && in.largest_z_bits != nullptr) {
    atomicMax(in.largest_z_bits, __float_as_int(largest));
  }
}

__global__ void __launch_bounds__(kCombineThreads)
    TiledCombineKernel(TiledDeviceArrays d, OrbitBlock block, TiledCombine in) {
  WaitForPreviousKernel();
  LetNextKernelStart();
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  CombineRay(d, block, in, i, LoadCombineInputs(d, block, in, i));
}

// kFixed: the accumulators are int32 in units of 1 / scale (shared-memory integer adds are
// one instruction; float adds are a load and compare-and-store loop). scale is a power of
// two with count * column_bound * max |z| * scale <= 2^30 (max over the block's rays), which
// bounds every accumulator and the sum of a tile's planes: no overflow, and each add is off
// by at most 1 / (2 scale), about 5e-10 of that bound.
// bound_per_z: count * column_bound, the factor of max |z|.
__device__ __forceinline__ float FixedPointBoundPerZ(const TiledDeviceArrays& d,
                                                     const OrbitBlock& block) {
  return static_cast<float>(block.count) * d.column_bound[block.stored_view];
}
__device__ __forceinline__ float FixedPointScale(float bound_per_z, float largest_z) {
  const float bound = bound_per_z * largest_z;
  if (!(bound > 0.0f)) return 1.0f;
  int exponent;
  frexpf(bound, &exponent);  // bound < 2^exponent
  return ldexpf(1.0f, min(30 - exponent, 100));
}

// One lane's share of a task's transpose: z of its rays in its warp's plane order (two
// 4-float loads each, 0 for no ray; plain loads: in the sweep z is written by this kernel),
// w z_p added at place of plane p of acc (int32 fixed point when kFixed). The scale
// (scale_of(): a power of two, applied to the weights) is asked for after the z loads are
// issued, so that the sweep's load of it (the block's largest |z|, like z written by the
// combine) is in flight with them.
template <bool kFixed, int kPlane, typename ScaleOf>
__device__ __forceinline__ void BackTask(const TiledDeviceArrays& d, float* acc,
                                         const LaneTask& task, const float* z_maps,
                                         ScaleOf scale_of) {
  const int plane = PlaneFloats<kPlane>(d);
  int* const acc_fixed = reinterpret_cast<int*>(acc);
  float z1[8], z2[8];
  const auto load_z = [&](uint32_t c, float* z) {
    float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f), b = a;
    if (c != kTiledNoRay) {
      const float4* from = reinterpret_cast<const float4*>(z_maps + MapRayIndex(d, task.map, c));
      a = from[0];
      b = from[1];
    }
    z[0] = a.x, z[1] = a.y, z[2] = a.z, z[3] = a.w, z[4] = b.x, z[5] = b.y, z[6] = b.z, z[7] = b.w;
  };
  load_z(task.rays & 0xffffu, z1);
  load_z(task.rays >> 16, z2);
  const float scale = scale_of();
#pragma unroll
  for (int j = 0; j < kTiledTaskSteps; ++j) {
    // Past the warp's last step the slots read as weight 0 at place 0: the same address for
    // all 32 lanes, which a shared-memory atomic serialises (32 wavefronts per add). The
    // whole warp leaves together (the task is the warp's).
    if (task.first_step + j >= task.steps) break;
    const bool on_first = task.first_step + j < task.change;
    // A power of two: the product is the same as with z scaled.
    const float w = task.wt[j] * scale;
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      const float value = w * (on_first ? z1[p] : z2[p]);
      if (kFixed) {
        atomicAdd(acc_fixed + p * plane + task.place[j], __float2int_rn(value));
      } else {
        atomicAdd(acc + p * plane + task.place[j], value);
      }
    }
  }
}

// floats[0, count) = 0, the caller's threads sharing the work; 16 bytes a store where
// floats and count allow (the planes: 8 per orbit).
__device__ __forceinline__ void ClearShared(float* floats, int count) {
  if (reinterpret_cast<uintptr_t>(floats) % 16 == 0 && count % 4 == 0) {
    float4* const quads = reinterpret_cast<float4*>(floats);
    for (int i = threadIdx.x; i < count / 4; i += blockDim.x) {
      quads[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  } else {
    for (int i = threadIdx.x; i < count; i += blockDim.x) floats[i] = 0.0f;
  }
}

// Where the sweep's write-back reads x and where it leaves the new x besides device memory
// (each may be nullptr): `from`, planes of x in T0's frame (the resident x) instead of device
// memory; `to`, planes that take the new value at every plane of the pixel's tile (the
// resident x, or the accumulators themselves, which then hold x for the next block's
// forward).
struct XPlanes {
  const float* from;
  float* to;
};

// Each (tile, pixel) of the orbit once, a tile's pixels on consecutive threads (x read and
// written in rows): x += the accumulator planes whose tile it is (over scale when kFixed),
// clamped at 0 when asked; x read from device memory unless x_planes.from is set, and the
// new value also into x_planes.to. Threads [thread, + threads) of the caller's block share
// the work, kBatch items each at a time: all their loads before any store (a store to x
// could alias the orbit's fields, which would otherwise be reloaded after each). x may be
// nullptr when x_planes.to is not (the resident sweep keeps x in its planes until its last
// block). kClear: each accumulator read is set to 0 for the next block (the sweep's; every
// accumulator of the orbit is read once, and by the thread that writes its place in
// x_planes.to when those are the accumulators, which then take x instead of 0).
template <bool kFixed, bool kClear, int kPlane>
__device__ __forceinline__ void WriteBackOrbit(const TiledDeviceArrays& d, const TileOrbit& orbit,
                                               float* acc, XPlanes x_planes, float scale, float* x,
                                               int clamp, int thread, int threads) {
  constexpr int kBatch = 4;
  const int plane = PlaneFloats<kPlane>(d);
  int* const acc_fixed = reinterpret_cast<int*>(acc);
  const int sx0 = orbit.size_x, sy0 = orbit.size_y, area = sx0 * sy0;
  for (int base = thread; base < 8 * area; base += kBatch * threads) {
    float value[kBatch];
    int64_t where[kBatch];
    int same[kBatch];  // bit e: plane e is the item's tile (0: no item)
    int local[kBatch];  // the item's pixel in its tile: lx | ly << 16
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int item = base + u * threads;
      const int h = item / area, r = item - h * area;
      same[u] = 0;
      value[u] = 0.0f;
      where[u] = 0;
      local[u] = 0;
      if (item >= 8 * area || !((orbit.distinct >> h) & 1)) continue;
      const TilePixel pixel(r, sx0, sy0);
      const int lx = pixel.x(h), ly = pixel.y(h);
      local[u] = lx | ly << 16;
      where[u] = static_cast<int64_t>(orbit.corner_y[h] + ly) * d.n + orbit.corner_x[h] + lx;
      float total = 0.0f, old = 0.0f;
      int total_fixed = 0;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if (orbit.corner_x[e] != orbit.corner_x[h] || orbit.corner_y[e] != orbit.corner_y[h]) {
          continue;
        }
        same[u] |= 1 << e;
        int lx0, ly0;
        TileLocalToRepresentative(kTiledMaps.m[e][0], kTiledMaps.m[e][1], kTiledMaps.m[e][2],
                                  kTiledMaps.m[e][3], sx0, sy0, lx, ly, &lx0, &ly0);
        const int at = e * plane + ly0 * d.stride + lx0;
        if (kFixed) {
          total_fixed += acc_fixed[at];
        } else {
          total += acc[at];
        }
        // Where the accumulators take the new x, this place is written below.
        if (kClear && x_planes.to != acc) acc[at] = 0.0f;
        if (x_planes.from != nullptr && e == h) old = x_planes.from[at];
      }
      if (x_planes.from == nullptr) old = x[where[u]];
      if (kFixed) total = static_cast<float>(total_fixed) / scale;
      const float updated = old + total;
      value[u] = clamp ? fmaxf(updated, 0.0f) : updated;
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (same[u] == 0) continue;
      if (x != nullptr) x[where[u]] = value[u];
      if (x_planes.to == nullptr) continue;
      const int lx = local[u] & 0xffff, ly = local[u] >> 16;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if (!((same[u] >> e) & 1)) continue;
        int lx0, ly0;
        TileLocalToRepresentative(kTiledMaps.m[e][0], kTiledMaps.m[e][1], kTiledMaps.m[e][2],
                                  kTiledMaps.m[e][3], sx0, sy0, lx, ly, &lx0, &ly0);
        x_planes.to[e * plane + ly0 * d.stride + lx0] = value[u];
      }
    }
  }
}

template <bool kFixed, int kPlane>
__global__ void __launch_bounds__(kTiledMaxBackThreads, 1)
    TiledBackKernel(TiledDeviceArrays d, OrbitBlock block, const float* __restrict__ z_maps,
                    const int32_t* __restrict__ largest_z_bits, int next_stored_view,
                    float* __restrict__ x, int clamp) {
  extern __shared__ float acc[];
  // The largest orbits first (TiledTasks::transpose_order).
  const int orbit_index =
      d.transpose_order[static_cast<int64_t>(block.stored_view) * d.orbits_per_view + blockIdx.x];
  const int plane = PlaneFloats<kPlane>(d);
  // The next block's matrix comes into L2 while this transpose reads this one's from there.
  if (threadIdx.x == 0 && next_stored_view >= 0) {
    const int64_t next = static_cast<int64_t>(next_stored_view) * d.orbits_per_view + orbit_index;
    PrefetchWarpSlots(d, d.orbit_warp_begin[next], d.orbit_warp_begin[next + 1]);
  }
  for (int i = threadIdx.x; i < 8 * plane; i += blockDim.x) acc[i] = 0.0f;
  WaitForPreviousKernel();
  LetNextKernelStart();
  const float scale =
      kFixed ? FixedPointScale(FixedPointBoundPerZ(d, block), __int_as_float(*largest_z_bits))
             : 1.0f;
  __syncthreads();  // the accumulators cleared
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int64_t at = static_cast<int64_t>(block.stored_view) * d.orbits_per_view + orbit_index;
  const int64_t end = d.orbit_task_begin[at + 1];
  const int64_t first_warp = d.orbit_warp_begin[at];
  for (int64_t t = d.orbit_task_begin[at] + warp; t < end; t += warps) {
    LaneTask task;
    LoadLaneTask(d, t, first_warp, lane, task);
    BackTask<kFixed, kPlane>(d, acc, task, z_maps, [&] { return scale; });
  }
  __syncthreads();
  WriteBackOrbit<kFixed, false, kPlane>(d, d.orbits[orbit_index], acc, {nullptr, nullptr}, scale, x,
                                        clamp, threadIdx.x, blockDim.x);
}

// The sweep's copy in shared memory of one ART block's bookkeeping for the thread block's
// orbits, staged while the block before runs, so that its products start from shared
// memory instead of chains of dependent loads (task, then its warp, then the warp's lanes,
// then z): per owned orbit its first layout warp and task and their counts; the orbits'
// layout warps in turn (header, orbit, lanes' rays and switch steps); the orbits' tasks in
// turn (staged warp | chunk << 16). Warp w of the thread block takes the staged warps and
// tasks w, w + warps, ... Where the shared memory holds them, the block's slots too
// (CopySlots), each orbit's after the one before.
struct StagedOrbit {
  int64_t first_warp, first_task;
  int32_t warps, tasks;
  int64_t slot_shift;  // slot s of the orbit is at s + slot_shift in the block's copy
};
struct StagedWarp {
  TiledWarp header;
  int32_t orbit, unused;
};
struct SweepStage {
  StagedOrbit* orbits;  // [owned orbits]
  StagedWarp* warps;    // [stage_warps]
  uint32_t* rays;       // [stage_warps * 32]
  uint16_t* change;     // [stage_warps * 32]
  uint32_t* tasks;      // [stage_tasks]

  // Bytes of one stage, a multiple of 8.
  __host__ __device__ static size_t Bytes(int orbits, int stage_warps, int stage_tasks) {
    const size_t bytes = sizeof(StagedOrbit) * orbits +
                         (sizeof(StagedWarp) + 32 * sizeof(uint32_t) + 32 * sizeof(uint16_t)) *
                             static_cast<size_t>(stage_warps) +
                         sizeof(uint32_t) * static_cast<size_t>(stage_tasks);
    return (bytes + 7) / 8 * 8;
  }
  __device__ static SweepStage At(char* base, int orbits, int stage_warps) {
    SweepStage stage;
    stage.orbits = reinterpret_cast<StagedOrbit*>(base);
    stage.warps = reinterpret_cast<StagedWarp*>(stage.orbits + orbits);
    stage.rays = reinterpret_cast<uint32_t*>(stage.warps + stage_warps);
    stage.change = reinterpret_cast<uint16_t*>(stage.rays + 32 * stage_warps);
    stage.tasks = reinterpret_cast<uint32_t*>(stage.change + 32 * stage_warps);
    return stage;
  }
  __device__ int Warps(int orbits) const {
    int sum = 0;
    for (int i = 0; i < orbits; ++i) sum += this->orbits[i].warps;
    return sum;
  }
  __device__ int Tasks(int orbits) const {
    int sum = 0;
    for (int i = 0; i < orbits; ++i) sum += this->orbits[i].tasks;
    return sum;
  }
  // First step: each orbit's offsets and counts in stored view `view`, threads [thread,
  // + threads) sharing the work (none for a negative thread).
  __device__ void StageOrbits(const TiledDeviceArrays& d, int view, const int32_t* owned,
                              int count, int thread, int threads) const {
    for (int i = thread; i >= 0 && i < count; i += threads) {
      const int64_t at = static_cast<int64_t>(view) * d.orbits_per_view + owned[i];
      const int64_t warp = d.orbit_warp_begin[at], task = d.orbit_task_begin[at];
      orbits[i] = {warp, task, static_cast<int32_t>(d.orbit_warp_begin[at + 1] - warp),
                   static_cast<int32_t>(d.orbit_task_begin[at + 1] - task)};
    }
  }
  // The second step's items: a lane of each warp, and each task.
  __device__ int Items(int orbits) const { return 32 * Warps(orbits) + Tasks(orbits); }
  // Second step (after the first is visible to the thread block): the warps, lanes and
  // tasks, threads [thread, + threads) sharing the work, kBatch items each at a time: all
  // their loads (round trips to device memory) before any store (the stage's pointers are
  // generic, and the compiler would not move a load past a store).
  __device__ void StageWork(const TiledDeviceArrays& d, int count, int thread, int threads) const {
    constexpr int kBatch = 2;
    const int lanes = 32 * Warps(count), items = lanes + Tasks(count);
    for (int base = thread; base < items; base += kBatch * threads) {
      uint32_t loaded_rays[kBatch] = {}, loaded_task[kBatch] = {};
      uint16_t loaded_change[kBatch] = {};
      TiledWarp header[kBatch];
      int orbit_of[kBatch] = {};
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int item = base + k * threads;
        if (item >= items) continue;
        int i = 0, warps_before = 0, tasks_before = 0;
        if (item < lanes) {
          const int u = item / 32, lane = item % 32;
          while (u >= warps_before + orbits[i].warps) warps_before += orbits[i++].warps;
          const int64_t warp = orbits[i].first_warp + (u - warps_before);
          loaded_rays[k] = d.lane_rays[warp * 32 + lane];
          loaded_change[k] = d.lane_switch[warp * 32 + lane];
          if (lane == 0) header[k] = d.warps[warp];
          orbit_of[k] = i;
        } else {
          const int t = item - lanes;
          while (t >= tasks_before + orbits[i].tasks) {
            tasks_before += orbits[i].tasks;
            warps_before += orbits[i++].warps;
          }
          const TiledTask task = d.tasks[orbits[i].first_task + (t - tasks_before)];
          loaded_task[k] = static_cast<uint32_t>(warps_before + task.warp_offset) |
                           static_cast<uint32_t>(task.chunk) << 16;
        }
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int item = base + k * threads;
        if (item >= items) continue;
        if (item < lanes) {
          rays[item] = loaded_rays[k];
          change[item] = loaded_change[k];
          if (item % 32 == 0) warps[item / 32] = {header[k], orbit_of[k], 0};
        } else {
          tasks[item - lanes] = loaded_task[k];
        }
      }
    }
  }
  // Third step, one thread (after the second is visible to it): each orbit's slots, from its
  // first staged warp's slot_base to its last's end, copied into weights_to and local_to
  // (room for the most slots of a thread block, CountTiledSweepSlots) after the orbit before,
  // by bulk copies that complete `ready`; each orbit's slot_shift says where.
  __device__ void CopySlots(const TiledDeviceArrays& d, int count, float* weights_to,
                            uint16_t* local_to, uint64_t* ready) const {
    int64_t total = 0;
    for (int i = 0, u = 0; i < count; u += orbits[i++].warps) {
      if (orbits[i].warps > 0) total += SlotsOf(u, orbits[i].warps);
    }
    ExpectCopyBytes(ready, static_cast<uint32_t>(6 * total));
    int64_t offset = 0;
    for (int i = 0, u = 0; i < count; u += orbits[i++].warps) {
      if (orbits[i].warps == 0) continue;
      const int64_t begin = warps[u].header.slot_base, slots = SlotsOf(u, orbits[i].warps);
      // Slot bases and counts are multiples of 32: 128-byte weights, 64-byte places.
      CopyToShared(weights_to + offset, d.weights + begin, static_cast<uint32_t>(4 * slots), ready);
      CopyToShared(local_to + offset, d.local + begin, static_cast<uint32_t>(2 * slots), ready);
      orbits[i].slot_shift = offset - begin;
      offset += slots;
    }
  }

 private:
  // The slots of the `count` staged warps from u on.
  __device__ int64_t SlotsOf(int u, int count) const {
    return SlotSpan(warps[u].header, warps[u + count - 1].header);
  }
};

// The tile side of a plane of kPlane floats (side x (side + 1)); 0 for the generic instance.
template <int kPlane>
constexpr int SideOfPlane() {
  return kPlane == kPlane16 ? 16 : kPlane == kPlane32 ? 32 : 0;
}

// The sweep's tables for square orbits of 8 distinct tiles of the compiled side (all but
// those on the diagonals and the centre lines): place[h * side^2 + r] is the place in T0's
// frame (ly0 * stride + lx0) of pixel r (row-major in the tile) of tile M_h(T0), so that
// moving x between a tile and its plane is one table read instead of the maps' arithmetic.
template <int kPlane>
struct SquareOrbitPlaces {
  static constexpr int kSide = SideOfPlane<kPlane>() > 0 ? SideOfPlane<kPlane>() : 1;
  static constexpr int kArea = kSide * kSide;
  uint16_t place[8 * kArea];
  __device__ void Build(int stride) {
    for (int item = threadIdx.x; item < 8 * kArea; item += blockDim.x) {
      const int h = item / kArea, r = item % kArea;
      int lx0, ly0;
      TileLocalToRepresentative(kTiledMaps.m[h][0], kTiledMaps.m[h][1], kTiledMaps.m[h][2],
                                kTiledMaps.m[h][3], kSide, kSide, r % kSide, r / kSide, &lx0, &ly0);
      place[item] = static_cast<uint16_t>(ly0 * stride + lx0);
    }
  }
  // Whether the orbit's tiles are the table's: square of kSide, 8 distinct.
  __device__ static bool Fits(const TileOrbit& orbit) {
    return SideOfPlane<kPlane>() > 0 && orbit.size_x == kSide && orbit.size_y == kSide &&
           orbit.distinct == 0xff;
  }
  // The table's items (pixel r of tile h: h * kArea + r), and each one's place in the planes
  // (one plane per pixel: no partner).
  static constexpr int kItems = 8 * kArea;
  static constexpr bool kPaired = false;
  __device__ int At(int item) const { return (item / kArea) * kPlane + place[item]; }
  __device__ int PartnerAt(int /*item*/) const { return -1; }
  // x of item `item` in device memory.
  __device__ int64_t Where(const TiledDeviceArrays& d, const TileOrbit& orbit, int item) const {
    const int h = item / kArea, r = item % kArea;
    return static_cast<int64_t>(orbit.corner_y[h] + r / kSide) * d.n + orbit.corner_x[h] + r % kSide;
  }
};

// The sweep's tables for orbits of square tiles of the compiled side on the diagonal
// (T0 = (c, c)): 4 distinct tiles, each M_h(T0) = M_e(T0) for a partner e (the two maps send
// (1, 1) to the same point), so each pixel has two planes. Item k * kArea + r is pixel r
// (row-major) of the orbit's k-th distinct tile M_h(T0), h = map[k]: its place in plane h,
// and in plane partner[k]. These are all the orbits the square table leaves out on an even
// grid (its partition has no centre line).
template <int kPlane>
struct DiagonalOrbitPlaces {
  static constexpr int kSide = SquareOrbitPlaces<kPlane>::kSide;
  static constexpr int kArea = kSide * kSide;
  uint16_t place[4 * kArea];
  uint16_t partner_place[4 * kArea];
  int map[4], partner[4];
  int distinct;  // the orbits' mask: the first map of each pair
  // Thread 0 writes the maps; every thread finds the pairs it needs itself, so that the
  // block writes each word once.
  __device__ void Build(int stride) {
    if (threadIdx.x == 0) {
      distinct = 0;
      for (int t = 0; t < 4; ++t) {
        Pair(t, &map[t], &partner[t]);
        distinct |= 1 << map[t];
      }
    }
    for (int item = threadIdx.x; item < 4 * kArea; item += blockDim.x) {
      int h, e;
      Pair(item / kArea, &h, &e);
      place[item] = PlaceOf(h, item % kArea, stride);
      partner_place[item] = PlaceOf(e, item % kArea, stride);
    }
  }
  // Whether the orbit is one of the table's: square tiles of kSide, on the diagonal.
  __device__ bool Fits(const TileOrbit& orbit) const {
    if (SideOfPlane<kPlane>() == 0 || orbit.size_x != kSide || orbit.size_y != kSide ||
        orbit.distinct != distinct) {
      return false;
    }
    for (int t = 0; t < 4; ++t) {
      if (orbit.corner_x[map[t]] != orbit.corner_x[partner[t]] ||
          orbit.corner_y[map[t]] != orbit.corner_y[partner[t]]) {
        return false;
      }
    }
    return true;
  }
  static constexpr int kItems = 4 * kArea;
  static constexpr bool kPaired = true;
  __device__ int At(int item) const { return map[item / kArea] * kPlane + place[item]; }
  __device__ int PartnerAt(int item) const {
    return partner[item / kArea] * kPlane + partner_place[item];
  }
  // x of item `item` in device memory.
  __device__ int64_t Where(const TiledDeviceArrays& d, const TileOrbit& orbit, int item) const {
    const int h = map[item / kArea], r = item % kArea;
    return static_cast<int64_t>(orbit.corner_y[h] + r / kSide) * d.n + orbit.corner_x[h] + r % kSide;
  }

 private:
  // The t-th pair of maps that send (1, 1) to the same point, in map order as the layout's
  // `distinct` (its first map reaching each tile): h the first, e the other.
  __device__ static void Pair(int t, int* h_out, int* e_out) {
    int k = 0;
    for (int h = 0; h < 8; ++h) {
      int first = h, other = h;
      for (int e = 0; e < 8; ++e) {
        if (e != h && ImageOfOneOne(e) == ImageOfOneOne(h)) {
          if (e < h) first = e;
          other = e;
        }
      }
      if (first != h) continue;
      if (k++ == t) {
        *h_out = h;
        *e_out = other;
        return;
      }
    }
  }
  __device__ static int ImageOfOneOne(int h) {
    return (kTiledMaps.m[h][0] + kTiledMaps.m[h][1]) * 4 + (kTiledMaps.m[h][2] + kTiledMaps.m[h][3]);
  }
  __device__ static uint16_t PlaceOf(int h, int r, int stride) {
    int lx0, ly0;
    TileLocalToRepresentative(kTiledMaps.m[h][0], kTiledMaps.m[h][1], kTiledMaps.m[h][2],
                              kTiledMaps.m[h][3], kSide, kSide, r % kSide, r / kSide, &lx0, &ly0);
    return static_cast<uint16_t>(ly0 * stride + lx0);
  }
};

// x into the planes of an orbit that fits `table` (SquareOrbitPlaces or DiagonalOrbitPlaces):
// LoadOrbitPlanes' work, one table read per pixel and plane.
template <typename Table>
__device__ __forceinline__ void LoadTableOrbitPlanes(const TiledDeviceArrays& d, const Table& table,
                                                     const TileOrbit& orbit, const float* x,
                                                     float* xs) {
  for (int item = threadIdx.x; item < Table::kItems; item += blockDim.x) {
    const float value = x[table.Where(d, orbit, item)];
    xs[table.At(item)] = value;
    if (Table::kPaired) xs[table.PartnerAt(item)] = value;
  }
}

// Whether x's rows of the orbit's tiles can be read and written 16 bytes (4 pixels of a
// tile row) at a time: the tables' sides are multiples of 4; the rows and tile corners
// must start on 16-byte boundaries.
template <typename Table>
__device__ __forceinline__ bool FitsQuads(const TiledDeviceArrays& d, const TileOrbit& orbit,
                                          const float* x) {
  if (Table::kSide % 4 != 0 || d.n % 4 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    return false;
  }
  for (int h = 0; h < 8; ++h) {
    if (orbit.corner_x[h] % 4 != 0) return false;
  }
  return true;
}

// WriteBackTableOrbit where x comes from device memory and goes back there and into the
// accumulators' planes (x not resident) and FitsQuads: four pixels of a tile row per item,
// x read and written 16 bytes at a time, so that a thread's round trips to device memory
// are a quarter as many.
template <typename Table>
__device__ __forceinline__ void WriteBackTableOrbitQuads(const TiledDeviceArrays& d,
                                                         const Table& table, const TileOrbit& orbit,
                                                         float* acc, float scale, float* x,
                                                         int clamp) {
  constexpr int kBatch = 2, kQuads = Table::kItems / 4;
  int* const acc_fixed = reinterpret_cast<int*>(acc);
  for (int base = threadIdx.x; base < kQuads; base += kBatch * blockDim.x) {
    float4 old[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {  // the batch's round trips before its stores
      const int quad = base + u * blockDim.x;
      if (quad < kQuads) {
        old[u] = *reinterpret_cast<const float4*>(x + table.Where(d, orbit, 4 * quad));
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int quad = base + u * blockDim.x;
      if (quad >= kQuads) continue;
      float value[4] = {old[u].x, old[u].y, old[u].z, old[u].w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int at = table.At(4 * quad + k);
        int total = acc_fixed[at];
        if (Table::kPaired) total += acc_fixed[table.PartnerAt(4 * quad + k)];
        value[k] += static_cast<float>(total) / scale;
        if (clamp) value[k] = fmaxf(value[k], 0.0f);
        // x takes the accumulators' place.
        acc[at] = value[k];
        if (Table::kPaired) acc[table.PartnerAt(4 * quad + k)] = value[k];
      }
      *reinterpret_cast<float4*>(x + table.Where(d, orbit, 4 * quad)) =
          make_float4(value[0], value[1], value[2], value[3]);
    }
  }
}

// WriteBackOrbit (fixed point, the accumulators cleared) for an orbit that fits `table`: a
// pixel's plane, or its two planes added (diagonal orbits). Each batch's loads (x from
// device memory: a round trip) all come before its first store, which the compiler could
// not otherwise move them past (x and the planes are generic pointers).
template <typename Table>
__device__ __forceinline__ void WriteBackTableOrbit(const TiledDeviceArrays& d, const Table& table,
                                                    const TileOrbit& orbit, float* acc,
                                                    XPlanes x_planes, float scale, float* x,
                                                    int clamp) {
  // Only the 32-pixel tables' instance: the grids whose x does not stay resident are large,
  // and the extra path's registers would cost the 16-pixel instance's sweep (spills).
  if constexpr (Table::kSide >= 32) {
    if (x_planes.from == nullptr && x_planes.to == acc && x != nullptr &&
        FitsQuads<Table>(d, orbit, x)) {
      WriteBackTableOrbitQuads(d, table, orbit, acc, scale, x, clamp);
      return;
    }
  }
  constexpr int kBatch = 4;
  int* const acc_fixed = reinterpret_cast<int*>(acc);
  for (int base = threadIdx.x; base < Table::kItems; base += kBatch * blockDim.x) {
    float old[kBatch];
    int total[kBatch], at[kBatch], partner_at[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int item = base + u * blockDim.x;
      at[u] = -1;
      if (item >= Table::kItems) continue;
      at[u] = table.At(item);
      partner_at[u] = table.PartnerAt(item);
      old[u] = x_planes.from != nullptr ? x_planes.from[at[u]] : x[table.Where(d, orbit, item)];
      total[u] = acc_fixed[at[u]];
      if (Table::kPaired) total[u] += acc_fixed[partner_at[u]];
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (at[u] < 0) continue;
      const float updated = old[u] + static_cast<float>(total[u]) / scale;
      const float value = clamp ? fmaxf(updated, 0.0f) : updated;
      if (x != nullptr) x[table.Where(d, orbit, base + u * blockDim.x)] = value;
      // The accumulators cleared for the next block, unless x takes their place.
      if (x_planes.to != acc) {
        acc_fixed[at[u]] = 0;
        if (Table::kPaired) acc_fixed[partner_at[u]] = 0;
      }
      if (x_planes.to != nullptr) {
        x_planes.to[at[u]] = value;
        if (Table::kPaired) x_planes.to[partner_at[u]] = value;
      }
    }
  }
}

// Which table of places an owned orbit of the sweep goes through (TileOrbit::table): none
// (the generic map arithmetic), SquareOrbitPlaces or DiagonalOrbitPlaces.
enum OrbitTable : int32_t { kNoTable = 0, kSquareTable = 1, kDiagonalTable = 2 };

// The sweep's dynamic shared memory: slot_buffers blocks' slots (stage_slots weights each,
// then stage_slots places each), 8 planes per owned orbit for the
// transpose's accumulators (and x in the forward when x is not resident), 8 more per owned
// orbit for x when it is resident, the owned orbits' descriptions, two stages (SweepStage:
// the block's and the next one's), then the orbits' indices.
size_t SweepSharedBytes(const TiledDeviceArrays& d, int most_orbits, bool resident_x,
                        int stage_warps, int stage_tasks, int stage_slots, int slot_buffers) {
  const int orbits = std::max(1, most_orbits);
  return (sizeof(float) + sizeof(uint16_t)) * static_cast<size_t>(slot_buffers) *
             static_cast<size_t>(stage_slots) +
         (TiledSharedBytes(d) * (resident_x ? 2 : 1) + sizeof(TileOrbit) + sizeof(int32_t)) *
             static_cast<size_t>(orbits) +
         2 * SweepStage::Bytes(orbits, stage_warps, stage_tasks);
}

// A whole ART sweep (TiledSweep in stored_matrix_kernels.h). Thread block t owns the orbits
// s.owned_orbits[s.owner_begin[t] ...]; x of its orbits is loaded into their planes once,
// before the first block. Per ART block b:
//   1. Each thread loads what its share of the combine reads besides the sums; the last
//      warp stages the next block's orbit offsets; the forward of its orbits, a whole warp
//      of the layout per warp (ForwardWarp: sums by map, added once per layout warp and
//      ray), the warps' headers and lanes from the block's stage (SweepStage), and its slots
//      from their copy in shared memory when s.slot_buffers is set; the warps left without a
//      layout warp stage the next block's warps, lanes and tasks meanwhile; then the last
//      warp brings the next block's slots into L2 (s.prefetch).
//   2. grid barrier; the combine of all rays, shared by all threads of the grid (warp w of
//      block t takes the grid's warp w * blocks + t); arrival at the second grid barrier;
//      then (x not resident) the accumulators cleared and x of the orbits brought into L2
//      for the write-back, and, if no warp was left idle by the forward, the next block's
//      warps, lanes and tasks staged before its wait.
//   3. the second barrier's wait; the next block's description read meanwhile, and with two slot
//      buffers its slots' copy started (one thread issues bulk copies into the buffer the
//      block before this one used); the transpose of its orbits' staged tasks (int32 fixed
//      point; the block's largest |z|, which sets the scale, read in flight with the first
//      z), then (one slot buffer: the next block's copy started) x written back, which the
//      same thread block reads at block b + 1, and the accumulators cleared as they are read.
// With x resident its planes stay in shared memory for the whole sweep, beside the
// accumulators: kept by the write-back, and x goes to device memory in the last block only.
// Else the write-back reads x from device memory and writes it there, and leaves it in the
// accumulators' planes, which the next block's forward reads as x's planes.
template <int kPlane>
__global__ void __launch_bounds__(kSweepThreads, 1)
    TiledSweepKernel(TiledDeviceArrays d, TiledSweep s) {
  extern __shared__ float dynamic_shared[];
  __shared__ OrbitBlock blocks[2];  // block b at b % 2; b + 1 read during b's transpose
  __shared__ uint64_t slots_ready[2];  // block b's slots copied into buffer b % 2
  __shared__ SquareOrbitPlaces<kPlane> table;
  __shared__ DiagonalOrbitPlaces<kPlane> diagonal;
  const int orbit_floats = 8 * PlaneFloats<kPlane>(d);
  const int first_owned = s.owner_begin[blockIdx.x];
  const int owned_count = s.owner_begin[blockIdx.x + 1] - first_owned;
  // Block b's slots (when copied: slot_buffers > 0) in buffer u = b % slot_buffers, at
  // slot_weights + u * stage_slots and slot_local + u * stage_slots; then the planes.
  const int stage_slots = s.slot_buffers > 0 ? s.stage_slots : 0;
  const int slot_buffers = stage_slots > 0 ? s.slot_buffers : 0;
  float* const slot_weights = dynamic_shared;
  uint16_t* const slot_local =
      reinterpret_cast<uint16_t*>(dynamic_shared + slot_buffers * stage_slots);
  float* const planes = dynamic_shared + slot_buffers * stage_slots * 3 / 2;
  const auto buffer_of = [&](int b) { return slot_buffers == 2 ? b % 2 : 0; };
  // The phase of block b's copy on its buffer's barrier (each buffer's copies in turn).
  const auto copy_parity = [&](int b) { return static_cast<uint32_t>(b / slot_buffers) % 2; };
  float* const acc = planes;
  float* const x_planes = s.resident_x ? planes + owned_count * orbit_floats : planes;
  TileOrbit* const orbits =
      reinterpret_cast<TileOrbit*>(planes + owned_count * orbit_floats * (s.resident_x ? 2 : 1));
  char* const stage_base = reinterpret_cast<char*>(orbits + owned_count);
  const size_t stage_bytes = SweepStage::Bytes(owned_count, s.stage_warps, s.stage_tasks);
  // Block b's bookkeeping, staged during block b - 1.
  const auto stage_of = [&](int b) {
    return SweepStage::At(stage_base + (b % 2) * stage_bytes, owned_count, s.stage_warps);
  };
  int32_t* const owned = reinterpret_cast<int32_t*>(stage_base + 2 * stage_bytes);
  const auto copy_slots = [&](int b) {  // one thread, block b's stage visible to it
    const int u = buffer_of(b);
    stage_of(b).CopySlots(d, owned_count, slot_weights + u * stage_slots,
                          slot_local + u * stage_slots, &slots_ready[u]);
  };
  const auto slots_of = [&](int b, const SweepStage& stage, int orbit) {
    return SlotSource{slot_local + buffer_of(b) * stage_slots,
                      slot_weights + buffer_of(b) * stage_slots, stage.orbits[orbit].slot_shift};
  };
  for (int i = threadIdx.x; i < owned_count; i += blockDim.x) {
    owned[i] = s.owned_orbits[first_owned + i];
    orbits[i] = d.orbits[owned[i]];
  }
  // A block's description as 4-byte words, one per thread.
  const auto read_block = [&](int b) {
    constexpr int kWords = sizeof(OrbitBlock) / 4;
    if (threadIdx.x < kWords && b < s.block_count) {
      reinterpret_cast<int32_t*>(&blocks[b % 2])[threadIdx.x] =
          reinterpret_cast<const int32_t*>(s.blocks + b)[threadIdx.x];
    }
  };
  read_block(0);
  if (stage_slots > 0 && threadIdx.x == 0) {
    InitCopyBarrier(&slots_ready[0]);
    InitCopyBarrier(&slots_ready[1]);
  }
  if (SideOfPlane<kPlane>() > 0) {
    table.Build(d.stride);
    diagonal.Build(d.stride);
  }
  __syncthreads();  // the diagonal table's maps, for the owned orbits' kinds
  // Each owned orbit's table, once.
  for (int i = threadIdx.x; i < owned_count; i += blockDim.x) {
    orbits[i].table = SquareOrbitPlaces<kPlane>::Fits(orbits[i]) ? kSquareTable
                      : diagonal.Fits(orbits[i])                 ? kDiagonalTable
                                                                 : kNoTable;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int64_t combine_i = (static_cast<int64_t>(warp) * gridDim.x + blockIdx.x) * 32 + lane;
  const int64_t combine_stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t combine_end = 8 * static_cast<int64_t>(d.columns);
  TiledCombine combine;
  combine.sums = s.sums;
  combine.projections = s.projections;
  combine.residual = s.residual;
  combine.z_maps = s.z_maps;
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  const auto load_planes = [&]() {
    for (int i = 0; i < owned_count; ++i) {
      if (orbits[i].table == kSquareTable) {
        LoadTableOrbitPlanes(d, table, orbits[i], s.x, x_planes + i * orbit_floats);
      } else if (orbits[i].table == kDiagonalTable) {
        LoadTableOrbitPlanes(d, diagonal, orbits[i], s.x, x_planes + i * orbit_floats);
      } else {
        LoadOrbitPlanes<kPlane>(d, orbits[i], s.x, x_planes + i * orbit_floats, threadIdx.x,
                                blockDim.x);
      }
    }
  };
  // Resident, the accumulators start at 0 and each block's write-back clears those it reads.
  if (s.resident_x) ClearShared(acc, owned_count * orbit_floats);
  __syncthreads();  // owned, orbits, the first block, the table, the accumulators
  load_planes();
  if (s.block_count > 0) {
    stage_of(0).StageOrbits(d, s.blocks[0].stored_view, owned, owned_count, threadIdx.x,
                            blockDim.x);
    __syncthreads();
    stage_of(0).StageWork(d, owned_count, threadIdx.x, blockDim.x);
    if (stage_slots > 0) {
      __syncthreads();  // the staged warps, for their slots
      if (threadIdx.x == 0) copy_slots(0);
    }
  }
  for (int b = 0; b < s.block_count; ++b) {
    const OrbitBlock& block = blocks[b % 2];
    combine.largest_z_bits = s.largest_z_bits + b;
    // The first of this thread's combine items (the only one where the grid has at least
    // 8 threads per ray and view slot, as on every device it runs on for 720 x 1024 rays).
    const CombineInputs first_inputs = LoadCombineInputs(d, block, combine, combine_i);
    // The next block's orbits, by the last warp (the forward deals its warps from the first).
    if (b + 1 < s.block_count) {
      stage_of(b + 1).StageOrbits(d, s.blocks[b + 1].stored_view, owned, owned_count,
                                  static_cast<int>(threadIdx.x) - 32 * (warps - 1), 32);
    }
    __syncthreads();  // x's planes (and, at b = 0, resident ones), the next block's orbits
    const int staged_warps = stage_of(b).Warps(owned_count);
    // Warps with no layout warp of this block stage the next block's work during the
    // forward, where they are enough to take it in at most two rounds (each a round trip to
    // device memory); else all threads stage it after the combine.
    const bool stage_during_forward =
        b + 1 < s.block_count && staged_warps < warps &&
        2 * 32 * (warps - staged_warps) >= stage_of(b + 1).Items(owned_count);
    if (stage_during_forward && warp >= staged_warps) {
      stage_of(b + 1).StageWork(d, owned_count, static_cast<int>(threadIdx.x) - 32 * staged_warps,
                                32 * (warps - staged_warps));
    }
    {
      const SweepStage stage = stage_of(b);
      // A layout warp's slots from the block's copy when staged.
      const auto forward = [&](auto shared, auto source) {
        for (int u = warp; u < staged_warps; u += warps) {
          const StagedWarp& staged = stage.warps[u];
          ForwardWarp<kPlane, decltype(shared)::value>(
              d, x_planes + staged.orbit * orbit_floats, source(staged.orbit), staged.header,
              stage.rays[32 * u + lane], stage.change[32 * u + lane], lane, s.sums);
        }
      };
      if (stage_slots > 0) {
        // Every thread, so that the transpose's warps read the copy after it landed too.
        WaitForCopies(&slots_ready[buffer_of(b)], copy_parity(b));
        forward(std::true_type(), [&](int orbit) { return slots_of(b, stage, orbit); });
      } else {
        forward(std::false_type(), [&](int) { return SlotSource{d.local, d.weights, 0}; });
      }
    }
    // The next block's matrix comes into L2 while this one's products run, by the last warp
    // (the one with the fewest layout warps, if any).
    if (s.prefetch && b + 1 < s.block_count && warp == warps - 1) {
      const SweepStage next = stage_of(b + 1);
      for (int i = lane; i < owned_count; i += 32) {
        PrefetchWarpSlots(d, next.orbits[i].first_warp,
                          next.orbits[i].first_warp + next.orbits[i].warps);
      }
    }
    grid.sync();
    // Bounds by the warp's first item, the same for all its lanes (the combine shuffles).
    for (int64_t i = combine_i; i - lane < combine_end; i += combine_stride) {
      CombineRay(d, block, combine, i,
                 i == combine_i ? first_inputs : LoadCombineInputs(d, block, combine, i));
    }
    // The second barrier, split: this thread block's z is in; what follows until the wait
    // needs no other's, and overlaps the barrier's round trip.
    auto combined = grid.barrier_arrive();
    // Not resident, the accumulators share the planes with x (the forward's); resident, the
    // write-back cleared them.
    if (!s.resident_x) {
      ClearShared(acc, owned_count * orbit_floats);
      // x for the write-back, from device memory.
      for (int i = 0; i < owned_count; ++i)
        PrefetchOrbitX(d, orbits[i], s.x, threadIdx.x, blockDim.x);
    }
    // The next block's warps, lanes and tasks, unless the forward's idle warps staged them.
    if (b + 1 < s.block_count && !stage_during_forward) {
      stage_of(b + 1).StageWork(d, owned_count, threadIdx.x, blockDim.x);
    }
    const float bound_per_z = FixedPointBoundPerZ(d, block);
    grid.barrier_wait(std::move(combined));
    read_block(b + 1);
    // The next block's slots into the other buffer (its stage is complete: the barrier).
    if (slot_buffers == 2 && b + 1 < s.block_count && threadIdx.x == 0) copy_slots(b + 1);
    // Used only once the transpose's first z loads are in flight (BackTask).
    const float largest_z = __int_as_float(s.largest_z_bits[b]);
    {
      const SweepStage stage = stage_of(b);
      const int staged_tasks = stage.Tasks(owned_count);
      // A task's slots from the block's copy when staged (the forward waited for it).
      const auto back = [&](auto shared, auto source) {
        for (int t = warp; t < staged_tasks; t += warps) {
          const uint32_t staged_task = stage.tasks[t];
          const int u = static_cast<int>(staged_task & 0xffffu);
          const StagedWarp& staged = stage.warps[u];
          LaneTask task;
          FillLaneTask<decltype(shared)::value>(
              source(staged.orbit), staged.header, static_cast<int>(staged_task >> 16),
              stage.rays[32 * u + lane], stage.change[32 * u + lane], lane, task);
          BackTask<true, kPlane>(d, acc + staged.orbit * orbit_floats, task, s.z_maps,
                                 [&] { return FixedPointScale(bound_per_z, largest_z); });
        }
      };
      if (stage_slots > 0) {
        back(std::true_type(), [&](int orbit) { return slots_of(b, stage, orbit); });
      } else {
        back(std::false_type(), [&](int) { return SlotSource{d.local, d.weights, 0}; });
      }
    }
    __syncthreads();
    const float scale = FixedPointScale(bound_per_z, largest_z);
    // One buffer: the next block's slots replace this block's, read by now, while the
    // write-back runs.
    if (slot_buffers == 1 && b + 1 < s.block_count && threadIdx.x == 0) copy_slots(b + 1);
    // With x resident only the owner reads its pixels, from its planes: device memory gets
    // x at the end of the sweep. Else x is read from device memory (brought into L2 during
    // the transpose) and written there, and it takes the accumulators' place in the planes
    // for the next block's forward.
    float* const x_out = s.resident_x && b + 1 < s.block_count ? nullptr : s.x;
    for (int i = 0; i < owned_count; ++i) {
      float* const orbit_acc = acc + i * orbit_floats;
      const XPlanes planes_of_x =
          s.resident_x ? XPlanes{x_planes + i * orbit_floats, x_planes + i * orbit_floats}
                       : XPlanes{nullptr, orbit_acc};
      if (orbits[i].table == kSquareTable) {
        WriteBackTableOrbit(d, table, orbits[i], orbit_acc, planes_of_x, scale, x_out, s.clamp);
      } else if (orbits[i].table == kDiagonalTable) {
        WriteBackTableOrbit(d, diagonal, orbits[i], orbit_acc, planes_of_x, scale, x_out, s.clamp);
      } else {
        WriteBackOrbit<true, true, kPlane>(d, orbits[i], orbit_acc, planes_of_x, scale, x_out,
                                           s.clamp, threadIdx.x, blockDim.x);
      }
    }
    __syncthreads();  // the accumulators, x's planes and the next block are used next
  }
}

// f(std::integral_constant<int, kPlane>) for the instance that runs d's tiles.
template <typename F>
cudaError_t WithCompiledPlane(const TiledDeviceArrays& d, F f) {
  switch (d.tile_side * d.stride) {
    case kPlane16:
      return f(std::integral_constant<int, kPlane16>());
    case kPlane32:
      return f(std::integral_constant<int, kPlane32>());
    default:
      return f(std::integral_constant<int, 0>());
  }
}

// A launch whose thread blocks may start before the previous kernel in the stream ends
// (when `overlap`; the kernels wait for it before they read what it wrote).
template <typename... Params, typename... Args>
cudaError_t LaunchOverlapped(void (*kernel)(Params...), dim3 grid, dim3 threads, size_t shared,
                             bool overlap, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = threads;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = overlap ? 1 : 0;
  const cudaError_t e = cudaLaunchKernelEx(&config, kernel, args...);
  return e != cudaSuccess ? e : cudaGetLastError();
}

}  // namespace

cudaError_t ChooseTiledBackThreads(TiledDeviceArrays& d, int64_t most_tasks) {
  int device = 0, multiprocessors = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) {
    e = cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device);
  }
  if (e != cudaSuccess) return e;
  // The kernels hold at most 64 registers (__launch_bounds__(1024, 1)): 1024 threads per
  // multiprocessor.
  d.back_threads = TiledBackThreads(d.orbits_per_view, most_tasks, multiprocessors,
                                    kTiledMaxBackThreads);
  return cudaSuccess;
}

cudaError_t PrepareTiledKernels(const TiledDeviceArrays& d, const SquareMapTable& maps,
                                const ComposeTable& compose) {
  cudaError_t e = cudaMemcpyToSymbol(kTiledMaps, &maps, sizeof(maps));
  if (e != cudaSuccess) return e;
  e = cudaMemcpyToSymbol(kTiledCompose, &compose, sizeof(compose));
  if (e != cudaSuccess) return e;
  const int bytes = static_cast<int>(TiledSharedBytes(d));
  return WithCompiledPlane(d, [&](auto plane) {
    constexpr int kPlane = decltype(plane)::value;
    cudaError_t status = cudaFuncSetAttribute(TiledForwardKernel<kPlane>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (status != cudaSuccess) return status;
    status = cudaFuncSetAttribute(TiledBackKernel<false, kPlane>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (status != cudaSuccess) return status;
    return cudaFuncSetAttribute(TiledBackKernel<true, kPlane>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  });
}

cudaError_t LaunchTiledForward(const TiledDeviceArrays& d, int32_t stored_view,
                               int32_t forward_parts, const float* x, float* sums, bool overlap,
                               cudaStream_t stream) {
  if (forward_parts <= 0) return cudaSuccess;
  return WithCompiledPlane(d, [&](auto plane) {
    return LaunchOverlapped(TiledForwardKernel<decltype(plane)::value>,
                            dim3(static_cast<unsigned>(forward_parts),
                                 static_cast<unsigned>(d.orbits_per_view)),
                            dim3(kForwardThreads), TiledSharedBytes(d), overlap, stream, d,
                            stored_view, x, sums);
  });
}

cudaError_t LaunchTiledCombine(const TiledDeviceArrays& d, const OrbitBlock& block,
                               const TiledCombine& combine, bool overlap, cudaStream_t stream) {
  const int threads = 8 * d.columns;
  return LaunchOverlapped(TiledCombineKernel, dim3((threads + kCombineThreads - 1) / kCombineThreads),
                          dim3(kCombineThreads), 0, overlap, stream, d, block, combine);
}

cudaError_t LaunchTiledBack(const TiledDeviceArrays& d, const OrbitBlock& block,
                            const float* z_maps, const int32_t* largest_z_bits,
                            int next_stored_view, float* x, bool clamp, bool overlap,
                            bool fixed_point, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(d.orbits_per_view)), threads(d.back_threads);
  const size_t shared = TiledSharedBytes(d);
  const int clamp_flag = clamp ? 1 : 0;
  return WithCompiledPlane(d, [&](auto plane) {
    constexpr int kPlane = decltype(plane)::value;
    return fixed_point
               ? LaunchOverlapped(TiledBackKernel<true, kPlane>, grid, threads, shared, overlap,
                                  stream, d, block, z_maps, largest_z_bits, next_stored_view, x,
                                  clamp_flag)
               : LaunchOverlapped(TiledBackKernel<false, kPlane>, grid, threads, shared, overlap,
                                  stream, d, block, z_maps, largest_z_bits, next_stored_view, x,
                                  clamp_flag);
  });
}

cudaError_t TiledSweepThreadBlocks(const TiledDeviceArrays& d, int blocks_per_multiprocessor,
                                   int* thread_blocks) {
  *thread_blocks = 0;
  int device = 0, cooperative = 0, multiprocessors = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device);
  if (e == cudaSuccess) {
    e = cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device);
  }
  if (e != cudaSuccess) return e;
  // Two thread blocks per multiprocessor only where each still owns an orbit or more.
  const int64_t blocks = int64_t{blocks_per_multiprocessor} * multiprocessors;
  if (cooperative != 0 && (blocks_per_multiprocessor == 1 || d.orbits_per_view >= blocks)) {
    *thread_blocks = static_cast<int>(std::min<int64_t>(blocks, std::max(1, d.orbits_per_view)));
  }
  return cudaSuccess;
}

cudaError_t FitTiledSweep(const TiledDeviceArrays& d, int thread_blocks,
                          int blocks_per_multiprocessor, int most_orbits, int stage_warps,
                          int stage_tasks, int64_t stage_slots, int most_slot_buffers,
                          bool allow_resident_x, TiledSweepShape* shape) {
  *shape = TiledSweepShape{};
  int device = 0, shared_limit = 0, major = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) {
    e = cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  }
  if (e == cudaSuccess) {
    e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  }
  if (e != cudaSuccess || thread_blocks <= 0) return e;
  const int threads = kSweepThreads / blocks_per_multiprocessor;
  // The slots' bulk copies need compute capability 9.0; each block's must fit the copy
  // barrier's count of pending bytes (2^20 - 1).
  const bool can_stage = major >= 9 && stage_slots > 0 && 6 * stage_slots < (int64_t{1} << 20);
  const struct {
    int slot_buffers;
    bool resident_x;
  } choices[] = {{2, true}, {2, false}, {1, true}, {1, false}, {0, true}, {0, false}};
  for (const auto choice : choices) {
    if (choice.slot_buffers > 0 && (!can_stage || choice.slot_buffers > most_slot_buffers)) {
      continue;
    }
    if (choice.resident_x && !allow_resident_x) continue;
    const bool resident_x = choice.resident_x;
    const int slots = choice.slot_buffers > 0 ? static_cast<int>(stage_slots) : 0;
    const size_t shared = SweepSharedBytes(d, most_orbits, resident_x, stage_warps, stage_tasks,
                                           slots, choice.slot_buffers);
    int resident_blocks = 0;
    e = WithCompiledPlane(d, [&](auto plane) {
      const auto kernel = TiledSweepKernel<decltype(plane)::value>;
      cudaFuncAttributes attributes{};
      cudaError_t status = cudaFuncGetAttributes(&attributes, kernel);
      if (status != cudaSuccess) return status;
      if (shared + attributes.sharedSizeBytes > static_cast<size_t>(shared_limit)) return cudaSuccess;
      status = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
      if (status != cudaSuccess) return status;
      return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident_blocks, kernel, threads,
                                                           shared);
    });
    if (e != cudaSuccess) return e;
    if (resident_blocks >= blocks_per_multiprocessor) {
      *shape = {thread_blocks, most_orbits, resident_x, threads,
                stage_warps,   stage_tasks, slots,      choice.slot_buffers};
      return cudaSuccess;
    }
  }
  return cudaSuccess;
}

cudaError_t LaunchTiledSweep(const TiledDeviceArrays& d, const TiledSweep& sweep,
                             const TiledSweepShape& shape, cudaStream_t stream) {
  const size_t shared = SweepSharedBytes(d, shape.most_orbits, shape.resident_x, shape.stage_warps,
                                         shape.stage_tasks, shape.stage_slots, shape.slot_buffers);
  return WithCompiledPlane(d, [&](auto plane) {
    const auto kernel = TiledSweepKernel<decltype(plane)::value>;
    // Set again at each launch: another layout of the same tile side may have set it lower.
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(shared));
    if (e != cudaSuccess) return e;
    TiledDeviceArrays arrays = d;
    TiledSweep args = sweep;
    args.resident_x = shape.resident_x ? 1 : 0;
    args.stage_warps = shape.stage_warps;
    args.stage_tasks = shape.stage_tasks;
    args.stage_slots = shape.stage_slots;
    args.slot_buffers = shape.slot_buffers;
    void* params[] = {&arrays, &args};
    e = cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel),
                                    dim3(static_cast<unsigned>(shape.thread_blocks)),
                                    dim3(static_cast<unsigned>(shape.threads)), params, shared,
                                    stream);
    return e != cudaSuccess ? e : cudaGetLastError();
  });
}

}  // namespace tomo::core::system_matrix::cuda
