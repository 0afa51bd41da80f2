// What one lane of the dense layout's kernels computes (dense_products.cu), as host/device
// functions, so that a CPU test runs every lane of a launch on host copies of the arrays
// (tests/core/system_matrix/dense_slabs_test.cc) without a GPU.
#pragma once

#include <cstdint>

#include "core/system_matrix/cuda/stored_matrix_kernels.h"

#if defined(__CUDACC__)
#define TOMO_DENSE_MATH __host__ __device__ __forceinline__
#else
#define TOMO_DENSE_MATH inline
#endif

namespace tomo::core::system_matrix::cuda {

// Forward, one lane and one view k of the block: the sum of the lane's weights times x at
// the images of their pixels under view k's map (the block's eight warps, one per view,
// read the slab's lines once from L2 and then from L1).
//
// x_transposed (optional: nullptr reads x alone) is the image transposed, xt[ix * n + iy] =
// x[iy * n + ix]. The lanes of one step lie along a column of pixels (slab.along_x) or a
// row; a map that keeps the axes keeps that line's direction, one that swaps them turns it.
// Reading each map's pixels from the copy in which that line is contiguous makes the 32
// lanes' reads of x fall in a few cache lines for all eight maps, not for four of them.
TOMO_DENSE_MATH float DenseForwardLaneView(const DenseDeviceArrays& d, const DenseSlab& slab,
                                           const OrbitBlock& block, int k, int lane,
                                           const float* x, const float* x_transposed) {
  const int n1 = d.n - 1;
  const bool keeps_axes = block.m[k][1] == 0;
  const bool transposed = x_transposed != nullptr && keeps_axes == (slab.along_x != 0);
  float sum = 0.0f;
#if defined(__CUDA_ARCH__)
#pragma unroll 4
#endif
  for (int j = 0; j < slab.width; ++j) {
    const int64_t e = slab.offset + 32 * static_cast<int64_t>(j) + lane;
    const uint32_t o = d.offsets[e];
    const int cx = 2 * (static_cast<int>(slab.base & 0xffffu) + static_cast<int>(o & 0xffu)) - n1;
    const int cy = 2 * (static_cast<int>(slab.base >> 16) + static_cast<int>(o >> 8)) - n1;
    const int ox = (block.m[k][0] * cx + block.m[k][1] * cy + n1) >> 1;
    const int oy = (block.m[k][2] * cx + block.m[k][3] * cy + n1) >> 1;
    const float* at = transposed ? x_transposed + static_cast<int64_t>(ox) * d.n + oy
                                 : x + static_cast<int64_t>(oy) * d.n + ox;
#if defined(__CUDA_ARCH__)
    sum += d.values[e] * __ldg(at);
#else
    sum += d.values[e] * *at;
#endif
  }
  return sum;
}

// All the block's views for one lane (the CPU's emulation of the views' warps).
inline void DenseForwardLane(const DenseDeviceArrays& d, const DenseSlab& slab,
                             const OrbitBlock& block, int lane, const float* x,
                             const float* x_transposed, float sums[8]) {
  for (int k = 0; k < block.count; ++k) {
    sums[k] += DenseForwardLaneView(d, slab, block, k, lane, x, x_transposed);
  }
}

// Where the lane's sums go (LaunchSymmetricCombine's partials); nothing for lanes past the
// last column.
TOMO_DENSE_MATH void DenseWritePartials(const DenseDeviceArrays& d, const DenseSlab& slab,
                                        const OrbitBlock& block, int lane, const float sums[8],
                                        float* partials) {
  const int row = slab.first_row + lane;
  if (row >= d.columns) return;
  for (int k = 0; k < 8; ++k) {
    if (k < block.count) {
      partials[(static_cast<int64_t>(slab.segment) * 8 + k) * d.columns + row] = sums[k];
    }
  }
}

TOMO_DENSE_MATH void AddToPixel(float* to, float value) {
#if defined(__CUDA_ARCH__)
  atomicAdd(to, value);
#else
  *to += value;
#endif
}

// Transposed product, one lane: for each step with a weight, w z_k(row) added at the
// pixel's image under view k's map, for every view k of the block.
TOMO_DENSE_MATH void DenseBackLane(const DenseDeviceArrays& d, const DenseSlab& slab,
                                   const OrbitBlock& block, int lane, const float* z_full,
                                   float* x) {
  const int row = slab.first_row + lane;
  if (row >= d.columns) return;
  float z[8];
  for (int k = 0; k < 8; ++k) {
    z[k] = 0.0f;
    if (k < block.count) {
      const int column = block.reversed[k] ? d.columns - 1 - row : row;
      z[k] = z_full[static_cast<int64_t>(block.view[k]) * d.columns + column];
    }
  }
  const int n1 = d.n - 1;
  for (int j = 0; j < slab.width; ++j) {
    const int64_t e = slab.offset + 32 * static_cast<int64_t>(j) + lane;
    const float w = d.values[e];
    if (w == 0.0f) continue;
    const uint32_t o = d.offsets[e];
    const int cx = 2 * (static_cast<int>(slab.base & 0xffffu) + static_cast<int>(o & 0xffu)) - n1;
    const int cy = 2 * (static_cast<int>(slab.base >> 16) + static_cast<int>(o >> 8)) - n1;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int k = 0; k < 8; ++k) {
      if (k < block.count) {
        const int ox = (block.m[k][0] * cx + block.m[k][1] * cy + n1) >> 1;
        const int oy = (block.m[k][2] * cx + block.m[k][3] * cy + n1) >> 1;
        AddToPixel(x + static_cast<int64_t>(oy) * d.n + ox, w * z[k]);
      }
    }
  }
}

}  // namespace tomo::core::system_matrix::cuda
