// Voxel-driven back projection for any VectorGeometry on CUDA (backend.h): each voxel
// centre is mapped onto each view's detector by the view's linear forms (VectorBpView in
// vector_kernels.h: a projective map for flat detectors, atan2 for cylindrical ones), the
// projection is interpolated bilinearly there (zero outside the detector) and the views'
// values are summed, each times the distance weight D / U to a power (0: plain; 2: FDK and
// the matched 3D cone model; 1: the matched 2D fan model) and, for powers 0 and 1, the view's
// scale (matched_back_projection.h; for power 2 the scale is folded into the forms).
//
//   voxel X (index units) --a,b,d--> (column, row) = (a/d, b/d) on view v's detector
//                                    value += P_v(row, column) [ / d^power ] [ * scale ]
//
// All views in one pass (the volume is written once); with the texture sampler the host
// passes at most kMaxTextureLayers views per launch and accumulates.
//
// Two thread layouts (template kStepY): 3D volumes, a thread owns kVoxelsPerThread voxels
// along z; volumes of one slice (2D geometries, nz = 1), a thread owns kVoxelsPerThread
// pixels along y instead (the 3D layout would sample 7 of its 8 positions outside the
// volume), sharing the view's forms the same way (the y step is one add per form).

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

#include "core/operators/cuda/vector_kernels.h"

