// The two kernels of one multi-voxel update step of ICD (core/statistical/cuda/icd_kernels.h):
// the back projection of w e and w into theta1, theta2 with the voxel update, and the
// forward update of the residual.
//
// Launch shape (IcdGroupShape): block (kx, ky) = (voxels, views), 256 threads; grid
// (ceil(largest step / kx), ceil(views / ky)). Thread (k, v) owns voxel k of the step in
// view v: it computes the column's transaxial footprint in that view (4 projected corners,
// separable_footprint_math.h) and the voxel's axial footprint, and visits its pixels. The
// residual layout (view, column, row) puts the voxels of a group, a few rows apart, next to
// each other in memory, and consecutive threads are consecutive voxels.
#include "core/statistical/cuda/icd_kernels.h"
#include "core/statistical/icd_update_math.h"

namespace tomo::core::statistical::cuda {
namespace {

constexpr int kThreads = 256;

// Calls visit(index into residual/weights, a_ij) for each pixel of the voxel (column at
// (x, y), slice centre z) in view v.
template <typename Visit>
__device__ __forceinline__ void VisitFootprint(const IcdDeviceProblem& p, int v, float x, float y,
                                               float z, Visit&& visit) {
  const SfViewT<float> view = p.views[v];
  const SfColumnT<float> col = MakeColumn<float>(view, x, y, p.voxel_x, p.voxel_y, p.columns);
  if (col.first_column > col.last_column) return;
  const SfAxialT<float> ax = MakeAxial<float>(col, z, p.voxel_z, p.rows);
  if (ax.first_row > ax.last_row) return;
  for (int c = col.first_column; c <= col.last_column; ++c) {
    const float column_part = ax.amplitude * ColumnWeight(col, c);
    const int64_t base = (static_cast<int64_t>(v) * p.columns + c) * p.rows;
    for (int r = ax.first_row; r <= ax.last_row; ++r) {
      visit(base + r, column_part * RowWeight(ax, r));
    }
  }
}

__device__ __forceinline__ void ColumnCentre(const IcdDeviceProblem& p, int column, float& x,
                                             float& y) {
  const int ix = column % p.nx, iy = column / p.nx;
  x = p.x0 + ix * p.voxel_x;
  y = p.y0 + iy * p.voxel_y;
}

__device__ __forceinline__ int StepSize(const IcdStepTask& task) {
  int size = 0;
#pragma unroll
  for (int g = 0; g < kIcdMaxGroupsPerStep; ++g) size += task.groups[g].size;
  return size;
}

// Voxel k (< StepSize) of a step: its column and slice.
__device__ __forceinline__ void StepVoxel(const IcdStepTask& task, int k, int& column, int& iz) {
  int g = 0;
  while (g < kIcdMaxGroupsPerStep - 1 && k >= task.groups[g].size) {
    k -= task.groups[g].size;
    ++g;
  }
  column = task.groups[g].column;
  iz = task.groups[g].first_slice + k * task.groups[g].stride;
}

__device__ float UpdateVoxel(const IcdDeviceProblem& p, int column, int iz, float theta1,
                             float theta2) {
  const int ix = column % p.nx, iy = column / p.nx;
  float values[26], weights[26];
#pragma unroll
  for (int n = 0; n < 26; ++n) {
    const int raster = n < 13 ? n : n + 1;
    const int dz = raster / 9 - 1, dy = (raster / 3) % 3 - 1, dx = raster % 3 - 1;
    const int jx = ix + dx, jy = iy + dy, jz = iz + dz;
    const bool inside = jx >= 0 && jx < p.nx && jy >= 0 && jy < p.ny && jz >= 0 && jz < p.nz;
    weights[n] = inside ? p.neighbour_weights[n] : 0.0f;
    values[n] = inside ? p.volume[(static_cast<int64_t>(jy) * p.nx + jx) * p.nz + jz] : 0.0f;
  }
  float* voxel = p.volume + static_cast<int64_t>(column) * p.nz + iz;
  const float old_value = *voxel;
  const float new_value =
      SurrogateVoxelUpdate<float>(old_value, theta1, theta2, values, weights, p.prior);
  *voxel = new_value;
  return new_value - old_value;
}

__global__ void __launch_bounds__(kThreads)
    GroupBackProjectAndUpdate(IcdDeviceProblem p, IcdGroupScratch s) {
  __shared__ float sum1[kThreads], sum2[kThreads];
  __shared__ bool last_block;
  const IcdStepTask task = s.tasks[*s.cursor];
  const int size = StepSize(task);
  const int kx = blockDim.x, ky = blockDim.y;
  const int k = blockIdx.x * kx + threadIdx.x;
  const int v = blockIdx.y * ky + threadIdx.y;
  float t1 = 0, t2 = 0;
  if (k < size && v < p.num_views) {
    int column, iz;
    StepVoxel(task, k, column, iz);
    float x, y;
    ColumnCentre(p, column, x, y);
    const float z = p.z0 + iz * p.voxel_z;
    VisitFootprint(p, v, x, y, z, [&](int64_t i, float a) {
      const float wa = p.weights[i] * a;
      t1 += wa * p.residual[i];
      t2 += wa * a;
    });
  }
  // Sum over the block's views (threadIdx.y) for each voxel.
  const int tid = threadIdx.y * kx + threadIdx.x;
  sum1[tid] = t1;
  sum2[tid] = t2;
  __syncthreads();
  for (int half = ky / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) {
      sum1[tid] += sum1[tid + half * kx];
      sum2[tid] += sum2[tid + half * kx];
    }
    __syncthreads();
  }
  const int stride_k = gridDim.x * kx;  // partial_theta is [2][grid_y][grid_x * kx]
  if (threadIdx.y == 0) {
    s.partial_theta[blockIdx.y * stride_k + k] = sum1[threadIdx.x];
    s.partial_theta[(gridDim.y + blockIdx.y) * stride_k + k] = sum2[threadIdx.x];
  }
  // The last block to finish sums the partials and updates the voxels.
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    const unsigned blocks = gridDim.x * gridDim.y;
    last_block = atomicAdd(s.ticket, 1u) == blocks - 1;
  }
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  for (int j = tid; j < size; j += kThreads) {
    float theta1 = 0, theta2 = 0;
    for (int b = 0; b < static_cast<int>(gridDim.y); ++b) {
      theta1 += __ldcg(&s.partial_theta[b * stride_k + j]);
      theta2 += __ldcg(&s.partial_theta[(gridDim.y + b) * stride_k + j]);
    }
    int column, iz;
    StepVoxel(task, j, column, iz);
    s.delta[j] = UpdateVoxel(p, column, iz, theta1, theta2);
  }
  __syncthreads();
  if (tid == 0) {
    *s.ticket = 0;
    *s.cursor += 1;
  }
}

