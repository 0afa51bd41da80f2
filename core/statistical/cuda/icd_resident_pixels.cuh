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
// Layout: one entry per column slot of the step, its detector columns [first_column,
// +columns) in this view by the rows [first_row, +rows) that any slice of the column
// projects to, rows fastest (as the residual), at `offset` in the two shared arrays. The
// held pixels serve a step when each of its slots holds the same column as when they were
// loaded (a set keeps its columns in their slots); otherwise the block writes the held
// residual back and loads the step's. A set that does not fit the capacity runs on the
// global arrays, as without residency. Planning is spread over one thread per slot: a
// single thread planning a whole step was measured on the step's path.
#pragma once

#include "core/statistical/cuda/icd_step_footprints.cuh"

namespace tomo::core::statistical::cuda::icd_device {

// A plain struct (no member initialisers): it lives in __shared__ memory. Entry g belongs to
// the step's column slot g; column -1: an empty slot.
struct ResidentLayout {
  int column[kIcdMaxGroupsPerStep];
  int first_column[kIcdMaxGroupsPerStep], columns[kIcdMaxGroupsPerStep];
  int first_row[kIcdMaxGroupsPerStep], rows[kIcdMaxGroupsPerStep];
  int offset[kIcdMaxGroupsPerStep];  // held layouts only
  bool valid;                        // held: the shared arrays hold these pixels
};

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

// Thread g < kIcdMaxGroupsPerStep, once the step's footprints f are in shared memory:
// slot g's entry of the layout the step needs.
__device__ __forceinline__ void PlanResidentSlot(const IcdDeviceProblem& p, const IcdStepTask& task,
                                                 const StepFootprints& f, int g,
                                                 ResidentLayout& planned) {
  planned.column[g] = task.groups[g].size > 0 ? task.groups[g].column : -1;
  planned.first_column[g] = 0;
  planned.columns[g] = 0;
  planned.first_row[g] = 0;
  planned.rows[g] = 0;
  const SfColumnT<float>& col = f.column[g];
  if (task.groups[g].size <= 0 || col.first_column > col.last_column) return;
  int first_row, last_row;
  ColumnRows(p, col, first_row, last_row);
  planned.first_column[g] = col.first_column;
  planned.columns[g] = col.last_column - col.first_column + 1;
  planned.first_row[g] = first_row;
  planned.rows[g] = max(0, last_row - first_row + 1);
}

// Any thread, once the planned layout is complete: whether the held pixels serve the step.
__device__ __forceinline__ bool HeldServes(const ResidentLayout& held,
                                           const ResidentLayout& planned) {
  if (!held.valid) return false;
  bool same = true;
#pragma unroll
  for (int g = 0; g < kIcdMaxGroupsPerStep; ++g) {
    same &= planned.column[g] < 0 || planned.column[g] == held.column[g];
  }
  return same;
}

// Thread g < kIcdMaxGroupsPerStep: slot g of the planned layout becomes held (its offset;
// thread 0 also whether the whole fits the capacity). A barrier must follow before it is
// read.
__device__ __forceinline__ void HoldPlanned(const ResidentLayout& planned, int capacity, int g,
                                            ResidentLayout& held) {
  int offset = 0, total = 0;
#pragma unroll
  for (int h = 0; h < kIcdMaxGroupsPerStep; ++h) {
    const int floats = planned.columns[h] * planned.rows[h];
    if (h < g) offset += floats;
    total += floats;
  }
  held.column[g] = planned.column[g];
  held.first_column[g] = planned.first_column[g];
  held.columns[g] = planned.columns[g];
  held.first_row[g] = planned.first_row[g];
  held.rows[g] = planned.rows[g];
  held.offset[g] = offset;
  if (g == 0) held.valid = total <= capacity;
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
  int task = 0;  // the (slot, detector column) pairs, in order
  for (int g = 0; g < kIcdMaxGroupsPerStep; ++g) {
    const int rows = layout.rows[g];
    for (int c = 0; c < layout.columns[g]; ++c, ++task) {
      if (task % warps != warp) continue;
      const int64_t from = view_offset +
                           static_cast<int64_t>(layout.first_column[g] + c) * p.rows +
                           layout.first_row[g];
      const int to = layout.offset[g] + c * rows;
      if (load) {
        for (int r = lane; r < rows; r += 32) {
          CopyToShared(shared_weights + to + r, p.weights + from + r);
          CopyToShared(shared_residual + to + r, p.residual + from + r);
        }
      } else {
        for (int r = lane; r < rows; r += 32) p.residual[from + r] = shared_residual[to + r];
      }
    }
  }
  if (load) ResidentCopiesDone();
}

}  // namespace tomo::core::statistical::cuda::icd_device
