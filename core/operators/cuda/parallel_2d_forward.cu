// 2D parallel-beam forward projection (Joseph, ray-driven) on CUDA, and the volume
// transpose it reads from. Operator definition: core/operators/backend.h; per-view index
// arithmetic: JosephView in parallel_2d_kernels.h.
//
//        y ^            ray direction r = (sin t, -cos t)
//          |     \      detector axis u = (cos t, sin t), element k at s_k along u
//          |      \ r
//   row iy +---+---+    step_along_x (|sin t| > |cos t|): the ray is stepped column by
//          |   | x |    column (j = ix) and interpolated across rows (i = iy); otherwise
//          +---+---+    row by row (j = iy), interpolated across columns (i = ix).
//          +---------> x (column ix)
//
// Memory layout: the views that step along x read the transposed volume (x-major), so in
// both cases the interpolation pair of one step sits in one row of the array read, and
// neighbouring rays (detectors) of a warp read neighbouring addresses.

#include "core/operators/cuda/parallel_2d_kernels.h"

namespace tomo::core::cuda {
namespace {

// Threads per block along the detector axis of one view. 128 keeps enough blocks in
// flight for small detectors (e.g. 256 elements x 180 views = 360 blocks). Not tuned yet;
// first version on an H100 SXM (issue 2): 2048^2 image, 3072 views x 3072 detectors in
// 25 ms wall including pageable copies (about 510 G ray-pixel updates/s).
constexpr int kForwardBlock = 128;
// Transpose tile (32 x 32 elements, read and written by 32 x 8 threads).
constexpr int kTransposeTile = 32;
constexpr int kTransposeRows = 8;

// Launch: grid (ceil(nx / 32), ceil(ny / 32)), block (32, 8).
// A block owns one 32 x 32 tile: it reads the tile of `in` (ny, nx) row by row into
// shared memory (padded by one column against bank conflicts) and writes it transposed
// into `out` (nx, ny); each thread reads and writes 4 elements.
__global__ void __launch_bounds__(kTransposeTile* kTransposeRows)
    TransposeKernel(const float* __restrict__ in, int32_t nx, int32_t ny,
                    float* __restrict__ out) {
  __shared__ float tile[kTransposeTile][kTransposeTile + 1];
  const int x0 = blockIdx.x * kTransposeTile;
  const int y0 = blockIdx.y * kTransposeTile;
  for (int r = threadIdx.y; r < kTransposeTile; r += kTransposeRows) {
    const int x = x0 + threadIdx.x;
    const int y = y0 + r;
    if (x < nx && y < ny) tile[r][threadIdx.x] = in[static_cast<int64_t>(y) * nx + x];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kTransposeTile; r += kTransposeRows) {
    const int y = y0 + threadIdx.x;
    const int x = x0 + r;
    if (x < nx && y < ny) out[static_cast<int64_t>(x) * ny + y] = tile[threadIdx.x][r];
  }
}

// Launch: grid (num_views, ceil(num_detectors / kForwardBlock)), block (kForwardBlock).
// A thread owns one ray (view blockIdx.x, detector k): it reads the view's JosephView and
// the pixels along the ray (two per step, from `volume_t` when the view steps along x,
// else from `volume`), and writes projections[v * num_detectors + k]. Every ray is
// written, also those that miss the volume (0). Accumulation in float.
__global__ void __launch_bounds__(kForwardBlock)
    Parallel2dForwardKernel(Parallel2dShape shape, const JosephView* __restrict__ views,
                            const float* __restrict__ volume,
                            const float* __restrict__ volume_t,
                            float* __restrict__ projections) {
  const int v = blockIdx.x;
  const int k = blockIdx.y * kForwardBlock + threadIdx.x;
  if (k >= shape.num_detectors) return;
  const JosephView& view = views[v];
  const bool along_x = view.step_along_x != 0;
  const float* __restrict__ data = along_x ? volume_t : volume;
  const int n_step = along_x ? shape.nx : shape.ny;
  const int n_across = along_x ? shape.ny : shape.nx;

  // a(j) = a0 + j * da; only steps with -1 < a < n_across can touch a pixel. The range is
  // found in double and widened by one step each side; the loop still checks each pixel.
  const double a0d = view.across0 + static_cast<double>(k) * view.across_per_detector;
  const double dad = view.across_per_step;
  int j_begin = 0;
  int j_end = n_step;
  if (dad != 0.0) {
    double lo = (-1.0 - a0d) / dad;
    double hi = (static_cast<double>(n_across) - a0d) / dad;
    if (dad < 0.0) {
      const double t = lo;
      lo = hi;
      hi = t;
    }
    lo = fmin(fmax(lo, -1.0), static_cast<double>(n_step));
    hi = fmin(fmax(hi, -1.0), static_cast<double>(n_step));
    j_begin = max(0, static_cast<int>(floor(lo)) - 1);
    j_end = min(n_step, static_cast<int>(ceil(hi)) + 2);
  } else if (a0d <= -1.0 || a0d >= static_cast<double>(n_across)) {
    j_end = 0;
  }

  const float a0 = static_cast<float>(a0d);
  const float da = view.across_per_step_f;
  float sum = 0.0f;
  for (int j = j_begin; j < j_end; ++j) {
    const float a = fmaf(static_cast<float>(j), da, a0);
    const float floor_a = floorf(a);
    const int i0 = static_cast<int>(floor_a);
    const float w1 = a - floor_a;
    const float* __restrict__ line = data + static_cast<int64_t>(j) * n_across;
    const float p0 = (i0 >= 0 && i0 < n_across) ? __ldg(line + i0) : 0.0f;
    const float p1 = (i0 + 1 >= 0 && i0 + 1 < n_across) ? __ldg(line + i0 + 1) : 0.0f;
    sum += fmaf(w1, p1, (1.0f - w1) * p0);
  }
  projections[static_cast<int64_t>(v) * shape.num_detectors + k] = sum * view.step_weight;
}

}  // namespace

cudaError_t LaunchTranspose(const float* volume, int32_t nx, int32_t ny, float* volume_t,
                            cudaStream_t stream) {
  if (nx <= 0 || ny <= 0) return cudaSuccess;
  const dim3 grid((nx + kTransposeTile - 1) / kTransposeTile,
                  (ny + kTransposeTile - 1) / kTransposeTile);
  const dim3 block(kTransposeTile, kTransposeRows);
  TransposeKernel<<<grid, block, 0, stream>>>(volume, nx, ny, volume_t);
  return cudaGetLastError();
}

cudaError_t LaunchParallel2dForward(const Parallel2dShape& shape, const JosephView* views,
                                    const float* volume, const float* volume_t,
                                    float* projections, cudaStream_t stream) {
  if (shape.num_views <= 0 || shape.num_detectors <= 0) return cudaSuccess;
  const dim3 grid(shape.num_views, (shape.num_detectors + kForwardBlock - 1) / kForwardBlock);
  Parallel2dForwardKernel<<<grid, kForwardBlock, 0, stream>>>(shape, views, volume, volume_t,
                                                              projections);
  return cudaGetLastError();
}

}  // namespace tomo::core::cuda
