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
#if defined(__CUDA_ARCH__)
#pragma unroll 8
#endif
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

// The detector columns [first, last] whose ray wedges can meet stored pixel (qx, qy):
// between the projections of the pixel's corners, widened by half a column and the margin.
TOMO_THREAD_MATH void RayWindow(const StoredViewGeometry& g, float half, int columns, int qx,
                                int qy, int* first, int* last) {
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
  *first = window_first < 0 ? 0 : window_first;
  *last = window_last > columns - 1 ? columns - 1 : window_last;
}

// The weight of stored row `row` at stored pixel (qx, qy) through the packed row header,
// 0 where the row does not meet it (runs and values a.stride slots apart).
TOMO_THREAD_MATH float HeaderWeight(const SymmetricDeviceArrays& a, int64_t row, int qx,
                                    int qy) {
  const uint4 header = a.row_headers[row];
  const int j = qy - static_cast<int>(header.w & 0xffffu);
  if (j < 0 || j >= static_cast<int>(header.w >> 16)) return 0.0f;
  const uint32_t stride = static_cast<uint32_t>(a.stride);
  const uint2 run = a.runs[header.x + stride * static_cast<uint32_t>(j)];
  const int dx = qx - static_cast<int>(run.y & 0xffffu);
  if (dx < 0 || dx >= static_cast<int>(run.y >> 16)) return 0.0f;
  const uint64_t value_begin = static_cast<uint64_t>(header.y) | (static_cast<uint64_t>(header.z) << 32);
  return a.values[value_begin + static_cast<uint64_t>(stride) * (run.x + static_cast<uint32_t>(dx))];
}

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
    int first, last;
    RayWindow(g, half, a.columns, qx, qy, &first, &last);
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

// Forward on the interleaved layout, one lane: walks entries step_begin .. step_end - 1 of
// its row in step with the other lanes (values of one step in one line), moving to the
// next run (pixel row) when the current one ends, and adds w x(M_k p) to sums[k] for every
// view k of the block. x_transposed as DenseForwardLane's: each map reads from the copy in
// which the step's lanes lie contiguous (slab.along_x: the lanes lie along a column).
TOMO_THREAD_MATH void InterleavedForwardLane(const InterleavedDeviceArrays& d,
                                             const InterleavedSlab& slab,
                                             const OrbitBlock& block, int lane, const float* x,
                                             const float* x_transposed, float sums[8]) {
  const int row = slab.first_row + lane;
  if (row >= d.columns) return;
  const uint4 header = d.row_headers[static_cast<int64_t>(slab.stored_view) * d.columns + row];
  const int iy0 = static_cast<int>(header.w & 0xffffu);
  const int runs = static_cast<int>(header.w >> 16);
  int j = d.cursors[slab.cursor_offset + lane];
  if (j >= runs) return;
  uint2 run = d.runs[slab.run_base + 32u * static_cast<uint32_t>(j) + static_cast<uint32_t>(lane)];
  const int n1 = d.n - 1;
  bool transposed[8];
  for (int k = 0; k < 8; ++k) {
    const bool keeps_axes = block.m[k][1] == 0;
    transposed[k] = x_transposed != nullptr && keeps_axes == (slab.along_x != 0);
  }
  for (int t = slab.step_begin; t < slab.step_end; ++t) {
    while (t >= static_cast<int>(run.x + (run.y >> 16))) {
      if (++j >= runs) return;
      run = d.runs[slab.run_base + 32u * static_cast<uint32_t>(j) + static_cast<uint32_t>(lane)];
    }
    const float w = LoadReadOnly(d.values + slab.value_base + 32 * static_cast<int64_t>(t) + lane);
    const int cx = 2 * (static_cast<int>(run.y & 0xffffu) + t - static_cast<int>(run.x)) - n1;
    const int cy = 2 * (iy0 + j) - n1;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int k = 0; k < 8; ++k) {
      if (k < block.count) {
        const int ox = (block.m[k][0] * cx + block.m[k][1] * cy + n1) >> 1;
        const int oy = (block.m[k][2] * cx + block.m[k][3] * cy + n1) >> 1;
        const float* at = transposed[k] ? x_transposed + static_cast<int64_t>(ox) * d.n + oy
                                        : x + static_cast<int64_t>(oy) * d.n + ox;
        sums[k] += w * LoadReadOnly(at);
      }
    }
  }
}

