// TiledRuns: the symmetric format's stored rows re-laid by square pixel tiles, so that the
// GPU products (cuda/tiled_products.cu) gather x from, and scatter A^T z into, shared
// memory, and stream the matrix in coalesced lines with no dependent look-up.
//
// The grid is cut into tiles of at most tile_side pixels a side by a partition symmetric
// about the centre (tiled_slab.h), so that the eight square maps send tiles onto tiles; the
// tiles fall into orbits. The products work orbit by orbit: the entries of the orbit's (up
// to) eight tiles of the stored view are read once and, for every view k of the block,
// each entry is used at M_k of its pixel, which lies in a tile of the same orbit. So the
// forward loads x over the orbit's tiles into shared memory (each of its thread blocks, which
// take the orbit's tasks: tiled_tasks.h), and the transpose adds into the orbit's tiles in
// shared memory and writes them once: each pixel has one owner, no global atomics (the
// forward adds its ray sums with global atomics: 8 per lane and task).
//
// Within (stored view, tile) the rays that meet the tile become lanes, ceil(rays / 32)
// warps of them: a ray's entries in the tile, in the order of the stored runs, cut into
// pieces of at most L entries, and the pieces paired into lanes (the longest with the
// shortest that fits beside it within L), L the least for which they fit: a lane holds
// one or two pieces (a ray may span several lanes, each adding its own part; a lane with
// two rays moves to the second at its switch step). Lanes are sorted longest first, 32 to a
// warp. Slot s of lane l of a warp sits at slot_base + 32 s + l (one coalesced line of
// weights and half a line of pixel places per step), padded to the warp's longest lane with
// weight 0. A lane's entries of one ray are ordered so that the 32 lanes of a step fall in
// different shared-memory banks where a few entries' look-ahead allows: each step's lanes
// are matched to distinct banks among their next entries' (a lane's sum does not depend on
// the order); pads sit at a pixel of T0 in the least used bank. Per slot: the
// weight (float) and the pixel's place in the orbit's representative tile T0,
// ly0 * stride + lx0 (uint16), that is the stored pixel M_g^-1 mapped back, g = the warp's
// map: the kernels then index shared memory with no arithmetic per entry.
// stride = tile_side + 1: a tile's columns fall in different banks.
//
// Bytes: 6 per slot (padding included), 6 per lane (its rays and switch), 16 per warp, 8
// per (stored view, orbit), 4 per stored view (its column bound), 4 per stored row (the row
// norms), and the tasks' (tiled_tasks.h: 4 per task, 8 per (stored view, orbit)).
//
//   TOMO_ASSIGN_OR_RETURN(TiledRuns t, TiledRuns::Build(matrix, TiledRuns::TileSideFor(n)));
//   t.ForwardBlock(matrix, b, x, y);  // the layout's products on the CPU (the reference)
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/default_init_vector.h"
#include "core/system_matrix/symmetric_system_matrix.h"
#include "core/system_matrix/tiled_slab.h"
#include "core/system_matrix/tiled_tasks.h"

namespace tomo::core::system_matrix {

class TiledRuns {
 public:
  static constexpr int kLanes = 32;
  static constexpr int kMinTileSide = 4;
  // 8 planes of 64 x 65 floats: 133 KB of shared memory per thread block.
  static constexpr int kMaxTileSide = 64;

  // INVALID_ARGUMENT naming the value when tile_side is outside [kMinTileSide,
  // kMaxTileSide] or the scan has 65535 or more detector columns.
  static absl::StatusOr<TiledRuns> Build(const SymmetricSystemMatrix& a, int tile_side,
                                         int threads = 0);
  // The bytes() of Build(the scan's symmetric matrix, tile_side), counted from the rays'
  // extents alone (no weights, no layout), so that a job is refused before anything is
  // built. tile_side 0: TileSideFor(the scan's nx). FAILED_PRECONDITION when the scan lacks
  // the square symmetry; INVALID_ARGUMENT as Build.
  static absl::StatusOr<uint64_t> CountBytes(const FanScan& scan, int tile_side, int threads = 0);
  // The default side for an n x n grid: 16 up to 1024, else 32 (the fastest of 8, 16 and 32
  // measured at 512^2 and 1024^2, of 16 and 32 at 2048^2; bench/NOTES.md).
  static int TileSideFor(int64_t n);
  // The symmetric partition of [0, n) into intervals of at most tile_side (an odd count for
  // odd n, so that the centre pixel's interval maps onto itself): bounds, count + 1 values.
  static std::vector<int32_t> Partition(int32_t n, int tile_side);

