// Forward projection for any VectorGeometry on CUDA: Joseph's method in 3D (backend.h).
//
// Coordinates are voxel indices (vector_kernels.h). A ray is O + t D: for a cone beam O is
// the source and D = pixel - source, t >= 0; for a parallel beam O is the pixel centre and
// D the ray direction, t unbounded (the same as the reference's backed-off origin). The
// ray steps over the integer planes j of its main axis a, the axis along which |D| in mm is
// largest, and at plane j samples the volume at
//   P(j) = B + j S,   S = D / D_a,  B = O - O_a S   (so P(j)_a = j exactly)
// with bilinear interpolation in the plane (zero outside the volume); the sum times the
// path length per plane, voxel_a |D_mm| / |D_mm,a|, is the pixel's value.
//
// The planes visited are those where the ray can touch a voxel: the t-interval where every
// coordinate lies in [-1, n] (a slightly larger interval than where the interpolation is
// non-zero, so rounding never drops a sample; the extra samples read exactly 0), intersected
// with t >= 0 for a cone beam and with j in [0, n_a - 1].
//
//      z (rows, v)                     volume: nz x ny x nx voxels, centre indices
//      |   detector                    (nx-1)/2 ... ; a ray crosses planes j = const of
//      |  +------+     source *        its main axis and samples bilinearly in each.
//      | /|      |        .   .
//      |/ +------+  <- . . .    . . -- ray O + t D
//      +------------ x

#include <cmath>

#include "core/operators/cuda/joseph_ray.cuh"
#include "core/operators/cuda/vector_kernels.h"

