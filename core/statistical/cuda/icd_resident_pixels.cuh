// The pixels of a set held in shared memory by version 4 of the persistent ICD kernel
// (IcdV4Launch::resident_floats; bench/NOTES.md "ICD v5: the set's pixels in shared
// memory").
//
// Why: a set (a column and its partners, core/statistical/update_schedule.h) runs its G
// steps one after the other, and each step's back projection reads nearly every pixel of
// its columns' footprints (a group's slices, G apart, cover about every row the column
// projects to), then its forward update reads and writes them again. Block v owns view v
// alone, so nothing but the block itself changes those pixels while the set runs: it copies
// them (weights and residual) into shared memory when the set starts, works there, and
// writes the residual back when the set ends. Each step's phases then read shared memory
// (tens of cycles) instead of L2 (hundreds), and a set moves its pixels through L2 twice
// instead of 3 G times.
//
// Layout: one entry per column of the set, its detector columns [first_column, +columns)
// in this view by the rows [first_row, +rows) that any slice of the column projects to,
// rows fastest (as the residual), at `offset` in the two shared arrays. A step is covered
// when every column of it has an entry; otherwise the block writes the old entries back and
// loads new ones for the step's columns. A set that does not fit (`floats` over the
// capacity) runs on the global arrays, as without residency.
#pragma once

#include "core/statistical/cuda/icd_step_footprints.cuh"

namespace tomo::core::statistical::cuda::icd_device {

// Plain structs (no member initialisers): they live in __shared__ arrays.
struct ResidentEntry {
  int column;
  int first_column, columns, first_row, rows, offset;
};

// The resident layout for one step (a double buffer, as the tasks and footprints).
struct ResidentLayout {
  ResidentEntry entry[kIcdMaxGroupsPerStep];
  int entry_of_slot[kIcdMaxGroupsPerStep];
  int count;
  int floats;
  bool valid;  // the step runs on the shared arrays
  bool reuse;  // the shared arrays already hold this layout (the step before's)
};

// What a block holds before its first step: nothing.
__device__ __forceinline__ ResidentLayout NothingResident() {
  ResidentLayout none;
  none.count = 0;
  none.floats = 0;
  none.valid = false;
  none.reuse = false;
  return none;
}

// Rows any slice of the column projects to in this view: the axial footprint is affine in
// z (one rows_per_mm per column), so slices 0 and nz - 1 bound it; float rounding is
// monotone, so every MakeAxial of a slice in between falls within.
__device__ __forceinline__ void ColumnRows(const IcdDeviceProblem& p, const SfColumnT<float>& col,
                                           int& first_row, int& last_row) {
  const SfAxialT<float> bottom = MakeAxial<float>(col, p.z0, p.voxel_z, p.rows);
  const SfAxialT<float> top =
      MakeAxial<float>(col, p.z0 + (p.nz - 1) * p.voxel_z, p.voxel_z, p.rows);
  first_row = min(bottom.first_row, top.first_row);
  last_row = max(bottom.last_row, top.last_row);
}

// One thread (the caller's thread 0) fills `next` for the step `task` with footprints f,
// from `current` (the layout held now: reused when it covers the step).
__device__ inline void PlanResident(const IcdDeviceProblem& p, const IcdStepTask& task,
                                    const StepFootprints& f, const ResidentLayout& current,
                                    int capacity, ResidentLayout& next) {
  bool covered = current.valid;
  int entry_of_slot[kIcdMaxGroupsPerStep];
  for (int g = 0; g < kIcdMaxGroupsPerStep; ++g) {
    entry_of_slot[g] = -1;
    if (task.groups[g].size <= 0) continue;
    for (int e = 0; e < current.count; ++e) {
      if (current.entry[e].column == task.groups[g].column) entry_of_slot[g] = e;
    }
    covered &= entry_of_slot[g] >= 0;
  }
  if (covered) {
    next = current;
    next.reuse = true;
    for (int g = 0; g < kIcdMaxGroupsPerStep; ++g) next.entry_of_slot[g] = entry_of_slot[g];
    return;
  }
  next.count = 0;
  next.floats = 0;
  next.reuse = false;
  for (int g = 0; g < kIcdMaxGroupsPerStep; ++g) {
    next.entry_of_slot[g] = -1;
    if (task.groups[g].size <= 0) continue;
    const SfColumnT<float>& col = f.column[g];
    ResidentEntry entry{task.groups[g].column, 0, 0, 0, 0, next.floats};
    if (col.first_column <= col.last_column) {
      int last_row;
      ColumnRows(p, col, entry.first_row, last_row);
      entry.first_column = col.first_column;
      entry.columns = col.last_column - col.first_column + 1;
      entry.rows = max(0, last_row - entry.first_row + 1);
    }
    next.entry_of_slot[g] = next.count;
    next.entry[next.count++] = entry;
    next.floats += entry.columns * entry.rows;
  }
  next.valid = next.floats <= capacity;
}

// Asynchronous 4-byte copy global -> shared (cp.async: no register holds the value, so a
// thread has all its copies in flight at once); ResidentCopiesDone waits for them.
__device__ __forceinline__ void CopyToShared(float* to, const float* from) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(address), "l"(from) : "memory");
}
__device__ __forceinline__ void ResidentCopiesDone() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}

// All threads: the layout's pixels of view v into the shared arrays (load) or the residual
// back from them (!load). Warp w takes the entries' detector columns w, w + warps, ...,
// its lanes the rows (no division per pixel: a copy is a few instructions). A load is
// complete for this thread after ResidentCopiesDone, for the block after a barrier that
// follows it.
__device__ inline void CopyResident(const IcdDeviceProblem& p, const ResidentLayout& layout,
                                    int v, float* shared_weights, float* shared_residual,
                                    bool load) {
  const int64_t view_offset = static_cast<int64_t>(v) * p.columns * p.rows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  int task = 0;  // the (entry, detector column) pairs, in order
  for (int e = 0; e < layout.count; ++e) {
    const ResidentEntry& entry = layout.entry[e];
    for (int c = 0; c < entry.columns; ++c, ++task) {
      if (task % warps != warp) continue;
      const int64_t from = view_offset +
                           static_cast<int64_t>(entry.first_column + c) * p.rows + entry.first_row;
      const int to = entry.offset + c * entry.rows;
      if (load) {
        for (int r = lane; r < entry.rows; r += 32) {
          CopyToShared(shared_weights + to + r, p.weights + from + r);
          CopyToShared(shared_residual + to + r, p.residual + from + r);
        }
      } else {
        for (int r = lane; r < entry.rows; r += 32) p.residual[from + r] = shared_residual[to + r];
      }
    }
  }
  if (load) ResidentCopiesDone();
}

}  // namespace tomo::core::statistical::cuda::icd_device
