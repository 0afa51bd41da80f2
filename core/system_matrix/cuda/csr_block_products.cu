// Products of plain CSR rows for block ART on scans without the square symmetry.
//
// CsrBlockForwardKernel: one warp per row of the block (count * columns warps, 8 per
// block of 256 threads); lanes stride over the row's entries (coalesced), gather x, reduce
// with shuffles; lane 0 writes the product or the scaled residual.
// CsrBlockBackKernel: one warp per row; lanes scatter a_ij z_i into the accumulator with
// atomicAdd (rows of one view overlap at their edges, and views cross).
// AddAndClearKernel: one thread per pixel.
#include "core/system_matrix/cuda/stored_matrix_kernels.h"

namespace tomo::core::system_matrix::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kWarps = kBlock / 32;

__global__ void __launch_bounds__(kBlock)
    CsrBlockForwardKernel(CsrDeviceArrays a, const int32_t* __restrict__ views, int32_t count,
                          float step_scale, const float* __restrict__ x,
                          const float* __restrict__ projections, float* __restrict__ residual,
                          float* __restrict__ out) {
  const int warp = blockIdx.x * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= count * a.columns) return;
  const int64_t row = static_cast<int64_t>(views[warp / a.columns]) * a.columns + warp % a.columns;
  float sum = 0;
  for (int64_t e = a.row_offsets[row] + lane; e < a.row_offsets[row + 1]; e += 32) {
    sum += a.values[e] * __ldg(x + a.column_indices[e]);
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (lane != 0) return;
  if (projections == nullptr) {
    out[warp] = sum;  // the block's own layout: view k of the block, column c
    return;
  }
  const float r = projections[row] - sum;
  residual[row] = r;
  out[row] = a.row_norm2[row] > 1e-20f ? step_scale * r / a.row_norm2[row] : 0.0f;
}

__global__ void __launch_bounds__(kBlock)
    CsrBlockBackKernel(CsrDeviceArrays a, const int32_t* __restrict__ views, int32_t count,
                       const float* __restrict__ z, bool z_compact,
                       float* __restrict__ accumulator) {
  const int warp = blockIdx.x * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= count * a.columns) return;
  const int64_t row = static_cast<int64_t>(views[warp / a.columns]) * a.columns + warp % a.columns;
  const float zi = z[z_compact ? warp : row];
  if (zi == 0.0f) return;
  for (int64_t e = a.row_offsets[row] + lane; e < a.row_offsets[row + 1]; e += 32) {
    atomicAdd(accumulator + a.column_indices[e], a.values[e] * zi);
  }
}

__global__ void AddAndClearKernel(float* __restrict__ x, float* __restrict__ accumulator,
                                  int64_t count, bool clamp) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float updated = x[i] + accumulator[i];
  x[i] = clamp ? fmaxf(updated, 0.0f) : updated;
  accumulator[i] = 0.0f;
}

}  // namespace

cudaError_t LaunchCsrBlockForward(const CsrDeviceArrays& a, const int32_t* views, int32_t count,
                                  float step_scale, const float* x, const float* projections,
                                  float* residual, float* out, cudaStream_t stream) {
  const int64_t warps = static_cast<int64_t>(count) * a.columns;
  CsrBlockForwardKernel<<<static_cast<unsigned>((warps + kWarps - 1) / kWarps), kBlock, 0,
                          stream>>>(a, views, count, step_scale, x, projections, residual, out);
  return cudaGetLastError();
}

cudaError_t LaunchCsrBlockBack(const CsrDeviceArrays& a, const int32_t* views, int32_t count,
                               const float* z, bool z_compact, float* accumulator,
                               cudaStream_t stream) {
  const int64_t warps = static_cast<int64_t>(count) * a.columns;
  CsrBlockBackKernel<<<static_cast<unsigned>((warps + kWarps - 1) / kWarps), kBlock, 0,
                       stream>>>(a, views, count, z, z_compact, accumulator);
  return cudaGetLastError();
}

cudaError_t LaunchAddAndClear(float* x, float* accumulator, int64_t count, bool clamp,
                              cudaStream_t stream) {
  AddAndClearKernel<<<static_cast<unsigned>((count + 255) / 256), 256, 0, stream>>>(
      x, accumulator, count, clamp);
  return cudaGetLastError();
}

}  // namespace tomo::core::system_matrix::cuda
