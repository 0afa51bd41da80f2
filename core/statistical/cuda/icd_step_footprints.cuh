// Device helpers shared by the persistent ICD kernels (icd_persistent_kernels.cu and
// icd_persistent_v4_kernels.cu): a step's voxels, its columns' footprints in one view
// (computed once per (column, view) into shared memory and shared by every slice of the
// groups), a voxel's pixels in the CPU reference's order, and a voxel's 1D update. Included by .cu files only.
#pragma once

#include "core/statistical/cuda/icd_kernels.h"
#include "core/statistical/icd_update_math.h"

namespace tomo::core::statistical::cuda::icd_device {

constexpr int kCachedColumns = 32;
static_assert(128 >= kIcdMaxGroupsPerStep * kCachedColumns,
              "one thread per (column slot, cached detector column) in blocks of 128 or 256");

struct StepFootprints {
  SfColumnT<float> column[kIcdMaxGroupsPerStep];
  float weight[kIcdMaxGroupsPerStep][kCachedColumns];
};

__device__ __forceinline__ int StepSize(const IcdStepTask& task) {
  int size = 0;
#pragma unroll
  for (int g = 0; g < kIcdMaxGroupsPerStep; ++g) size += task.groups[g].size;
  return size;
}

// Voxel k (< StepSize) of a step: its column slot and slice.
__device__ __forceinline__ void StepVoxel(const IcdStepTask& task, int k, int& slot, int& iz) {
  int g = 0;
  while (g < kIcdMaxGroupsPerStep - 1 && k >= task.groups[g].size) {
    k -= task.groups[g].size;
    ++g;
  }
  slot = g;
  iz = task.groups[g].first_slice + k * task.groups[g].stride;
}

// Read-only inputs (views, weights, tasks) through the non-coherent cache: they stay cached
// across the grid barriers. What other blocks write within a launch (volume, partials,
// changes) is read with __ldcg (L2), never through a possibly stale L1 line.
template <typename T>
__device__ __forceinline__ T LoadReadOnly(const T* from) {
  static_assert(sizeof(T) % sizeof(int) == 0, "whole words");
  T out;
  const int* words = reinterpret_cast<const int*>(from);
  int* to = reinterpret_cast<int*>(&out);
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(T) / sizeof(int)); ++i) to[i] = __ldg(words + i);
  return out;
}

// Where the theta partials of view v and step voxel j lie (IcdPersistentScratch; in 32 bits:
// the runner keeps the partials under 2^31).
__device__ __forceinline__ int PartialIndex(const IcdPersistentScratch& s, int v, int j) {
  const int shift = s.view_group_shift;
  return (((v >> shift) * s.slots + j) << shift) | (v & ((1 << shift) - 1));
}

// Fills f for view v of the step (all threads take part; ends with a barrier).
__device__ inline void LoadFootprints(const IcdDeviceProblem& p, const IcdStepTask& task, int v,
                               StepFootprints& f) {
  const int t = threadIdx.x;
  if (t < kIcdMaxGroupsPerStep * kCachedColumns) {
    const int g = t / kCachedColumns, offset = t % kCachedColumns;
    if (task.groups[g].size > 0) {
      const int column = task.groups[g].column;
      const int ix = column % p.nx, iy = column / p.nx;
      const SfColumnT<float> col =
          MakeColumn<float>(LoadReadOnly(p.views + v), p.x0 + ix * p.voxel_x, p.y0 + iy * p.voxel_y,
                            p.voxel_x, p.voxel_y, p.columns);
      if (offset == 0) f.column[g] = col;
      const int c = col.first_column + offset;
      if (c <= col.last_column) f.weight[g][offset] = ColumnWeight(col, c);
    }
  }
  __syncthreads();
}

// The pixels of voxel (slot, iz) in view v, numbered n = 0 .. count - 1 with detector
// columns outer and rows inner (the CPU reference's order). The phases visit them in
// batches of kBatch: the batch's loads are all issued before any is used, so that a thread
// waits for memory once per batch rather than once per pixel (a footprint is about 6
// pixels, so usually one batch).
constexpr int kBatch = 6;

struct VoxelPixels {
  SfAxialT<float> axial;
  int rows = 0, count = 0;  // rows per detector column; pixels (0: none)
};

__device__ __forceinline__ VoxelPixels MakeVoxelPixels(const IcdDeviceProblem& p,
                                                       const SfColumnT<float>& col, int iz) {
  VoxelPixels out;
  if (col.first_column > col.last_column) return out;
  out.axial = MakeAxial<float>(col, p.z0 + iz * p.voxel_z, p.voxel_z, p.rows);
  if (out.axial.first_row > out.axial.last_row) return out;
  out.rows = out.axial.last_row - out.axial.first_row + 1;
  out.count = out.rows * (col.last_column - col.first_column + 1);
  return out;
}

