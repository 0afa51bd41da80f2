#include "core/system_matrix/matrix_memory.h"

#include <gtest/gtest.h>

#include "core/system_matrix/csr_system_matrix.h"
#include "core/system_matrix/symmetric_system_matrix.h"
#include "tests/core/system_matrix/fan_cases.h"

namespace tomo::core::system_matrix {
namespace {

TEST(MatrixMemoryTest, CountsEqualTheBuiltMatrices) {
  for (const FanCase& c : SymmetricFanCases()) {
    SCOPED_TRACE(c.name);
    const FanScan scan = ScanOf(c);
    const MatrixBytes need = EstimateMatrixBytes(scan, MatrixFormat::kAutomatic).value();
    EXPECT_EQ(need.format, MatrixFormat::kSymmetric);
    EXPECT_EQ(need.symmetry, "eight-fold");
    EXPECT_EQ(need.bytes, SymmetricSystemMatrix::Build(scan).value().bytes());
    // The CSR figure is that of the symmetric matrix expanded; a CSR matrix computed
    // directly for every view may differ by the odd pixel a ray only grazes (rounding).
    const CsrSystemMatrix csr = SymmetricSystemMatrix::Build(scan).value().ExpandToCsr();
    EXPECT_EQ(need.csr_bytes, csr.bytes());
    EXPECT_EQ(need.nonzeros, csr.nonzeros());
    EXPECT_EQ(EstimateMatrixBytes(scan, MatrixFormat::kCsr).value().bytes, csr.bytes());
    EXPECT_NEAR(static_cast<double>(CsrSystemMatrix::Build(scan).nonzeros()),
                static_cast<double>(need.nonzeros), 1e-3 * need.nonzeros);
  }
  for (const FanCase& c : AsymmetricFanCases()) {
    SCOPED_TRACE(c.name);
    const FanScan scan = ScanOf(c);
    const MatrixBytes need = EstimateMatrixBytes(scan, MatrixFormat::kAutomatic).value();
    EXPECT_EQ(need.format, MatrixFormat::kCsr);
    EXPECT_EQ(need.bytes, CsrSystemMatrix::Build(scan).bytes());
    EXPECT_EQ(EstimateMatrixBytes(scan, MatrixFormat::kSymmetric).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

TEST(MatrixMemoryTest, RefusesOverBudgetNamingBytesAndBudget) {
  const FanScan scan = ScanOf(SymmetricFanCases()[0]);
  const MatrixBytes need = EstimateMatrixBytes(scan, MatrixFormat::kAutomatic).value();
  EXPECT_TRUE(CheckMatrixFitsBudget(need, 0).ok());
  EXPECT_TRUE(CheckMatrixFitsBudget(need, need.bytes).ok());
  const absl::Status refused = CheckMatrixFitsBudget(need, need.bytes - 1);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            absl::StrCat("stored system matrix (symmetric format) needs ", need.bytes,
                         " bytes, over the memory budget of ", need.bytes - 1, " bytes"));
}

}  // namespace
}  // namespace tomo::core::system_matrix
