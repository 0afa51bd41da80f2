// The products of one orbit block on the tiled layout (tiled_runs.h): one thread block per
// orbit of tiles, x and the accumulators in shared memory, the matrix streamed in coalesced
// lines.
//
// TiledForwardKernel: loads x over the orbit's (up to) eight tiles into eight planes of
// shared memory, each in the representative tile T0's frame (plane h holds x at M_h(p0) in
// p0's place), once; then warp by warp over the orbit's stored warps (a warp of tile
// M_g(T0) of the stored view): per step a lane reads its slot (weight, place in T0), and
// for every view k of the block adds w xs[M_k M_g plane][place]: 8 shared-memory loads and
// 8 FMAs per stored entry, no dependent global load. Each lane adds its 8 sums into the
// block's ray sums (sums[8 c + k], two 4-float global atomicAdds) for each of its (one or
// two) rays.
//
// TiledBackKernel: the same walk with 8 planes of accumulators: per step and view k a
// shared-memory atomicAdd of w z_k(c) at the same place of plane M_k M_g (float, or int32
// fixed point: kFixed below); then each
// distinct tile of the orbit is written once by this thread block (x = x + the planes
// whose tile it is, clamped when asked): one owner per pixel, no global atomics. z_k(c) is
// read from z_full or formed from the forward's ray sums (ART: the residual and the scaled
// residual, as LaunchSymmetricCombine), which saves the combine launch.
#include <algorithm>

#include "core/system_matrix/cuda/stored_matrix_kernels.h"

namespace tomo::core::system_matrix::cuda {
namespace {

// Threads per block: d.threads (enough warps for the most warps of one orbit, at most
// kTiledMaxThreads); a warp takes the orbit's warps w, w + warps, ...
constexpr int kTiledMaxThreads = 512;
// Steps whose slots a lane loads before using them: that many loads in flight per warp.
constexpr int kTiledBatch = 8;

// The square maps and their products, indexed by values known only at run time: in constant
// memory (as kernel arguments indexed so they would be copied to the stack).
__constant__ SquareMapTable kTiledMaps;
__constant__ ComposeTable kTiledCompose;

// Programmatic dependent launch (sm_90): wait for the previous kernel in the stream to
// finish and its writes to be visible, then let the next kernel's thread blocks start (they
// run their own prologue until their wait). No-ops for a kernel launched without the
// attribute.
__device__ __forceinline__ void WaitForPreviousKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void LetNextKernelStart() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The lane's slots [base, base + kTiledBatch) (place in the tile, weight), all loads issued
// before any is used; slots past `steps` read as weight 0 at place 0.
__device__ __forceinline__ void LoadSlotBatch(const uint16_t* __restrict__ local,
                                              const float* __restrict__ weight, int base,
                                              int steps, int (&place)[kTiledBatch],
                                              float (&wt)[kTiledBatch]) {
#pragma unroll
  for (int j = 0; j < kTiledBatch; ++j) {
    const bool in = base + j < steps;
    place[j] = in ? __ldg(local + 32 * (base + j)) : 0;
    wt[j] = in ? __ldg(weight + 32 * (base + j)) : 0.0f;
  }
}

// Brings the slots of stored view `view`'s orbit blockIdx.x (contiguous: its warps follow
// each other) from device memory into L2 with two bulk prefetches, one thread's work.
__device__ __forceinline__ void PrefetchOrbitSlots(const TiledDeviceArrays& d, int64_t view) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int64_t at = view * d.orbits_per_view + blockIdx.x;
  const int64_t first = d.orbit_warp_begin[at], end = d.orbit_warp_begin[at + 1];
  if (first == end) return;
  const TiledWarp last = d.warps[end - 1];
  const int64_t begin = d.warps[first].slot_base;
  const int64_t slots = last.slot_base + 32 * static_cast<int64_t>(last.steps) - begin;
  // Slot bases are multiples of 32: 128-byte (weights) and 64-byte (places) aligned.
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(d.weights + begin),
               "r"(static_cast<uint32_t>(4 * slots))
               : "memory");
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(d.local + begin),
               "r"(static_cast<uint32_t>(2 * slots))
               : "memory");