__global__ void __launch_bounds__(kThreads) GroupForward(IcdDeviceProblem p, IcdGroupScratch s) {
  const IcdStepTask task = s.tasks[*s.cursor - 1];
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  const int v = blockIdx.y * blockDim.y + threadIdx.y;
  if (k >= StepSize(task) || v >= p.num_views) return;
  const float delta = s.delta[k];
  if (delta == 0.0f) return;
  int column, iz;
  StepVoxel(task, k, column, iz);
  float x, y;
  ColumnCentre(p, column, x, y);
  const float z = p.z0 + iz * p.voxel_z;
  VisitFootprint(p, v, x, y, z, [&](int64_t i, float a) { p.residual[i] += a * delta; });
}

}  // namespace

IcdGroupShape MakeIcdGroupShape(int largest_group, int num_views) {
  IcdGroupShape shape;
  shape.kx = 1;
  while (shape.kx < largest_group && shape.kx < 32) shape.kx *= 2;
  shape.ky = kThreads / shape.kx;
  shape.grid_x = (largest_group + shape.kx - 1) / shape.kx;
  shape.grid_y = (num_views + shape.ky - 1) / shape.ky;
  return shape;
}

cudaError_t LaunchIcdGroupBackProjectAndUpdate(const IcdDeviceProblem& problem,
                                               const IcdGroupScratch& scratch,
                                               const IcdGroupShape& shape, cudaStream_t stream) {
  GroupBackProjectAndUpdate<<<dim3(shape.grid_x, shape.grid_y), dim3(shape.kx, shape.ky), 0,
                              stream>>>(problem, scratch);
  return cudaGetLastError();
}

cudaError_t LaunchIcdGroupForward(const IcdDeviceProblem& problem, const IcdGroupScratch& scratch,
                                  const IcdGroupShape& shape, cudaStream_t stream) {
  GroupForward<<<dim3(shape.grid_x, shape.grid_y), dim3(shape.kx, shape.ky), 0, stream>>>(
      problem, scratch);
  return cudaGetLastError();
}

}  // namespace tomo::core::statistical::cuda
