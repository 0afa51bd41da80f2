// The persistent multi-voxel update of ICD, version 4 (IcdKernel::kPersistentV4; the phases
// as in icd_persistent_kernels.cu and icd_kernels.h), the default. What it changes, each
// counted and measured in bench/NOTES.md ("### v4"; on an H200 at 512^3 with 3 columns per
// step 19.7 us per step against version 3's 24.8: the pixel path -2.6, the flags -2.1; then
// "ICD under 4 s": the partials' layout -3.5, the pixels' steps -1.6, now 14.2-14.3 us):
//
// - A voxel's pixels without integer division: a voxel of at most 2 rows (every voxel of the
//   literature case) has pixel k at (column offset k >> shift, row offset k & shift), its
//   row weights folded into its amplitude once; its loads go out in rounds of kFastPixels
//   (2 rows x 4 detector columns), where version 3 took batches of 6 (a voxel of 8 pixels: 2
//   rounds), and within a round each pixel's index and column weight is a constant step from
//   the round's (SlotVoxel, FastRound). Voxels over more rows are walked as version 3 walks
//   them.
// - kSlots voxels per thread (j = t, t + T) whose loads go out together (IcdV4Launch::
//   voxels_per_thread): with 2, 513 voxels on 288 threads are one round instead of version
//   3's three voxel passes, but ptxas then spills 300-400 bytes and the kernel measured
//   slower (bench/NOTES.md); 1, the default, spills as little as version 3.
// - The step's two grid barriers (cooperative grid.sync: every block arrives on one
//   counter) can be replaced by flags (IcdV4Launch::flags): a block that finished the back
//   projection of its views writes its epoch (view_done[block]); only the blocks whose warps
//   update voxels wait for all of them; a voxel's change is written with its epoch in one
//   64-bit word, which the forward update's threads poll as the load of the change itself.
//   The second barrier thus costs no round trip beyond the change's load, the first no
//   serialised arrivals, and the blocks without voxels to update never wait for the first.
// - The sums of the theta partials over the views: one round of 13 loads per lane (416
//   views), where version 3 took two rounds of 8; with the partials of 8 views of a voxel
//   side by side (PartialIndex), 8 lanes read one 64-byte piece.
// - L2 prefetch (IcdV4Launch::prefetch): the first step of a set (a column and its partners)
//   reads the set's pixels from HBM, the set's other steps find them in L2; the prefetch asks
//   for them (cp.async.bulk.prefetch, one per (column, detector column, array)) two steps
//   ahead, while the previous set is still being updated. (Measured: no gain; the DRAM was
//   never the limit.) Optionally also an L1 prefetch by the blocks waiting for the update.
//
// Memory order with flags (the PTX model's release and acquire patterns, as grid.sync
// makes them: a barrier of the block, then one thread's fence and its store or load):
// - partials and volume values -> view_done: the block's threads write, bar.sync, thread 0
//   fences and stores its epoch; a waiting block polls, fences, bar.sync, then reads. The
//   voxel values written by a block's updating warps are ordered before its next view_done
//   the same way, so every later update sees them.
// - a change: value and epoch in one 64-bit word (single-copy atomic), no fence needed.
// - partials and changes are overwritten a step later only after every reader is done: a
//   block's next back projection follows its forward update, which waited for every change,
//   and each change follows its warp's loads of the partials it depends on.
#include <cooperative_groups.h>

#include "core/statistical/cuda/icd_kernels.h"
#include "core/statistical/cuda/icd_step_footprints.cuh"
#include "core/statistical/icd_update_math.h"

