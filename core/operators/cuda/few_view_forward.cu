// Forward projection of blocks of few views (SART: one view per block) for the resident
// operators' projectors (cuda_resident_operators.cc): the same projection as vector_forward.cu's
// exact sampler (Joseph's method in 3D, bilinear in each plane of the main axis, plain
// float loads, zero outside; the ray set-up is joseph_ray.cuh's, drawn in vector_forward.cu),
// with each ray split among kSegments threads.
//
// Why: one view of 256^2 pixels is 65536 rays of 256 dependent samples each; one thread per
// ray (vector_forward.cu) fills a quarter of an H100's thread slots and waits on each load in
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

#include "core/operators/cuda/joseph_ray.cuh"
#include "core/operators/cuda/resident_kernels.h"
#include "core/operators/cuda/vector_kernels.h"

namespace tomo::core::cuda {
namespace {

// 32 neighbouring columns per warp (their samples are neighbours in each plane), 8
// segments: 256 threads per block.
constexpr int kBlockX = 32;
constexpr int kSegments = 8;

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
    const JosephRay ray = MakeJosephRay(vol, det, views[view_index], row, column);
    weight = ray.weight;
    // This thread's segment of [j_begin, j_end]: equal runs, the first ones longer.
    const int count = ray.j_end - ray.j_begin + 1;
    if (count > 0) {
      const int per = count / kSegments, extra = count % kSegments;
      const int first = ray.j_begin + segment * per + min(segment, extra);
      const int last = first + per + (segment < extra ? 1 : 0) - 1;
      for (int j = first; j <= last; ++j) {
        const float fj = static_cast<float>(j);
        sum += SampleExact(volume, vol.nx, vol.ny, vol.nz, fmaf(fj, ray.step[0], ray.base[0]),
                           fmaf(fj, ray.step[1], ray.base[1]),
                           fmaf(fj, ray.step[2], ray.base[2]));
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