#endif
}

// Pixel r (row-major in the tile's own rows) of the orbit's tile M_h(T0), whose rows are sx0
// long when M_h keeps the axes and sy0 long when it swaps them: its column and row there.
struct TilePixel {
  __device__ TilePixel(int r, int sx0, int sy0)
      : y_keep(r / sx0), x_keep(r - y_keep * sx0), y_swap(r / sy0), x_swap(r - y_swap * sy0) {}
  __device__ int x(int h) const { return kTiledMaps.m[h][0] == 0 ? x_swap : x_keep; }
  __device__ int y(int h) const { return kTiledMaps.m[h][0] == 0 ? y_swap : y_keep; }
  int y_keep, x_keep, y_swap, x_swap;
};

// The shared-memory bytes of one thread block: 8 planes of tile_side x stride floats.
size_t TiledSharedBytes(const TiledDeviceArrays& d) {
  return sizeof(float) * 8 * static_cast<size_t>(d.tile_side) * static_cast<size_t>(d.stride);
}

__global__ void __launch_bounds__(kTiledMaxThreads, 1)
    TiledForwardKernel(TiledDeviceArrays d, OrbitBlock block, const float* __restrict__ x,
                       float* __restrict__ sums) {
  extern __shared__ float xs[];
  const int plane = d.tile_side * d.stride;
  // The matrix does not depend on the previous kernel: on its way while that one ends.
  if (threadIdx.x == 0) PrefetchOrbitSlots(d, block.stored_view);
  WaitForPreviousKernel();
  LetNextKernelStart();
  const TileOrbit& orbit = d.orbits[blockIdx.x];
  const int sx0 = orbit.size_x, sy0 = orbit.size_y, area = sx0 * sy0;
  // Pixel r of each of the orbit's tiles (in the tile's own rows, which are sx0 or sy0 long)
  // into its place in T0's frame; the 8 tiles' loads of one thread in flight together.
  for (int r = threadIdx.x; r < area; r += blockDim.x) {
    const TilePixel pixel(r, sx0, sy0);
#pragma unroll
    for (int h = 0; h < 8; ++h) {
      const int lx = pixel.x(h), ly = pixel.y(h);
      int lx0, ly0;
      TileLocalToRepresentative(kTiledMaps.m[h][0], kTiledMaps.m[h][1], kTiledMaps.m[h][2],
                                kTiledMaps.m[h][3], sx0, sy0, lx, ly, &lx0, &ly0);
      xs[h * plane + ly0 * d.stride + lx0] =
          __ldg(x + static_cast<int64_t>(orbit.corner_y[h] + ly) * d.n + orbit.corner_x[h] + lx);
    }
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t at = static_cast<int64_t>(block.stored_view) * d.orbits_per_view + blockIdx.x;
  const int64_t end = d.orbit_warp_begin[at + 1];
  for (int64_t w = d.orbit_warp_begin[at] + warp; w < end; w += blockDim.x / 32) {
    const TiledWarp header = d.warps[w];
    int h_plane[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      h_plane[k] = k < block.count ? plane * kTiledCompose.h[block.map_index[k]][header.map] : 0;
    }
    const uint32_t rays = d.lane_rays[w * 32 + lane];
    const int change = d.lane_switch[w * 32 + lane];
    // Sums of the lane's first ray (steps before `change`) and of its second: no branch and
    // no store in the loop, so that a batch's loads are all in flight at once.
    float first[8] = {0, 0, 0, 0, 0, 0, 0, 0}, second[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const uint16_t* __restrict__ local = d.local + header.slot_base + lane;
    const float* __restrict__ weight = d.weights + header.slot_base + lane;
    for (int base = 0; base < header.steps; base += kTiledBatch) {
      int place[kTiledBatch];
      float wt[kTiledBatch];
      LoadSlotBatch(local, weight, base, header.steps, place, wt);
#pragma unroll
      for (int j = 0; j < kTiledBatch; ++j) {
        const float w1 = base + j < change ? wt[j] : 0.0f, w2 = wt[j] - w1;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          if (k < block.count) {
            const float xv = xs[h_plane[k] + place[j]];
            first[k] = fmaf(w1, xv, first[k]);
            second[k] = fmaf(w2, xv, second[k]);
          }
        }
      }
    }
    // A ray's 8 sums are contiguous: two 4-float atomic adds per (lane, ray).
    const auto add = [&](uint32_t c, const float* v) {
      if (c == kTiledNoRay) return;
      float4* to = reinterpret_cast<float4*>(sums + 8 * c);
      atomicAdd(to, make_float4(v[0], v[1], v[2], v[3]));
      if (block.count > 4) atomicAdd(to + 1, make_float4(v[4], v[5], v[6], v[7]));
    };
    add(rays & 0xffffu, first);
    if (change < header.steps) add(rays >> 16, second);
  }
}

// z_k of ray c for the block's views (0 for kTiledNoRay), from z_full or from the ray sums.
__device__ __forceinline__ void RayValues(const TiledDeviceArrays& d, const OrbitBlock& block,
                                          const TiledRayValues& in, int c, float values[8]) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    values[k] = 0.0f;
    if (k < block.count && c != kTiledNoRay) {
      const int64_t place = static_cast<int64_t>(block.view[k]) * d.columns +
                            (block.reversed[k] ? d.columns - 1 - c : c);
      if (in.sums == nullptr) {
        values[k] = __ldg(in.z_full + place);
      } else {
        const float r = in.projections[place] - in.sums[8 * c + k];
        const float norm2 = d.row_norm2[static_cast<int64_t>(block.stored_view) * d.columns + c];
        values[k] = norm2 > 1e-20f ? block.step_scale * r / norm2 : 0.0f;
      }
    }
  }
}

