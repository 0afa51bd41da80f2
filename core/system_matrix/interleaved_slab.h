// InterleavedSlab: one warp's share of the interleaved-runs layout (interleaved_runs.h), a
// plain struct shared by the CPU builder and the CUDA kernels.
//
// The slab is steps [step_begin, step_end) of the group of 32 stored rows first_row ..
// first_row + 31 of one stored view: lane l walks entries step_begin .. of row first_row + l,
// whose value for entry e sits at value_base + 32 e + l and whose runs (one per pixel row)
// at run_base + 32 j + l. cursors[cursor_offset + l] is the run holding the lane's first
// entry (runs past the row's last: the lane has nothing in this slab).
#pragma once

#include <cstdint>

namespace tomo::core::system_matrix {

struct InterleavedSlab {
  int64_t value_base = 0;
  int64_t cursor_offset = 0;
  uint32_t run_base = 0;
  int32_t stored_view = 0;
  int32_t first_row = 0;  // detector column of lane 0
  int32_t segment = 0;
  int32_t step_begin = 0, step_end = 0;
  // 1: the group's rays run mostly along x, so the lanes of a step lie along a column of
  // pixels; 0: along a row.
  int32_t along_x = 1;
};

// A run slot (as CUDA's uint2): the index of the run's first entry in its row, and
// ix_first | length << 16 (length 0: padding).
struct alignas(8) RunSlot {
  uint32_t first_entry = 0;
  uint32_t ix_first_and_length = 0;
};

// A row header (as CUDA's uint4): the row's first run slot, its first value slot (low and
// high 32 bits), and iy_first | runs << 16.
struct alignas(16) RowHeader {
  uint32_t run_slot = 0;
  uint32_t value_slot_low = 0, value_slot_high = 0;
  uint32_t iy_first_and_runs = 0;
};

}  // namespace tomo::core::system_matrix
