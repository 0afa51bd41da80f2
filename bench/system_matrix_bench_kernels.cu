// One thread per element (256 per block); both bound by reading and writing the vectors.
#include "bench/system_matrix_bench_kernels.h"

namespace tomo::bench {
namespace {

__global__ void ScaledResidualKernel(const float* __restrict__ b, const float* __restrict__ y,
                                     const float* __restrict__ step, float* __restrict__ z,
                                     int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) z[i] = step[i] * (b[i] - y[i]);
}

__global__ void ClampKernel(float* __restrict__ x, int64_t count) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] = fmaxf(x[i], 0.0f);
}

}  // namespace

cudaError_t LaunchScaledResidual(const float* b, const float* y, const float* step, float* z,
                                 int64_t count, cudaStream_t stream) {
  ScaledResidualKernel<<<static_cast<unsigned>((count + 255) / 256), 256, 0, stream>>>(b, y, step,
                                                                                      z, count);
  return cudaGetLastError();
}

cudaError_t LaunchClampNonnegative(float* x, int64_t count, cudaStream_t stream) {
  ClampKernel<<<static_cast<unsigned>((count + 255) / 256), 256, 0, stream>>>(x, count);
  return cudaGetLastError();
}

}  // namespace tomo::bench
