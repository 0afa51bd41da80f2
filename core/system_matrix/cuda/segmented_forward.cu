// Forward products of one orbit block on the segmented-runs layout (segmented_runs.h): one
// block of 256 threads per slab (32 stored rows, a range of columns along the group's march
// axis), warp k for the block's view k, a lane per row (SegmentedForwardLaneView,
// segmented_thread_math.h). The 32 lanes of a step read one line of values (the block's
// eight warps read the same lines: one from L2, seven from L1) and, being cut by position,
// lie side by side across the rays: with the image's transposed copy each view's reads of
// x fall in a few lines. A lane reads its next run (interleaved too) when it moves to the
// next column. Eight warps per slab keep the device busy (the first version, a warp per
// slab doing all views, left 11 % occupancy at 512^2). Each lane writes its sum to the
// partials of its segment; the group's last block adds them (group_combine.cuh).
#include "core/system_matrix/cuda/group_combine.cuh"
#include "core/system_matrix/cuda/segmented_thread_math.h"
#include "core/system_matrix/cuda/stored_matrix_kernels.h"

namespace tomo::core::system_matrix::cuda {
namespace {

constexpr int kBlock = 256;  // threads: warp k for view k of the orbit

__global__ void __launch_bounds__(kBlock)
    SegmentedForwardKernel(SegmentedDeviceArrays d, OrbitBlock block, int64_t slab_first,
                           const float* __restrict__ x, const float* __restrict__ x_transposed,
                           float* __restrict__ partials, GroupCombine combine) {
  const int k = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const SegmentedSlab slab = d.slabs[slab_first + blockIdx.x];
  const int row = slab.first_row + lane;
  if (k < block.count) {
    const float sum = SegmentedForwardLaneView(d, slab, block, k, lane, x, x_transposed);
    if (row < d.columns) partials[(static_cast<int64_t>(slab.segment) * 8 + k) * d.columns + row] = sum;
  }
  if (combine.counters != nullptr) {
    CombineIfLastBlockOfGroup(combine, block, slab.first_row, d.columns, partials);
  }
}

}  // namespace

cudaError_t LaunchSegmentedForwardPartials(const SegmentedDeviceArrays& d,
                                           const OrbitBlock& block, int64_t slab_first,
                                           int64_t slab_count, const float* x,
                                           const float* x_transposed, float* partials,
                                           const GroupCombine& combine, cudaStream_t stream) {
  if (slab_count == 0) return cudaSuccess;
  SegmentedForwardKernel<<<static_cast<unsigned>(slab_count), kBlock, 0, stream>>>(
      d, block, slab_first, x, x_transposed, partials, combine);
  return cudaGetLastError();
}

}  // namespace tomo::core::system_matrix::cuda
