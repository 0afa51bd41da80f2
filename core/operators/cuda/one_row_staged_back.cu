// Back projection of one-slice volumes from one-row flat detectors (the 2D parallel and fan
// geometries) on CUDA, with the detector windows staged in shared memory: the same
// voxel-driven operator as vector_back.cu (linear interpolation along the row, zero outside
// it, FDK weight 1 / d^2 on request), computed exactly in float32 instead of with the
// texture unit's 8-bit weights.
//
// Why: a texture fetch per pixel-view update caps the 2D back projection at the texture
// unit's rate (about 955 G fetches/s on the H100: 0.1 ms for 729^2 x 180 views). A tile of
// pixels projects onto a short stretch of the detector (a 32 x 32 tile onto about 46
// pixels of a 1 mm detector), so the block copies that stretch once per view into shared
// memory, as pairs (midpoint, difference) of neighbours p[k], p[k + 1], and each update is
// one 8-byte shared load and one FMA; shared memory serves a warp per clock per SM, several
// times the texture rate.
//
//   tile of pixels --corners--> [lo, hi] on view v's row --stage--> pairs[0 .. length)
//   pixel: q = column - start - 1/2, i = round(q): value = pairs[i].mid + (q - i) pairs[i].diff
//
// The block computes each view's window itself (the column is linear for a parallel beam
// and projective for a fan beam, so its extremes over a tile are at the corners), so
// nothing is precomputed on the host and any geometry is correct: views whose window does
// not fit the shared buffer, or whose tile reaches behind the source, read the row from
// global memory directly (the same arithmetic).

#include <cmath>

#include "core/operators/cuda/vector_kernels.h"