namespace tomo::core::cuda {
namespace {

// Block of 32 detector columns x 8 rows of one view: a warp's rays are neighbours, so their
// samples hit neighbouring texels. Measured on the H100 (bench/NOTES.md v0.3, views_inner
// block order): 512^3 -> 720 x 768^2 in 161 ms layered (213 ms 3D texture; v0.2's order:
// 401 / 384 ms), 256^3 -> 360 x 384^2 in 10.2 ms layered (13.5 ms 3D texture).
constexpr int kFpBlockX = 32;
constexpr int kFpBlockY = 8;
// Block order (vector_kernels.h, LaunchVectorForward's views_inner): 1 puts the views in
// gridDim.y and the detector row groups in gridDim.z, so that the blocks in flight at a time
// are the same rows of many views: for a circular scan about z they all read one z-slab of
// the volume, which stays in L2 (50 MB), instead of half of the volume for one view (0: the
// views slowest, v0.2). Measured on the H100 (bench/NOTES.md v0.3): 2.5x at 512^3 layered
// (401 -> 161 ms), 1.8x 3D texture (384 -> 213 ms), 1.33x at 256^3.
constexpr int32_t kMaxViewsPerLaunch = 65535;

// Launch: grid (ceil(columns / kFpBlockX), ceil(rows / kFpBlockY), num_views), block
// (kFpBlockX, kFpBlockY); with views_inner, grid (ceil(columns / kFpBlockX), num_views,
// ceil(rows / kFpBlockY)). A thread owns one detector pixel (view, row, column): it reads
// its view's VectorFpView and the volume samples along its ray, and writes
// projections[view][row][column] once (every pixel is written, 0 when the ray misses).
template <VectorSampler kSampler>
__global__ void __launch_bounds__(kFpBlockX* kFpBlockY)
    VectorForwardKernel(VectorVolumeShape vol, VectorDetectorShape det,
                        const VectorFpView* __restrict__ views, VectorFpTextures textures,
                        const float* __restrict__ volume, float* __restrict__ projections,
                        int32_t views_inner) {
  const int column = blockIdx.x * kFpBlockX + threadIdx.x;
  const int row = (views_inner ? blockIdx.z : blockIdx.y) * kFpBlockY + threadIdx.y;
  const int view_index = views_inner ? blockIdx.y : blockIdx.z;
  if (column >= det.columns || row >= det.rows) return;
  const JosephRay ray = MakeJosephRay(vol, det, views[view_index], row, column);
  const int a = ray.axis;
  const float* step = ray.step;
  const float* base = ray.base;
  const int j_begin = ray.j_begin, j_end = ray.j_end;
  float sum = 0.0f;
  if (kSampler == VectorSampler::kLayered) {
    // One bilinear fetch per plane from the layered texture of the main axis; texel
    // centres at +0.5, the layer is the plane.
    if (a == 2) {
      const float bx = base[0] + 0.5f, by = base[1] + 0.5f;
#pragma unroll 4
      for (int j = j_begin; j <= j_end; ++j) {
        const float fj = static_cast<float>(j);
        sum += tex2DLayered<float>(textures.along_z, fmaf(fj, step[0], bx),
                                   fmaf(fj, step[1], by), j);
      }
    } else if (a == 1) {
      const float bx = base[0] + 0.5f, bz = base[2] + 0.5f;
#pragma unroll 4
      for (int j = j_begin; j <= j_end; ++j) {
        const float fj = static_cast<float>(j);
        sum += tex2DLayered<float>(textures.along_y, fmaf(fj, step[0], bx),
                                   fmaf(fj, step[2], bz), j);
      }
    } else {
      const float by = base[1] + 0.5f, bz = base[2] + 0.5f;
#pragma unroll 4
      for (int j = j_begin; j <= j_end; ++j) {
        const float fj = static_cast<float>(j);
        sum += tex2DLayered<float>(textures.along_x, fmaf(fj, step[1], by),
                                   fmaf(fj, step[2], bz), j);
      }
    }
  } else if (kSampler == VectorSampler::kTexture) {
    // Texel centres at +0.5; the main coordinate is exactly j + 0.5 (weight 0 across).
    const float bx = base[0] + 0.5f, by = base[1] + 0.5f, bz = base[2] + 0.5f;
#pragma unroll 4
    for (int j = j_begin; j <= j_end; ++j) {
      const float fj = static_cast<float>(j);
      sum += tex3D<float>(textures.volume3d, fmaf(fj, step[0], bx), fmaf(fj, step[1], by),
                          fmaf(fj, step[2], bz));
    }
  } else {
    for (int j = j_begin; j <= j_end; ++j) {
      const float fj = static_cast<float>(j);
      sum += SampleExact(volume, vol.nx, vol.ny, vol.nz, fmaf(fj, step[0], base[0]),
                         fmaf(fj, step[1], base[1]), fmaf(fj, step[2], base[2]));
    }
  }
  projections[(static_cast<int64_t>(view_index) * det.rows + row) * det.columns + column] =
      sum * ray.weight;
}

}  // namespace

cudaError_t LaunchVectorForward(const VectorVolumeShape& volume_shape,
                                const VectorDetectorShape& detector, const VectorFpView* views,
                                VectorSampler sampler, const VectorFpTextures& textures,
                                const float* volume, float* projections, cudaStream_t stream,
                                int32_t views_inner) {
  if (detector.num_views <= 0 || detector.rows <= 0 || detector.columns <= 0) return cudaSuccess;
  const dim3 block(kFpBlockX, kFpBlockY);
  const int64_t view_size = static_cast<int64_t>(detector.rows) * detector.columns;
  // gridDim.y and gridDim.z are at most 65535: views in chunks (rows / kFpBlockY stays far
  // below).
  for (int32_t v0 = 0; v0 < detector.num_views; v0 += kMaxViewsPerLaunch) {
    VectorDetectorShape chunk = detector;
    chunk.num_views = min(kMaxViewsPerLaunch, detector.num_views - v0);
    const unsigned row_blocks = (detector.rows + kFpBlockY - 1) / kFpBlockY;
    const unsigned view_blocks = static_cast<unsigned>(chunk.num_views);
    const dim3 grid((detector.columns + kFpBlockX - 1) / kFpBlockX,
                    views_inner ? view_blocks : row_blocks, views_inner ? row_blocks : view_blocks);
    float* out = projections + v0 * view_size;
    switch (sampler) {
      case VectorSampler::kLayered:
        VectorForwardKernel<VectorSampler::kLayered><<<grid, block, 0, stream>>>(
            volume_shape, chunk, views + v0, textures, volume, out, views_inner);
        break;
      case VectorSampler::kTexture:
        VectorForwardKernel<VectorSampler::kTexture><<<grid, block, 0, stream>>>(
            volume_shape, chunk, views + v0, textures, volume, out, views_inner);
        break;
      default:
        VectorForwardKernel<VectorSampler::kExact><<<grid, block, 0, stream>>>(
            volume_shape, chunk, views + v0, textures, volume, out, views_inner);
        break;
    }
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

namespace {

constexpr int kTransposeTile = 32;
constexpr int kTransposeRows = 8;

// Launch: grid (ceil(nx / 32), ceil(ny / 32), nz), block (32, 8). A block owns the 32 x 32
// tile (x, y) of slice z: it reads it coalesced along x, writes along_y[y][z][x] directly
// (coalesced along x) and along_x[x][z][y] through shared memory (coalesced along y).
__global__ void __launch_bounds__(kTransposeTile* kTransposeRows)
    VolumeTransposeKernel(const float* __restrict__ volume, int nx, int ny, int nz,
                          float* __restrict__ along_x, float* __restrict__ along_y) {
  __shared__ float tile[kTransposeTile][kTransposeTile + 1];
  const int x0 = blockIdx.x * kTransposeTile, y0 = blockIdx.y * kTransposeTile;
  const int z = blockIdx.z;
  for (int dy = threadIdx.y; dy < kTransposeTile; dy += kTransposeRows) {
    const int x = x0 + threadIdx.x, y = y0 + dy;
    if (x < nx && y < ny) {
      const float value = volume[(static_cast<int64_t>(z) * ny + y) * nx + x];
      tile[dy][threadIdx.x] = value;
      along_y[(static_cast<int64_t>(y) * nz + z) * nx + x] = value;
    }
  }
  __syncthreads();
  for (int dx = threadIdx.y; dx < kTransposeTile; dx += kTransposeRows) {
    const int x = x0 + dx, y = y0 + threadIdx.x;
    if (x < nx && y < ny) {
      along_x[(static_cast<int64_t>(x) * nz + z) * ny + y] = tile[threadIdx.x][dx];
    }
  }
}

}  // namespace

cudaError_t LaunchVolumeTransposes(const float* volume, int32_t nx, int32_t ny, int32_t nz,
                                   float* along_x, float* along_y, cudaStream_t stream) {
  if (nx <= 0 || ny <= 0 || nz <= 0) return cudaSuccess;
  const dim3 grid((nx + kTransposeTile - 1) / kTransposeTile,
                  (ny + kTransposeTile - 1) / kTransposeTile, nz);
  VolumeTransposeKernel<<<grid, dim3(kTransposeTile, kTransposeRows), 0, stream>>>(
      volume, nx, ny, nz, along_x, along_y);
  return cudaGetLastError();
}

}  // namespace tomo::core::cuda
