#include "core/system_matrix/stored_matrix.h"

#include <utility>

#include "core/base/status_macros.h"
#include "core/system_matrix/fan_scan.h"

namespace tomo::core::system_matrix {

std::unique_ptr<ViewBlocks> StoredMatrix::Blocks(int64_t views_per_block) const {
  if (symmetric_) return std::make_unique<SymmetricViewBlocks>(*symmetric_);
  return std::make_unique<CsrViewBlocks>(*csr_, views_per_block == 0 ? 1 : views_per_block);
}

absl::StatusOr<StoredMatrix> BuildStoredMatrix(const VectorGeometry& geometry,
                                               const VolumeGeometry& volume, MatrixFormat format,
                                               uint64_t budget_bytes, int threads) {
  TOMO_ASSIGN_OR_RETURN(const FanScan scan, FanScan::Create(geometry, volume));
  StoredMatrix matrix;
  TOMO_ASSIGN_OR_RETURN(matrix.need_, EstimateMatrixBytes(scan, format, threads));
  TOMO_RETURN_IF_ERROR(CheckMatrixFitsBudget(matrix.need_, budget_bytes));
  if (matrix.need_.format == MatrixFormat::kSymmetric) {
    TOMO_ASSIGN_OR_RETURN(SymmetricSystemMatrix a, SymmetricSystemMatrix::Build(scan, threads));
    matrix.symmetric_.emplace(std::move(a));
  } else if (DetectSquareSymmetry(scan).eight_fold) {
    // CSR asked for on a symmetric scan: expanded from the stored views (an eighth of the
    // work, and the rows the count was made from).
    TOMO_ASSIGN_OR_RETURN(SymmetricSystemMatrix a, SymmetricSystemMatrix::Build(scan, threads));
    matrix.csr_.emplace(a.ExpandToCsr(threads));
  } else {
    matrix.csr_.emplace(CsrSystemMatrix::Build(scan, threads));
  }
  return matrix;
}

absl::StatusOr<ArtResult> RunStoredArt(const StoredMatrix& matrix, const Array3D& projections,
                                       const ArtOptions& options, const RunContext& context) {
  const bool symmetric = matrix.symmetric() != nullptr;
  TOMO_RETURN_IF_ERROR(ValidateArtOptions(
      options, symmetric, symmetric ? matrix.symmetric()->scan().num_views() : matrix.csr()->views()));
  const std::unique_ptr<ViewBlocks> blocks = matrix.Blocks(options.views_per_block);
  return RunBlockArt(*blocks, projections, options, symmetric, context);
}

absl::StatusOr<MatrixBytes> EstimateMatrixBytes(const VectorGeometry& geometry,
                                                const VolumeGeometry& volume, MatrixFormat format) {
  TOMO_ASSIGN_OR_RETURN(const FanScan scan, FanScan::Create(geometry, volume));
  return EstimateMatrixBytes(scan, format);
}

}  // namespace tomo::core::system_matrix