namespace tomo::core::cuda {
namespace {

// Launch shapes (vector_kernels.h, kBpVariant...): blocks of kBlockX x kBlockY voxel
// columns (x fastest, so a warp's detector positions are neighbours) and kVoxelsPerThread
// voxels along z per thread, sharing one evaluation of the view's forms (the z step is one
// add per form). Measured on the H100 (bench/NOTES.md, v0.2; GPU-resident, texture copy
// included): variant 0, 32 x 4 x 8: 939 GUPS on 512^3 x 720 x 768^2, 705 GUPS on FDK
// case 1 (863 with float16 projections); the other shapes are within 2% (32 x 4 x 16 the
// best on FDK case 1: 714, 895 with float16), so the default stays the tested one.
// 2D (nz = 1) shapes (vector_kernels.h), measured on the H100 (bench/NOTES.md v0.3,
// GPU-resident, texture copy included). First run, 32 x 4 threads owning 4 / 2 / 1 pixels
// along y and 16 x 8 owning 4: 2d-par-bp (729^2 from 180 x 729) 0.15 / 0.13 / 0.19 /
// 0.15 ms, 2d-fan-bp (1024^2 from 720 x 1024) 0.87 / 0.85 / 1.36 / 0.87 ms. Second run
// (the variants below): 32x4x2 0.128 / 0.845, 32x4x4 0.144 / 0.868, 32x8x2 0.129 / 0.833,
// 16x8x2 0.127 / 0.846 ms: the 2-pixel shapes within 2%, 32 x 4 x 2 stays the default.
// v0.4: one-row detectors read a layered 1D texture (kOneRow): 0.1276 -> 0.1235 / 0.852 ->
// 0.835 ms in one run (bench/NOTES.md v0.4).
// Views whose parameters are staged in shared memory at a time (64 bytes each).
constexpr int kBpViewsPerChunk = 64;

// acc + value * w^kPower: the distance weight of the back projection (w = D / U), kPower 0
// (plain, parallel beams), 1 (2D fan beams, matched) or 2 (FDK; 3D cone beams, matched).
template <int kPower>
__device__ __forceinline__ float AddWeighted(float acc, float value, float w) {
  if (kPower == 2) return fmaf(value, w * w, acc);
  if (kPower == 1) return fmaf(value, w, acc);
  return acc + value;
}

// The view's scale (VectorBpView::extra.w) on a sample. kPower 2 (FDK, 3D cone beams) takes
// none: a matched scale is folded into the view's forms there (cuda_vector_projector.cc),
// which keeps the FDK path's inner loop as it was.
template <int kPower>
__device__ __forceinline__ float ScaledSample(float value, float scale) {
  return kPower == 2 ? value : value * scale;
}

// kOneRow (kTexture, detectors of one row whose pixels all map onto the row's centre line,
// which the host checks): the projections are a layered 1D texture, one linear fetch of 2
// texels; `row` is ignored (it is 0, where the bilinear fetch gives the same value).
template <VectorSampler kSampler, bool kOneRow = false>
__device__ __forceinline__ float SampleDetector(cudaTextureObject_t texture,
                                                const float* __restrict__ projections,
                                                int rows, int columns, int view, float row,
                                                float column) {
  if (kSampler == VectorSampler::kTexture && kOneRow) {
    return tex1DLayered<float>(texture, column + 0.5f, view);
  } else if (kSampler == VectorSampler::kTexture) {
    return tex2DLayered<float>(texture, column + 0.5f, row + 0.5f, view);
  } else {
    const float fc = floorf(column), fr = floorf(row);
    if (!(fc >= -1.0f && fc < static_cast<float>(columns) && fr >= -1.0f &&
          fr < static_cast<float>(rows))) {
      return 0.0f;
    }
    const float tc = column - fc, tr = row - fr;
    const int c0 = static_cast<int>(fc), r0 = static_cast<int>(fr);
    const float* base = projections + static_cast<int64_t>(view) * rows * columns;
    float sum = 0.0f;
#pragma unroll
    for (int dr = 0; dr < 2; ++dr) {
      const int r = r0 + dr;
      if (r < 0 || r >= rows) continue;
      const float wr = dr ? tr : 1.0f - tr;
#pragma unroll
      for (int dc = 0; dc < 2; ++dc) {
        const int c = c0 + dc;
        if (c < 0 || c >= columns) continue;
        const float wc = dc ? tc : 1.0f - tc;
        sum = fmaf(wr * wc, __ldg(base + static_cast<int64_t>(r) * columns + c), sum);
      }
    }
    return sum;
  }
}

// Launch (kStepY false): grid (ceil(nx / kBpBlockX), ceil(ny / kBpBlockY), ceil(nz /
// kVoxelsPerThread)), block (kBpBlockX, kBpBlockY). A thread owns voxels (ix, iy, iz0 ..
// iz0 + kVoxelsPerThread - 1): for every view it reads the view's VectorBpView (staged by
// the block in shared memory) and one interpolated detector value per voxel, accumulates in
// registers and writes (or adds to) each of its voxels once.
// Launch (kStepY true, for nz = 1): grid (ceil(nx / kBpBlockX), ceil(ny / (kBpBlockY *
// kVoxelsPerThread)), nz), block (kBpBlockX, kBpBlockY); a thread owns pixels (ix, iy0 ..
// iy0 + kVoxelsPerThread - 1, iz), otherwise the same.
template <VectorSampler kSampler, bool kCylindrical, int kPower, int kBpBlockX, int kBpBlockY,
          int kVoxelsPerThread, bool kStepY, bool kOneRow>
__global__ void __launch_bounds__(kBpBlockX* kBpBlockY)
    VectorBackKernel(VectorVolumeShape vol, VectorDetectorShape det,
                     const VectorBpView* __restrict__ views, int32_t accumulate,
                     cudaTextureObject_t texture, const float* __restrict__ projections,
                     float* __restrict__ volume) {
  __shared__ VectorBpView s_views[kBpViewsPerChunk];
  const int ix = blockIdx.x * kBpBlockX + threadIdx.x;
  const int iy = kStepY ? (blockIdx.y * kBpBlockY + threadIdx.y) * kVoxelsPerThread
                        : blockIdx.y * kBpBlockY + threadIdx.y;
  const int iz0 = kStepY ? blockIdx.z : blockIdx.z * kVoxelsPerThread;
  const bool inside = ix < vol.nx && iy < vol.ny;
  const int thread = threadIdx.y * kBpBlockX + threadIdx.x;
  const float fx = static_cast<float>(ix), fy = static_cast<float>(iy);
  const float fz = static_cast<float>(iz0);

  float acc[kVoxelsPerThread];
#pragma unroll
  for (int k = 0; k < kVoxelsPerThread; ++k) acc[k] = 0.0f;

  for (int v0 = 0; v0 < det.num_views; v0 += kBpViewsPerChunk) {
    const int count = min(kBpViewsPerChunk, det.num_views - v0);
    __syncthreads();  // the previous chunk is no longer read
    for (int t = thread; t < count; t += kBpBlockX * kBpBlockY) s_views[t] = views[v0 + t];
    __syncthreads();
    if (!inside) continue;
    for (int c = 0; c < count; ++c) {
      const VectorBpView view = s_views[c];
      const int v = v0 + c;
      float a = fmaf(view.a.x, fx, fmaf(view.a.y, fy, fmaf(view.a.z, fz, view.a.w)));
      float b = fmaf(view.b.x, fx, fmaf(view.b.y, fy, fmaf(view.b.z, fz, view.b.w)));
      float d = fmaf(view.d.x, fx, fmaf(view.d.y, fy, fmaf(view.d.z, fz, view.d.w)));
#pragma unroll
      for (int k = 0; k < kVoxelsPerThread; ++k) {
        if (kCylindrical) {
          // a: along the central ray, b: along the tangent, d: rows (all over R).
          if (a > 0.0f) {
            const float rho2 = fmaf(a, a, b * b);
            const float inv_rho = rsqrtf(rho2);
            const float column = fmaf(atan2f(b, a), view.extra.x, view.extra.y);
            const float row = fmaf(d, inv_rho, view.extra.z);
            const float value = SampleDetector<kSampler, kOneRow>(texture, projections, det.rows,
                                                         det.columns, v, row, column);
            acc[k] = AddWeighted<kPower>(acc[k], ScaledSample<kPower>(value, view.extra.w), inv_rho);
          }
        } else {
          if (d > 0.0f) {
            // Approximate reciprocal (MUFU.RCP, 1 ulp class) instead of an IEEE division.
            const float inv_d = __fdividef(1.0f, d);
            const float value = SampleDetector<kSampler, kOneRow>(texture, projections, det.rows,
                                                         det.columns, v, b * inv_d, a * inv_d);
            acc[k] = AddWeighted<kPower>(acc[k], ScaledSample<kPower>(value, view.extra.w), inv_d);
          }
        }
        a += kStepY ? view.a.y : view.a.z;
        b += kStepY ? view.b.y : view.b.z;
        d += kStepY ? view.d.y : view.d.z;
      }
    }
  }
  if (!inside) return;
#pragma unroll
  for (int k = 0; k < kVoxelsPerThread; ++k) {
    const int iz = kStepY ? iz0 : iz0 + k;
    const int iyk = kStepY ? iy + k : iy;
    if (iz < vol.nz && iyk < vol.ny) {
      float* out = volume + (static_cast<int64_t>(iz) * vol.ny + iyk) * vol.nx + ix;
      *out = accumulate ? *out + acc[k] : acc[k];
    }
  }
}

template <VectorSampler kSampler, bool kCylindrical, int kPower, int kBpBlockX, int kBpBlockY,
          int kVoxelsPerThread, bool kStepY = false, bool kOneRow = false>
cudaError_t LaunchBackShape(const VectorVolumeShape& vol, const VectorDetectorShape& det,
                            const VectorBpView* views, int32_t accumulate,
                            cudaTextureObject_t texture, const float* projections,
                            float* volume, cudaStream_t stream) {
  const dim3 grid = kStepY ? dim3((vol.nx + kBpBlockX - 1) / kBpBlockX,
                                  (vol.ny + kBpBlockY * kVoxelsPerThread - 1) /
                                      (kBpBlockY * kVoxelsPerThread),
                                  vol.nz)
                           : dim3((vol.nx + kBpBlockX - 1) / kBpBlockX,
                                  (vol.ny + kBpBlockY - 1) / kBpBlockY,
                                  (vol.nz + kVoxelsPerThread - 1) / kVoxelsPerThread);
  const dim3 block(kBpBlockX, kBpBlockY);
  VectorBackKernel<kSampler, kCylindrical, kPower, kBpBlockX, kBpBlockY, kVoxelsPerThread, kStepY,
                   kOneRow>
      <<<grid, block, 0, stream>>>(vol, det, views, accumulate, texture, projections, volume);
  return cudaGetLastError();
}

// One slice (nz = 1): the 2D shapes of vector_kernels.h (kBp2dVariant...); kOneRow: the
// projections in a layered 1D texture (SampleDetector).
template <VectorSampler kSampler, bool kCylindrical, int kPower, bool kOneRow>
cudaError_t LaunchBack2d(const VectorVolumeShape& vol, const VectorDetectorShape& det,
                         const VectorBpView* views, int32_t accumulate,
                         cudaTextureObject_t texture, const float* projections, float* volume,
                         cudaStream_t stream, int32_t variant) {
  switch (variant) {
    case 1:
      return LaunchBackShape<kSampler, kCylindrical, kPower, 32, 4, 4, true, kOneRow>(
          vol, det, views, accumulate, texture, projections, volume, stream);
    case 2:
      return LaunchBackShape<kSampler, kCylindrical, kPower, 32, 8, 2, true, kOneRow>(
          vol, det, views, accumulate, texture, projections, volume, stream);
    case 3:
      return LaunchBackShape<kSampler, kCylindrical, kPower, 16, 8, 2, true, kOneRow>(
          vol, det, views, accumulate, texture, projections, volume, stream);
    default:
      return LaunchBackShape<kSampler, kCylindrical, kPower, 32, 4, 2, true, kOneRow>(
          vol, det, views, accumulate, texture, projections, volume, stream);
  }
}

// The launch shape variants of vector_kernels.h; the exact sampler (a correctness
// reference) uses only the default.
template <VectorSampler kSampler, bool kCylindrical, int kPower>
cudaError_t LaunchBack(const VectorVolumeShape& vol, const VectorDetectorShape& det,
                       const VectorBpView* views, int32_t accumulate,
                       cudaTextureObject_t texture, const float* projections, float* volume,
                       cudaStream_t stream, int32_t variant, int32_t one_row) {
  if (vol.nz == 1) {
    if (kSampler == VectorSampler::kTexture && one_row) {
      return LaunchBack2d<kSampler, kCylindrical, kPower, true>(
          vol, det, views, accumulate, texture, projections, volume, stream, variant);
    }
    return LaunchBack2d<kSampler, kCylindrical, kPower, false>(
        vol, det, views, accumulate, texture, projections, volume, stream,
        kSampler == VectorSampler::kTexture ? variant : kBpVariantDefault);
  }
  if (kSampler == VectorSampler::kTexture) {
    switch (variant) {
      case 1:
        return LaunchBackShape<kSampler, kCylindrical, kPower, 16, 8, 8>(
            vol, det, views, accumulate, texture, projections, volume, stream);
      case 2:
        return LaunchBackShape<kSampler, kCylindrical, kPower, 32, 4, 16>(
            vol, det, views, accumulate, texture, projections, volume, stream);
      case 3:
        return LaunchBackShape<kSampler, kCylindrical, kPower, 8, 8, 8>(
            vol, det, views, accumulate, texture, projections, volume, stream);
      default:
        break;
    }
  }
  return LaunchBackShape<kSampler, kCylindrical, kPower, 32, 4, 8>(
      vol, det, views, accumulate, texture, projections, volume, stream);
}

template <VectorSampler kSampler, bool kCylindrical>
cudaError_t LaunchBackPower(const VectorVolumeShape& vol, const VectorDetectorShape& det,
                            const VectorBpView* views, int32_t power, int32_t accumulate,
                            cudaTextureObject_t texture, const float* projections,
                            float* volume, cudaStream_t stream, int32_t variant,
                            int32_t one_row) {
  switch (power) {
    case 2:
      return LaunchBack<kSampler, kCylindrical, 2>(vol, det, views, accumulate, texture,
                                                   projections, volume, stream, variant,
                                                   one_row);
    case 1:
      // (D / U)^1 is the 2D fan beam's weight (matched_back_projection.h): one slice only.
      if (vol.nz != 1) return cudaErrorInvalidValue;
      if (kSampler == VectorSampler::kTexture && one_row) {
        return LaunchBack2d<kSampler, kCylindrical, 1, true>(
            vol, det, views, accumulate, texture, projections, volume, stream, variant);
      }
      return LaunchBack2d<kSampler, kCylindrical, 1, false>(
          vol, det, views, accumulate, texture, projections, volume, stream,
          kSampler == VectorSampler::kTexture ? variant : kBpVariantDefault);
    default:
      return LaunchBack<kSampler, kCylindrical, 0>(vol, det, views, accumulate, texture,
                                                   projections, volume, stream, variant,
                                                   one_row);
  }
}

template <VectorSampler kSampler>
cudaError_t LaunchBackSampler(const VectorVolumeShape& vol, const VectorDetectorShape& det,
                              const VectorBpView* views, int32_t power, int32_t accumulate,
                              cudaTextureObject_t texture, const float* projections,
                              float* volume, cudaStream_t stream, int32_t variant,
                              int32_t one_row) {
  return det.cylindrical
             ? LaunchBackPower<kSampler, true>(vol, det, views, power, accumulate, texture,
                                               projections, volume, stream, variant, one_row)
             : LaunchBackPower<kSampler, false>(vol, det, views, power, accumulate, texture,
                                                projections, volume, stream, variant, one_row);
}

// Launch: grid-stride, 256 threads; a thread converts elements i, i + stride, ...
__global__ void FloatToHalfKernel(const float* __restrict__ in, int64_t count,
                                  __half* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __float2half_rn(in[i]);
  }
}

}  // namespace