namespace tomo::core::cuda {
namespace {

// Views per chunk: one warp computes their windows with one shuffle scan.
constexpr int kChunk = 32;
// Pairs of detector values staged per chunk (16 KiB): 32 views of up to 64 pixels fit,
// enough for a 32 x 32 tile on a detector as fine as the pixels (46 per view).
constexpr int kStagedPairs = 2048;
// Adding 1.5 * 2^23 rounds a float in (-2^22, 2^22) to an integer held in the low bits of
// the sum: floor and fraction with full-rate adds instead of the quarter-rate F2I and FRND
// (two of those per update made v0.5's first version slower than the texture).
constexpr float kRoundMagic = 12582912.0f;
constexpr int kRoundMagicBits = 0x4B400000;

// One view as the update loop needs it. Relative to the window, q = column - shift with
// shift = start + 1/2: the pair index is round(q), the interpolation offset q - round(q) in
// [-1/2, 1/2]. Parallel beams: q = a(X) with shift folded into a.w (exact enough: a.w is
// of the size of the column); cone beams: q = a(X) / d(X) - shift, one FFMA (folding shift
// into the form instead would subtract shift * d from a coefficient by coefficient, and that
// cancellation, divided by a small d near the source, costs accuracy).
struct StagedView {
  float4 a;     // (x, y, w) coefficients of the column form; z: the view's scale
  float4 d;     // cone only
  float shift;  // start + 1/2
  int start;    // detector column of the window's first pair's first value
  int offset;   // first pair in the shared buffer; -1: read global memory (direct)
  int length;   // pairs
};

// acc + value * w^kPower (the distance weight w = D / U; vector_back.cu's AddWeighted).
template <int kPower>
__device__ __forceinline__ float AddWeighted(float acc, float value, float w) {
  if (kPower == 2) return fmaf(value, w * w, acc);
  if (kPower == 1) return fmaf(value, w, acc);
  return acc + value;
}

// Linear interpolation of row `row` (columns values) at `column`, zero outside.
__device__ __forceinline__ float SampleRow(const float* __restrict__ row, int columns,
                                           float column) {
  const float fc = floorf(column);
  if (!(fc >= -1.0f && fc < static_cast<float>(columns))) return 0.0f;
  const int c0 = static_cast<int>(fc);
  const float t = column - fc;
  const float p0 = c0 >= 0 ? __ldg(row + c0) : 0.0f;
  const float p1 = c0 + 1 < columns ? __ldg(row + c0 + 1) : 0.0f;
  return fmaf(t, p1 - p0, p0);
}

// Launch: grid (ceil(nx / kBlockX), ceil(ny / (kBlockY * kPixels))), block (kBlockX,
// kBlockY). A block owns a tile of kBlockX x (kBlockY * kPixels) pixels; a thread owns
// pixels (ix, iy + j * kBlockY), j < kPixels (a warp: 32 neighbours along x, whose
// columns are neighbours, so its shared loads hit few banks). Per chunk of kChunk views:
// warp 0 computes the windows (tile corners, an inclusive shuffle scan for the offsets),
// the warps stage the windows' pairs (warp w the views w, w + 8, ...) as (midpoint,
// difference), then every thread updates its pixels: per update one FFMA for q (parallel),
// three adds and an integer add for the index and offset, one LDS.64, one FFMA and the
// accumulating add. Each pixel is written once (accumulate: added to).
// Pixels of the tile beyond the volume's last row compute as that row (their results are
// not written), so every computed q lies in its window: the window has one pair of margin
// on each side against float rounding, and no clamp is needed.
template <bool kCone, int kPower, int kBlockX, int kBlockY, int kPixels>
__global__ void __launch_bounds__(kBlockX* kBlockY)
    OneRowStagedBackKernel(VectorVolumeShape vol, VectorDetectorShape det,
                           const VectorBpView* __restrict__ views, int32_t accumulate,
                           const float* __restrict__ projections, float* __restrict__ volume) {
  constexpr int kThreads = kBlockX * kBlockY;
  constexpr int kWarps = kThreads / 32;
  constexpr int kTileY = kBlockY * kPixels;
  __shared__ StagedView s_views[kChunk];
  __shared__ float2 s_pairs[kStagedPairs];

  const int x0 = blockIdx.x * kBlockX, y0 = blockIdx.y * kTileY;
  const int ix = x0 + threadIdx.x;
  const int iy = y0 + threadIdx.y;
  const int thread = threadIdx.y * kBlockX + threadIdx.x;
  const int warp = thread / 32, lane = thread % 32;
  const int x_last = min(x0 + kBlockX, vol.nx) - 1;
  const int y_last = min(y0 + kTileY, vol.ny) - 1;
  const int columns = det.columns;
  const float fx = static_cast<float>(ix);
  float fy[kPixels];
#pragma unroll
  for (int j = 0; j < kPixels; ++j) fy[j] = static_cast<float>(min(iy + j * kBlockY, y_last));

  float acc[kPixels];
#pragma unroll
  for (int j = 0; j < kPixels; ++j) acc[j] = 0.0f;

  for (int v0 = 0; v0 < det.num_views; v0 += kChunk) {
    const int count = min(kChunk, det.num_views - v0);
    __syncthreads();  // the previous chunk is no longer read
    if (warp == 0) {
      StagedView staged{};
      bool fits = lane < count;
      if (lane < count) {
        const VectorBpView view = views[v0 + lane];
        // The column's extremes over the tile: at its corners (linear for a parallel beam,
        // projective, hence monotone along lines, for a cone beam in front of the source).
        float lo = INFINITY, hi = -INFINITY;
#pragma unroll
        for (int corner = 0; corner < 4; ++corner) {
          const float x = static_cast<float>(corner & 1 ? x_last : x0);
          const float y = static_cast<float>(corner & 2 ? y_last : y0);
          const float a = fmaf(view.a.x, x, fmaf(view.a.y, y, view.a.w));
          float column = a;
          if (kCone) {
            const float d = fmaf(view.d.x, x, fmaf(view.d.y, y, view.d.w));
            fits = fits && d > 0.0f;
            column = a / d;
          }
          lo = fminf(lo, column);
          hi = fmaxf(hi, column);
        }
        fits = fits && lo > -1e6f && hi < 1e6f;
        const float flo = fits ? floorf(lo) : 0.0f;
        staged.start = static_cast<int>(flo) - 1;
        staged.length = fits ? static_cast<int>(floorf(hi) - flo) + 4 : 0;
        staged.shift = static_cast<float>(staged.start) + 0.5f;
        staged.a = view.a;
        staged.a.z = view.extra.w;  // the view's scale (the z coefficient is not used here)
        if (kCone) {
          staged.d = view.d;
        } else {
          staged.a.w -= staged.shift;
        }
      }
      // Inclusive scan of the lengths: a view is staged when it ends inside the buffer.
      int end = staged.length;
#pragma unroll
      for (int step = 1; step < 32; step *= 2) {
        const int other = __shfl_up_sync(0xffffffffu, end, step);
        if (lane >= step) end += other;
      }
      if (lane < count) {
        staged.offset = fits && end <= kStagedPairs ? end - staged.length : -1;
        s_views[lane] = staged;
      }
    }
    __syncthreads();
    for (int c = warp; c < count; c += kWarps) {
      const StagedView& view = s_views[c];
      if (view.offset < 0) continue;
      const float* __restrict__ row = projections + static_cast<int64_t>(v0 + c) * columns;
      for (int t = lane; t < view.length; t += 32) {
        const int k = view.start + t;
        const float p0 = k >= 0 && k < columns ? __ldg(row + k) : 0.0f;
        const float p1 = k + 1 >= 0 && k + 1 < columns ? __ldg(row + k + 1) : 0.0f;
        s_pairs[view.offset + t] = make_float2(0.5f * (p0 + p1), p1 - p0);
      }
    }
    __syncthreads();
    if (ix >= vol.nx) continue;
    for (int c = 0; c < count; ++c) {
      const StagedView& view = s_views[c];
      const float4 a = view.a;
      const float shift = view.shift;
      const float a_row = fmaf(a.x, fx, a.w);
      float d_row = 1.0f;
      float4 d = make_float4(0.0f, 0.0f, 0.0f, 1.0f);
      if (kCone) {
        d = view.d;
        d_row = fmaf(d.x, fx, d.w);
      }
      if (view.offset >= 0) {
        // The pair index is the rounded float's bits minus the magic's: fold that into the
        // view's offset (one integer add per update).
        const int pair_base = view.offset - kRoundMagicBits;
#pragma unroll
        for (int j = 0; j < kPixels; ++j) {
          float q = fmaf(a.y, fy[j], a_row);
          float inv_d = 1.0f;
          if (kCone) {
            // In the window, so in front of the source: d > 0.
            inv_d = __fdividef(1.0f, fmaf(d.y, fy[j], d_row));
            q = fmaf(q, inv_d, -shift);
          }
          const float rounded = q + kRoundMagic;
          const float offset = q - (rounded - kRoundMagic);
          const float2 pair = s_pairs[pair_base + __float_as_int(rounded)];
          const float value = fmaf(offset, pair.y, pair.x);
          acc[j] = AddWeighted<kPower>(acc[j], kPower == 2 ? value : value * a.z, inv_d);
        }
      } else {
        const float* row = projections + static_cast<int64_t>(v0 + c) * columns;
#pragma unroll
        for (int j = 0; j < kPixels; ++j) {
          const float a_j = fmaf(a.y, fy[j], a_row);
          float column = a_j + shift;
          float inv_d = 1.0f;
          if (kCone) {
            const float dj = fmaf(d.y, fy[j], d_row);
            if (!(dj > 0.0f)) continue;  // at or behind the source
            inv_d = __fdividef(1.0f, dj);
            column = a_j * inv_d;
          }
          const float value = SampleRow(row, columns, column);
          acc[j] = AddWeighted<kPower>(acc[j], kPower == 2 ? value : value * a.z, inv_d);
        }
      }
    }
  }
  if (ix >= vol.nx) return;
#pragma unroll
  for (int j = 0; j < kPixels; ++j) {
    const int y = iy + j * kBlockY;
    if (y < vol.ny) {
      float* out = volume + static_cast<int64_t>(y) * vol.nx + ix;
      *out = accumulate ? *out + acc[j] : acc[j];
    }
  }
}

template <bool kCone, int kPower, int kBlockX, int kBlockY, int kPixels>
cudaError_t LaunchShape(const VectorVolumeShape& vol, const VectorDetectorShape& det,
                        const VectorBpView* views, int32_t accumulate, const float* projections,
                        float* volume, cudaStream_t stream) {
  constexpr int kTileY = kBlockY * kPixels;
  const dim3 grid((vol.nx + kBlockX - 1) / kBlockX, (vol.ny + kTileY - 1) / kTileY);
  const dim3 block(kBlockX, kBlockY);
  OneRowStagedBackKernel<kCone, kPower, kBlockX, kBlockY, kPixels>
      <<<grid, block, 0, stream>>>(vol, det, views, accumulate, projections, volume);
  return cudaGetLastError();
}

template <bool kCone, int kPower>
cudaError_t LaunchVariant(const VectorVolumeShape& vol, const VectorDetectorShape& det,
                          const VectorBpView* views, int32_t accumulate,
                          const float* projections, float* volume, cudaStream_t stream,
                          int32_t variant) {
  switch (variant) {
    case 1:
      return LaunchShape<kCone, kPower, 32, 8, 2>(vol, det, views, accumulate, projections,
                                                volume, stream);
    case 2:
      return LaunchShape<kCone, kPower, 32, 4, 4>(vol, det, views, accumulate, projections,
                                                volume, stream);
    case 3:
      return LaunchShape<kCone, kPower, 32, 16, 2>(vol, det, views, accumulate, projections,
                                                 volume, stream);
    default:
      return LaunchShape<kCone, kPower, 32, 8, 4>(vol, det, views, accumulate, projections,
                                                volume, stream);
  }
}

}  // namespace

cudaError_t LaunchOneRowStagedBack(const VectorVolumeShape& volume_shape,
                                   const VectorDetectorShape& detector,
                                   const VectorBpView* views, int32_t weight_power,
                                   int32_t accumulate, const float* projections, float* volume,
                                   cudaStream_t stream, int32_t variant) {
  if (volume_shape.nx <= 0 || volume_shape.ny <= 0) return cudaSuccess;
  if (detector.cone) {
    switch (weight_power) {
      case 2:
        return LaunchVariant<true, 2>(volume_shape, detector, views, accumulate, projections,
                                      volume, stream, variant);
      case 1:
        return LaunchVariant<true, 1>(volume_shape, detector, views, accumulate, projections,
                                      volume, stream, variant);
      default:
        return LaunchVariant<true, 0>(volume_shape, detector, views, accumulate, projections,
                                      volume, stream, variant);
    }
  }
  // Parallel beams have no distance weight.
  return LaunchVariant<false, 0>(volume_shape, detector, views, accumulate, projections,
                                 volume, stream, variant);
}

}  // namespace tomo::core::cuda
