// Products of one orbit block on the dense layout (dense_slabs.h): one warp per slab, a lane
// per stored row, each step's 32 values and 32 pixels read as one 128-byte line each
// (coalesced), every stored value used for all the block's views (up to 8) while in a
// register. Per lane: dense_thread_math.h.
//
// DenseForwardKernel writes the lane's 8 sums to the partials of its segment, and the last
// warp of each group adds the group's segments (group_combine.cuh; or the combine kernel
// of symmetric_forward.cu does, launched after); given the image's transpose too, it reads
// each map's pixels from the copy in which the step's lanes are contiguous.
// DenseBackKernel adds w z_k at the
// pixel's 8 images with atomicAdd: the layout's permutation keeps the 32 lanes of a step on
// pixels of different orbits, so the adds of one instruction never meet, but warps run
// unsynchronised and two of them (neighbouring ray groups, or the images of different
// views) can reach one pixel at once: without atomics that would lose updates.
#include <algorithm>

#include "core/system_matrix/cuda/dense_thread_math.h"
#include "core/system_matrix/cuda/group_combine.cuh"
#include "core/system_matrix/cuda/stored_matrix_kernels.h"

namespace tomo::core::system_matrix::cuda {
namespace {

constexpr int kBlock = 256;  // threads: 8 warps, one slab each
constexpr int kWarps = kBlock / 32;

// One block of 256 threads per slab, warp k for view k of the block (a warp per slab for
// all views left 11 % occupancy at 512^2).
__global__ void __launch_bounds__(kBlock)
    DenseForwardKernel(DenseDeviceArrays d, OrbitBlock block, int64_t slab_first,
                       const float* __restrict__ x, const float* __restrict__ x_transposed,
                       float* __restrict__ partials, GroupCombine combine) {
  const int k = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const DenseSlab slab = d.slabs[slab_first + blockIdx.x];
  const int row = slab.first_row + lane;
  if (k < block.count) {
    const float sum = DenseForwardLaneView(d, slab, block, k, lane, x, x_transposed);
    if (row < d.columns) partials[(static_cast<int64_t>(slab.segment) * 8 + k) * d.columns + row] = sum;
  }
  if (combine.counters != nullptr) {
    CombineIfLastBlockOfGroup(combine, block, slab.first_row, d.columns, partials);
  }
}

__global__ void __launch_bounds__(kBlock)
    DenseBackKernel(DenseDeviceArrays d, OrbitBlock block, int64_t slab_first,
                    int64_t slab_count, const float* __restrict__ z_full, float* x) {
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (warp >= slab_count) return;
  const DenseSlab slab = d.slabs[slab_first + warp];
  DenseBackLane(d, slab, block, threadIdx.x % 32, z_full, x);
}

constexpr int kTile = 32;

__global__ void TransposeKernel(const float* __restrict__ x, float* __restrict__ xt, int32_t n) {
  __shared__ float tile[kTile][kTile + 1];
  const int bx = blockIdx.x * kTile, by = blockIdx.y * kTile;
  for (int r = threadIdx.y; r < kTile; r += blockDim.y) {
    const int ix = bx + threadIdx.x, iy = by + r;
    if (ix < n && iy < n) tile[r][threadIdx.x] = x[static_cast<int64_t>(iy) * n + ix];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kTile; r += blockDim.y) {
    const int iy = by + threadIdx.x, ix = bx + r;
    if (ix < n && iy < n) xt[static_cast<int64_t>(ix) * n + iy] = tile[threadIdx.x][r];
  }
}

__global__ void ClampAndTransposeKernel(float* __restrict__ x, float* __restrict__ xt,
                                        int32_t n, bool clamp) {
  __shared__ float tile[kTile][kTile + 1];
  const int bx = blockIdx.x * kTile, by = blockIdx.y * kTile;
  for (int r = threadIdx.y; r < kTile; r += blockDim.y) {
    const int ix = bx + threadIdx.x, iy = by + r;
    if (ix < n && iy < n) {
      const int64_t at = static_cast<int64_t>(iy) * n + ix;
      const float v = clamp ? fmaxf(x[at], 0.0f) : x[at];
      if (clamp) x[at] = v;
      tile[r][threadIdx.x] = v;
    }
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kTile; r += blockDim.y) {
    const int iy = by + threadIdx.x, ix = bx + r;
    if (ix < n && iy < n) xt[static_cast<int64_t>(ix) * n + iy] = tile[threadIdx.x][r];
  }
}

__global__ void ClampKernel(float* __restrict__ x, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] = fmaxf(x[i], 0.0f);
}

unsigned BlocksFor(int64_t slabs) { return static_cast<unsigned>((slabs + kWarps - 1) / kWarps); }

}  // namespace

cudaError_t LaunchDenseForwardPartials(const DenseDeviceArrays& d, const OrbitBlock& block,
                                       int64_t slab_first, int64_t slab_count, const float* x,
                                       const float* x_transposed, float* partials,
                                       const GroupCombine& combine, cudaStream_t stream) {
  if (slab_count == 0) return cudaSuccess;
  DenseForwardKernel<<<static_cast<unsigned>(slab_count), kBlock, 0, stream>>>(
      d, block, slab_first, x, x_transposed, partials, combine);
  return cudaGetLastError();
}

cudaError_t LaunchDenseBackAtomic(const DenseDeviceArrays& d, const OrbitBlock& block,
                                  int64_t slab_first, int64_t slab_count, const float* z_full,
                                  float* x, cudaStream_t stream) {
  if (slab_count == 0) return cudaSuccess;
  DenseBackKernel<<<BlocksFor(slab_count), kBlock, 0, stream>>>(d, block, slab_first,
                                                                slab_count, z_full, x);
  return cudaGetLastError();
}

cudaError_t LaunchTranspose(const float* x, float* xt, int32_t n, cudaStream_t stream) {
  const dim3 blocks((n + kTile - 1) / kTile, (n + kTile - 1) / kTile);
  TransposeKernel<<<blocks, dim3(kTile, 8), 0, stream>>>(x, xt, n);
  return cudaGetLastError();
}

cudaError_t LaunchClampAndTranspose(float* x, float* xt, int32_t n, bool clamp,
                                    cudaStream_t stream) {
  const dim3 blocks((n + kTile - 1) / kTile, (n + kTile - 1) / kTile);
  ClampAndTransposeKernel<<<blocks, dim3(kTile, 8), 0, stream>>>(x, xt, n, clamp);
  return cudaGetLastError();
}

cudaError_t LaunchClampNonnegative(float* x, int64_t count, cudaStream_t stream) {
  ClampKernel<<<static_cast<unsigned>((count + 255) / 256), 256, 0, stream>>>(x, count);
  return cudaGetLastError();
}

}  // namespace tomo::core::system_matrix::cuda
