// Forward projection of blocks of few views (SART: one view per block) for the resident
// operators' projectors (cuda_resident_operators.cc): the same projection as cone_forward.cu's
// exact sampler (Joseph's method in 3D, bilinear in each plane of the main axis, plain
// float loads, zero outside; see that file for the ray set-up and its drawing), with each
// ray split among kSegments threads.
//
// Why: one view of 256^2 pixels is 65536 rays of 256 dependent samples each; one thread per
// ray (cone_forward.cu) fills a quarter of an H100's thread slots and waits on each load in
// turn: 165 us per view (bench/NOTES.md, iterative section). Splitting every ray into
// kSegments runs of planes gives 8x the threads in flight; the partial sums are added in
// shared memory in segment order (deterministic). No texture, so nothing is copied.
//
// Launch: grid (ceil(columns / kBlockX), rows, views), block (kBlockX, kSegments). Thread
// (x, s) owns the planes of segment s of the ray of detector pixel (view, row, column =
// blockIdx.x kBlockX + x): it reads its view's VectorFpView and the volume samples of its
// planes, writes its partial sum to shared memory; thread (x, 0) adds the kSegments partials
// and writes projections[view][row][column] once (every pixel written, 0 on a miss).
#include <cmath>

#include "core/operators/cuda/resident_kernels.h"
#include "core/operators/cuda/vector_kernels.h"

