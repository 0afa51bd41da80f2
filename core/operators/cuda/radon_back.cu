// Back projection of the Radon plane-integral projector on CUDA (radon_kernels.h): for each
// voxel, the sum over directions of the direction's samples interpolated linearly at the
// voxel's sample index, times the direction's scale. A gather: every voxel written once.
//
//   voxel (ix, iy, iz) --form_i--> u = x ix + y iy + z iz + w    (fractional sample index)
//                                  value += s_i * lerp(samples_i, u)
//
// A block owns a box of kBlockX x kBlockY x kVoxelsPerThread voxels (a thread: one (x, y)
// and kVoxelsPerThread voxels along z, sharing the form's evaluation; the z step is one add).
// The box's sample indices of one direction span at most `window` - 4 samples (the host's
// bound over all directions), so per chunk of directions the block stages only that window
// of each direction's samples in shared memory, pre-multiplied by the scale and as pairs
// (s_j, s_{j+1} - s_j): one 64-bit shared load and one FMA per update, no bounds checks
// (samples outside [0, S) are staged as 0).
//
// Floor without the conversion pipe: for 0 <= v < 2^23, __fadd_rz(v, 2^23) holds floor(v)
// in its mantissa, so index and fraction come from three full-rate adds.
//
// Windows too long for shared memory (samples much finer than voxels) take a global-memory
// kernel (RadonBackGlobalKernel) with bounds checks instead.

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/operators/cuda/radon_kernels.h"