namespace tomo::core::statistical::cuda {
namespace {

namespace cg = cooperative_groups;
using namespace icd_device;  // NOLINT: the helpers of both persistent kernels

constexpr int kFastPixels = 8;  // pixels per voxel in that round: up to 2 rows x 4 columns
// The forward update's batch: its e is mostly in L1 (read by the block's back projection a
// step before), and holding 2 x 8 pixels' addresses and predicates for the stores spilled.
constexpr int kForwardBatch = 4;
static_assert(kFastPixels % 2 == 0 && kForwardBatch % 2 == 0, "rounds start at even pixels");

__device__ __forceinline__ unsigned long long LoadRelaxed64(const unsigned long long* at) {
  unsigned long long value;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(value) : "l"(at));
  return value;
}
__device__ __forceinline__ void StoreRelaxed64(unsigned long long* at, unsigned long long value) {
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(at), "l"(value) : "memory");
}
__device__ __forceinline__ unsigned LoadRelaxed32(const unsigned* at) {
  unsigned value;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(value) : "l"(at) : "memory");
  return value;
}
__device__ __forceinline__ void StoreRelaxed32(unsigned* at, unsigned value) {
  asm volatile("st.relaxed.gpu.global.b32 [%0], %1;" ::"l"(at), "r"(value) : "memory");
}
// Asks the L2 for [from, from + bytes) (rounded out to 16 bytes); no effect on the data.
__device__ __forceinline__ void PrefetchL2(const float* from, int64_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(from) & ~uintptr_t{15};
  const uintptr_t end = (reinterpret_cast<uintptr_t>(from) + bytes + 15) & ~uintptr_t{15};
  if (end <= begin) return;
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(begin),
               "r"(static_cast<unsigned>(end - begin))
               : "memory");
#else
  for (uintptr_t line = begin & ~uintptr_t{127}; line < end; line += 128) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
  }
#endif
}

__device__ __forceinline__ unsigned long long PackChange(unsigned epoch, float delta) {
  return (static_cast<unsigned long long>(epoch) << 32) | __float_as_uint(delta);
}
__device__ __forceinline__ bool Reached(unsigned value, unsigned epoch) {
  return static_cast<int>(value - epoch) >= 0;  // epochs only grow (wrap-safe)
}

// One voxel of a thread's round. On the fast path (at most 2 rows and kCachedColumns
// detector columns: the literature case's voxels span 1 or 2 rows) pixel k is (column offset
// k >> shift, row offset k & shift) at base + offset * rows + row offset, as the CPU
// reference orders them (columns outer), walked in rounds of kFastPixels; other voxels are
// walked after the rounds.
// Pixel k = 2 m + o (o = 0 or 1) lies at base + m pair_step + o odd_step, and its column's
// weight at weight_base + m (2 - shift) + o (1 - shift) of the footprints' weights: the
// rounds start at even k and are unrolled, so m and o are constants there and a pixel's
// index is one or two adds (FastRound), where shifts and masks per pixel took about a fifth
// of the pixel loops' instructions (bench/NOTES.md).
// Kept small: the registers also hold a round's loads for every slot.
struct SlotVoxel {
  bool valid = false;
  int fast_count = 0;  // pixels on the fast path (0 when none or off it)
  int slow = -1;       // off the fast path: slot | iz << 2 (VoxelPixels recomputed then)
  int base = 0, pair_step = 0, odd_step = 0, shift = 0;
  int weight_base = 0;               // slot * kCachedColumns
  float a_even = 0, a_odd = 0;       // amplitude times the row weight of even and odd k
};

__device__ __forceinline__ SlotVoxel MakeSlotVoxel(const IcdDeviceProblem& p,
                                                   const IcdStepTask& task, int size, int j,
                                                   const StepFootprints& f) {
  SlotVoxel x;
  x.valid = j < size;
  if (!x.valid) return x;
  int slot, iz;
  StepVoxel(task, j, slot, iz);
  const VoxelPixels pixels = MakeVoxelPixels(p, f.column[slot], iz);
  if (pixels.rows > 2 || pixels.count > pixels.rows * kCachedColumns) {
    x.slow = slot | iz << 2;
    return x;
  }
  x.fast_count = pixels.count;
  if (pixels.count > 0) {
    const bool two_rows = pixels.rows > 1;
    x.shift = two_rows ? 1 : 0;
    x.base = f.column[slot].first_column * p.rows + pixels.axial.first_row;
    x.pair_step = two_rows ? p.rows : 2 * p.rows;
    x.odd_step = two_rows ? 1 : p.rows;
    x.weight_base = slot * kCachedColumns;
    x.a_even = pixels.axial.amplitude * RowWeight(pixels.axial, pixels.axial.first_row);
    x.a_odd = two_rows ? pixels.axial.amplitude *
                             RowWeight(pixels.axial, pixels.axial.first_row + 1)
                       : x.a_even;
  }
  return x;
}