// Pixel n's index into view v's part of the residual/weights and its a_ij.
__device__ __forceinline__ void PixelOf(const IcdDeviceProblem& p, const StepFootprints& f,
                                        int slot, const VoxelPixels& x, int n, int& index,
                                        float& a) {
  const SfColumnT<float>& col = f.column[slot];
  const int offset = n / x.rows;
  const int r = x.axial.first_row + (n - offset * x.rows);
  const int c = col.first_column + offset;
  const float column_weight =
      offset < kCachedColumns ? f.weight[slot][offset] : ColumnWeight(col, c);
  a = x.axial.amplitude * column_weight * RowWeight(x.axial, r);
  index = c * p.rows + r;
}

// Adds a voxel's data terms over its pixels in one view, pixels in batches of kBatch whose
// loads (weight and residual) all go out before any is used: t1 += sum w a e, t2 += sum w a^2.
__device__ __forceinline__ void AddVoxelThetas(const IcdDeviceProblem& p, const StepFootprints& f,
                                               int slot, const VoxelPixels& pixels,
                                               const float* weights, const float* residual,
                                               float& t1, float& t2) {
  for (int first = 0; first < pixels.count; first += kBatch) {
    float a[kBatch], w[kBatch], e[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      a[k] = 0;
      w[k] = 0;
      e[k] = 0;
      if (first + k < pixels.count) {
        int index;
        PixelOf(p, f, slot, pixels, first + k, index, a[k]);
        w[k] = __ldg(weights + index);
        e[k] = residual[index];
      }
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const float wa = w[k] * a[k];
      t1 += wa * e[k];
      t2 += wa * a[k];
    }
  }
}

__device__ __forceinline__ float WarpSum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

// Phase B's 1D update of step voxel j by one warp (lane = threadIdx.x % 32): the voxel's
// and its 26 neighbours' values first (independent of the partial sums, so that both sets
// of loads are in flight together), then theta1 and theta2 summed over the views' partials,
// 32 x kViewsPerLane views per round of loads (a loop with a run-time bound would wait for
// each load in turn). Lane 0's x and r are the voxel's value and its new value (the other
// lanes' r is unset); returns the voxel's address.
template <int kViewsPerLane>
__device__ __forceinline__ float* SolveStepVoxel(const IcdDeviceProblem& p,
                                                 const IcdPersistentScratch& s,
                                                 const IcdStepTask& task, int j, int lane,
                                                 float& x, float& r) {
  int slot, iz;
  StepVoxel(task, j, slot, iz);
  const int column = task.groups[slot].column;
  const int ix = column % p.nx, iy = column / p.nx;
  float* voxel = p.volume + static_cast<int64_t>(column) * p.nz + iz;
  x = __ldcg(voxel);
  float other = 0, b = 0;
  if (lane < 26) {
    const int raster = lane < 13 ? lane : lane + 1;
    const int dz = raster / 9 - 1, dy = (raster / 3) % 3 - 1, dx = raster % 3 - 1;
    const int jx = ix + dx, jy = iy + dy, jz = iz + dz;
    if (jx >= 0 && jx < p.nx && jy >= 0 && jy < p.ny && jz >= 0 && jz < p.nz) {
      b = p.neighbour_weights[lane];
      if (b != 0.0f) {
        other = __ldcg(&p.volume[(static_cast<int64_t>(jy) * p.nx + jx) * p.nz + jz]);
      }
    }
  }
  float t1 = 0, t2 = 0;
  for (int first = 0; first < p.num_views; first += 32 * kViewsPerLane) {
    float2 partial[kViewsPerLane];
#pragma unroll
    for (int k = 0; k < kViewsPerLane; ++k) {
      const int v = first + k * 32 + lane;
      partial[k] = v < p.num_views
                       ? __ldcg(&s.theta_partial[PartialIndex(s, v, j)])
                       : make_float2(0.0f, 0.0f);
    }
#pragma unroll
    for (int k = 0; k < kViewsPerLane; ++k) {
      t1 += partial[k].x;
      t2 += partial[k].y;
    }
  }
  const float theta1 = WarpSum(t1), theta2 = WarpSum(t2);
  float numerator = 0, denominator = 0;
  if (b != 0.0f) {
    const float curvature = SurrogateNeighbourCurvature<float>(x, other, b, p.prior);
    numerator = curvature * other;
    denominator = curvature;
  }
  numerator = WarpSum(numerator);
  denominator = WarpSum(denominator);
  if (lane == 0) r = SurrogateSolve<float>(x, theta1, theta2, numerator, denominator);
  return voxel;
}

}  // namespace tomo::core::statistical::cuda::icd_device
