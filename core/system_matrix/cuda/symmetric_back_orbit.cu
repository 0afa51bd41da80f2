// Transposed product of one orbit block of the symmetric stored matrix, one thread per pixel
// orbit (BackOrbitRepresentative, symmetric_thread_math.h), without atomics.
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
// Launch shape: kTileX x kTileY threads over the quadrant ix, iy >= n / 2 (the
// representatives are its half cx >= cy; the other threads return), a warp an 8 x 4 tile so
// that the orbit's pixels under maps that swap the axes are as compact as under those that
// keep them.
#include "core/system_matrix/cuda/stored_matrix_kernels.h"
#include "core/system_matrix/cuda/symmetric_thread_math.h"

namespace tomo::core::system_matrix::cuda {
namespace {

constexpr int kTileX = 8;
constexpr int kTileY = 16;

__global__ void __launch_bounds__(kTileX * kTileY)
    SymmetricBackOrbitKernel(SymmetricDeviceArrays a, StoredViewGeometry g, OrbitBlock block,
                             SquareMapTable maps, const float* __restrict__ z_full,
                             float* __restrict__ x, float* __restrict__ x_transposed,
                             bool clamp) {
  const int ix = a.n / 2 + static_cast<int>(blockIdx.x) * kTileX + static_cast<int>(threadIdx.x);
  const int iy = a.n / 2 + static_cast<int>(blockIdx.y) * kTileY + static_cast<int>(threadIdx.y);
  if (!IsOrbitRepresentative(a.n, ix, iy)) return;
  BackOrbitRepresentative(a, g, block, maps, z_full, ix, iy, x, x_transposed, clamp);
}

}  // namespace

cudaError_t LaunchSymmetricBackOrbit(const SymmetricDeviceArrays& a,
                                     const StoredViewGeometry& geometry,
                                     const OrbitBlock& block, const SquareMapTable& maps,
                                     const float* z_full, float* x, float* x_transposed,
                                     bool clamp, cudaStream_t stream) {
  const int side = a.n - a.n / 2;
  const dim3 threads(kTileX, kTileY);
  const dim3 blocks((side + kTileX - 1) / kTileX, (side + kTileY - 1) / kTileY);
  SymmetricBackOrbitKernel<<<blocks, threads, 0, stream>>>(a, geometry, block, maps, z_full, x,
                                                           x_transposed, clamp);
  return cudaGetLastError();
}

}  // namespace tomo::core::system_matrix::cuda