namespace tomo::core::cuda {
namespace {

// Launch shape: 32 x 8 threads (x fastest, so that a warp's sample indices are neighbours).
// kVoxelsPerThread along z is chosen on the host (ChooseVoxelsPerThread). Not yet measured
// against other shapes on a GPU: radon-bench times every voxels-per-thread variant.
constexpr int kBlockX = 32;
constexpr int kBlockY = 8;
constexpr int kThreads = kBlockX * kBlockY;
// Shared memory for staged windows per block: 24 KiB, so that shared memory does not limit
// residency before registers do (sm_90, 40 registers at 8 voxels per thread: 6 blocks of
// 256 threads, 144 of the SM's 228 KiB).
constexpr int kStageBytes = 24 * 1024;
constexpr int kMaxChunk = 64;
constexpr float kFloorMagic = 8388608.0f;  // 2^23
constexpr int kFloorMagicBits = 0x4B000000;

struct StagedLayout {
  int window;          // float2 entries per direction
  int chunk;           // directions per pass, <= kMaxChunk
  int step_c, step_j;  // kThreads = step_c * window + step_j
};

size_t StagedBytes(const StagedLayout& layout) {
  return static_cast<size_t>(layout.chunk) * sizeof(float4) + kMaxChunk * sizeof(int) +
         static_cast<size_t>(layout.chunk) * layout.window * sizeof(float2);
}

// Launch: grid (ceil(nx / 32), ceil(ny / 8), ceil(nz / kVoxelsPerThread)), block (32, 8),
// dynamic shared memory StagedBytes(layout). A thread owns voxels (ix, iy, iz0 .. iz0 +
// kVoxelsPerThread - 1). Per chunk of directions the block stages, per direction, the form
// relative to the block (x, y, z steps; w = the block's first voxel's position in the
// window), the window's first sample index and `window` pairs of scaled samples; each
// thread then accumulates its voxels in registers and writes (or adds to) each once.
template <int kVoxelsPerThread>
__global__ void __launch_bounds__(kThreads)
    RadonBackStagedKernel(RadonVolumeShape vol, RadonSamplesShape smp,
                          const float4* __restrict__ forms, const float* __restrict__ scales,
                          const float* __restrict__ projections, int32_t accumulate,
                          float* __restrict__ volume, StagedLayout layout) {
  extern __shared__ float4 s_dynamic[];
  float4* s_forms = s_dynamic;                                      // chunk
  int* s_first = reinterpret_cast<int*>(s_dynamic + layout.chunk);  // kMaxChunk
  float2* s_rows = reinterpret_cast<float2*>(s_first + kMaxChunk);  // chunk x window

  const int tx = threadIdx.x, ty = threadIdx.y;
  const int thread = ty * kBlockX + tx;
  const int ix0 = blockIdx.x * kBlockX, iy0 = blockIdx.y * kBlockY;
  const int iz0 = blockIdx.z * kVoxelsPerThread;
  const int ix = ix0 + tx, iy = iy0 + ty;
  const bool inside = ix < vol.nx && iy < vol.ny;
  const float ftx = static_cast<float>(tx), fty = static_cast<float>(ty);

  float acc[kVoxelsPerThread];
#pragma unroll
  for (int k = 0; k < kVoxelsPerThread; ++k) acc[k] = 0.0f;

  for (int d0 = 0; d0 < smp.num_directions; d0 += layout.chunk) {
    const int count = min(layout.chunk, smp.num_directions - d0);
    __syncthreads();  // the previous chunk is no longer read
    if (thread < count) {
      const float4 f = __ldg(forms + d0 + thread);
      const float origin =
          fmaf(f.x, static_cast<float>(ix0),
               fmaf(f.y, static_cast<float>(iy0), fmaf(f.z, static_cast<float>(iz0), f.w)));
      const float low = origin + fminf(f.x, 0.0f) * (kBlockX - 1) +
                        fminf(f.y, 0.0f) * (kBlockY - 1) +
                        fminf(f.z, 0.0f) * static_cast<float>(kVoxelsPerThread - 1);
      const float first = floorf(low) - 1.0f;
      s_forms[thread] = make_float4(f.x, f.y, f.z, origin - first);
      s_first[thread] = static_cast<int>(first);
    }
    __syncthreads();
    // Entry e = c * window + j of the chunk's windows; (c, j) stepped without a division.
    for (int e = thread, c = thread / layout.window, j = thread - c * layout.window;
         e < count * layout.window; e += kThreads) {
      const int k = s_first[c] + j;
      const float scale = __ldg(scales + d0 + c);
      const float* row = projections + static_cast<int64_t>(d0 + c) * smp.num_samples;
      const float a = (k >= 0 && k < smp.num_samples) ? __ldg(row + k) : 0.0f;
      const float b = (k + 1 >= 0 && k + 1 < smp.num_samples) ? __ldg(row + k + 1) : 0.0f;
      s_rows[e] = make_float2(scale * a, scale * (b - a));
      c += layout.step_c;
      j += layout.step_j;
      if (j >= layout.window) {
        j -= layout.window;
        ++c;
      }
    }
    __syncthreads();
    if (!inside) continue;
    for (int c = 0; c < count; ++c) {
      const float4 f = s_forms[c];
      const float2* row = s_rows + c * layout.window;
      float v = fmaf(f.x, ftx, fmaf(f.y, fty, f.w));
#pragma unroll
      for (int k = 0; k < kVoxelsPerThread; ++k) {
        const float r = __fadd_rz(v, kFloorMagic);
        const int i = __float_as_int(r) - kFloorMagicBits;
        const float frac = v - (r - kFloorMagic);
        const float2 pair = row[i];
        acc[k] += fmaf(frac, pair.y, pair.x);
        v += f.z;
      }
    }
  }
  if (!inside) return;
#pragma unroll
  for (int k = 0; k < kVoxelsPerThread; ++k) {
    const int iz = iz0 + k;
    if (iz < vol.nz) {
      float* out = volume + (static_cast<int64_t>(iz) * vol.ny + iy) * vol.nx + ix;
      *out = accumulate ? *out + acc[k] : acc[k];
    }
  }
}

// Launch: grid and block as the staged kernel, no dynamic shared memory. A thread owns the
// same voxels and reads each direction's form and scale and two samples from global memory
// (through the read-only cache) per update.
template <int kVoxelsPerThread>
__global__ void __launch_bounds__(kThreads)
    RadonBackGlobalKernel(RadonVolumeShape vol, RadonSamplesShape smp,
                          const float4* __restrict__ forms, const float* __restrict__ scales,
                          const float* __restrict__ projections, int32_t accumulate,
                          float* __restrict__ volume) {
  const int ix = blockIdx.x * kBlockX + threadIdx.x, iy = blockIdx.y * kBlockY + threadIdx.y;
  const int iz0 = blockIdx.z * kVoxelsPerThread;
  if (ix >= vol.nx || iy >= vol.ny) return;
  float acc[kVoxelsPerThread];
#pragma unroll
  for (int k = 0; k < kVoxelsPerThread; ++k) acc[k] = 0.0f;
  for (int d = 0; d < smp.num_directions; ++d) {
    const float4 f = __ldg(forms + d);
    const float scale = __ldg(scales + d);
    const float* row = projections + static_cast<int64_t>(d) * smp.num_samples;
    float u = fmaf(f.x, static_cast<float>(ix),
                   fmaf(f.y, static_cast<float>(iy), fmaf(f.z, static_cast<float>(iz0), f.w)));
#pragma unroll
    for (int k = 0; k < kVoxelsPerThread; ++k) {
      const float fk = floorf(u);
      const float frac = u - fk;
      if (fk >= -1.0f && fk < static_cast<float>(smp.num_samples)) {
        const int i = static_cast<int>(fk);
        const float a = i >= 0 ? __ldg(row + i) : 0.0f;
        const float b = i + 1 < smp.num_samples ? __ldg(row + i + 1) : 0.0f;
        acc[k] = fmaf(scale, fmaf(frac, b - a, a), acc[k]);
      }
      u += f.z;
    }
  }
#pragma unroll
  for (int k = 0; k < kVoxelsPerThread; ++k) {
    const int iz = iz0 + k;
    if (iz < vol.nz) {
      float* out = volume + (static_cast<int64_t>(iz) * vol.ny + iy) * vol.nx + ix;
      *out = accumulate ? *out + acc[k] : acc[k];
    }
  }
}

// The largest k of {8, 4, 2, 1} whose grid still has 8 blocks per SM, so that small volumes
// fill the GPU (64^3 with 8 voxels per thread is 128 blocks for 132 SMs).
int ChooseVoxelsPerThread(const RadonVolumeShape& vol, int sm_count) {
  const int64_t columns =
      static_cast<int64_t>((vol.nx + kBlockX - 1) / kBlockX) * ((vol.ny + kBlockY - 1) / kBlockY);
  for (int k : {8, 4, 2}) {
    if (columns * ((vol.nz + k - 1) / k) >= 8 * static_cast<int64_t>(sm_count)) return k;
  }
  return 1;
}

// The window (float2 entries per direction) that covers every direction's sample indices
// over one block's box of voxels: the span, 1 below the lowest index (the kernel's `first`)
// and 2 for rounding and the pair's second sample.
int WindowFor(const RadonFormBounds& bounds, int voxels_z) {
  const double span = static_cast<double>(bounds.max_abs_x) * (kBlockX - 1) +
                      static_cast<double>(bounds.max_abs_y) * (kBlockY - 1) +
                      static_cast<double>(bounds.max_abs_z) * (voxels_z - 1);
  return static_cast<int>(std::min(std::ceil(span), 1e8)) + 4;
}

template <int kVoxelsPerThread>
cudaError_t LaunchBackShape(const RadonVolumeShape& vol, const RadonSamplesShape& smp,
                            const float4* forms, const float* scales, const float* projections,
                            int32_t accumulate, float* volume, const StagedLayout* layout,
                            cudaStream_t stream) {
  const dim3 grid((vol.nx + kBlockX - 1) / kBlockX, (vol.ny + kBlockY - 1) / kBlockY,
                  (vol.nz + kVoxelsPerThread - 1) / kVoxelsPerThread);
  const dim3 block(kBlockX, kBlockY);
  if (layout != nullptr) {
    RadonBackStagedKernel<kVoxelsPerThread><<<grid, block, StagedBytes(*layout), stream>>>(
        vol, smp, forms, scales, projections, accumulate, volume, *layout);
  } else {
    RadonBackGlobalKernel<kVoxelsPerThread>
        <<<grid, block, 0, stream>>>(vol, smp, forms, scales, projections, accumulate, volume);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchRadonBack(const RadonVolumeShape& volume_shape,
                            const RadonSamplesShape& samples_shape, const float4* forms,
                            const RadonFormBounds& bounds, const float* scales,
                            const float* projections, int32_t accumulate, float* volume,
                            cudaStream_t stream, int32_t voxels_per_thread) {
  if (volume_shape.nx <= 0 || volume_shape.ny <= 0 || volume_shape.nz <= 0) return cudaSuccess;
  int device = 0, sm_count = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  error = cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  if (error != cudaSuccess) return error;
  const int k =
      voxels_per_thread > 0 ? voxels_per_thread : ChooseVoxelsPerThread(volume_shape, sm_count);
  StagedLayout layout{WindowFor(bounds, k), 0, 0, 0};
  layout.step_c = kThreads / layout.window;
  layout.step_j = kThreads % layout.window;
  const size_t per_direction = sizeof(float4) + static_cast<size_t>(layout.window) * sizeof(float2);
  layout.chunk = static_cast<int>(std::min<size_t>(
      {static_cast<size_t>(kMaxChunk), static_cast<size_t>(samples_shape.num_directions),
       (kStageBytes - kMaxChunk * sizeof(int)) / per_direction}));
  const StagedLayout* staged = layout.chunk >= 1 ? &layout : nullptr;
  if (samples_shape.num_directions <= 0) staged = nullptr;
  switch (k) {
    case 1:
      return LaunchBackShape<1>(volume_shape, samples_shape, forms, scales, projections, accumulate,
                                volume, staged, stream);
    case 2:
      return LaunchBackShape<2>(volume_shape, samples_shape, forms, scales, projections, accumulate,
                                volume, staged, stream);
    case 4:
      return LaunchBackShape<4>(volume_shape, samples_shape, forms, scales, projections, accumulate,
                                volume, staged, stream);
    case 8:
      return LaunchBackShape<8>(volume_shape, samples_shape, forms, scales, projections, accumulate,
                                volume, staged, stream);
    case 16:
      return LaunchBackShape<16>(volume_shape, samples_shape, forms, scales, projections,
                                 accumulate, volume, staged, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace tomo::core::cuda