// kFixed: the accumulators are int32 in units of 1 / scale (shared-memory integer adds are
// one instruction; float adds are a load and compare-and-store loop). scale is a power of
// two with count * column_bound * max |z| * scale <= 2^30 (max over this thread block's
// rays), which bounds every accumulator and the sum of a tile's planes: no overflow, and
// each add is off by at most 1 / (2 scale), about 5e-10 of that bound.
template <bool kFixed>
__global__ void __launch_bounds__(kTiledMaxThreads, 1)
    TiledBackKernel(TiledDeviceArrays d, OrbitBlock block, TiledRayValues rays_in,
                    int next_stored_view, float* __restrict__ x, int clamp) {
  extern __shared__ float acc[];
  int* const acc_fixed = reinterpret_cast<int*>(acc);
  __shared__ int largest_z_bits;  // max |z| of the block's rays, as the bits of a float >= 0
  const int plane = d.tile_side * d.stride;
  // The next block's matrix comes into L2 while this transpose reads this one's from there.
  if (threadIdx.x == 0 && next_stored_view >= 0) PrefetchOrbitSlots(d, next_stored_view);
  for (int i = threadIdx.x; i < 8 * plane; i += blockDim.x) acc[i] = 0.0f;
  if (threadIdx.x == 0) largest_z_bits = 0;
  WaitForPreviousKernel();
  LetNextKernelStart();
  const int columns = d.columns;
  if (rays_in.sums != nullptr) {  // ART: the residual, and the next forward's ray sums cleared
    const int count = block.count * columns;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
      const int k = i / columns, c = i - k * columns;
      const int64_t at =
          static_cast<int64_t>(block.view[k]) * columns + (block.reversed[k] ? columns - 1 - c : c);
      rays_in.residual[at] = rays_in.projections[at] - rays_in.sums[8 * c + k];
      rays_in.clear[8 * c + k] = 0.0f;
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t at = static_cast<int64_t>(block.stored_view) * d.orbits_per_view + blockIdx.x;
  const int64_t begin = d.orbit_warp_begin[at], end = d.orbit_warp_begin[at + 1];
  float scale = 1.0f;
  if (kFixed) {
    __syncthreads();  // largest_z_bits set
    float largest = 0.0f;
    for (int64_t w = begin + warp; w < end; w += blockDim.x / 32) {
      const uint32_t rays = d.lane_rays[w * 32 + lane];
      float z[8];
      RayValues(d, block, rays_in, static_cast<int>(rays & 0xffffu), z);
#pragma unroll
      for (int k = 0; k < 8; ++k) largest = fmaxf(largest, fabsf(z[k]));
      RayValues(d, block, rays_in, static_cast<int>(rays >> 16), z);
#pragma unroll
      for (int k = 0; k < 8; ++k) largest = fmaxf(largest, fabsf(z[k]));
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      largest = fmaxf(largest, __shfl_xor_sync(0xffffffffu, largest, offset));
    }
    if (lane == 0) atomicMax(&largest_z_bits, __float_as_int(largest));
    __syncthreads();
    const float bound = static_cast<float>(block.count) * d.column_bound[block.stored_view] *
                        __int_as_float(largest_z_bits);
    if (bound > 0.0f) {
      int exponent;
      frexpf(bound, &exponent);  // bound < 2^exponent
      scale = ldexpf(1.0f, min(30 - exponent, 100));
    }
  } else {
    __syncthreads();
  }
  for (int64_t w = begin + warp; w < end; w += blockDim.x / 32) {
    const TiledWarp header = d.warps[w];
    const uint32_t rays = d.lane_rays[w * 32 + lane];
    const int change = d.lane_switch[w * 32 + lane];
    float z[8], z_second[8];
    RayValues(d, block, rays_in, static_cast<int>(rays & 0xffffu), z);
    RayValues(d, block, rays_in, static_cast<int>(rays >> 16), z_second);
    int h_plane[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      h_plane[k] = k < block.count ? plane * kTiledCompose.h[block.map_index[k]][header.map] : 0;
      if (kFixed) {
        z[k] *= scale;
        z_second[k] *= scale;
      }
    }
    const uint16_t* __restrict__ local = d.local + header.slot_base + lane;
    const float* __restrict__ weight = d.weights + header.slot_base + lane;
    for (int base = 0; base < header.steps; base += kTiledBatch) {
      int place[kTiledBatch];
      float wt[kTiledBatch];
      LoadSlotBatch(local, weight, base, header.steps, place, wt);
#pragma unroll
      for (int j = 0; j < kTiledBatch; ++j) {
        const bool on_first = base + j < change;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          if (k < block.count) {
            const float value = wt[j] * (on_first ? z[k] : z_second[k]);
            if (kFixed) {
              atomicAdd(acc_fixed + h_plane[k] + place[j], __float2int_rn(value));
            } else {
              atomicAdd(acc + h_plane[k] + place[j], value);
            }
          }
        }
      }
    }
  }
  __syncthreads();
  const TileOrbit& orbit = d.orbits[blockIdx.x];
  const int sx0 = orbit.size_x, sy0 = orbit.size_y, area = sx0 * sy0;
  for (int r = threadIdx.x; r < area; r += blockDim.x) {
    const TilePixel pixel(r, sx0, sy0);
#pragma unroll
    for (int h = 0; h < 8; ++h) {
      if (!((orbit.distinct >> h) & 1)) continue;
      const int lx = pixel.x(h), ly = pixel.y(h);
      float total = 0.0f;
      int total_fixed = 0;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if (orbit.corner_x[e] != orbit.corner_x[h] || orbit.corner_y[e] != orbit.corner_y[h]) {
          continue;
        }
        int lx0, ly0;
        TileLocalToRepresentative(kTiledMaps.m[e][0], kTiledMaps.m[e][1], kTiledMaps.m[e][2],
                                  kTiledMaps.m[e][3], sx0, sy0, lx, ly, &lx0, &ly0);
        if (kFixed) {
          total_fixed += acc_fixed[e * plane + ly0 * d.stride + lx0];
        } else {
          total += acc[e * plane + ly0 * d.stride + lx0];
        }
      }
      if (kFixed) total = static_cast<float>(total_fixed) / scale;
      float* p = x + static_cast<int64_t>(orbit.corner_y[h] + ly) * d.n + orbit.corner_x[h] + lx;
      const float updated = *p + total;
      *p = clamp ? fmaxf(updated, 0.0f) : updated;
    }
  }
}

