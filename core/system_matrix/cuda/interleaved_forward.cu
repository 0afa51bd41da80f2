// Forward products of one orbit block on the interleaved-runs layout (interleaved_runs.h):
// one warp per slab (a group of 32 stored rows, a range of steps), a lane per row
// (InterleavedForwardLane, symmetric_thread_math.h). The 32 lanes of a step read one line of
// values; a lane reads its next run (interleaved too) when it moves to the next pixel row;
// every stored value is used for all the block's views (up to 8) while in a register, and
// with the image's transposed copy each view's reads of x fall in a few lines. Each lane
// writes its 8 sums to the partials of its segment; the group's last warp adds them
// (group_combine.cuh), or LaunchSymmetricCombine does after.
#include "core/system_matrix/cuda/group_combine.cuh"
#include "core/system_matrix/cuda/stored_matrix_kernels.h"
#include "core/system_matrix/cuda/symmetric_thread_math.h"

namespace tomo::core::system_matrix::cuda {
namespace {

constexpr int kBlock = 256;  // threads: 8 warps, one slab each
constexpr int kWarps = kBlock / 32;

__global__ void __launch_bounds__(kBlock)
    InterleavedForwardKernel(InterleavedDeviceArrays d, OrbitBlock block, int64_t slab_first,
                             int64_t slab_count, const float* __restrict__ x,
                             const float* __restrict__ x_transposed,
                             float* __restrict__ partials, GroupCombine combine) {
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (warp >= slab_count) return;
  const int lane = threadIdx.x % 32;
  const InterleavedSlab slab = d.slabs[slab_first + warp];
  float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  InterleavedForwardLane(d, slab, block, lane, x, x_transposed, sums);
  const int row = slab.first_row + lane;
  if (row < d.columns) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if (k < block.count) partials[(static_cast<int64_t>(slab.segment) * 8 + k) * d.columns + row] = sums[k];
    }
  }
  if (combine.counters != nullptr) {
    CombineIfLastOfGroup(combine, block, slab.first_row, d.columns, partials, lane);
  }
}

}  // namespace

cudaError_t LaunchInterleavedForwardPartials(const InterleavedDeviceArrays& d,
                                             const OrbitBlock& block, int64_t slab_first,
                                             int64_t slab_count, const float* x,
                                             const float* x_transposed, float* partials,
                                             const GroupCombine& combine, cudaStream_t stream) {
  if (slab_count == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((slab_count + kWarps - 1) / kWarps);
  InterleavedForwardKernel<<<blocks, kBlock, 0, stream>>>(d, block, slab_first, slab_count, x,
                                                          x_transposed, partials, combine);
  return cudaGetLastError();
}

}  // namespace tomo::core::system_matrix::cuda
