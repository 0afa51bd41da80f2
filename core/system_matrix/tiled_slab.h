// The plain structs of the tiled layout (tiled_runs.h), shared by the CPU builder, the CPU
// reference of its products and the CUDA kernels (cuda/tiled_products.cu), with the map of
// a pixel's place inside one tile onto its place inside the image of that tile.
//
// The grid is cut into tiles by one partition of [0, n) used on both axes, symmetric about
// the centre (interval i and m - 1 - i have the same length), so that every square map
// sends tiles onto tiles. The tiles fall into orbits under the eight maps; an orbit is
// named by its representative T0 (the tile whose doubled centred indices satisfy
// ci >= cj >= 0) and holds the tiles M_h(T0), h < 8 (fewer distinct ones on the diagonals
// and centre lines). Inside a tile a pixel is (lx, ly) from the tile's corner; a tile's
// shared-memory plane holds pixel (lx, ly) at ly * stride + lx.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TOMO_TILED_FN __host__ __device__ inline
#else
#define TOMO_TILED_FN inline
#endif

namespace tomo::core::system_matrix {

// One warp's share of one stored tile: 32 lanes x steps slots, slot s of lane l at
// slot_base + 32 s + l; its lanes' rays at lane_rays[32 w + l] (tiled_runs.h).
// map: the g with this tile = M_g(T0) of its orbit (the first such g), so that the slots'
// pixels are given in T0's frame: the stored pixel is M_g(p0) for p0 the slot's pixel of T0.
struct TiledWarp {
  int64_t slot_base = 0;
  int32_t steps = 0;
  int32_t map = 0;
};

// The slots of warps first .. last of one orbit (consecutive warps' slots follow each
// other): from first's base to the end of last's.
TOMO_TILED_FN int64_t SlotSpan(const TiledWarp& first, const TiledWarp& last) {
  return last.slot_base + 32 * int64_t{last.steps} - first.slot_base;
}

inline constexpr uint16_t kTiledNoRay = 0xffff;

// The GPU kernels' unit of work (tiled_tasks.h): steps [chunk * kTiledTaskSteps, +
// kTiledTaskSteps) of the warp orbit_warp_begin[(stored view, orbit)] + warp_offset, fewer at
// its end. 4 bytes: the task tables stay under 1% of the layout.
inline constexpr int kTiledTaskSteps = 8;
struct TiledTask {
  uint16_t warp_offset = 0;
  uint16_t chunk = 0;
};

// Tasks per thread block of the forward product: consecutive tasks of one orbit of tiles
// (whose x the block loads into shared memory), one per warp.
inline constexpr int kTiledForwardTasks = 8;

// One orbit of tiles: the corner (pixel indices) of M_h(T0) for each h, T0's side lengths
// (M_h(T0) has them swapped when M_h swaps the axes), and distinct: bit h set when M_h(T0)
// differs from M_e(T0) for every e < h.
struct TileOrbit {
  int32_t corner_x[8];
  int32_t corner_y[8];
  int32_t size_x = 0, size_y = 0;
  int32_t distinct = 0;
  // 0 in the layout. The one-launch sweep notes here, in its shared-memory copy, which table
  // of places moves the orbit's x (cuda/tiled_products.cu: OrbitTable).
  int32_t table = 0;
};

// Map m given as its matrix [[xx, xy], [yx, yy]] (kSquareMaps). Pixel (lx, ly) of tile U,
// U = M(T0) with T0 of sides (sx0, sy0): its place (lx0, ly0) in T0, that is M^-1 applied
// about the tiles' centres (the maps are orthogonal: M^-1 = M^T). Exact in doubled centred
// coordinates for odd and even sides.
TOMO_TILED_FN void TileLocalToRepresentative(int xx, int xy, int yx, int yy, int sx0, int sy0,
                                             int lx, int ly, int* lx0, int* ly0) {
  const bool swaps = xx == 0;
  const int ux = swaps ? sy0 : sx0, uy = swaps ? sx0 : sy0;
  const int a = 2 * lx - (ux - 1), b = 2 * ly - (uy - 1);
  *lx0 = (xx * a + yx * b + (sx0 - 1)) >> 1;
  *ly0 = (xy * a + yy * b + (sy0 - 1)) >> 1;
}

}  // namespace tomo::core::system_matrix
