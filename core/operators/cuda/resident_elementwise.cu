// The element-wise operations of the resident operators (resident_operators.h) on CUDA:
// each one pass over its arrays, bound by memory bandwidth (a 256^3 volume is 64 MiB per
// array read or written).
//
// Launch shape, every kernel: kBlock threads per block, a grid of
// min(ceil(count / kBlock), kMaxBlocks) blocks, a grid-stride loop: thread t of the grid
// owns elements t, t + grid, t + 2 grid, ... and reads and writes only those (no sharing,
// no atomics). float32 arithmetic exactly as the host reference writes it (one rounding
// per operation; no fused multiply-add contraction, so CPU and CUDA give the same bits).
#include "core/operators/cuda/resident_kernels.h"

#include <algorithm>

namespace tomo::core::cuda {
namespace {

// 256 threads, at most 132 SMs x 16 blocks of the H100 in flight: more blocks only add
// scheduling; the grid-stride loop covers any count.
constexpr int kBlock = 256;
constexpr int64_t kMaxBlocks = 132 * 16;

int64_t Blocks(int64_t count) {
  return std::max<int64_t>(1, std::min<int64_t>((count + kBlock - 1) / kBlock, kMaxBlocks));
}

// Grid-stride index range helper.
#define TOMO_GRID_STRIDE(i, count)                                              \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       i < (count); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void __launch_bounds__(kBlock) FillKernel(float value, int64_t count, float* x) {
  TOMO_GRID_STRIDE(i, count) x[i] = value;
}

__global__ void __launch_bounds__(kBlock)
    AxpbyKernel(float a, const float* __restrict__ x, float b, int64_t count,
                float* __restrict__ y) {
  TOMO_GRID_STRIDE(i, count) y[i] = __fadd_rn(__fmul_rn(a, x[i]), __fmul_rn(b, y[i]));
}

__global__ void __launch_bounds__(kBlock)
    MultiplyKernel(const float* __restrict__ w, int64_t count, float* __restrict__ y) {
  TOMO_GRID_STRIDE(i, count) y[i] = __fmul_rn(w[i], y[i]);
}

__global__ void __launch_bounds__(kBlock)
    AddScaledQuotientKernel(float a, const float* __restrict__ d, const float* __restrict__ s,
                            float epsilon, float lower, float upper, int64_t count,
                            float* __restrict__ x) {
  TOMO_GRID_STRIDE(i, count) {
    const float sum = s[i];
    const float step = sum > epsilon ? __fdiv_rn(__fmul_rn(a, d[i]), sum) : 0.0f;
    x[i] = fminf(fmaxf(__fadd_rn(x[i], step), lower), upper);
  }
}

__global__ void __launch_bounds__(kBlock)
    InvertGuardedKernel(float epsilon, int64_t count, float* x) {
  TOMO_GRID_STRIDE(i, count) {
    const float value = x[i];
    x[i] = value > epsilon ? __fdiv_rn(1.0f, value) : 0.0f;
  }
}

__global__ void __launch_bounds__(kBlock)
    ClampKernel(float lower, float upper, int64_t count, float* x) {
  TOMO_GRID_STRIDE(i, count) x[i] = fminf(fmaxf(x[i], lower), upper);
}

#undef TOMO_GRID_STRIDE

}  // namespace

cudaError_t LaunchFill(float value, int64_t count, float* x, cudaStream_t stream) {
  FillKernel<<<Blocks(count), kBlock, 0, stream>>>(value, count, x);
  return cudaGetLastError();
}

cudaError_t LaunchAxpby(float a, const float* x, float b, int64_t count, float* y,
                        cudaStream_t stream) {
  AxpbyKernel<<<Blocks(count), kBlock, 0, stream>>>(a, x, b, count, y);
  return cudaGetLastError();
}

cudaError_t LaunchMultiply(const float* w, int64_t count, float* y, cudaStream_t stream) {
  MultiplyKernel<<<Blocks(count), kBlock, 0, stream>>>(w, count, y);
  return cudaGetLastError();
}

cudaError_t LaunchAddScaledQuotient(float a, const float* d, const float* s, float epsilon,
                                    float lower, float upper, int64_t count, float* x,
                                    cudaStream_t stream) {
  AddScaledQuotientKernel<<<Blocks(count), kBlock, 0, stream>>>(a, d, s, epsilon, lower, upper,
                                                                count, x);
  return cudaGetLastError();
}

cudaError_t LaunchInvertGuarded(float epsilon, int64_t count, float* x, cudaStream_t stream) {
  InvertGuardedKernel<<<Blocks(count), kBlock, 0, stream>>>(epsilon, count, x);
  return cudaGetLastError();
}

cudaError_t LaunchClamp(float lower, float upper, int64_t count, float* x, cudaStream_t stream) {
  ClampKernel<<<Blocks(count), kBlock, 0, stream>>>(lower, upper, count, x);
  return cudaGetLastError();
}

}  // namespace tomo::core::cuda