// Pixel (ix, iy) of the n x n grid under square map m (MapPixel of square_symmetry.h).
TOMO_THREAD_MATH void MapGridPixel(const SquareMapTable& maps, int m, int n, int ix, int iy,
                                   int* ox, int* oy) {
  const int cx = 2 * ix - (n - 1), cy = 2 * iy - (n - 1);
  *ox = (maps.m[m][0] * cx + maps.m[m][1] * cy + (n - 1)) >> 1;
  *oy = (maps.m[m][2] * cx + maps.m[m][3] * cy + (n - 1)) >> 1;
}

// Whether (ix, iy) represents its orbit: cx >= cy >= 0 in doubled centred coordinates.
TOMO_THREAD_MATH bool IsOrbitRepresentative(int n, int ix, int iy) {
  const int cx = 2 * ix - (n - 1), cy = 2 * iy - (n - 1);
  return cy >= 0 && cx >= cy && ix < n;
}

// The stored weights of the runs format (or the interleaved layout, a.stride 32) for the
// orbit transpose: stored view `stored_view`'s rows.
struct RunsWeightAt {
  SymmetricDeviceArrays a;  // by value: the functor is a kernel argument
  int64_t row0;
  TOMO_THREAD_MATH float operator()(int c, int qx, int qy) const {
    return HeaderWeight(a, row0 + c, qx, qy);
  }
};

// Transposed product, one thread per pixel orbit (representative (ix, iy)): for each of
// the orbit's pixels q_g = M_g q0 in the stored view's frame, the rays meeting q_g (window)
// and their weights (weight_at(c, qx, qy): ray c's stored weight at (qx, qy), 0 where it
// does not meet it), each weight found once and added, for every view k of the block, to
// output pixel M_h q0 with M_k = M_h M_g^-1 (block.slot_for[h][g]). Then each distinct
// output pixel of the orbit is updated once: x = x + sum (clamped at 0 when clamp). Pixels
// of smaller orbits (on a diagonal or a centre line) appear under several h with the same
// sum and are written once. x_transposed (optional) receives the same values transposed
// (xt[ix * n + iy]; the transposed pixel is in the same orbit, so it has the same owner).
template <typename WeightAt>
TOMO_THREAD_MATH void BackOrbitThread(int n, int columns, const StoredViewGeometry& geometry,
                                      const OrbitBlock& block, const SquareMapTable& maps,
                                      const float* z_full, int ix, int iy,
                                      const WeightAt& weight_at, float* x, float* x_transposed,
                                      bool clamp) {
  const float half = 0.5f * static_cast<float>(columns - 1);
  int px[8], py[8];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int h = 0; h < 8; ++h) MapGridPixel(maps, h, n, ix, iy, &px[h], &py[h]);
  float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int g = 0; g < 8; ++g) {
    const int qx = px[g], qy = py[g];
    int first, last;
    RayWindow(geometry, half, columns, qx, qy, &first, &last);
    for (int c = first; c <= last; ++c) {
      const float w = weight_at(c, qx, qy);
      if (w == 0.0f) continue;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int h = 0; h < 8; ++h) {
        const int k = block.slot_for[h][g];
        if (k < 0) continue;
        const int column = block.reversed[k] ? columns - 1 - c : c;
        sums[h] += w * LoadReadOnly(z_full + static_cast<int64_t>(block.view[k]) * columns + column);
      }
    }
  }
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int h = 0; h < 8; ++h) {
    bool seen = false;
    for (int e = 0; e < h; ++e) seen = seen || (px[e] == px[h] && py[e] == py[h]);
    if (seen) continue;
    const int64_t at = static_cast<int64_t>(py[h]) * n + px[h];
    const float updated = x[at] + sums[h];
    const float value = clamp ? fmaxf(updated, 0.0f) : updated;
    x[at] = value;
    if (x_transposed != nullptr) x_transposed[static_cast<int64_t>(px[h]) * n + py[h]] = value;
  }
}

// The runs format's (or the interleaved layout's) orbit thread.
TOMO_THREAD_MATH void BackOrbitRepresentative(const SymmetricDeviceArrays& a,
                                              const StoredViewGeometry& geometry,
                                              const OrbitBlock& block,
                                              const SquareMapTable& maps,
                                              const float* z_full, int ix, int iy, float* x,
                                              float* x_transposed, bool clamp) {
  const RunsWeightAt weight_at{a, static_cast<int64_t>(block.stored_view) * a.columns};
  BackOrbitThread(a.n, a.columns, geometry, block, maps, z_full, ix, iy, weight_at, x,
                  x_transposed, clamp);
}

}  // namespace tomo::core::system_matrix::cuda
