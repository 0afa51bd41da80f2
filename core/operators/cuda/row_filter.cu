// Ramp filtering of detector rows on CUDA: the frequency-domain multiply between cuFFT's
// batched R2C and C2R transforms (the transforms, the zero padding and the copies are
// driven from cuda_backend.cc). The response is real and already holds the 1/padded_length
// normalisation of the unnormalised inverse transform (see core/filters/ramp_filter.h).

#include "core/operators/cuda/parallel_2d_kernels.h"

namespace tomo::core::cuda {
namespace {

// 256 threads per block, at most kMaxMultiplyBlocks blocks, grid-stride beyond that:
// the multiply is a streaming pass, enough blocks to fill an H100 (132 SMs) many times.
constexpr int kMultiplyBlock = 256;
constexpr int64_t kMaxMultiplyBlocks = 4096;

// Launch: grid (min(ceil(total / kMultiplyBlock), kMaxMultiplyBlocks)), block
// (kMultiplyBlock); grid-stride loop.
// A thread owns spectrum elements e = r * num_bins + f (stride: the grid's threads): it
// reads spectrum[e] and response[f] and writes spectrum[e] scaled.
__global__ void __launch_bounds__(kMultiplyBlock)
    MultiplySpectrumKernel(float2* __restrict__ spectrum, const float* __restrict__ response,
                           int64_t total, int32_t num_bins) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kMultiplyBlock;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * kMultiplyBlock + threadIdx.x; e < total;
       e += stride) {
    const float h = __ldg(response + e % num_bins);
    float2 z = spectrum[e];
    z.x *= h;
    z.y *= h;
    spectrum[e] = z;
  }
}

}  // namespace

cudaError_t LaunchMultiplySpectrum(float2* spectrum, const float* response, int64_t rows,
                                   int32_t num_bins, cudaStream_t stream) {
  const int64_t total = rows * num_bins;
  if (total <= 0) return cudaSuccess;
  int64_t blocks = (total + kMultiplyBlock - 1) / kMultiplyBlock;
  if (blocks > kMaxMultiplyBlocks) blocks = kMaxMultiplyBlocks;
  MultiplySpectrumKernel<<<static_cast<unsigned>(blocks), kMultiplyBlock, 0, stream>>>(
      spectrum, response, total, num_bins);
  return cudaGetLastError();
}

}  // namespace tomo::core::cuda
