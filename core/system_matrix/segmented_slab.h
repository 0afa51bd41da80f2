// SegmentedSlab: one warp's share of the segmented-runs layout (segmented_runs.h), a plain
// struct shared by the CPU builder and the CUDA kernels, with the packing of its runs.
//
// The slab is the part of the 32 stored rows first_row .. first_row + 31 of one stored view
// whose pixels lie in the columns march_begin .. march_end - 1 along the group's march axis
// (x when along_x, else y). Lane l's run for column m sits at run_base + 32 (m - march_begin)
// + l: the lane's pixels in that column (a contiguous range of the other coordinate) and the
// index of the first of them among the lane's entries in the slab; entry t of lane l sits at
// value_base + 32 t + l. `width` is the most entries of a lane.
#pragma once

#include <cstdint>

// The run helpers run in CUDA kernels too.
#if defined(__CUDACC__)
#define TOMO_SEGMENTED_RUN_FN __host__ __device__ inline
#else
#define TOMO_SEGMENTED_RUN_FN inline
#endif

namespace tomo::core::system_matrix {

struct SegmentedSlab {
  int64_t value_base = 0;
  int64_t run_base = 0;
  int32_t stored_view = 0;
  int32_t first_row = 0;  // detector column of lane 0
  int32_t segment = 0;
  int32_t width = 0;
  int32_t march_begin = 0, march_end = 0;
  int32_t along_x = 1;
  int32_t unused = 0;
};

// A run in 32 bits: first (the index of its first entry in the lane's slab, < 2048),
// length (< 32), minor_first (the first pixel along the other axis, < 65536: the grid's
// side).
TOMO_SEGMENTED_RUN_FN uint32_t PackSegmentedRun(uint32_t first, uint32_t length, uint32_t minor_first) {
  return first | (length << 11) | (minor_first << 16);
}
TOMO_SEGMENTED_RUN_FN uint32_t SegmentedRunFirst(uint32_t run) { return run & 0x7ffu; }
TOMO_SEGMENTED_RUN_FN uint32_t SegmentedRunLength(uint32_t run) { return (run >> 11) & 0x1fu; }
TOMO_SEGMENTED_RUN_FN uint32_t SegmentedRunMinor(uint32_t run) { return run >> 16; }

}  // namespace tomo::core::system_matrix
