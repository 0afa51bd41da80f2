// The kernels ICD needs besides the group steps (core/statistical/cuda/icd_kernels.h): the
// forward projection of the start volume into the residual, and the cost terms.
#include "core/statistical/cuda/icd_kernels.h"

namespace tomo::core::statistical::cuda {
namespace {

// Grid (views, ceil(columns / 128)), one thread per (column, view): the column's transaxial footprint once, then every slice
// with a non-zero value. Columns of the same view collide on pixels: atomic adds (this runs
// once per reconstruction).
constexpr int kForwardThreads = 128;
__global__ void __launch_bounds__(kForwardThreads) ForwardVolume(IcdDeviceProblem p) {
  const int column = blockIdx.y * blockDim.x + threadIdx.x;
  const int v = blockIdx.x;
  if (column >= p.nx * p.ny) return;
  const int ix = column % p.nx, iy = column / p.nx;
  const SfViewT<float> view = p.views[v];
  const SfColumnT<float> col = MakeColumn<float>(view, p.x0 + ix * p.voxel_x,
                                                 p.y0 + iy * p.voxel_y, p.voxel_x, p.voxel_y,
                                                 p.columns);
  if (col.first_column > col.last_column) return;
  const float* values = p.volume + static_cast<int64_t>(column) * p.nz;
  for (int iz = 0; iz < p.nz; ++iz) {
    const float value = values[iz];
    if (value == 0.0f) continue;
    const SfAxialT<float> ax = MakeAxial<float>(col, p.z0 + iz * p.voxel_z, p.voxel_z, p.rows);
    for (int c = col.first_column; c <= col.last_column; ++c) {
      const float column_part = value * ax.amplitude * ColumnWeight(col, c);
      const int64_t base = (static_cast<int64_t>(v) * p.columns + c) * p.rows;
      for (int r = ax.first_row; r <= ax.last_row; ++r) {
        atomicAdd(&p.residual[base + r], column_part * RowWeight(ax, r));
      }
    }
  }
}

constexpr int kCostThreads = 256;

__device__ double BlockSum(double value, double* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = kCostThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

__global__ void __launch_bounds__(kCostThreads) CostTerms(IcdDeviceProblem p, double* partials) {
  __shared__ double shared[kCostThreads];
  const int64_t pixels = static_cast<int64_t>(p.num_views) * p.rows * p.columns;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  double data = 0, squares = 0;
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < pixels; i += step) {
    const double e = p.residual[i];
    data += 0.5 * p.weights[i] * e * e;
    squares += e * e;
  }
  // The prior: each voxel with its 13 neighbours after it in raster order (each pair once).
  double prior = 0;
  const int64_t voxels = static_cast<int64_t>(p.nx) * p.ny * p.nz;
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < voxels; i += step) {
    const int iz = static_cast<int>(i % p.nz);
    const int column = static_cast<int>(i / p.nz);
    const int ix = column % p.nx, iy = column / p.nx;
    const float centre = p.volume[i];
    for (int n = 13; n < 26; ++n) {
      const int raster = n + 1;
      const int dz = raster / 9 - 1, dy = (raster / 3) % 3 - 1, dx = raster % 3 - 1;
      const int jx = ix + dx, jy = iy + dy, jz = iz + dz;
      if (jx < 0 || jx >= p.nx || jy < 0 || jy >= p.ny || jz < 0 || jz >= p.nz) continue;
      const float b = p.neighbour_weights[n];
      if (b == 0.0f) continue;
      const float other = p.volume[(static_cast<int64_t>(jy) * p.nx + jx) * p.nz + jz];
      prior += static_cast<double>(b) * QggmrfPotential<float>(p.prior, centre - other);
    }
  }
  const double data_sum = BlockSum(data, shared);
  const double squares_sum = BlockSum(squares, shared);
  const double prior_sum = BlockSum(prior, shared);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = data_sum;
    partials[kIcdCostBlocks + blockIdx.x] = squares_sum;
    partials[2 * kIcdCostBlocks + blockIdx.x] = prior_sum;
  }
}

}  // namespace

cudaError_t LaunchIcdForwardVolume(const IcdDeviceProblem& problem, cudaStream_t stream) {
  const int columns = problem.nx * problem.ny;
  ForwardVolume<<<dim3(problem.num_views, (columns + kForwardThreads - 1) / kForwardThreads),
                  kForwardThreads, 0, stream>>>(problem);
  return cudaGetLastError();
}

cudaError_t LaunchIcdCostTerms(const IcdDeviceProblem& problem, double* partials,
                               cudaStream_t stream) {
  CostTerms<<<kIcdCostBlocks, kCostThreads, 0, stream>>>(problem, partials);
  return cudaGetLastError();
}

}  // namespace tomo::core::statistical::cuda