__device__ __forceinline__ VoxelPixels SlowPixels(const IcdDeviceProblem& p,
                                                  const StepFootprints& f, const SlotVoxel& x) {
  return MakeVoxelPixels(p, f.column[x.slow & 3], x.slow >> 2);
}

__device__ __forceinline__ bool FastPixel(const SlotVoxel& x, int k) { return k < x.fast_count; }
// Pixel k's index, any k (off the unrolled rounds).
__device__ __forceinline__ int FastIndex(const SlotVoxel& x, int k) {
  return x.base + (k >> 1) * x.pair_step + (k & 1) * x.odd_step;
}

// The pixels first + o of a voxel, first even (a round's start), o a constant of an
// unrolled loop.
struct FastRound {
  int index_base, weight_base;
  __device__ FastRound(const SlotVoxel& x, int first)
      : index_base(x.base + (first >> 1) * x.pair_step),
        weight_base(x.weight_base + (first >> 1) * (2 - x.shift)) {}
  __device__ int Index(const SlotVoxel& x, int o) const {
    return index_base + (o >> 1) * x.pair_step + ((o & 1) ? x.odd_step : 0);
  }
  __device__ float A(const StepFootprints& f, const SlotVoxel& x, int o) const {
    const int m = o >> 1, odd = o & 1;
    const float column_weight = (&f.weight[0][0])[weight_base + 2 * m + odd - x.shift * (m + odd)];
    return column_weight * (odd ? x.a_odd : x.a_even);
  }
};

// The most pixels of the thread's fast-path voxels (they are walked in rounds of
// kFastPixels, the loads of a round for all slots together).
template <int kSlots>
__device__ __forceinline__ int MostFastPixels(const SlotVoxel (&x)[kSlots]) {
  int most = 0;
#pragma unroll
  for (int u = 0; u < kSlots; ++u) {
    most = max(most, x[u].fast_count);
  }
  return most;
}

// A voxel off the fast path (more than 2 rows), walked as version 3 walks every voxel: in
// batches of kBatch whose loads go out together.
__device__ void BackProjectSlowVoxel(const IcdDeviceProblem& p, const StepFootprints& f,
                                     const SlotVoxel& x, const float* weights,
                                     const float* residual, float& t1, float& t2) {
  AddVoxelThetas(p, f, x.slow & 3, SlowPixels(p, f, x), weights, residual, t1, t2);
}

