// DenseSlab: one warp's share of the symmetric format's dense layout (dense_slabs.h), a
// plain struct shared by the CPU builder and the CUDA kernels.
//
// Lane l (0..31) of the slab holds part of stored row first_row + l of stored view
// stored_view (lanes past the detector's last column hold nothing); its entries at steps
// j = 0 .. width - 1 sit at offset + 32 j + l of the value and pixel-offset arrays, so that
// the 32 lanes of one step read one 128-byte line of values and half a line of offsets. `segment` says which part of the rows
// (segment s of S: the s-th S-th of each row's entries, along the ray).
#pragma once

#include <cstdint>

namespace tomo::core::system_matrix {

struct DenseSlab {
  int64_t offset = 0;
  int32_t stored_view = 0;
  int32_t first_row = 0;  // detector column of lane 0
  int32_t segment = 0;
  int32_t width = 0;      // steps
  // 1: the group's rays run mostly along x (entries ordered by ix), so the lanes of a step
  // lie along a column of pixels; 0: along y, the lanes along a row.
  int32_t along_x = 1;
  // The slab's pixels are base + offsets: base = PackPixel(ix0, iy0), the least ix and iy
  // of the slab; an entry's offset is (ix - ix0) | (iy - iy0) << 8.
  uint32_t base = 0;
};

// A stored pixel in the pixel array: ix | iy << 16 (grids below 65536).
inline uint32_t PackPixel(int32_t ix, int32_t iy) {
  return static_cast<uint32_t>(ix) | (static_cast<uint32_t>(iy) << 16);
}

}  // namespace tomo::core::system_matrix