namespace tomo::core::cuda {
namespace {

// 32 neighbouring columns per warp (their samples are neighbours in each plane), 8
// segments: 256 threads per block.
constexpr int kBlockX = 32;
constexpr int kSegments = 8;

__device__ __forceinline__ float SampleExact(const float* __restrict__ volume, int nx, int ny,
                                             int nz, float x, float y, float z) {
  const float fx0 = floorf(x), fy0 = floorf(y), fz0 = floorf(z);
  const float tx = x - fx0, ty = y - fy0, tz = z - fz0;
  const int x0 = static_cast<int>(fx0), y0 = static_cast<int>(fy0), z0 = static_cast<int>(fz0);
  float sum = 0.0f;
#pragma unroll
  for (int dz = 0; dz < 2; ++dz) {
    const int zz = z0 + dz;
    const float wz = dz ? tz : 1.0f - tz;
    if (zz < 0 || zz >= nz || wz == 0.0f) continue;
#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
      const int yy = y0 + dy;
      const float wy = dy ? ty : 1.0f - ty;
      if (yy < 0 || yy >= ny || wy == 0.0f) continue;
      const float* row = volume + (static_cast<int64_t>(zz) * ny + yy) * nx;
#pragma unroll
      for (int dx = 0; dx < 2; ++dx) {
        const int xx = x0 + dx;
        const float wx = dx ? tx : 1.0f - tx;
        if (xx < 0 || xx >= nx || wx == 0.0f) continue;
        sum = fmaf(wz * wy * wx, __ldg(row + xx), sum);
      }
    }
  }
  return sum;
}

__device__ __forceinline__ float Pick(int a, float x, float y, float z) {
  return a == 0 ? x : (a == 1 ? y : z);
}

__global__ void __launch_bounds__(kBlockX* kSegments)
    FewViewForwardKernel(VectorVolumeShape vol, VectorDetectorShape det,
                         const VectorFpView* __restrict__ views,
                         const float* __restrict__ volume, float* __restrict__ projections) {
  __shared__ float partial[kSegments][kBlockX];
  const int column = blockIdx.x * kBlockX + threadIdx.x;
  const int row = blockIdx.y;
  const int view_index = blockIdx.z;
  const int segment = threadIdx.y;
  float sum = 0.0f;
  float weight = 0.0f;
  if (column < det.columns) {
    const VectorFpView& view = views[view_index];
    const float cr = static_cast<float>(row) - 0.5f * static_cast<float>(det.rows - 1);
    const float cc = static_cast<float>(column) - 0.5f * static_cast<float>(det.columns - 1);
    float pixel[3];
    if (det.cylindrical) {
      const float g = cc * view.gamma_per_column;
      const float sh = sinf(0.5f * g);
      const float cm1 = -2.0f * sh * sh;
      const float sg = sinf(g);
#pragma unroll
      for (int k = 0; k < 3; ++k) {
        pixel[k] = view.center[k] + cm1 * view.u[k] + sg * view.w[k] + cr * view.v[k];
      }
    } else {
#pragma unroll
      for (int k = 0; k < 3; ++k) pixel[k] = view.center[k] + cc * view.u[k] + cr * view.v[k];
    }
    float origin[3], dir[3];
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      origin[k] = det.cone ? view.source[k] : pixel[k];
      dir[k] = det.cone ? pixel[k] - view.source[k] : view.source[k];
    }
    const int n[3] = {vol.nx, vol.ny, vol.nz};
    const float ad0 = fabsf(dir[0]), ad1 = fabsf(dir[1]), ad2 = fabsf(dir[2]);
    int a = 1;
    if (ad0 > ad1) a = 0;
    if (ad2 > (a == 0 ? ad0 : ad1)) a = 2;
    const float dir_a = Pick(a, dir[0], dir[1], dir[2]);
    const float origin_a = Pick(a, origin[0], origin[1], origin[2]);
    const int n_a = a == 0 ? vol.nx : (a == 1 ? vol.ny : vol.nz);
    float dmm[3];
#pragma unroll
    for (int k = 0; k < 3; ++k) dmm[k] = dir[k] * vol.voxel_mm[k];
    const float length_mm = sqrtf(dmm[0] * dmm[0] + dmm[1] * dmm[1] + dmm[2] * dmm[2]);
    weight = length_mm / fabsf(dir_a);

    float t_lo = det.cone ? 0.0f : -INFINITY;
    float t_hi = INFINITY;
    bool miss = false;
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      const float lo = -1.0f, hi = static_cast<float>(n[k]);
      if (dir[k] == 0.0f) {
        miss = miss || origin[k] < lo || origin[k] > hi;
      } else {
        const float inv = 1.0f / dir[k];
        float t0 = (lo - origin[k]) * inv, t1 = (hi - origin[k]) * inv;
        if (t0 > t1) {
          const float t = t0;
          t0 = t1;
          t1 = t;
        }
        t_lo = fmaxf(t_lo, t0);
        t_hi = fminf(t_hi, t1);
      }
    }
    if (!miss && t_lo <= t_hi) {
      const float inv_da = 1.0f / dir_a;
      float step[3], base[3];
#pragma unroll
      for (int k = 0; k < 3; ++k) {
        step[k] = k == a ? 1.0f : dir[k] * inv_da;
        base[k] = k == a ? 0.0f : origin[k] - origin_a * step[k];
      }
      const float ja =
          fminf(fmaxf(origin_a + t_lo * dir_a, -2.0f), static_cast<float>(n_a) + 1.0f);
      const float jb =
          fminf(fmaxf(origin_a + t_hi * dir_a, -2.0f), static_cast<float>(n_a) + 1.0f);
      int j_begin = max(0, static_cast<int>(floorf(fminf(ja, jb))) - 1);
      int j_end = min(n_a - 1, static_cast<int>(ceilf(fmaxf(ja, jb))) + 1);
      if (det.cone) {
        const float o = fminf(fmaxf(origin_a, -2.0f), static_cast<float>(n_a) + 1.0f);
        if (dir_a > 0.0f) {
          j_begin = max(j_begin, static_cast<int>(ceilf(o)));
        } else {
          j_end = min(j_end, static_cast<int>(floorf(o)));
        }
      }
      // This thread's segment of [j_begin, j_end]: equal runs, the first ones longer.
      const int count = j_end - j_begin + 1;
      if (count > 0) {
        const int per = count / kSegments, extra = count % kSegments;
        const int first = j_begin + segment * per + min(segment, extra);
        const int last = first + per + (segment < extra ? 1 : 0) - 1;
        for (int j = first; j <= last; ++j) {
          const float fj = static_cast<float>(j);
          sum += SampleExact(volume, vol.nx, vol.ny, vol.nz, fmaf(fj, step[0], base[0]),
                             fmaf(fj, step[1], base[1]), fmaf(fj, step[2], base[2]));
        }
      }
    }
  }
  partial[segment][threadIdx.x] = sum;
  __syncthreads();
  if (segment == 0 && column < det.columns) {
    float total = 0.0f;
#pragma unroll
    for (int s = 0; s < kSegments; ++s) total += partial[s][threadIdx.x];
    projections[(static_cast<int64_t>(view_index) * det.rows + row) * det.columns + column] =
        total * weight;
  }
}

}  // namespace

cudaError_t LaunchFewViewForward(const VectorVolumeShape& volume_shape,
                                 const VectorDetectorShape& detector, const VectorFpView* views,
                                 const float* volume, float* projections, cudaStream_t stream) {
  if (detector.num_views <= 0 || detector.rows <= 0 || detector.columns <= 0) {
    return cudaSuccess;
  }
  if (detector.rows > 65535 || detector.num_views > 65535) return cudaErrorInvalidValue;
  const dim3 block(kBlockX, kSegments);
  const dim3 grid((detector.columns + kBlockX - 1) / kBlockX, detector.rows, detector.num_views);
  FewViewForwardKernel<<<grid, block, 0, stream>>>(volume_shape, detector, views, volume,
                                                   projections);
  return cudaGetLastError();
}

}  // namespace tomo::core::cuda