// Phase A for one view (theta partials of every voxel of the step), kSlots voxels per
// thread, the loads of a round of pixels for all of them together.
template <int kThreads, int kSlots>
__device__ void BackProjectViewV4(const IcdDeviceProblem& p, const IcdPersistentScratch& s,
                                  const IcdStepTask& task, int size, int v,
                                  const StepFootprints& f) {
  const int64_t view_offset = static_cast<int64_t>(v) * p.columns * p.rows;
  const float* weights = p.weights + view_offset;
  const float* residual = p.residual + view_offset;
  for (int round = 0; round < size; round += kSlots * kThreads) {
    SlotVoxel x[kSlots];
    float t1[kSlots], t2[kSlots];
#pragma unroll
    for (int u = 0; u < kSlots; ++u) {
      x[u] = MakeSlotVoxel(p, task, size, round + u * kThreads + threadIdx.x, f);
      t1[u] = 0;
      t2[u] = 0;
    }
    const int most = MostFastPixels(x);
    for (int first = 0; first < most; first += kFastPixels) {
      float w[kSlots][kFastPixels], e[kSlots][kFastPixels];
#pragma unroll
      for (int u = 0; u < kSlots; ++u) {
        const FastRound at(x[u], first);
#pragma unroll
        for (int k = 0; k < kFastPixels; ++k) {
          w[u][k] = 0;
          e[u][k] = 0;
          if (FastPixel(x[u], first + k)) {
            const int index = at.Index(x[u], k);
            w[u][k] = __ldg(weights + index);
            e[u][k] = residual[index];
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kSlots; ++u) {
        const FastRound at(x[u], first);
#pragma unroll
        for (int k = 0; k < kFastPixels; ++k) {
          const float a = FastPixel(x[u], first + k) ? at.A(f, x[u], k) : 0.0f;
          const float wa = w[u][k] * a;
          t1[u] += wa * e[u][k];
          t2[u] += wa * a;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kSlots; ++u) {
      if (!x[u].valid) continue;
      if (x[u].slow >= 0) BackProjectSlowVoxel(p, f, x[u], weights, residual, t1[u], t2[u]);
      s.theta_partial[PartialIndex(s, v, round + u * kThreads + threadIdx.x)] =
          make_float2(t1[u], t2[u]);
    }
  }
  __syncthreads();  // f may be rewritten next
}

// The change of voxel j in step `epoch`: polls its word until that epoch is there.
__device__ __forceinline__ float WaitForChange(const IcdV4Sync& sync, int j, unsigned epoch,
                                               unsigned long long word, bool sleep) {
  while (static_cast<unsigned>(word >> 32) != epoch) {
    if (sleep) __nanosleep(32);
    word = LoadRelaxed64(sync.change + j);
  }
  return __uint_as_float(static_cast<unsigned>(word));
}

// Phase C for one view: e += a delta for every voxel of the step. The changes of both
// slots are loaded (polled: their epoch) together with the first slot's e; the slots'
// pixels then one slot after the other, kForwardBatch at a time.
template <int kThreads, int kSlots>
__device__ void ForwardViewV4(const IcdDeviceProblem& p, const IcdPersistentScratch& s,
                              const IcdV4Sync& sync, unsigned epoch, bool sleep,
                              const IcdStepTask& task, int size, int v, const StepFootprints& f) {
  float* residual = p.residual + static_cast<int64_t>(v) * p.columns * p.rows;
  for (int round = 0; round < size; round += kSlots * kThreads) {
    unsigned long long word[kSlots];
#pragma unroll
    for (int u = 0; u < kSlots; ++u) {
      const int j = round + u * kThreads + threadIdx.x;
      word[u] = j < size ? LoadRelaxed64(sync.change + j) : 0;
    }
#pragma unroll
    for (int u = 0; u < kSlots; ++u) {
      const int j = round + u * kThreads + threadIdx.x;
      const SlotVoxel x = MakeSlotVoxel(p, task, size, j, f);
      if (!x.valid) continue;
      float delta = 0;
      for (int first = 0; first == 0 || first < x.fast_count; first += kForwardBatch) {
        float e[kForwardBatch];
        const FastRound at(x, first);
#pragma unroll
        for (int k = 0; k < kForwardBatch; ++k) {
          e[k] = FastPixel(x, first + k) ? residual[at.Index(x, k)] : 0.0f;
        }
        if (first == 0) delta = WaitForChange(sync, j, epoch, word[u], sleep);
        if (delta == 0.0f) break;  // nothing to add
#pragma unroll
        for (int k = 0; k < kForwardBatch; ++k) {
          if (FastPixel(x, first + k)) {
            residual[at.Index(x, k)] = e[k] + at.A(f, x, k) * delta;
          }
        }
      }
      if (x.slow < 0 || delta == 0.0f) continue;
      const VoxelPixels pixels = SlowPixels(p, f, x);
      for (int n = 0; n < pixels.count; ++n) {
        int index;
        float a;
        PixelOf(p, f, x.slow & 3, pixels, n, index, a);
        residual[index] = residual[index] + a * delta;
      }
    }
  }
  __syncthreads();  // the next phase reads what other threads of the block wrote
}

// Phase B: one warp per voxel of the step; the change goes out with its epoch.
__device__ void UpdateVoxelsV4(const IcdDeviceProblem& p, const IcdPersistentScratch& s,
                               const IcdV4Sync& sync, unsigned epoch, const IcdStepTask& task,
                               int size) {
  const int lane = threadIdx.x % 32;
  const int warps_per_block = blockDim.x / 32;
  const int warp = blockIdx.x * warps_per_block + threadIdx.x / 32;
  const int warps = gridDim.x * warps_per_block;
  for (int j = warp; j < size; j += warps) {
    float x = 0, r = 0;
    float* voxel = SolveStepVoxel<13>(p, s, task, j, lane, x, r);
    if (lane == 0) {
      *voxel = r;
      StoreRelaxed64(sync.change + j, PackChange(epoch, r - x));
    }
  }
}

// The block's back projections of step `epoch` are written (flags: its epoch; else the
// grid barrier).
__device__ __forceinline__ void Arrive(const IcdV4Sync& sync, bool flags, unsigned epoch,
                                       cg::grid_group& grid) {
  if (!flags) {
    grid.sync();
    return;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    StoreRelaxed32(sync.view_done + blockIdx.x, epoch);
  }
}

// Flags: waits until every block wrote the back projections of step `epoch`.
__device__ void WaitForAllViews(const IcdV4Sync& sync, unsigned epoch, bool sleep) {
  for (;;) {
    bool done = true;
    for (int b = threadIdx.x; b < gridDim.x; b += blockDim.x) {
      done &= Reached(LoadRelaxed32(sync.view_done + b), epoch);
    }
    if (__syncthreads_and(done)) break;
    if (sleep) __nanosleep(64);
  }
  __threadfence();
  __syncthreads();
}

// Asks the L2 for the pixels (weights and residual) of the groups of step `step` in view v
// whose columns step `step` - 1 does not update (the first step of a set; its other steps
// find them in L2). Threads t < 32 kIcdMaxGroupsPerStep: group t / 32, detector columns
// t % 32, t % 32 + 32, ...; each prefetch spans the rows of the group's first to last slice.
__device__ void PrefetchStep(const IcdDeviceProblem& p, const IcdPersistentScratch& s, int step,
                             const IcdStepTask& previous, int v) {
  const int t = threadIdx.x;
  if (t >= 32 * kIcdMaxGroupsPerStep) return;
  const int g = t / 32, lane = t % 32;
  const IcdGroupTask group = LoadReadOnly(&s.tasks[step].groups[g]);
  if (group.size <= 0) return;
  for (int h = 0; h < kIcdMaxGroupsPerStep; ++h) {
    if (previous.groups[h].size > 0 && previous.groups[h].column == group.column) return;
  }
  const int ix = group.column % p.nx, iy = group.column / p.nx;
  const SfColumnT<float> col =
      MakeColumn<float>(LoadReadOnly(p.views + v), p.x0 + ix * p.voxel_x, p.y0 + iy * p.voxel_y,
                        p.voxel_x, p.voxel_y, p.columns);
  if (col.first_column > col.last_column) return;
  const int last_slice = group.first_slice + (group.size - 1) * group.stride;
  const SfAxialT<float> bottom =
      MakeAxial<float>(col, p.z0 + group.first_slice * p.voxel_z, p.voxel_z, p.rows);
  const SfAxialT<float> top = MakeAxial<float>(col, p.z0 + last_slice * p.voxel_z, p.voxel_z, p.rows);
  const int first_row = min(bottom.first_row, top.first_row);
  const int last_row = max(bottom.last_row, top.last_row);
  if (first_row > last_row) return;
  const int64_t view_offset = static_cast<int64_t>(v) * p.columns * p.rows;
  const int64_t bytes = static_cast<int64_t>(last_row - first_row + 1) * sizeof(float);
  for (int c = col.first_column + lane; c <= col.last_column; c += 32) {
    const int64_t at = view_offset + static_cast<int64_t>(c) * p.rows + first_row;
    PrefetchL2(p.weights + at, bytes);
    PrefetchL2(p.residual + at, bytes);
  }
}

// Asks L1 for the lines of the weights and residual that BackProjectViewV4 will read for
// the step in view v (fast-path voxels; one line per detector column and array: a voxel's
// one or two rows are adjacent). The residual may still change before then (this block's
// forward update): the lines are only fetched early, their data is read later.
template <int kThreads, int kSlots>
__device__ void PrefetchBackProjectionL1(const IcdDeviceProblem& p, const IcdStepTask& task,
                                         int size, int v, const StepFootprints& f) {
  const int64_t view_offset = static_cast<int64_t>(v) * p.columns * p.rows;
  for (int round = 0; round < size; round += kSlots * kThreads) {
#pragma unroll
    for (int u = 0; u < kSlots; ++u) {
      const SlotVoxel x = MakeSlotVoxel(p, task, size, round + u * kThreads + threadIdx.x, f);
      for (int k = 0; k < x.fast_count; k += 1 + x.shift) {
        const int64_t at = view_offset + FastIndex(x, k);
        asm volatile("prefetch.global.L1 [%0];" ::"l"(p.weights + at));
        asm volatile("prefetch.global.L1 [%0];" ::"l"(p.residual + at));
      }
    }
  }
}

template <int kThreads>
constexpr int MinBlocksPerSm() {
  return kThreads <= 128 ? 6 : 3;  // at least 768 threads per SM (391 views on 132 SMs)
}

// Structure as PersistentSteps (icd_persistent_kernels.cu); step `step`'s epoch is
// a.epoch_base + 1 + (step - a.first_step).
template <int kThreads, int kSlots>
__global__ void __launch_bounds__(kThreads, MinBlocksPerSm<kThreads>())
    PersistentStepsV4(IcdDeviceProblem p, IcdPersistentScratch s, IcdV4Sync sync, IcdV4Launch a) {
  __shared__ StepFootprints footprints[2];
  __shared__ IcdStepTask step_tasks[2];
  constexpr int kTaskWords = sizeof(IcdStepTask) / sizeof(int);
  static_assert(kTaskWords <= 128, "a task is loaded by one thread per word");
  cg::grid_group grid = cg::this_grid();
  const bool one_view = gridDim.x >= p.num_views;  // block b owns view b only
  const bool flags = a.flags != 0;
  auto epoch_of = [&](int step) { return a.epoch_base + 1u + static_cast<unsigned>(step - a.first_step); };
  int current = 0;
  if (threadIdx.x < kTaskWords) {
    reinterpret_cast<int*>(&step_tasks[current])[threadIdx.x] =
        __ldg(reinterpret_cast<const int*>(s.tasks + a.first_step) + threadIdx.x);
  }
  __syncthreads();
  for (int v = blockIdx.x; v < p.num_views; v += gridDim.x) {
    LoadFootprints(p, step_tasks[current], v, footprints[current]);
    BackProjectViewV4<kThreads, kSlots>(p, s, step_tasks[current], StepSize(step_tasks[current]), v,
                                footprints[current]);
  }
  Arrive(sync, flags, epoch_of(a.first_step), grid);
  // The next task's words: loaded a step ahead, stored when its buffer is free.
  int next_word = 0;
  if (a.first_step + 1 < a.last_step && threadIdx.x < kTaskWords) {
    next_word = __ldg(reinterpret_cast<const int*>(s.tasks + a.first_step + 1) + threadIdx.x);
  }
  for (int step = a.first_step; step < a.last_step; ++step) {
    const IcdStepTask& task = step_tasks[current];
    const IcdStepTask& next = step_tasks[current ^ 1];
    const int size = StepSize(task);
    const unsigned epoch = epoch_of(step);
    const bool more = step + 1 < a.last_step;
    const bool updates = blockIdx.x * (kThreads / 32) < size;  // has voxels to update
    // The next step's task and footprints (one view per block): with flags first, while the
    // updating blocks wait for the partials anyway and the others for the changes; with grid
    // barriers after the update, which every block waits for.
    auto next_footprints = [&] {
      if (!more) return;
      if (threadIdx.x < kTaskWords) {
        reinterpret_cast<int*>(&step_tasks[current ^ 1])[threadIdx.x] = next_word;
      }
      __syncthreads();
      if (one_view) LoadFootprints(p, next, blockIdx.x, footprints[current ^ 1]);
      next_word = 0;
      if (step + 2 < a.last_step && threadIdx.x < kTaskWords) {
        next_word = __ldg(reinterpret_cast<const int*>(s.tasks + step + 2) + threadIdx.x);
      }
    };
    if (flags) next_footprints();
    // B: only the blocks with voxels to update wait for every view's partials.
    if (updates) {
      if (flags) WaitForAllViews(sync, epoch, a.poll_sleep != 0);
      UpdateVoxelsV4(p, s, sync, epoch, task, size);
    }
    if (!flags) next_footprints();
    if (more) {
      if (a.prefetch && step + 2 < a.last_step) {
        for (int v = blockIdx.x; v < p.num_views; v += gridDim.x) {
          PrefetchStep(p, s, step + 2, next, v);
        }
      }
      // The blocks that wait for the update ask L1 for the next back projection's pixels.
      if (a.l1_prefetch && one_view && !updates) {
        PrefetchBackProjectionL1<kThreads, kSlots>(p, next, StepSize(next), blockIdx.x,
                                           footprints[current ^ 1]);
      }
    }
    if (!flags) grid.sync();
    for (int v = blockIdx.x; v < p.num_views; v += gridDim.x) {
      if (!one_view) LoadFootprints(p, task, v, footprints[current]);
      ForwardViewV4<kThreads, kSlots>(p, s, sync, epoch, a.poll_sleep != 0, task, size, v,
                                      footprints[current]);
      if (more) {
        if (!one_view) LoadFootprints(p, next, v, footprints[current ^ 1]);
        BackProjectViewV4<kThreads, kSlots>(p, s, next, StepSize(next), v, footprints[current ^ 1]);
      }
    }
    if (more) Arrive(sync, flags, epoch_of(step + 1), grid);
    current ^= 1;
  }
}

template <int kThreads, int kSlots>
const void* KernelV4() {
  return reinterpret_cast<const void*>(PersistentStepsV4<kThreads, kSlots>);
}

const void* KernelV4For(int threads, int voxels_per_thread) {
  if (voxels_per_thread == 1) {
    switch (threads) {
      case 128: return KernelV4<128, 1>();
      case 256: return KernelV4<256, 1>();
      case 288: return KernelV4<288, 1>();
      case 320: return KernelV4<320, 1>();
      default: return nullptr;
    }
  }
  if (voxels_per_thread == 2) {
    switch (threads) {
      case 128: return KernelV4<128, 2>();
      case 256: return KernelV4<256, 2>();
      case 288: return KernelV4<288, 2>();
      case 320: return KernelV4<320, 2>();
      default: return nullptr;
    }
  }
  return nullptr;
}

}  // namespace

int IcdPersistentV4Threads(int64_t largest_step, int voxels_per_thread) {
  if (voxels_per_thread == 1) return largest_step > 128 ? 256 : 128;
  for (int threads : {128, 256, 288}) {
    if (2 * threads >= largest_step) return threads;
  }
  return 320;
}

cudaError_t IcdPersistentV4GridBlocks(int num_views, int threads, int voxels_per_thread,
                                      int* blocks) {
  *blocks = 0;
  const void* kernel = KernelV4For(threads, voxels_per_thread);
  if (kernel == nullptr) return cudaErrorInvalidValue;
  return IcdCooperativeGridBlocks(kernel, threads, num_views, blocks);
}

cudaError_t LaunchIcdPersistentV4Steps(const IcdDeviceProblem& problem,
                                       const IcdPersistentScratch& scratch, const IcdV4Sync& sync,
                                       const IcdV4Launch& launch, int threads, int blocks,
                                       cudaStream_t stream) {
  const void* kernel = KernelV4For(threads, launch.voxels_per_thread);
  if (kernel == nullptr) return cudaErrorInvalidValue;
  IcdDeviceProblem p = problem;
  IcdPersistentScratch s = scratch;
  IcdV4Sync y = sync;
  IcdV4Launch a = launch;
  void* args[] = {&p, &s, &y, &a};
  const cudaError_t error =
      cudaLaunchCooperativeKernel(kernel, dim3(blocks), dim3(threads), args, 0, stream);
  if (error != cudaSuccess) return error;
  return cudaGetLastError();
}

}  // namespace tomo::core::statistical::cuda
