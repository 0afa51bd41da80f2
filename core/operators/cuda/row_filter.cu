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

// Launch: grid (ceil(columns / kMultiplyBlock), rows), block (kMultiplyBlock). A thread
// owns padded element (blockIdx.y, c), c < columns: reads one input value and its pixel
// and column weights and writes one padded value (the zero padding is the caller's, kept
// between calls).
__global__ void __launch_bounds__(kMultiplyBlock)
    WeightPadKernel(const float* __restrict__ in, const float* __restrict__ weight,
                    const float* __restrict__ column_weight, int32_t weight_rows,
                    int32_t columns, int32_t length, float* __restrict__ padded) {
  const int c = blockIdx.x * kMultiplyBlock + threadIdx.x;
  if (c >= columns) return;
  const int64_t r = blockIdx.y;
  float value = __ldg(in + r * columns + c);
  if (weight != nullptr) {
    value *= __ldg(weight + static_cast<int64_t>(r % weight_rows) * columns + c);
  }
  if (column_weight != nullptr) {
    value *= __ldg(column_weight + static_cast<int64_t>(r / weight_rows) * columns + c);
  }
  padded[r * length + c] = value;
}

// Launch: grid (ceil(columns / kMultiplyBlock), rows), block (kMultiplyBlock); a thread
// copies element (blockIdx.y, c).
__global__ void __launch_bounds__(kMultiplyBlock)
    UnpadKernel(const float* __restrict__ padded, int32_t columns, int32_t length,
                float* __restrict__ out) {
  const int c = blockIdx.x * kMultiplyBlock + threadIdx.x;
  if (c >= columns) return;
  const int64_t r = blockIdx.y;
  out[r * columns + c] = padded[r * length + c];
}

}  // namespace

cudaError_t LaunchWeightPadRows(const float* in, const float* weight,
                                const float* column_weight, int32_t weight_rows, int64_t rows,
                                int32_t columns, int32_t length, float* padded,
                                cudaStream_t stream) {
  if (rows <= 0 || columns <= 0) return cudaSuccess;
  if (rows > 65535 || columns > length || weight_rows <= 0) return cudaErrorInvalidValue;
  const dim3 grid((columns + kMultiplyBlock - 1) / kMultiplyBlock, static_cast<unsigned>(rows));
  WeightPadKernel<<<grid, kMultiplyBlock, 0, stream>>>(in, weight, column_weight, weight_rows,
                                                       columns, length, padded);
  return cudaGetLastError();
}

cudaError_t LaunchUnpadRows(const float* padded, int64_t rows, int32_t columns, int32_t length,
                            float* out, cudaStream_t stream) {
  if (rows <= 0 || columns <= 0) return cudaSuccess;
  if (rows > 65535) return cudaErrorInvalidValue;
  const dim3 grid((columns + kMultiplyBlock - 1) / kMultiplyBlock, static_cast<unsigned>(rows));
  UnpadKernel<<<grid, kMultiplyBlock, 0, stream>>>(padded, columns, length, out);
  return cudaGetLastError();
}

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
