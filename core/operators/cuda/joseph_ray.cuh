// Device code shared by the forward kernels (vector_forward.cu, one thread per ray;
// few_view_forward.cu, a ray split among threads): a detector pixel's ray set up for
// Joseph's method in 3D, and the exact sampler. vector_forward.cu's comment draws the ray
// and explains the planes visited. Included by .cu files only.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/operators/cuda/vector_kernels.h"

namespace tomo::core::cuda {

// Trilinear interpolation from plain loads, each tap bounds-checked (outside = 0). Along
// the main axis the fraction is exactly 0, so this is Joseph's bilinear interpolation in
// the plane.
__device__ __forceinline__ float SampleExact(const float* __restrict__ volume, int nx, int ny,
                                             int nz, float x, float y, float z) {
  const float fx0 = floorf(x), fy0 = floorf(y), fz0 = floorf(z);
  const float tx = x - fx0, ty = y - fy0, tz = z - fz0;
  const int x0 = static_cast<int>(fx0), y0 = static_cast<int>(fy0), z0 = static_cast<int>(fz0);
  float sum = 0.0f;
#pragma unroll
  for (int dz = 0; dz < 2; ++dz) {
    const int zz = z0 + dz;
    const float wz = dz ? tz : 1.0f - tz;
    if (zz < 0 || zz >= nz || wz == 0.0f) continue;
#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
      const int yy = y0 + dy;
      const float wy = dy ? ty : 1.0f - ty;
      if (yy < 0 || yy >= ny || wy == 0.0f) continue;
      const float* row = volume + (static_cast<int64_t>(zz) * ny + yy) * nx;
#pragma unroll
      for (int dx = 0; dx < 2; ++dx) {
        const int xx = x0 + dx;
        const float wx = dx ? tx : 1.0f - tx;
        if (xx < 0 || xx >= nx || wx == 0.0f) continue;
        sum = fmaf(wz * wy * wx, __ldg(row + xx), sum);
      }
    }
  }
  return sum;
}

__device__ __forceinline__ float Pick(int a, float x, float y, float z) {
  return a == 0 ? x : (a == 1 ? y : z);
}

// The ray of detector pixel (row, column) of a view: it samples plane j of its main axis at
// P(j) = base + j step (index units) for j in [j_begin, j_end] (none when the ray misses:
// j_begin > j_end), and the sum times weight (path length per plane, mm) is the pixel.
struct JosephRay {
  int axis;
  int j_begin;
  int j_end;
  float step[3];
  float base[3];
  float weight;
};

__device__ __forceinline__ JosephRay MakeJosephRay(const VectorVolumeShape& vol,
                                                   const VectorDetectorShape& det,
                                                   const VectorFpView& view, int row,
                                                   int column) {
  JosephRay ray;
  const float cr = static_cast<float>(row) - 0.5f * static_cast<float>(det.rows - 1);
  const float cc = static_cast<float>(column) - 0.5f * static_cast<float>(det.columns - 1);
  float pixel[3];
  if (det.cylindrical) {
    // center + (cos g - 1) u + sin g w + cr v, with cos g - 1 = -2 sin^2(g / 2).
    const float g = cc * view.gamma_per_column;
    const float sh = sinf(0.5f * g);
    const float cm1 = -2.0f * sh * sh;
    const float sg = sinf(g);
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      pixel[k] = view.center[k] + cm1 * view.u[k] + sg * view.w[k] + cr * view.v[k];
    }
  } else {
#pragma unroll
    for (int k = 0; k < 3; ++k) pixel[k] = view.center[k] + cc * view.u[k] + cr * view.v[k];
  }
  float origin[3], dir[3];
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    origin[k] = det.cone ? view.source[k] : pixel[k];
    dir[k] = det.cone ? pixel[k] - view.source[k] : view.source[k];
  }
  const int n[3] = {vol.nx, vol.ny, vol.nz};
  // Main axis: the largest |D| in index units; ties go to y, then x, then z (as the CPU
  // reference).
  const float ad0 = fabsf(dir[0]), ad1 = fabsf(dir[1]), ad2 = fabsf(dir[2]);
  int a = 1;
  if (ad0 > ad1) a = 0;
  if (ad2 > (a == 0 ? ad0 : ad1)) a = 2;
  ray.axis = a;
  // Per-axis values of the main axis, by selects (a run-time index would put the arrays
  // in local memory).
  const float dir_a = Pick(a, dir[0], dir[1], dir[2]);
  const float origin_a = Pick(a, origin[0], origin[1], origin[2]);
  const int n_a = a == 0 ? vol.nx : (a == 1 ? vol.ny : vol.nz);
  // Path length per plane: voxel_a / |unit direction_a| = voxel_a |D_mm| / |D_mm,a|.
  float dmm[3];
#pragma unroll
  for (int k = 0; k < 3; ++k) dmm[k] = dir[k] * vol.voxel_mm[k];
  const float length_mm = sqrtf(dmm[0] * dmm[0] + dmm[1] * dmm[1] + dmm[2] * dmm[2]);
  ray.weight = length_mm / fabsf(dir_a);

  // t-interval where every coordinate lies in [-1, n].
  float t_lo = det.cone ? 0.0f : -INFINITY;
  float t_hi = INFINITY;
  bool miss = false;
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    const float lo = -1.0f, hi = static_cast<float>(n[k]);
    if (dir[k] == 0.0f) {
      miss = miss || origin[k] < lo || origin[k] > hi;
    } else {
      const float inv = 1.0f / dir[k];
      float t0 = (lo - origin[k]) * inv, t1 = (hi - origin[k]) * inv;
      if (t0 > t1) {
        const float t = t0;
        t0 = t1;
        t1 = t;
      }
      t_lo = fmaxf(t_lo, t0);
      t_hi = fminf(t_hi, t1);
    }
  }
  if (miss || t_lo > t_hi) {
#pragma unroll
    for (int k = 0; k < 3; ++k) ray.step[k] = ray.base[k] = 0.0f;
    ray.j_begin = 0;
    ray.j_end = -1;
    return ray;
  }
  const float inv_da = 1.0f / dir_a;
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    ray.step[k] = k == a ? 1.0f : dir[k] * inv_da;
    ray.base[k] = k == a ? 0.0f : origin[k] - origin_a * ray.step[k];
  }
  // Plane range from the t-interval, widened by one plane for rounding.
  // (Clamped before the conversions to int: a parallel ray's t-interval may be huge.)
  const float ja = fminf(fmaxf(origin_a + t_lo * dir_a, -2.0f), static_cast<float>(n_a) + 1.0f);
  const float jb = fminf(fmaxf(origin_a + t_hi * dir_a, -2.0f), static_cast<float>(n_a) + 1.0f);
  ray.j_begin = max(0, static_cast<int>(floorf(fminf(ja, jb))) - 1);
  ray.j_end = min(n_a - 1, static_cast<int>(ceilf(fmaxf(ja, jb))) + 1);
  // A cone beam's planes with t >= 0 exactly: j on the detector's side of the source.
  if (det.cone) {
    const float o = fminf(fmaxf(origin_a, -2.0f), static_cast<float>(n_a) + 1.0f);
    if (dir_a > 0.0f) {
      ray.j_begin = max(ray.j_begin, static_cast<int>(ceilf(o)));
    } else {
      ray.j_end = min(ray.j_end, static_cast<int>(floorf(o)));
    }
  }
  return ray;
}

}  // namespace tomo::core::cuda
