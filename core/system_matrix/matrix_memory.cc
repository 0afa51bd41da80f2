#include "core/system_matrix/matrix_memory.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/system_matrix/csr_system_matrix.h"
#include "core/system_matrix/square_symmetry.h"
#include "core/system_matrix/strip_weights.h"
#include "core/system_matrix/symmetric_system_matrix.h"

namespace tomo::core::system_matrix {

const char* MatrixFormatName(MatrixFormat format) {
  switch (format) {
    case MatrixFormat::kAutomatic: return "automatic";
    case MatrixFormat::kCsr: return "csr";
    case MatrixFormat::kSymmetric: return "symmetric";
  }
  return "unknown";
}

absl::StatusOr<MatrixBytes> EstimateMatrixBytes(const FanScan& scan, MatrixFormat format,
                                                int threads) {
  const SymmetryReport symmetry = DetectSquareSymmetry(scan);
  if (format == MatrixFormat::kSymmetric && !symmetry.eight_fold) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the scan lacks the square symmetry of the compressed format: ", symmetry.reason));
  }
  const StripWeights weights(scan);
  const int64_t columns = scan.columns();
  // Views to count: the stored ones with the symmetry, else all.
  std::vector<int64_t> counted;
  if (symmetry.eight_fold) {
    counted = symmetry.stored_views;
  } else {
    for (int64_t v = 0; v < scan.num_views(); ++v) counted.push_back(v);
  }
  std::vector<RowCount> per_row(counted.size() * static_cast<size_t>(columns));
  ParallelFor(static_cast<int64_t>(per_row.size()), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      per_row[static_cast<size_t>(r)] =
          weights.CountRow(counted[static_cast<size_t>(r / columns)], r % columns);
    }
  }, threads);
  MatrixBytes need;
  StoredRowCounts stored;
  stored.rows = static_cast<int64_t>(per_row.size());
  for (size_t i = 0; i < counted.size(); ++i) {
    int64_t entries = 0;
    for (int64_t c = 0; c < columns; ++c) {
      const RowCount& row = per_row[i * static_cast<size_t>(columns) + static_cast<size_t>(c)];
      entries += row.entries;
      stored.runs += row.runs;
    }
    stored.nonzeros += entries;
    need.nonzeros += entries * (symmetry.eight_fold
                                    ? static_cast<int64_t>(symmetry.orbits[i].size())
                                    : 1);
  }
  need.csr_bytes = CsrSystemMatrix::BytesFor(scan.rows(), need.nonzeros);
  need.symmetry = symmetry.eight_fold ? "eight-fold" : symmetry.reason;
  const bool symmetric = format == MatrixFormat::kSymmetric ||
                         (format == MatrixFormat::kAutomatic && symmetry.eight_fold);
  need.format = symmetric ? MatrixFormat::kSymmetric : MatrixFormat::kCsr;
  need.bytes = symmetric ? SymmetricSystemMatrix::BytesFor(scan.num_views(), stored)
                         : need.csr_bytes;
  return need;
}

absl::Status CheckMatrixFitsBudget(const MatrixBytes& need, uint64_t budget_bytes) {
  if (budget_bytes == 0 || need.bytes <= budget_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "stored system matrix (", MatrixFormatName(need.format), " format) needs ", need.bytes,
      " bytes, over the memory budget of ", budget_bytes, " bytes"));
}

}  // namespace tomo::core::system_matrix
