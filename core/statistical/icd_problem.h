// IcdProblem: a PWLS problem laid out as ICD works on it, on the host, shared by the CPU
// reference and the CUDA runner (which uploads it):
//   volume    z fastest: voxel (ix, iy, iz) at (iy nx + ix) nz + iz, so that a group (one
//             column, slices apart along z) is one short stretch of memory;
//   residual  e = A x - y and the weights w, both (view, column, row), rows fastest, so
//             that the voxels of a column touch nearby memory in every view.
// Also the visiting order of the columns (a permutation drawn from the seed).
//
//   TOMO_ASSIGN_OR_RETURN(IcdProblem problem, PrepareIcdProblem(sf, y, w, start, options,
//                                                               ResidualStart::kCompute));
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/statistical/icd_options.h"
#include "core/statistical/separable_footprint.h"

namespace tomo::core::statistical {

struct IcdProblem {
  Size3 size;
  int64_t views = 0, rows = 0, columns = 0;
  std::vector<float> volume;    // z fastest
  std::vector<float> residual;  // (view, column, row); empty for ResidualStart::kLeaveEmpty
  std::vector<float> weights;   // (view, column, row)
  std::vector<float> line_integrals;  // y, (view, column, row)
  double line_integrals_norm2 = 0;
  std::vector<int32_t> column_order;  // iy nx + ix, each once
};

enum class ResidualStart {
  kCompute,     // residual = A x0 - y by the CPU projector
  kLeaveEmpty,  // the caller computes it (the device does, for large problems)
};

// INVALID_ARGUMENT (naming the argument) when: options are invalid; line_integrals or
// weights do not have the projector's dims, or start_volume (may be null: zeros) the
// volume's; a weight is negative or any value not finite. A negative start value is
// clipped to 0 (the constraint).
absl::StatusOr<IcdProblem> PrepareIcdProblem(const SeparableFootprintProjector& projector,
                                             const Array3D& line_integrals,
                                             const Array3D& weights,
                                             const Array3D* start_volume,
                                             const IcdOptions& options, ResidualStart residual);

// The volume back in (z, y, x).
Array3D VolumeFromZFastest(const std::vector<float>& volume, const Size3& size);

// Index of (view, row, column) in the (view, column, row) layout.
inline int64_t ViewColumnRowIndex(int64_t view, int64_t row, int64_t column, int64_t rows,
                                  int64_t columns) {
  return (view * columns + column) * rows + row;
}

// 1/2 sum w e^2 from a residual and weights in the same layout.
double HalfWeightedSquares(const std::vector<float>& residual, const std::vector<float>& weights);

}  // namespace tomo::core::statistical
