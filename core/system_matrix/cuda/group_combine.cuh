// The combine step fused into a forward kernel (dense_products.cu, interleaved_forward.cu):
// the segments of one group of 32 stored rows are summed by the group's last warp to
// finish, instead of by a kernel launched after the forward (one launch fewer per block).
// Device code only.
#pragma once

#include "core/system_matrix/cuda/stored_matrix_kernels.h"

namespace tomo::core::system_matrix::cuda {

// After a warp wrote its 32 lanes' partials (all lanes call this): the group's counter
// counts its finished warps; the last adds the `segments` partials of each of its rows and
// views in segment order (as LaunchSymmetricCombine: the same sums) and writes the product,
// or the residual and the scaled residual (CombineOne), then re-arms the counter for the
// next launch. The fence before the count makes this warp's partials visible to the last
// warp; the last one reads them from L2 (__ldcg), past its own L1.
__device__ __forceinline__ void CombineIfLastOfGroup(const GroupCombine& c,
                                                     const OrbitBlock& block, int first_row,
                                                     int columns, const float* partials,
                                                     int lane) {
  __threadfence();
  __syncwarp();
  const int group = first_row / 32;
  int last = 0;
  if (lane == 0) last = atomicAdd(c.counters + group, 1) == c.segments - 1;
  last = __shfl_sync(0xffffffffu, last, 0);
  if (!last) return;
  __threadfence();
  const int row = first_row + lane;
  if (row < columns) {
    for (int k = 0; k < block.count; ++k) {
      float sum = 0;
      for (int s = 0; s < c.segments; ++s) {
        sum += __ldcg(partials + (static_cast<int64_t>(s) * 8 + k) * columns + row);
      }
      const int column = block.reversed[k] ? columns - 1 - row : row;
      const int64_t at = static_cast<int64_t>(block.view[k]) * columns + column;
      if (c.projections == nullptr) {
        c.out[at] = sum;
      } else {
        const float r = c.projections[at] - sum;
        c.residual[at] = r;
        const float norm2 = c.row_norm2[static_cast<int64_t>(block.stored_view) * columns + row];
        c.out[at] = norm2 > 1e-20f ? block.step_scale * r / norm2 : 0.0f;
      }
    }
  }
  if (lane == 0) c.counters[group] = 0;
}

// The same for a block of 256 threads that holds one slab, warp k its view k (all threads
// call this): the group's last block to finish adds the partials, thread (k, lane) the
// segments of view k and row first_row + lane, unrolled so that the loads overlap.
__device__ __forceinline__ void CombineIfLastBlockOfGroup(const GroupCombine& c,
                                                          const OrbitBlock& block,
                                                          int first_row, int columns,
                                                          const float* partials) {
  __shared__ int last;
  __threadfence();
  __syncthreads();
  const int group = first_row / 32;
  if (threadIdx.x == 0) last = atomicAdd(c.counters + group, 1) == c.segments - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int k = threadIdx.x / 32;
  const int row = first_row + threadIdx.x % 32;
  if (k < block.count && row < columns) {
    float sum = 0;
#pragma unroll 8
    for (int s = 0; s < c.segments; ++s) {
      sum += __ldcg(partials + (static_cast<int64_t>(s) * 8 + k) * columns + row);
    }
    const int column = block.reversed[k] ? columns - 1 - row : row;
    const int64_t at = static_cast<int64_t>(block.view[k]) * columns + column;
    if (c.projections == nullptr) {
      c.out[at] = sum;
    } else {
      const float r = c.projections[at] - sum;
      c.residual[at] = r;
      const float norm2 = c.row_norm2[static_cast<int64_t>(block.stored_view) * columns + row];
      c.out[at] = norm2 > 1e-20f ? block.step_scale * r / norm2 : 0.0f;
    }
  }
  if (threadIdx.x == 0) c.counters[group] = 0;
}

}  // namespace tomo::core::system_matrix::cuda
