// The dot product of the resident operators (resident_operators.h) on CUDA, in two steps:
// this kernel leaves one float64 partial sum per block, the host adds the partials in
// block order (CudaResidentOperators::Dot). Deterministic: the partition of the elements
// depends only on the count.
//
// Launch shape: kDotBlock threads per block, DotBlocks(count) blocks (at most
// kMaxDotBlocks); thread t of the grid accumulates a[i] * b[i] (products in float64) over
// i = t, t + grid, ...; the block reduces its threads' sums with warp shuffles and shared
// memory and thread 0 writes partials[block]. Bound by reading a and b once.
#include "core/operators/cuda/resident_kernels.h"

#include <algorithm>

namespace tomo::core::cuda {
namespace {

constexpr int kDotBlock = 256;

__global__ void __launch_bounds__(kDotBlock)
    DotPartialsKernel(const float* __restrict__ a, const float* __restrict__ b, int64_t count,
                      double* __restrict__ partials) {
  double sum = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  __shared__ double warp_sums[kDotBlock / 32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    sum = lane < kDotBlock / 32 ? warp_sums[lane] : 0.0;
    for (int offset = 16; offset > 0; offset /= 2) {
      sum += __shfl_down_sync(0xffffffffu, sum, offset);
    }
    if (lane == 0) partials[blockIdx.x] = sum;
  }
}

// Launch shape: one block of one thread: adds the partials in block order (at most
// kMaxDotBlocks doubles, a few microseconds) so that the running total is deterministic.
__global__ void AddPartialsKernel(const double* __restrict__ partials, int32_t count,
                                  double* __restrict__ total) {
  double sum = 0;
  for (int32_t k = 0; k < count; ++k) sum += partials[k];
  *total += sum;
}

}  // namespace

cudaError_t LaunchAddPartials(const double* partials, int32_t count, double* total,
                              cudaStream_t stream) {
  AddPartialsKernel<<<1, 1, 0, stream>>>(partials, count, total);
  return cudaGetLastError();
}

int32_t DotBlocks(int64_t count) {
  return static_cast<int32_t>(std::max<int64_t>(
      1, std::min<int64_t>((count + kDotBlock - 1) / kDotBlock, kMaxDotBlocks)));
}

cudaError_t LaunchDotPartials(const float* a, const float* b, int64_t count, double* partials,
                              cudaStream_t stream) {
  DotPartialsKernel<<<DotBlocks(count), kDotBlock, 0, stream>>>(a, b, count, partials);
  return cudaGetLastError();
}

}  // namespace tomo::core::cuda
