// Transposed product of one orbit block of the symmetric stored matrix, without atomics.
//
// Launch shape: kTileX x kTileY threads per block over the n x n image, so that a warp
// covers 8 x 4 pixels: square enough that for the four maps that keep the axes and for the
// four that swap them alike, its pixels in the stored frame meet few rays, whose row data,
// runs (consecutive for consecutive pixel rows) and weights share cache lines. Thread
// (px, py) owns output pixel p and is the only one to write it. For each view k of the orbit it moves p
// into the stored view's frame (q = M_k^T p, the inverse of the map), finds the detector
// columns whose ray wedges can meet q (projecting q's corners from the source, plus half a
// column and a 0.01-column margin for float32 rounding), reads each such ray's weight at q
// from the stored runs (0 when the run does not hold q) and adds weight * z. It then adds
// the sum to x[p] and clamps. Reads: per pixel and view about three rays' run records and
// weights, shared by neighbouring pixels through L1; z; x once. Writes: x once.
// Because every output has one owner, the result is the same whatever the order of threads.
#include <cmath>

#include "core/system_matrix/cuda/stored_matrix_kernels.h"

namespace tomo::core::system_matrix::cuda {
namespace {

constexpr int kTileX = 8;   // a warp: 8 x 4 pixels
constexpr int kTileY = 16;  // 128 threads per block
constexpr float kWindowMargin = 0.01f;  // columns; float32 column coordinates err ~1e-4

__device__ float ColumnCoordinate(const StoredViewGeometry& g, float half, float px, float py) {
  if (!g.cylindrical) {
    const float cross_center = g.to_center_x * py - g.to_center_y * px;
    const float cross_u = g.u_x * py - g.u_y * px;
    return half - cross_center / cross_u;
  }
  const float w_x = g.to_center_x / g.radius, w_y = g.to_center_y / g.radius;
  const float e_x = g.u_x / g.step, e_y = g.u_y / g.step;
  return half + atan2f(px * e_x + py * e_y, px * w_x + py * w_y) * g.radius / g.step;
}

__global__ void __launch_bounds__(kTileX * kTileY)
    SymmetricBackGatherKernel(SymmetricDeviceArrays a, StoredViewGeometry g, OrbitBlock block,
                              const float* __restrict__ z_full, float* __restrict__ x,
                              bool clamp) {
  const int px = blockIdx.x * kTileX + threadIdx.x;
  const int py = blockIdx.y * kTileY + threadIdx.y;
  if (px >= a.n || py >= a.n) return;
  const int n1 = a.n - 1;
  const int pcx = 2 * px - n1, pcy = 2 * py - n1;
  const float half = 0.5f * static_cast<float>(a.columns - 1);
  const int64_t row0 = static_cast<int64_t>(block.stored_view) * a.columns;
  float sum = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    if (k >= block.count) break;
    // q = M^T p (the maps are orthogonal).
    const int qx = (block.m[k][0] * pcx + block.m[k][2] * pcy + n1) >> 1;
    const int qy = (block.m[k][1] * pcx + block.m[k][3] * pcy + n1) >> 1;
    float lo = 1e30f, hi = -1e30f;
    for (int corner = 0; corner < 4; ++corner) {
      const float cx = g.origin_x + static_cast<float>(qx + (corner & 1)) * g.pixel;
      const float cy = g.origin_y + static_cast<float>(qy + (corner >> 1)) * g.pixel;
      const float t = ColumnCoordinate(g, half, cx, cy);
      lo = fminf(lo, t);
      hi = fmaxf(hi, t);
    }
    const int first = max(0, static_cast<int>(ceilf(lo - 0.5f - kWindowMargin)));
    const int last = min(a.columns - 1, static_cast<int>(floorf(hi + 0.5f + kWindowMargin)));
    const float* z = z_full + static_cast<int64_t>(block.view[k]) * a.columns;
    for (int c = first; c <= last; ++c) {
      const int64_t row = row0 + c;
      const int j = qy - a.row_iy_first[row];
      const int64_t run0 = a.row_run_begin[row];
      if (j < 0 || j >= a.row_run_begin[row + 1] - run0) continue;
      const uint2 run = a.runs[run0 + j];
      const int dx = qx - static_cast<int>(run.y & 0xffffu);
      if (dx < 0 || dx >= static_cast<int>(run.y >> 16)) continue;
      const float w = a.values[a.row_value_begin[row] + run.x + dx];
      sum += w * z[block.reversed[k] ? a.columns - 1 - c : c];
    }
  }
  const int64_t at = static_cast<int64_t>(py) * a.n + px;
  const float updated = x[at] + sum;
  x[at] = clamp ? fmaxf(updated, 0.0f) : updated;
}

}  // namespace

cudaError_t LaunchSymmetricBackGather(const SymmetricDeviceArrays& a,
                                      const StoredViewGeometry& geometry,
                                      const OrbitBlock& block, const float* z_full, float* x,
                                      bool clamp, cudaStream_t stream) {
  const dim3 threads(kTileX, kTileY);
  const dim3 blocks((a.n + kTileX - 1) / kTileX, (a.n + kTileY - 1) / kTileY);
  SymmetricBackGatherKernel<<<blocks, threads, 0, stream>>>(a, geometry, block, z_full, x, clamp);
  return cudaGetLastError();
}

}  // namespace tomo::core::system_matrix::cuda
