// The CUDA kernels that build the stored rows of the symmetric format (device_matrix_build.h),
// as plain launch functions (g++-safe; each returns cudaGetLastError()). The arithmetic is
// strip_geometry.h's, compiled without fused multiply-adds so that extents and weights
// are those of the CPU build.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/system_matrix/strip_geometry.h"

namespace tomo::core::system_matrix::cuda {

// One thread per row: runs[row], entries[row] and iy_first[row] of the row's wedge.
cudaError_t LaunchCountRows(const strip_geometry::RowWedge* wedges, int64_t rows,
                            strip_geometry::GridFrame frame, int32_t* runs, int32_t* entries,
                            int32_t* iy_first, cudaStream_t stream);

// One warp per row: the runs (offset, ix_first, length), the weights and the squared norm,
// at the places row_value_begin / row_run_begin give. A row whose extents disagree with
// its counts (which the identical arithmetic rules out) writes nothing past its share and
// sets *mismatch to 1.
struct StoredRowPointers {
  const int64_t* row_value_begin;
  const int64_t* row_run_begin;
  int32_t* run_offset;
  uint16_t* run_ix_first;
  uint16_t* run_length;
  float* values;
  float* row_norm2;
  int32_t* mismatch;
};
cudaError_t LaunchFillRows(const strip_geometry::RowWedge* wedges, int64_t rows,
                           strip_geometry::GridFrame frame, StoredRowPointers out,
                           cudaStream_t stream);

}  // namespace tomo::core::system_matrix::cuda
