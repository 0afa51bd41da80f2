// 2D parallel-beam back projection on CUDA: the exact transpose of the Joseph forward
// projector (parallel_2d_forward.cu), evaluated pixel by pixel (a gather, no atomics).
//
// For a view and pixel (ix, iy), let j be the pixel's index along the view's step axis
// and i its index across (j = ix, i = iy when the view steps along x; else j = iy,
// i = ix). Ray k crosses step line j at a(k) = across0 + k * dk + j * across_per_step and
// gives pixel i the interpolation weight max(0, 1 - |a(k) - i|) times step_weight; those
// are exactly the forward weights (floor(a) gets 1 - frac, floor(a) + 1 gets frac). The
// detectors with a non-zero weight form the contiguous range |b + k * dk| < 1, with
// b = a(0) - i, which the thread enumerates.

#include "core/operators/cuda/parallel_2d_kernels.h"

namespace tomo::core::cuda {
namespace {

// Block of 32 x 8 pixels: a warp covers 32 neighbouring columns of one row, whose detector
// ranges overlap, so the projection reads of a warp hit few cache lines. Not tuned yet;
// first version on an H100 SXM (issue 2): 2048^2 image, 3072 views x 3072 detectors in
// 53 ms wall including pageable copies (about 240 G pixel-view updates/s).
constexpr int kBackBlockX = 32;
constexpr int kBackBlockY = 8;
// Views whose parameters are staged in shared memory at a time (48 bytes each).
constexpr int kViewsPerChunk = 128;

// Launch: grid (ceil(nx / kBackBlockX), ceil(ny / kBackBlockY)), block (kBackBlockX,
// kBackBlockY).
// A thread owns one pixel (ix, iy): for every view it reads the view's JosephView (staged
// by the block in shared memory, kViewsPerChunk at a time) and the projection values of
// the detectors whose rays touch the pixel, and writes volume[iy * nx + ix] once (every
// pixel is written). Accumulation in float.
__global__ void __launch_bounds__(kBackBlockX* kBackBlockY)
    Parallel2dBackKernel(Parallel2dShape shape, const JosephView* __restrict__ views,
                         const float* __restrict__ projections, float* __restrict__ volume) {
  __shared__ JosephView s_views[kViewsPerChunk];
  const int ix = blockIdx.x * kBackBlockX + threadIdx.x;
  const int iy = blockIdx.y * kBackBlockY + threadIdx.y;
  const bool inside = ix < shape.nx && iy < shape.ny;
  const int thread = threadIdx.y * kBackBlockX + threadIdx.x;
  const int nd = shape.num_detectors;

  float acc = 0.0f;
  for (int v0 = 0; v0 < shape.num_views; v0 += kViewsPerChunk) {
    const int count = min(kViewsPerChunk, shape.num_views - v0);
    __syncthreads();  // the previous chunk is no longer read
    for (int t = thread; t < count; t += kBackBlockX * kBackBlockY) s_views[t] = views[v0 + t];
    __syncthreads();
    if (!inside) continue;
    for (int c = 0; c < count; ++c) {
      const JosephView& view = s_views[c];
      const bool along_x = view.step_along_x != 0;
      const int j = along_x ? ix : iy;
      const int i = along_x ? iy : ix;
      // b = a(k = 0) - i, in double (the magnitudes reach the image size).
      const float b = static_cast<float>(view.across0 +
                                         static_cast<double>(j) * view.across_per_step -
                                         static_cast<double>(i));
      const float dk = view.across_per_detector_f;
      const float inv_dk = view.detector_per_across_f;
      float k_lo = (-1.0f - b) * inv_dk;
      float k_hi = (1.0f - b) * inv_dk;
      if (inv_dk < 0.0f) {
        const float t = k_lo;
        k_lo = k_hi;
        k_hi = t;
      }
      const int k_begin = max(0, static_cast<int>(ceilf(fmaxf(k_lo, -1.0f))));
      const int k_last = min(nd - 1, static_cast<int>(floorf(fminf(k_hi, static_cast<float>(nd)))));
      const float* __restrict__ row = projections + static_cast<int64_t>(v0 + c) * nd;
      float sum = 0.0f;
      for (int k = k_begin; k <= k_last; ++k) {
        const float w = 1.0f - fabsf(fmaf(static_cast<float>(k), dk, b));
        if (w > 0.0f) sum = fmaf(w, __ldg(row + k), sum);
      }
      acc = fmaf(sum, view.step_weight, acc);
    }
  }
  if (inside) volume[static_cast<int64_t>(iy) * shape.nx + ix] = acc;
}

}  // namespace

cudaError_t LaunchParallel2dBack(const Parallel2dShape& shape, const JosephView* views,
                                 const float* projections, float* volume,
                                 cudaStream_t stream) {
  if (shape.nx <= 0 || shape.ny <= 0) return cudaSuccess;
  const dim3 grid((shape.nx + kBackBlockX - 1) / kBackBlockX,
                  (shape.ny + kBackBlockY - 1) / kBackBlockY);
  const dim3 block(kBackBlockX, kBackBlockY);
  Parallel2dBackKernel<<<grid, block, 0, stream>>>(shape, views, projections, volume);
  return cudaGetLastError();
}

}  // namespace tomo::core::cuda
