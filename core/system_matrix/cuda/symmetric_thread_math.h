// What one thread of the symmetric format's kernels computes (symmetric_forward.cu,
// symmetric_back.cu), as host/device functions: the kernels call them, and a CPU test
// (tests/core/system_matrix/cuda/symmetric_thread_math_test.cc) runs them over every thread
// of a launch on host copies of the arrays, so that the kernels' indexing is checked
// without a GPU.
#pragma once

#include <math.h>

#include <cstdint>

#include "core/system_matrix/cuda/stored_matrix_kernels.h"

#if defined(__CUDACC__)
#define TOMO_THREAD_MATH __host__ __device__ __forceinline__
#else
#define TOMO_THREAD_MATH inline
#endif

namespace tomo::core::system_matrix::cuda {

// A read of x through the read-only cache on the device.
TOMO_THREAD_MATH float LoadReadOnly(const float* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

// Forward, one lane: adds to sums[k] (k < block.count) the products of stored row c's runs
// j = segment * 32 + lane, + 32 * segments, ... with x at the pixels' images under map k.
TOMO_THREAD_MATH void ForwardLaneSums(const SymmetricDeviceArrays& a, const OrbitBlock& block,
                                      int segments, int c, int segment, int lane,
                                      const float* x, float sums[8]) {
  const int64_t row = static_cast<int64_t>(block.stored_view) * a.columns + c;
  const int64_t run0 = a.row_run_begin[row];
  const int runs = static_cast<int>(a.row_run_begin[row + 1] - run0);
  const int iy0 = a.row_iy_first[row];
  const float* values = a.values + a.row_value_begin[row];
  const int n1 = a.n - 1;
  for (int j = segment * 32 + lane; j < runs; j += 32 * segments) {
    const uint2 run = a.runs[run0 + j];
    const int ix0 = static_cast<int>(run.y & 0xffffu);
    const int length = static_cast<int>(run.y >> 16);
    const int cy = 2 * (iy0 + j) - n1;
    for (int e = 0; e < length; ++e) {
      const float w = values[run.x + e];
      const int cx = 2 * (ix0 + e) - n1;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int k = 0; k < 8; ++k) {
        if (k < block.count) {
          const int ox = (block.m[k][0] * cx + block.m[k][1] * cy + n1) >> 1;
          const int oy = (block.m[k][2] * cx + block.m[k][3] * cy + n1) >> 1;
          sums[k] += w * LoadReadOnly(x + static_cast<int64_t>(oy) * a.n + ox);
        }
      }
    }
  }
}

// Combine, one thread (view k of the block, stored column c): adds the segments' partials
// and writes the product, or the residual and the scaled residual.
TOMO_THREAD_MATH void CombineOne(const SymmetricDeviceArrays& a, const OrbitBlock& block,
                                 int segments, int k, int c, const float* partials,
                                 const float* projections, float* residual, float* out) {
  float sum = 0;
  for (int s = 0; s < segments; ++s) sum += partials[(static_cast<int64_t>(s) * 8 + k) * a.columns + c];
  const int column = block.reversed[k] ? a.columns - 1 - c : c;
  const int64_t at = static_cast<int64_t>(block.view[k]) * a.columns + column;
  if (projections == nullptr) {
    out[at] = sum;
    return;
  }
  const float r = projections[at] - sum;
  residual[at] = r;
  const float norm2 = a.row_norm2[static_cast<int64_t>(block.stored_view) * a.columns + c];
  out[at] = norm2 > 1e-20f ? block.step_scale * r / norm2 : 0.0f;
}

// Where the line from the stored view's source through a point (relative to the source)
// meets the detector, in columns (FanScan::ColumnCoordinate in float32).
TOMO_THREAD_MATH float ColumnCoordinate(const StoredViewGeometry& g, float half, float px,
                                        float py) {
  if (!g.cylindrical) {
    const float cross_center = g.to_center_x * py - g.to_center_y * px;
    const float cross_u = g.u_x * py - g.u_y * px;
    return half - cross_center / cross_u;
  }
  const float w_x = g.to_center_x / g.radius, w_y = g.to_center_y / g.radius;
  const float e_x = g.u_x / g.step, e_y = g.u_y / g.step;
  return half + atan2f(px * e_x + py * e_y, px * w_x + py * w_y) * g.radius / g.step;
}

// Columns; float32 column coordinates err by about 1e-4.
constexpr float kWindowMargin = 0.01f;

// Transposed product, one thread: the sum over the block's views k of the weights of the
// rays that meet output pixel (px, py) times z, read from the stored runs.
TOMO_THREAD_MATH float BackGatherPixel(const SymmetricDeviceArrays& a,
                                       const StoredViewGeometry& g, const OrbitBlock& block,
                                       const float* z_full, int px, int py) {
  const int n1 = a.n - 1;
  const int pcx = 2 * px - n1, pcy = 2 * py - n1;
  const float half = 0.5f * static_cast<float>(a.columns - 1);
  const int64_t row0 = static_cast<int64_t>(block.stored_view) * a.columns;
  float sum = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
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
    const int window_first = static_cast<int>(ceilf(lo - 0.5f - kWindowMargin));
    const int window_last = static_cast<int>(floorf(hi + 0.5f + kWindowMargin));
    const int first = window_first < 0 ? 0 : window_first;
    const int last = window_last > a.columns - 1 ? a.columns - 1 : window_last;
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
  return sum;
}

}  // namespace tomo::core::system_matrix::cuda
