// Matrix memory: the bytes a stored system matrix would take, found by the counting pass
// alone (the extent of every ray in every pixel row, no weights), so that a job can be
// refused before anything is built. With the square symmetry only the stored views are
// counted (an eighth of the rows) even for the CSR figure, since the other views' rows are
// images of theirs with the same lengths.
//
//   TOMO_ASSIGN_OR_RETURN(MatrixBytes need, EstimateMatrixBytes(scan, MatrixFormat::kAutomatic));
//   TOMO_RETURN_IF_ERROR(CheckMatrixFitsBudget(need, context.memory_budget_bytes));
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/system_matrix/fan_scan.h"

namespace tomo::core::system_matrix {

enum class MatrixFormat { kAutomatic, kCsr, kSymmetric };
const char* MatrixFormatName(MatrixFormat format);

struct MatrixBytes {
  MatrixFormat format = MatrixFormat::kCsr;  // the one chosen (kAutomatic resolved)
  uint64_t bytes = 0;                        // of that format
  uint64_t csr_bytes = 0;                    // of CSR, for comparison
  int64_t nonzeros = 0;                      // of the whole matrix
  std::string symmetry;                      // "eight-fold" or why not
};

// kAutomatic: symmetric when the scan has the square symmetry, else CSR. kSymmetric on a
// scan without it: FAILED_PRECONDITION with the reason.
absl::StatusOr<MatrixBytes> EstimateMatrixBytes(const FanScan& scan, MatrixFormat format,
                                                int threads = 0);

// RESOURCE_EXHAUSTED naming the format, the bytes needed and the budget when
// bytes > budget_bytes; budget 0 means no limit.
absl::Status CheckMatrixFitsBudget(const MatrixBytes& need, uint64_t budget_bytes);

}  // namespace tomo::core::system_matrix