__global__ void TiledCombineKernel(TiledDeviceArrays d, OrbitBlock block,
                                   const float* __restrict__ sums, float* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= block.count * d.columns) return;
  const int k = i / d.columns, c = i - k * d.columns;
  out[static_cast<int64_t>(block.view[k]) * d.columns +
      (block.reversed[k] ? d.columns - 1 - c : c)] = sums[8 * c + k];
}

}  // namespace

int TiledThreadsFor(int64_t most_warps) {
  return static_cast<int>(std::clamp<int64_t>(32 * most_warps, 64, kTiledMaxThreads));
}

cudaError_t LaunchTiledCombine(const TiledDeviceArrays& d, const OrbitBlock& block,
                               const float* sums, float* out, cudaStream_t stream) {
  const int threads = block.count * d.columns;
  TiledCombineKernel<<<(threads + 255) / 256, 256, 0, stream>>>(d, block, sums, out);
  return cudaGetLastError();
}

cudaError_t PrepareTiledKernels(const TiledDeviceArrays& d, const SquareMapTable& maps,
                                const ComposeTable& compose) {
  cudaError_t e = cudaMemcpyToSymbol(kTiledMaps, &maps, sizeof(maps));
  if (e != cudaSuccess) return e;
  e = cudaMemcpyToSymbol(kTiledCompose, &compose, sizeof(compose));
  if (e != cudaSuccess) return e;
  const int bytes = static_cast<int>(TiledSharedBytes(d));
  e = cudaFuncSetAttribute(TiledForwardKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) return e;
  e = cudaFuncSetAttribute(TiledBackKernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           bytes);
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(TiledBackKernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              bytes);
}

