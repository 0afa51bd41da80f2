// Forward projection of the Radon plane-integral projector on CUDA (radon_kernels.h): each
// voxel's value is spread onto the two samples around its fractional sample index u (hat
// weights 1 - frac and frac), times the voxel volume over the sample spacing.
//
//   voxel (ix, iy, iz) --form_i--> u = x ix + y iy + z iz + w
//                                  bins_i[floor(u)] += (1 - frac) f,  bins_i[floor(u) + 1] += frac
//                                  f
//
// A block owns a box of kBlockX x kBlockY x kVoxelsPerThread voxels (a thread: one (x, y) and
// kVoxelsPerThread voxels along z, their values held in registers). Per chunk of directions
// the block bins its voxels into a shared-memory window of each direction's samples (the box
// reaches at most `window` - 4 of them, as in radon_back.cu) with shared atomic adds, then
// adds the window's non-zero bins to the projections with one global atomic add each. Global
// atomics are per block and sample, not per voxel: a 32 x 8 x 8 box of 2048 voxels touches
// about 50 samples of a direction.

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/operators/cuda/radon_kernels.h"

namespace tomo::core::cuda {
namespace {

// Launch shape, as radon_back.cu: 32 x 8 threads, 8 (or fewer for small volumes) voxels
// per thread along z; 24 KiB of shared windows per block.
constexpr int kBlockX = 32;
constexpr int kBlockY = 8;
constexpr int kThreads = kBlockX * kBlockY;
constexpr int kStageBytes = 24 * 1024;
constexpr int kMaxChunk = 64;
constexpr float kFloorMagic = 8388608.0f;  // 2^23: see radon_back.cu
constexpr int kFloorMagicBits = 0x4B000000;

struct BinLayout {
  int window;          // bins per direction
  int chunk;           // directions per pass, <= kMaxChunk
  int step_c, step_j;  // kThreads = step_c * window + step_j
};

size_t BinBytes(const BinLayout& layout) {
  return static_cast<size_t>(layout.chunk) * sizeof(float4) + kMaxChunk * sizeof(int) +
         static_cast<size_t>(layout.chunk) * layout.window * sizeof(float);
}

// Launch: grid (ceil(nx / 32), ceil(ny / 8), ceil(nz / kVoxelsPerThread)), block (32, 8),
// dynamic shared memory BinBytes(layout). A thread reads its kVoxelsPerThread voxels once;
// per chunk of directions it adds them into the block's shared bins, and the block then adds
// its bins to `projections` (zeroed beforehand) with atomic adds.
template <int kVoxelsPerThread>
__global__ void __launch_bounds__(kThreads)
    RadonForwardKernel(RadonVolumeShape vol, RadonSamplesShape smp,
                       const float4* __restrict__ forms, float mass_per_sample,
                       const float* __restrict__ volume, float* __restrict__ projections,
                       BinLayout layout) {
  extern __shared__ float4 s_dynamic[];
  float4* s_forms = s_dynamic;                                      // chunk
  int* s_first = reinterpret_cast<int*>(s_dynamic + layout.chunk);  // kMaxChunk
  float* s_bins = reinterpret_cast<float*>(s_first + kMaxChunk);    // chunk x window

  const int tx = threadIdx.x, ty = threadIdx.y;
  const int thread = ty * kBlockX + tx;
  const int ix0 = blockIdx.x * kBlockX, iy0 = blockIdx.y * kBlockY;
  const int iz0 = blockIdx.z * kVoxelsPerThread;
  const int ix = ix0 + tx, iy = iy0 + ty;
  const float ftx = static_cast<float>(tx), fty = static_cast<float>(ty);

  float values[kVoxelsPerThread];
  bool any = false;
#pragma unroll
  for (int k = 0; k < kVoxelsPerThread; ++k) {
    const int iz = iz0 + k;
    values[k] = (ix < vol.nx && iy < vol.ny && iz < vol.nz)
                    ? __ldg(volume + (static_cast<int64_t>(iz) * vol.ny + iy) * vol.nx + ix)
                    : 0.0f;
    any = any || values[k] != 0.0f;
  }

  for (int d0 = 0; d0 < smp.num_directions; d0 += layout.chunk) {
    const int count = min(layout.chunk, smp.num_directions - d0);
    __syncthreads();  // the previous chunk's bins have been flushed
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
    for (int e = thread; e < count * layout.window; e += kThreads) s_bins[e] = 0.0f;
    __syncthreads();
    if (any) {
      for (int c = 0; c < count; ++c) {
        const float4 f = s_forms[c];
        float* bins = s_bins + c * layout.window;
        float v = fmaf(f.x, ftx, fmaf(f.y, fty, f.w));
#pragma unroll
        for (int k = 0; k < kVoxelsPerThread; ++k) {
          if (values[k] != 0.0f) {
            const float r = __fadd_rz(v, kFloorMagic);
            const int i = __float_as_int(r) - kFloorMagicBits;
            const float frac = v - (r - kFloorMagic);
            atomicAdd(bins + i, (1.0f - frac) * values[k]);
            atomicAdd(bins + i + 1, frac * values[k]);
          }
          v += f.z;
        }
      }
    }
    __syncthreads();
    // Bin e = c * window + j of the chunk's windows; (c, j) stepped without a division.
    for (int e = thread, c = thread / layout.window, j = thread - c * layout.window;
         e < count * layout.window; e += kThreads) {
      const float bin = s_bins[e];
      const int k = s_first[c] + j;
      if (bin != 0.0f && k >= 0 && k < smp.num_samples) {
        atomicAdd(projections + static_cast<int64_t>(d0 + c) * smp.num_samples + k,
                  bin * mass_per_sample);
      }
      c += layout.step_c;
      j += layout.step_j;
      if (j >= layout.window) {
        j -= layout.window;
        ++c;
      }
    }
  }
}

int ChooseVoxelsPerThread(const RadonVolumeShape& vol, int sm_count) {
  const int64_t columns =
      static_cast<int64_t>((vol.nx + kBlockX - 1) / kBlockX) * ((vol.ny + kBlockY - 1) / kBlockY);
  for (int k : {8, 4, 2}) {
    if (columns * ((vol.nz + k - 1) / k) >= 8 * static_cast<int64_t>(sm_count)) return k;
  }
  return 1;
}

template <int kVoxelsPerThread>
cudaError_t LaunchForwardShape(const RadonVolumeShape& vol, const RadonSamplesShape& smp,
                               const float4* forms, float mass_per_sample, const float* volume,
                               float* projections, const BinLayout& layout, cudaStream_t stream) {
  const dim3 grid((vol.nx + kBlockX - 1) / kBlockX, (vol.ny + kBlockY - 1) / kBlockY,
                  (vol.nz + kVoxelsPerThread - 1) / kVoxelsPerThread);
  RadonForwardKernel<kVoxelsPerThread><<<grid, dim3(kBlockX, kBlockY), BinBytes(layout), stream>>>(
      vol, smp, forms, mass_per_sample, volume, projections, layout);
  return cudaGetLastError();
}

int WindowFor(const RadonFormBounds& bounds, int voxels_z) {
  const double span = static_cast<double>(bounds.max_abs_x) * (kBlockX - 1) +
                      static_cast<double>(bounds.max_abs_y) * (kBlockY - 1) +
                      static_cast<double>(bounds.max_abs_z) * (voxels_z - 1);
  return static_cast<int>(std::min(std::ceil(span), 1e8)) + 4;
}

size_t DirectionsThatFit(int window) {
  const size_t per_direction = sizeof(float4) + static_cast<size_t>(window) * sizeof(float);
  return (kStageBytes - kMaxChunk * sizeof(int)) / per_direction;
}

}  // namespace

bool RadonForwardFits(const RadonFormBounds& bounds) {
  return DirectionsThatFit(WindowFor(bounds, 8)) >= 1;
}

cudaError_t LaunchRadonForward(const RadonVolumeShape& volume_shape,
                               const RadonSamplesShape& samples_shape, const float4* forms,
                               const RadonFormBounds& bounds, float mass_per_sample,
                               const float* volume, float* projections, cudaStream_t stream) {
  const size_t projection_bytes = static_cast<size_t>(samples_shape.num_directions) *
                                  static_cast<size_t>(samples_shape.num_samples) * sizeof(float);
  cudaError_t error = cudaMemsetAsync(projections, 0, projection_bytes, stream);
  if (error != cudaSuccess) return error;
  if (volume_shape.nx <= 0 || volume_shape.ny <= 0 || volume_shape.nz <= 0 ||
      samples_shape.num_directions <= 0) {
    return cudaSuccess;
  }
  int device = 0, sm_count = 0;
  error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  error = cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  if (error != cudaSuccess) return error;
  const int k = ChooseVoxelsPerThread(volume_shape, sm_count);
  BinLayout layout{WindowFor(bounds, k), 0, 0, 0};
  layout.step_c = kThreads / layout.window;
  layout.step_j = kThreads % layout.window;
  const size_t fit = DirectionsThatFit(layout.window);
  if (fit < 1) return cudaErrorInvalidValue;  // RadonForwardFits is false
  layout.chunk = static_cast<int>(std::min<size_t>(
      {static_cast<size_t>(kMaxChunk), static_cast<size_t>(samples_shape.num_directions), fit}));
  switch (k) {
    case 1:
      return LaunchForwardShape<1>(volume_shape, samples_shape, forms, mass_per_sample, volume,
                                   projections, layout, stream);
    case 2:
      return LaunchForwardShape<2>(volume_shape, samples_shape, forms, mass_per_sample, volume,
                                   projections, layout, stream);
    case 4:
      return LaunchForwardShape<4>(volume_shape, samples_shape, forms, mass_per_sample, volume,
                                   projections, layout, stream);
    default:
      return LaunchForwardShape<8>(volume_shape, samples_shape, forms, mass_per_sample, volume,
                                   projections, layout, stream);
  }
}

}  // namespace tomo::core::cuda
