// Forward products of one orbit block of the symmetric stored matrix, and the residual.
//
// SymmetricForwardPartialsKernel. Launch shape: kForwardBlock threads per block, one warp
// per (stored row c, segment s): columns * segments warps. A warp reads its row's runs
// s * 32 + lane, s * 32 + lane + 32 * segments, ... (one pixel row each), and for every
// weight gathers x at the pixel's image under each of the orbit's maps (up to 8), so the
// stored weights are read once for all the orbit's views. It reduces its 8 sums with
// shuffles and lane 0 writes partials[(s * 8 + k) * columns + c]. Reads: the stored row,
// x at 8 places per weight (x stays in L2). Writes: 8 floats per warp.
//
// SymmetricCombineKernel: one thread per (view k of the orbit, stored column c); adds the
// segments' partials and writes the product or the scaled residual at the view's own
// column (reversed for reflections).
#include <algorithm>

#include "core/system_matrix/cuda/stored_matrix_kernels.h"
#include "core/system_matrix/cuda/symmetric_thread_math.h"

namespace tomo::core::system_matrix::cuda {
namespace {

constexpr int kForwardBlock = 256;  // threads; 8 warps
constexpr int kWarpsPerBlock = kForwardBlock / 32;
// Warps wanted in flight for one orbit: an H100 holds 132 x 64 = 8448 resident warps. Chosen,
// not yet tuned by measurement.
constexpr int kWantedWarps = 8192;

__global__ void __launch_bounds__(kForwardBlock)
    SymmetricForwardPartialsKernel(SymmetricDeviceArrays a, OrbitBlock block, int segments,
                                   const float* __restrict__ x, float* __restrict__ partials) {
  const int warp = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= a.columns * segments) return;
  const int c = warp / segments;
  const int segment = warp % segments;
  float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  ForwardLaneSums(a, block, segments, c, segment, lane, x, sums);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    for (int offset = 16; offset > 0; offset /= 2) {
      sums[k] += __shfl_xor_sync(0xffffffffu, sums[k], offset);
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if (k < block.count) partials[(static_cast<int64_t>(segment) * 8 + k) * a.columns + c] = sums[k];
    }
  }
}

__global__ void SymmetricCombineKernel(SymmetricDeviceArrays a, OrbitBlock block, int segments,
                                       const float* __restrict__ partials,
                                       const float* __restrict__ projections,
                                       float* __restrict__ residual, float* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= block.count * a.columns) return;
  CombineOne(a, block, segments, i / a.columns, i % a.columns, partials, projections, residual,
             out);
}

constexpr int kSumBlock = 256;
constexpr int kMaxSumBlocks = 1024;

__global__ void __launch_bounds__(kSumBlock)
    SumSquaresKernel(const float* __restrict__ v, int64_t count, double* __restrict__ partials) {
  double sum = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    sum += static_cast<double>(v[i]) * v[i];
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  __shared__ double warp_sums[kSumBlock / 32];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int w = 0; w < kSumBlock / 32; ++w) total += warp_sums[w];
    partials[blockIdx.x] = total;
  }
}

}  // namespace

int SymmetricForwardSegments(int32_t n, int32_t columns) {
  // Up to one segment per 64 pixel rows a ray can cross, and no more warps than wanted.
  const int by_rows = std::max(1, (n + 63) / 64);
  const int by_warps = std::max(1, kWantedWarps / std::max(1, columns));
  return std::max(1, std::min(by_rows, by_warps));
}

cudaError_t LaunchSymmetricForwardPartials(const SymmetricDeviceArrays& a, const OrbitBlock& block,
                                           int segments, const float* x, float* partials,
                                           cudaStream_t stream) {
  const int warps = a.columns * segments;
  const int blocks = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  SymmetricForwardPartialsKernel<<<blocks, kForwardBlock, 0, stream>>>(a, block, segments, x,
                                                                       partials);
  return cudaGetLastError();
}

cudaError_t LaunchSymmetricCombine(const SymmetricDeviceArrays& a, const OrbitBlock& block,
                                   int segments, const float* partials,
                                   const float* projections, float* residual, float* out,
                                   cudaStream_t stream) {
  const int threads = block.count * a.columns;
  SymmetricCombineKernel<<<(threads + 255) / 256, 256, 0, stream>>>(a, block, segments, partials,
                                                                   projections, residual, out);
  return cudaGetLastError();
}

int SumSquaresBlocks(int64_t count) {
  return static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>(kMaxSumBlocks, (count + kSumBlock - 1) / kSumBlock)));
}

cudaError_t LaunchSumSquares(const float* v, int64_t count, double* partials,
                             cudaStream_t stream) {
  SumSquaresKernel<<<SumSquaresBlocks(count), kSumBlock, 0, stream>>>(v, count, partials);
  return cudaGetLastError();
}

}  // namespace tomo::core::system_matrix::cuda