cudaError_t LaunchFloatToHalf(const float* in, int64_t count, uint16_t* out, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const int64_t blocks = std::min<int64_t>((count + 255) / 256, 132 * 32);
  FloatToHalfKernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      in, count, reinterpret_cast<__half*>(out));
  return cudaGetLastError();
}

cudaError_t LaunchVectorBack(const VectorVolumeShape& volume_shape,
                             const VectorDetectorShape& detector, const VectorBpView* views,
                             VectorSampler sampler, int32_t weight_power, int32_t accumulate,
                             cudaTextureObject_t projection_texture, const float* projections,
                             float* volume, cudaStream_t stream, int32_t variant,
                             int32_t one_row_texture) {
  if (volume_shape.nx <= 0 || volume_shape.ny <= 0 || volume_shape.nz <= 0) return cudaSuccess;
  if (sampler == VectorSampler::kTexture) {
    return LaunchBackSampler<VectorSampler::kTexture>(volume_shape, detector, views, weight_power,
                                                      accumulate, projection_texture,
                                                      projections, volume, stream, variant,
                                                      one_row_texture);
  }
  return LaunchBackSampler<VectorSampler::kExact>(volume_shape, detector, views, weight_power,
                                                  accumulate, projection_texture, projections,
                                                  volume, stream, variant, 0);
}

}  // namespace tomo::core::cuda