namespace {

// A launch whose thread blocks may start before the previous kernel in the stream ends
// (when `overlap`; the kernels wait for it before they read what it wrote).
template <typename... Params, typename... Args>
cudaError_t LaunchTiled(void (*kernel)(Params...), const TiledDeviceArrays& d, bool overlap,
                        cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(d.orbits_per_view));
  config.blockDim = dim3(static_cast<unsigned>(d.threads));
  config.dynamicSmemBytes = TiledSharedBytes(d);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = overlap ? 1 : 0;
  const cudaError_t e = cudaLaunchKernelEx(&config, kernel, args...);
  return e != cudaSuccess ? e : cudaGetLastError();
}

}  // namespace

cudaError_t LaunchTiledForward(const TiledDeviceArrays& d, const OrbitBlock& block, const float* x,
                               float* sums, bool overlap, cudaStream_t stream) {
  return LaunchTiled(TiledForwardKernel, d, overlap, stream, d, block, x, sums);
}

cudaError_t LaunchTiledBack(const TiledDeviceArrays& d, const OrbitBlock& block,
                            const TiledRayValues& rays, int next_stored_view, float* x, bool clamp,
                            bool overlap, bool fixed_point, cudaStream_t stream) {
  return fixed_point ? LaunchTiled(TiledBackKernel<true>, d, overlap, stream, d, block, rays,
                                   next_stored_view, x, clamp ? 1 : 0)
                     : LaunchTiled(TiledBackKernel<false>, d, overlap, stream, d, block, rays,
                                   next_stored_view, x, clamp ? 1 : 0);
}

}  // namespace tomo::core::system_matrix::cuda
