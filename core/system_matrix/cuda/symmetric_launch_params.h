// The plain structs the symmetric format's kernels take (stored_matrix_kernels.h), made
// from a SymmetricSystemMatrix on the host: packed runs, each stored view's float32
// geometry, and the blocks of views (an orbit for ART, or any subset grouped by stored
// view for a projector). Shared by DeviceStoredMatrix and the CPU test of the kernels'
// per-thread code.
//
//   std::vector<uint2> runs = PackRuns(matrix);
//   TOMO_ASSIGN_OR_RETURN(std::vector<cuda::OrbitBlock> groups, GroupViews(matrix, views));
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/system_matrix/cuda/stored_matrix_kernels.h"
#include "core/system_matrix/symmetric_system_matrix.h"

namespace tomo::core::system_matrix::cuda {

// x = offset of the run's first value from its row's, y = ix_first | length << 16.
std::vector<uint2> PackRuns(const SymmetricSystemMatrix& a);

// Per stored row as SymmetricDeviceArrays::row_headers. INVALID_ARGUMENT when the runs
// exceed 32-bit offsets.
absl::StatusOr<std::vector<uint4>> PackRowHeaders(const SymmetricSystemMatrix& a);

// kSquareMaps for device code.
SquareMapTable SquareMaps();

// Stored view `stored` (an index into the stored views) as the transposed pass needs it.
StoredViewGeometry StoredGeometry(const SymmetricSystemMatrix& a, int64_t stored);

// Orbit `block` for ART on full-size vectors (view[k] = the view's number).
OrbitBlock OrbitOf(const SymmetricSystemMatrix& a, int64_t block, float step_scale);

// INVALID_ARGUMENT naming the entry unless every entry is a view number, none repeated.
absl::Status CheckViews(const std::vector<int64_t>& views, int64_t count);

// The views grouped by stored view, view[k] = the view's slot in `views` (vectors laid out
// view by view in that order); step_scale 0. Errors as CheckViews.
absl::StatusOr<std::vector<OrbitBlock>> GroupViews(const SymmetricSystemMatrix& a,
                                                   const std::vector<int64_t>& views);

}  // namespace tomo::core::system_matrix::cuda
