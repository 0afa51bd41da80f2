// What one lane of the segmented-runs layout's kernels computes (segmented_forward.cu, and
// the weight look-up of the orbit transpose), as host/device functions, so that a CPU test
// runs every lane of a launch on host copies of the arrays without a GPU.
#pragma once

#include <cstdint>

#include "core/system_matrix/cuda/stored_matrix_kernels.h"
#include "core/system_matrix/cuda/symmetric_thread_math.h"

namespace tomo::core::system_matrix::cuda {

// Forward, one lane and one view k of the block: walks the lane's entries t = 0 ..
// slab.width - 1 in step with the other lanes (one line of values per step), moving to its
// run of the next column when the current one ends, and returns the sum of w x(M_k p).
// x_transposed (optional) is x transposed (xt[ix * n + iy]): the lanes of a step lie along
// a column of pixels (slab.along_x) or a row; a map that keeps the axes keeps that line's
// direction, one that swaps them turns it; reading from the copy in which the line is
// contiguous puts the 32 lanes' reads in a few cache lines for every map.
TOMO_THREAD_MATH float SegmentedForwardLaneView(const SegmentedDeviceArrays& d,
                                                const SegmentedSlab& slab,
                                                const OrbitBlock& block, int k, int lane,
                                                const float* x, const float* x_transposed) {
  if (slab.first_row + lane >= d.columns || slab.march_end <= slab.march_begin) return 0.0f;
  const bool keeps_axes = block.m[k][1] == 0;
  const bool transposed = x_transposed != nullptr && keeps_axes == (slab.along_x != 0);
  const int n1 = d.n - 1;
  int m = slab.march_begin;
  // The run of the lane's current column, and the next one's loaded ahead (a lane moves on
  // every one to three steps: its next pixel then does not wait for a load).
  const int64_t runs0 = slab.run_base + lane;
  uint32_t run = d.runs[runs0];
  uint32_t next = m + 1 < slab.march_end ? d.runs[runs0 + 32] : 0u;
  float sum = 0.0f;
  for (int t = 0; t < slab.width; ++t) {
    while (static_cast<uint32_t>(t) >= SegmentedRunFirst(run) + SegmentedRunLength(run)) {
      if (++m >= slab.march_end) return sum;
      run = next;
      next = m + 1 < slab.march_end
                 ? d.runs[runs0 + 32 * static_cast<int64_t>(m + 1 - slab.march_begin)]
                 : 0u;
    }
    const float w = LoadReadOnly(d.values + slab.value_base + 32 * static_cast<int64_t>(t) + lane);
    const int minor = static_cast<int>(SegmentedRunMinor(run)) + t - static_cast<int>(SegmentedRunFirst(run));
    const int cx = 2 * (slab.along_x ? m : minor) - n1;
    const int cy = 2 * (slab.along_x ? minor : m) - n1;
    const int ox = (block.m[k][0] * cx + block.m[k][1] * cy + n1) >> 1;
    const int oy = (block.m[k][2] * cx + block.m[k][3] * cy + n1) >> 1;
    const float* at = transposed ? x_transposed + static_cast<int64_t>(ox) * d.n + oy
                                 : x + static_cast<int64_t>(oy) * d.n + ox;
    sum += w * LoadReadOnly(at);
  }
  return sum;
}

// All the block's views for one lane: sums[k] (the CPU's emulation of the views' warps).
inline void SegmentedForwardLane(const SegmentedDeviceArrays& d, const SegmentedSlab& slab,
                                 const OrbitBlock& block, int lane, const float* x,
                                 const float* x_transposed, float sums[8]) {
  for (int k = 0; k < block.count; ++k) {
    sums[k] += SegmentedForwardLaneView(d, slab, block, k, lane, x, x_transposed);
  }
}

// The stored weight of ray c of stored view `stored_view` at stored pixel (qx, qy), 0
// where it does not meet it: the group's segment of the pixel's march column, the slab,
// the lane's run of that column, the value.
struct SegmentedWeightAt {
  SegmentedDeviceArrays d;  // by value: the functor is a kernel argument
  int32_t stored_view;
  TOMO_THREAD_MATH float operator()(int c, int qx, int qy) const {
    const int64_t group = static_cast<int64_t>(stored_view) * d.groups_per_view + c / 32;
    const int lane = c % 32;
    const uint8_t* table = d.segment_of_column + group * 2 * d.n;
    const uint8_t by_x = table[qx], by_y = table[d.n + qy];
    const bool along_x = by_x != 0xff;
    const int segment = along_x ? by_x : by_y;
    if (segment == 0xff) return 0.0f;
    const SegmentedSlab& slab = d.slabs[group * d.segments + segment];
    const int m = along_x ? qx : qy;
    const int minor = along_x ? qy : qx;
    const uint32_t run = d.runs[slab.run_base + 32 * static_cast<int64_t>(m - slab.march_begin) + lane];
    const int delta = minor - static_cast<int>(SegmentedRunMinor(run));
    if (delta < 0 || delta >= static_cast<int>(SegmentedRunLength(run))) return 0.0f;
    return d.values[slab.value_base +
                    32 * static_cast<int64_t>(SegmentedRunFirst(run) + static_cast<uint32_t>(delta)) + lane];
  }
};

}  // namespace tomo::core::system_matrix::cuda
