// The CUDA kernels of the stored system matrix, as plain launch functions over plain
// structs (included by host code compiled with g++ and by the .cu files; no CUDA types but
// cudaStream_t and cudaError_t). Every Launch... returns cudaGetLastError() taken right
// after its launches. Layouts are those of SymmetricSystemMatrix and CsrSystemMatrix
// (symmetric_system_matrix.h, csr_system_matrix.h); a "full" vector is views x columns.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/system_matrix/dense_slab.h"
#include "core/system_matrix/interleaved_slab.h"
#include "core/system_matrix/segmented_slab.h"
#include "core/system_matrix/tiled_slab.h"

namespace tomo::core::system_matrix::cuda {

// The stored rows of the symmetric format on the device. A run is packed in 8 bytes:
// x = offset of its first value from the row's first value, y = ix_first | length << 16.
struct SymmetricDeviceArrays {
  const int64_t* row_value_begin;  // stored rows + 1
  const int64_t* row_run_begin;    // stored rows + 1
  const int32_t* row_iy_first;
  const uint2* runs;
  const float* values;
  const float* row_norm2;
  // Per stored row, packed for one 16-byte load (the orbit kernel's lookups):
  // x = first run, y | z << 32 = first value, w = iy_first | runs << 16.
  const uint4* row_headers;
  int32_t n;        // the grid is n x n
  int32_t columns;  // detector columns
  // Slots between a row's consecutive runs and values as row_headers and runs count them:
  // 1 for the runs format, 32 for the interleaved layout (interleaved_runs.h), whose
  // row_headers, runs and values the orbit kernel then reads.
  int32_t stride = 1;
};

// The stored view of an orbit as the back projection needs it: where the line from the
// source through a point meets the detector (FanScan::ColumnCoordinate), in float32 with
// everything relative to the source.
struct StoredViewGeometry {
  float origin_x, origin_y;        // the grid's corner (pixel (0, 0)'s) minus the source, mm
  float pixel;                     // pixel size, mm
  float to_center_x, to_center_y;  // detector centre - source
  float u_x, u_y;                  // column step
  int32_t cylindrical;
  float radius, step;              // cylindrical: |centre - source| and |u|
};

// One block of block ART: the views of one orbit and the maps from the stored view.
struct OrbitBlock {
  int32_t count;          // views in the orbit (1 to 8)
  int32_t stored_view;    // index of the stored view (its rows are stored_view * columns + c)
  int32_t view[8];        // where view k's values sit in the vectors: at view[k] * columns
                          // (the view's number for full vectors, its slot for a subset's)
  int32_t m[8][4];        // kSquareMaps[map] as xx, xy, yx, yy
  int32_t reversed[8];    // detector columns reversed
  int32_t map_index[8];   // the index of view k's map in kSquareMaps
  // slot_for[h][g]: the view k of the block whose map is M_h M_g^-1, or -1 when the block
  // lacks it: that view's rays meeting stored pixel M_g q0 add to output pixel M_h q0
  // (the orbit kernel's bookkeeping; h, g index kSquareMaps).
  int8_t slot_for[8][8];
  float step_scale;       // lambda / S_b (block_art.h)
};

// The eight square maps (kSquareMaps) as xx, xy, yx, yy, for device code.
struct SquareMapTable {
  int32_t m[8][4];
};

// Forward products of one orbit, split over `segments` warps per stored row: partials
// [segment][k][column of the stored row] (segments * 8 * columns floats).
cudaError_t LaunchSymmetricForwardPartials(const SymmetricDeviceArrays& a, const OrbitBlock& block,
                                           int segments, const float* x, float* partials,
                                           cudaStream_t stream);
// Segments per stored row that keep the device busy for a grid of n and `columns` rows.
int SymmetricForwardSegments(int32_t n, int32_t columns);

// Adds the partials. With projections == nullptr: out[view_k * columns + c_k] = (A x).
// Otherwise r = projections - A x at (view_k, c_k): residual[...] = r and
// out[...] = step_scale * r / ||a||^2 (0 for rows of norm^2 <= 1e-20).
cudaError_t LaunchSymmetricCombine(const SymmetricDeviceArrays& a, const OrbitBlock& block,
                                   int segments, const float* partials,
                                   const float* projections, float* residual, float* out,
                                   cudaStream_t stream);

// x[p] += sum over the orbit's rows of a_ip z_full[i], pixel by pixel (each pixel written
// by its own thread: no atomics), then x[p] = max(x[p], 0) when clamp.
cudaError_t LaunchSymmetricBackGather(const SymmetricDeviceArrays& a,
                                      const StoredViewGeometry& geometry,
                                      const OrbitBlock& block, const float* z_full, float* x,
                                      bool clamp, cudaStream_t stream);

// The same product with one thread per pixel orbit (the pixels M_h q0, h < 8, of a
// representative q0 with cx >= cy >= 0 in doubled centred coordinates): the thread finds
// the stored weights at the orbit's (up to) eight pixels once and uses each for every view
// of the block, then writes each distinct pixel of its orbit once (no atomics: every pixel
// has one owner), clamping when asked; x_transposed (optional, else nullptr) receives the
// same values at the transposed places (xt[ix * n + iy]).
cudaError_t LaunchSymmetricBackOrbit(const SymmetricDeviceArrays& a,
                                     const StoredViewGeometry& geometry,
                                     const OrbitBlock& block, const SquareMapTable& maps,
                                     const float* z_full, float* x, float* x_transposed,
                                     bool clamp, cudaStream_t stream);

// The combine fused into a forward launch (group_combine.cuh): with counters set, the last
// warp of each group of 32 rows adds the group's partials and writes what
// LaunchSymmetricCombine would (projections == nullptr: out = A x; else the residual and the
// scaled residual); counters: one int per group of the stored view, 0 between launches.
struct GroupCombine {
  int32_t* counters = nullptr;
  int32_t segments = 1;
  const float* row_norm2 = nullptr;
  const float* projections = nullptr;
  float* residual = nullptr;
  float* out = nullptr;
};

// The dense layout (dense_slabs.h) on the device.
struct DenseDeviceArrays {
  const float* values;
  const uint16_t* offsets;  // stored frame: pixel = slab base + (dx | dy << 8)
  const DenseSlab* slabs;
  int32_t n;         // the grid is n x n
  int32_t columns;   // detector columns
  int32_t segments;  // slabs per group of 32 rows
};

// Forward products of one orbit block from its stored view's slabs [slab_first, slab_first +
// slab_count), one warp per slab, a lane per row: partials[(segment * 8 + k) * columns + c]
// as LaunchSymmetricForwardPartials (LaunchSymmetricCombine adds them, with d.segments).
// x_transposed: nullptr, or x transposed (xt[ix * n + iy]; see DenseForwardLane).
// combine.counters set: the combine too (GroupCombine), no LaunchSymmetricCombine after.
cudaError_t LaunchDenseForwardPartials(const DenseDeviceArrays& d, const OrbitBlock& block,
                                       int64_t slab_first, int64_t slab_count, const float* x,
                                       const float* x_transposed, float* partials,
                                       const GroupCombine& combine, cudaStream_t stream);
// x[M_k p] += w z_k(row) for every entry of the slabs and view k of the block, one warp per
// slab, a lane per row. The lanes of one step add to different pixels (the layout's
// permutation); different warps may add to one pixel at once, so the adds are atomic.
cudaError_t LaunchDenseBackAtomic(const DenseDeviceArrays& d, const OrbitBlock& block,
                                  int64_t slab_first, int64_t slab_count, const float* z_full,
                                  float* x, cudaStream_t stream);
// x[i] = max(x[i], 0).
cudaError_t LaunchClampNonnegative(float* x, int64_t count, cudaStream_t stream);
// With clamp x = max(x, 0); then xt[ix * n + iy] = x[iy * n + ix].
cudaError_t LaunchClampAndTranspose(float* x, float* xt, int32_t n, bool clamp,
                                    cudaStream_t stream);
// xt[ix * n + iy] = x[iy * n + ix].
cudaError_t LaunchTranspose(const float* x, float* xt, int32_t n, cudaStream_t stream);

// The interleaved-runs layout (interleaved_runs.h) on the device.
struct InterleavedDeviceArrays {
  const float* values;
  const uint2* runs;
  const uint4* row_headers;
  const InterleavedSlab* slabs;
  const uint16_t* cursors;
  int32_t n, columns, segments;
};

// Forward products of one orbit block from its stored view's slabs [slab_first, slab_first +
// slab_count), one warp per slab, a lane per row, into LaunchSymmetricCombine's partials;
// x_transposed: nullptr, or x transposed (see InterleavedForwardLane).
cudaError_t LaunchInterleavedForwardPartials(const InterleavedDeviceArrays& d,
                                             const OrbitBlock& block, int64_t slab_first,
                                             int64_t slab_count, const float* x,
                                             const float* x_transposed, float* partials,
                                             const GroupCombine& combine, cudaStream_t stream);

// The segmented-runs layout (segmented_runs.h) on the device.
struct SegmentedDeviceArrays {
  const float* values;
  const uint32_t* runs;
  const SegmentedSlab* slabs;
  const uint8_t* segment_of_column;  // 2 n per group: x columns, then y rows
  int32_t n, columns, segments, groups_per_view;
};

// Forward products of one orbit block from its stored view's slabs, one warp per slab, a
// lane per row (SegmentedForwardLane), into the partials, with the combine fused when
// combine.counters is set (GroupCombine).
cudaError_t LaunchSegmentedForwardPartials(const SegmentedDeviceArrays& d,
                                           const OrbitBlock& block, int64_t slab_first,
                                           int64_t slab_count, const float* x,
                                           const float* x_transposed, float* partials,
                                           const GroupCombine& combine, cudaStream_t stream);
// The orbit transpose (as LaunchSymmetricBackOrbit) reading its weights from this layout.
cudaError_t LaunchSegmentedBackOrbit(const SegmentedDeviceArrays& d,
                                     const StoredViewGeometry& geometry,
                                     const OrbitBlock& block, const SquareMapTable& maps,
                                     const float* z_full, float* x, float* x_transposed,
                                     bool clamp, cudaStream_t stream);

// The tiled layout (tiled_runs.h) and its tasks (tiled_tasks.h) on the device.
struct TiledDeviceArrays {
  const uint16_t* local;   // per slot: place in the orbit's T0, ly0 * stride + lx0
  const float* weights;    // per slot
  const uint32_t* lane_rays;     // per lane: first ray | second ray << 16
  const uint16_t* lane_switch;   // per lane: the step at which it moves to its second ray
  const TiledWarp* warps;
  const int64_t* orbit_warp_begin;  // stored views x orbits + 1
  const TileOrbit* orbits;
  const float* row_norm2;
  const float* column_bound;  // per stored view (TiledRuns::column_bound)
  const TiledTask* tasks;
  const int64_t* orbit_task_begin;  // stored views x orbits + 1
  const int32_t* transpose_order;   // stored views x orbits (TiledTasks::transpose_order)
  int32_t n, columns, orbits_per_view, tile_side, stride;
  // Threads per thread block of the transpose (ChooseTiledBackThreads).
  int32_t back_threads = 64;
};
// h[a][b]: the index in kSquareMaps of M_a M_b.
struct ComposeTable {
  int8_t h[8][8];
};
// The per-map buffers' columns rounded up to groups of 8 rays: the sums keep each group's
// planes in two 128-byte lines (SumsRayIndex in tiled_products.cu). In 32 bits: the layout
// numbers rays in 16 (kTiledNoRay).
__host__ __device__ inline int32_t TiledGroupedColumns(int32_t columns) {
  return (columns + 7) / 8 * 8;
}
// Floats of a per-map buffer (the forward's sums, the transpose's z): 8 maps x the grouped
// columns x 8 planes. Plane p of map g is view k of a block for p = M_k M_g.
inline int64_t TiledMapBufferFloats(int32_t columns) {
  return int64_t{64} * TiledGroupedColumns(columns);
}
// Once per device before the tiled kernels' launches: the maps (SquareMaps()) and their
// products (h[a][b] = ComposeSquareMaps(a, b)) into the kernels' constant memory, and their
// dynamic shared memory allowed up to 8 planes of the layout's tiles (above 48 KB for tile
// sides above 38).
cudaError_t PrepareTiledKernels(const TiledDeviceArrays& d, const SquareMapTable& maps,
                                const ComposeTable& compose);
// On the device that will run them: d.back_threads by TiledBackThreads (tiled_back_threads.h)
// for this device's multiprocessors and a layout whose (stored view, orbit) pairs have at
// most `most_tasks` tasks.
cudaError_t ChooseTiledBackThreads(TiledDeviceArrays& d, int64_t most_tasks);
// The forward of one block of stored view `stored_view`: forward_parts thread blocks per
// orbit (TiledTasks::forward_parts) add x's products, by map and plane, into sums (a per-map
// buffer; float atomics: the order of the adds varies).
// overlap: launched with programmatic dependent launch (sm_90): its thread blocks may start
// while the previous kernel in the stream runs, and wait for it before reading anything it
// writes; each kernel here in turn lets the next one start once it has passed that wait.
cudaError_t LaunchTiledForward(const TiledDeviceArrays& d, int32_t stored_view,
                               int32_t forward_parts, const float* x, float* sums, bool overlap,
                               cudaStream_t stream);
// What the combine between the forward and the transpose reads and writes (all device
// pointers; full vectors are views x columns, at the block's views):
// - sums set: A x of each view and ray, summed over the maps, then sums cleared; with out,
//   A x into out; with projections, r = projections - A x into residual and
//   z = step_scale r / ||a||^2 (0 for norm^2 <= 1e-20), as LaunchSymmetricCombine.
// - sums nullptr: z read from z_full.
// - z_maps set: z by map and plane for LaunchTiledBack (a per-map buffer), and the largest
//   |z| into *largest_z_bits (the bits of a float >= 0, by atomicMax: 0 before the block).
struct TiledCombine {
  float* sums = nullptr;
  float* out = nullptr;
  const float* projections = nullptr;
  float* residual = nullptr;
  const float* z_full = nullptr;
  float* z_maps = nullptr;
  int32_t* largest_z_bits = nullptr;
};
cudaError_t LaunchTiledCombine(const TiledDeviceArrays& d, const OrbitBlock& block,
                               const TiledCombine& combine, bool overlap, cudaStream_t stream);
// x += A_b^T z (then max(x, 0) when clamp) from z_maps (LaunchTiledCombine's), one thread
// block per orbit of tiles, each pixel written by one thread block. next_stored_view >= 0:
// the slots of that stored view (the next forward's) are prefetched into L2 meanwhile.
// overlap as LaunchTiledForward's. fixed_point: the shared accumulators are int32 (integer
// adds instead of float compare-and-store loops; scaled by a power of two from the column
// bound and the block's largest |z|, each add within 5e-10 of that bound; the sum no longer
// depends on the order of the adds).
cudaError_t LaunchTiledBack(const TiledDeviceArrays& d, const OrbitBlock& block,
                            const float* z_maps, const int32_t* largest_z_bits,
                            int next_stored_view, float* x, bool clamp, bool overlap,
                            bool fixed_point, cudaStream_t stream);

// ART sweeps in one cooperative launch (TiledSweepKernel): its thread blocks, all resident,
// each own orbits of tiles for the whole sweep (tiled_sweep_owners.h) and, per ART block,
// run the forward of their orbits (x in shared memory, sums by map as LaunchTiledForward's),
// meet at a grid-wide barrier, share the combine (as LaunchTiledCombine's with projections
// and z_maps), meet again, and run the transpose of their orbits in fixed point (as
// LaunchTiledBack's with fixed_point), whose write-back the same thread block reads at its
// next forward: two barriers per block and no launch. All pointers on the device.
struct TiledSweep {
  const OrbitBlock* blocks = nullptr;  // the sweep's blocks, in order
  int32_t block_count = 0;
  const float* projections = nullptr;
  float* residual = nullptr;
  float* sums = nullptr;       // a per-map buffer, zero before the sweep (left zero)
  float* z_maps = nullptr;     // a per-map buffer
  int32_t* largest_z_bits = nullptr;  // one per block, zero before the sweep
  float* x = nullptr;
  int32_t clamp = 0;
  int32_t prefetch = 0;        // bring the next block's slots into L2 during the transpose
  const int32_t* owner_begin = nullptr;  // TiledSweepOwners::begin
  const int32_t* owned_orbits = nullptr; // TiledSweepOwners::orbits
  int32_t resident_x = 0;      // set by LaunchTiledSweep from its shape
  int32_t stage_warps = 0;     // set by LaunchTiledSweep from its shape
  int32_t stage_tasks = 0;     // set by LaunchTiledSweep from its shape
  int32_t stage_slots = 0;     // set by LaunchTiledSweep from its shape
  int32_t slot_buffers = 0;    // set by LaunchTiledSweep from its shape
};
// How a sweep launch runs: its thread blocks (0: it cannot run here), the most orbits one
// owns, whether x stays in their shared memory for the whole sweep (else each block's
// write-back reads x from device memory and writes it there, and leaves it in the planes
// for the next block's forward), and their threads.
struct TiledSweepShape {
  int thread_blocks = 0;
  int most_orbits = 0;
  bool resident_x = false;
  int threads = 0;
  // The most layout warps and tasks of one thread block in one stored view
  // (CountTiledSweepStage): the bookkeeping each block stages in shared memory.
  int stage_warps = 0;
  int stage_tasks = 0;
  // The most slots of one thread block in one stored view (CountTiledSweepSlots), when
  // each block's are copied into its shared memory for its products; 0 when they do not fit
  // there, and the products read the slots from device memory. slot_buffers: 2 when two
  // blocks' worth fit (the next block's copy lands during this block's combine and
  // transpose), 1 when one does (the next block's lands during this block's write-back), 0.
  int stage_slots = 0;
  int slot_buffers = 0;
};
// The thread blocks a sweep launch with blocks_per_multiprocessor (1 or 2: 768 threads per
// multiprocessor as one thread block or two) runs on the current device, to deal the orbits
// to: at most d.orbits_per_view; 0 without cooperative launch, or for 2 when the orbits are
// fewer than the thread blocks.
cudaError_t TiledSweepThreadBlocks(const TiledDeviceArrays& d, int blocks_per_multiprocessor,
                                   int* thread_blocks);
// The shape for those thread blocks owning at most most_orbits orbits each, with as much in
// their shared memory as it holds (and that shared memory allowed), in this order of
// preference: two blocks' slots (stage_slots each; not above most_slot_buffers, nor below
// compute capability 9.0), then one block's, each with x resident (unless not
// allow_resident_x) and then with x through device memory at each block; x resident only;
// neither. thread_blocks 0 when even the accumulators do not fit blocks_per_multiprocessor
// to a multiprocessor.
cudaError_t FitTiledSweep(const TiledDeviceArrays& d, int thread_blocks,
                          int blocks_per_multiprocessor, int most_orbits, int stage_warps,
                          int stage_tasks, int64_t stage_slots, int most_slot_buffers,
                          bool allow_resident_x, TiledSweepShape* shape);
cudaError_t LaunchTiledSweep(const TiledDeviceArrays& d, const TiledSweep& sweep,
                             const TiledSweepShape& shape, cudaStream_t stream);

// The CSR matrix on the device; rows of a block of views.
struct CsrDeviceArrays {
  const int64_t* row_offsets;
  const int32_t* column_indices;
  const float* values;
  const float* row_norm2;
  int32_t columns;
};
// For the block's views (device array `views` of `count`): with projections == nullptr,
// out[k * columns + c] = (A x) at views[k] (the block's own layout); else, at
// view * columns + c, residual = projections - A x and out = step_scale * residual / ||a||^2.
cudaError_t LaunchCsrBlockForward(const CsrDeviceArrays& a, const int32_t* views, int32_t count,
                                  float step_scale, const float* x, const float* projections,
                                  float* residual, float* out, cudaStream_t stream);
// accumulator[j] += sum over the block's rows of a_ij z_i (atomicAdd: plain CSR has no
// conflict-free order), z_i at k * columns + c when z_compact, else at view * columns + c.
cudaError_t LaunchCsrBlockBack(const CsrDeviceArrays& a, const int32_t* views, int32_t count,
                               const float* z, bool z_compact, float* accumulator,
                               cudaStream_t stream);
// x += accumulator (then max(x, 0) when clamp); accumulator = 0.
cudaError_t LaunchAddAndClear(float* x, float* accumulator, int64_t count, bool clamp,
                              cudaStream_t stream);

// Sum of squares in float64: partials[block] for LaunchSumSquares's blocks (the host adds
// them); SumSquaresBlocks(count) partials.
int SumSquaresBlocks(int64_t count);
cudaError_t LaunchSumSquares(const float* v, int64_t count, double* partials,
                             cudaStream_t stream);

}  // namespace tomo::core::system_matrix::cuda