  int tile_side() const { return tile_side_; }
  int32_t stride() const { return tile_side_ + 1; }
  int32_t n() const { return n_; }
  int32_t columns() const { return columns_; }
  const std::vector<int32_t>& bounds() const { return bounds_; }
  int64_t tiles_per_axis() const { return static_cast<int64_t>(bounds_.size()) - 1; }
  int64_t orbits_per_view() const { return static_cast<int64_t>(orbits_.size()); }
  const std::vector<TileOrbit>& orbits() const { return orbits_; }
  // Warps of (stored view v, orbit o): [orbit_warp_begin[v * orbits + o], ... [+ 1]).
  const std::vector<int64_t>& orbit_warp_begin() const { return orbit_warp_begin_; }
  const std::vector<TiledWarp>& warps() const { return warps_; }
  // Per lane (32 per warp): its rays, first | second << 16 (kTiledNoRay: none), and the
  // step at which it moves from the first to the second.
  const std::vector<uint32_t>& lane_rays() const { return lane_rays_; }
  const std::vector<uint16_t>& lane_switch() const { return lane_switch_; }
  // Per slot (sized once, then written by the build's threads: see default_init_vector.h).
  const DefaultInitVector<uint16_t>& local() const { return local_; }
  const DefaultInitVector<float>& weights() const { return weights_; }
  // Per stored view: the largest sum of |weight| over its rays at one pixel (bounds what
  // one view adds to a pixel in the transpose: |sum| <= bound * max |z|).
  const std::vector<float>& column_bound() const { return column_bound_; }
  // The warps cut into the GPU kernels' tasks (tiled_tasks.h).
  const TiledTasks& tasks() const { return tasks_; }

  int64_t entries() const { return entries_; }  // stored entries placed (= the matrix's)
  int64_t slots() const { return static_cast<int64_t>(weights_.size()); }
  // (lane, ray) pairs: the forward's global atomics are 8 per segment.
  int64_t ray_segments() const { return ray_segments_; }
  // Shared-memory wavefronts summed over every warp step: a gather (the forward: distinct
  // addresses per bank, the most in one bank) and an atomic add (the transpose: lanes per
  // bank, the most in one bank). 1 per step is conflict-free.
  int64_t gather_wavefronts() const { return gather_wavefronts_; }
  int64_t atomic_wavefronts() const { return atomic_wavefronts_; }
  uint64_t bytes() const;

  // The layout's products on the CPU, orbit by orbit as the kernels run them (float sums
  // per lane as on the device): y[k * columns + c] = (A x) at view BlockViews(block)[k],
  // column c (as SymmetricSystemMatrix::ForwardBlock); x += A_b^T z, z laid out as y.
  void ForwardBlock(const SymmetricSystemMatrix& a, int64_t block, const float* x, float* y) const;
  void BackBlockAdd(const SymmetricSystemMatrix& a, int64_t block, const float* z, float* x) const;

 private:
  int tile_side_ = 16;
  int32_t n_ = 0, columns_ = 0;
  std::vector<int32_t> bounds_;
  std::vector<TileOrbit> orbits_;
  std::vector<int64_t> orbit_warp_begin_;
  std::vector<TiledWarp> warps_;
  std::vector<uint32_t> lane_rays_;
  std::vector<uint16_t> lane_switch_;
  DefaultInitVector<uint16_t> local_;
  DefaultInitVector<float> weights_;
  std::vector<float> column_bound_;
  TiledTasks tasks_;
  int64_t entries_ = 0, ray_segments_ = 0;
  int64_t gather_wavefronts_ = 0, atomic_wavefronts_ = 0;
  int64_t row_norm_bytes_ = 0;
};

}  // namespace tomo::core::system_matrix
