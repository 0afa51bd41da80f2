// Transposed product of one orbit block of the symmetric stored matrix, one thread per pixel
// orbit (BackOrbitThread, symmetric_thread_math.h), without atomics.
//
// Why: the pixel-owned gather (symmetric_back.cu) finds, for each of the n^2 output pixels
// and each of the block's 8 views, the rays meeting the pixel's image in the stored frame
// and their weights: 8 windows and about 24 run look-ups per pixel, each stored weight
// found 8 times (once per view that uses it). Here a thread owns the (up to) eight pixels
// of one orbit of the square maps; the stored pixels it needs are the same eight (the
// orbit in the stored frame), so each window and each weight is found once and used for
// all eight views: 1 window and about 3 look-ups (a 16-byte row header, the run, the value)
// per pixel. Every output pixel still has one owner: no atomics, the same result whatever
// the order of threads.
//
// Measured (H100, first version, one thread per orbit): at 512^2 it was little faster than
// the gather (3.3 against 3.6 ms per sweep's A^T): a block's 32 k orbits are only 1 k warps,
// each a chain of dependent look-ups, too few to hide their latency.
//
// Launch shape: kTileX x kTileY threads over the quadrant ix, iy >= n / 2 (the
// representatives are its half cx >= cy; the other threads return), a warp an 8 x 4 tile so
// that the orbit's pixels under maps that swap the axes are as compact as under those that
// keep them, and the 32 lanes of a warp look up 32 neighbouring stored pixels (the same few
// rays, runs and lines) at each of the eight orbit pixels.
//
// Measured on the H100 (bench/NOTES.md): this first version, 6.09 / 11.67 / 36.37 ms per
// sweep at 512^2 / 1024^2 / 2048^2 with the runs forward, stayed the fastest. Spreading an
// orbit over eight lanes (round 2) scattered a warp's look-ups over eight places: 2.8x
// slower at 1024^2; over eight warps with a shared-memory sum (round 3) kept them together
// but was 1.1x faster at 512^2 and 2.4x slower at 1024^2.
#include "core/system_matrix/cuda/segmented_thread_math.h"
#include "core/system_matrix/cuda/stored_matrix_kernels.h"
#include "core/system_matrix/cuda/symmetric_thread_math.h"

namespace tomo::core::system_matrix::cuda {
namespace {

constexpr int kTileX = 8;
constexpr int kTileY = 16;

template <typename WeightAt>
__global__ void __launch_bounds__(kTileX * kTileY)
    SymmetricBackOrbitKernel(int32_t n, int32_t columns, WeightAt weight_at,
                             StoredViewGeometry geometry, OrbitBlock block, SquareMapTable maps,
                             const float* __restrict__ z_full, float* __restrict__ x,
                             float* __restrict__ x_transposed, bool clamp) {
  const int ix = n / 2 + static_cast<int>(blockIdx.x) * kTileX + static_cast<int>(threadIdx.x);
  const int iy = n / 2 + static_cast<int>(blockIdx.y) * kTileY + static_cast<int>(threadIdx.y);
  if (!IsOrbitRepresentative(n, ix, iy)) return;
  BackOrbitThread(n, columns, geometry, block, maps, z_full, ix, iy, weight_at, x, x_transposed,
                  clamp);
}

template <typename WeightAt>
cudaError_t LaunchOrbit(int32_t n, int32_t columns, const WeightAt& weight_at,
                        const StoredViewGeometry& geometry, const OrbitBlock& block,
                        const SquareMapTable& maps, const float* z_full, float* x,
                        float* x_transposed, bool clamp, cudaStream_t stream) {
  const int side = n - n / 2;
  const dim3 blocks((side + kTileX - 1) / kTileX, (side + kTileY - 1) / kTileY);
  SymmetricBackOrbitKernel<<<blocks, dim3(kTileX, kTileY), 0, stream>>>(
      n, columns, weight_at, geometry, block, maps, z_full, x, x_transposed, clamp);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchSymmetricBackOrbit(const SymmetricDeviceArrays& a,
                                     const StoredViewGeometry& geometry,
                                     const OrbitBlock& block, const SquareMapTable& maps,
                                     const float* z_full, float* x, float* x_transposed,
                                     bool clamp, cudaStream_t stream) {
  const RunsWeightAt weight_at{a, static_cast<int64_t>(block.stored_view) * a.columns};
  return LaunchOrbit(a.n, a.columns, weight_at, geometry, block, maps, z_full, x, x_transposed,
                     clamp, stream);
}

cudaError_t LaunchSegmentedBackOrbit(const SegmentedDeviceArrays& d,
                                     const StoredViewGeometry& geometry,
                                     const OrbitBlock& block, const SquareMapTable& maps,
                                     const float* z_full, float* x, float* x_transposed,
                                     bool clamp, cudaStream_t stream) {
  const SegmentedWeightAt weight_at{d, block.stored_view};
  return LaunchOrbit(d.n, d.columns, weight_at, geometry, block, maps, z_full, x, x_transposed,
                     clamp, stream);
}

}  // namespace tomo::core::system_matrix::cuda
