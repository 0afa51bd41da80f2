// Transposed product of one orbit block of the symmetric stored matrix, without atomics.
//
// Launch shape: kTileX x kTileY threads per block over the n x n image, so that a warp
// covers 8 x 4 pixels: square enough that for the four maps that keep the axes and for the
// four that swap them alike, its pixels in the stored frame meet few rays, whose row data,
// runs (consecutive for consecutive pixel rows) and weights share cache lines. Thread
// (px, py) owns output pixel p and is the only one to write it. For each view k of the orbit it moves p
// into the stored view's frame (q = M_k^T p, the inverse of the map), finds the detector
// columns whose ray wedges can meet q (projecting q's corners from the source, plus half a
// column and a 0.01-column margin for float32 rounding), reads each such ray's weight at q
// from the stored runs (0 when the run does not hold q) and adds weight * z. It then adds
// the sum to x[p] and clamps. Reads: per pixel and view about three rays' run records and
// weights, shared by neighbouring pixels through L1; z; x once. Writes: x once.
// Because every output has one owner, the result is the same whatever the order of threads.
#include "core/system_matrix/cuda/stored_matrix_kernels.h"
#include "core/system_matrix/cuda/symmetric_thread_math.h"

namespace tomo::core::system_matrix::cuda {
namespace {

constexpr int kTileX = 8;   // a warp: 8 x 4 pixels
constexpr int kTileY = 16;  // 128 threads per block

__global__ void __launch_bounds__(kTileX * kTileY)
    SymmetricBackGatherKernel(SymmetricDeviceArrays a, StoredViewGeometry g, OrbitBlock block,
                              const float* __restrict__ z_full, float* __restrict__ x,
                              bool clamp) {
  const int px = blockIdx.x * kTileX + threadIdx.x;
  const int py = blockIdx.y * kTileY + threadIdx.y;
  if (px >= a.n || py >= a.n) return;
  const float sum = BackGatherPixel(a, g, block, z_full, px, py);
  const int64_t at = static_cast<int64_t>(py) * a.n + px;
  const float updated = x[at] + sum;
  x[at] = clamp ? fmaxf(updated, 0.0f) : updated;
}

}  // namespace

cudaError_t LaunchSymmetricBackGather(const SymmetricDeviceArrays& a,
                                      const StoredViewGeometry& geometry,
                                      const OrbitBlock& block, const float* z_full, float* x,
                                      bool clamp, cudaStream_t stream) {
  const dim3 threads(kTileX, kTileY);
  const dim3 blocks((a.n + kTileX - 1) / kTileX, (a.n + kTileY - 1) / kTileY);
  SymmetricBackGatherKernel<<<blocks, threads, 0, stream>>>(a, geometry, block, z_full, x, clamp);
  return cudaGetLastError();
}

}  // namespace tomo::core::system_matrix::cuda
