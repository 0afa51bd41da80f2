#include "core/system_matrix/stored_matrix.h"

#include <gtest/gtest.h>

#include "core/phantom/ellipsoid_phantom.h"
#include "tests/core/system_matrix/fan_cases.h"

namespace tomo::core::system_matrix {
namespace {

TEST(StoredMatrixTest, ChoosesTheFormatAndSaysWhy) {
  const FanCase symmetric = SymmetricFanCases()[0];
  auto automatic = BuildStoredMatrix(symmetric.geometry, symmetric.volume,
                                     MatrixFormat::kAutomatic, 0);
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_EQ(automatic->format(), MatrixFormat::kSymmetric);
  EXPECT_EQ(automatic->symmetry(), "eight-fold");
  ASSERT_NE(automatic->symmetric(), nullptr);
  EXPECT_EQ(automatic->csr(), nullptr);
  EXPECT_EQ(automatic->bytes(), automatic->symmetric()->bytes());

  auto csr = BuildStoredMatrix(symmetric.geometry, symmetric.volume, MatrixFormat::kCsr, 0);
  ASSERT_TRUE(csr.ok()) << csr.status();
  ASSERT_NE(csr->csr(), nullptr);
  EXPECT_EQ(csr->bytes(), csr->csr()->bytes());
  EXPECT_EQ(csr->csr()->nonzeros(), automatic->symmetric()->represented_nonzeros());

  for (const FanCase& c : AsymmetricFanCases()) {
    SCOPED_TRACE(c.name);
    auto fallback = BuildStoredMatrix(c.geometry, c.volume, MatrixFormat::kAutomatic, 0);
    ASSERT_TRUE(fallback.ok()) << fallback.status();
    EXPECT_EQ(fallback->format(), MatrixFormat::kCsr);
    EXPECT_NE(fallback->symmetry(), "eight-fold");
    EXPECT_EQ(fallback->bytes(), fallback->csr()->bytes());
    EXPECT_EQ(BuildStoredMatrix(c.geometry, c.volume, MatrixFormat::kSymmetric, 0).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

TEST(StoredMatrixTest, RefusesOverTheBudgetBeforeBuilding) {
  const FanCase c = SymmetricFanCases()[0];
  const MatrixBytes need =
      EstimateMatrixBytes(c.geometry, c.volume, MatrixFormat::kAutomatic).value();
  auto refused = BuildStoredMatrix(c.geometry, c.volume, MatrixFormat::kAutomatic, need.bytes / 2);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find(absl::StrCat("needs ", need.bytes, " bytes")),
            std::string::npos);
  EXPECT_TRUE(BuildStoredMatrix(c.geometry, c.volume, MatrixFormat::kAutomatic, need.bytes).ok());
}

TEST(StoredMatrixTest, RejectsWhatIsNotA2DFanBeam) {
  const FanCase c = SymmetricFanCases()[0];
  const VectorGeometry parallel =
      MakeParallel2D({1, 40, 1.0, 0.7, 0, 0}, UniformAnglesRad(16, 0, M_PI)).value();
  EXPECT_EQ(BuildStoredMatrix(parallel, c.volume, MatrixFormat::kAutomatic, 0).status().message(),
            "beam: parallel is not supported by the stored system matrix (2D fan beam only)");
  const VolumeGeometry slab = VolumeGeometry::Create({25, 25, 3}, {0.7, 0.7, 0.7}, {}).value();
  EXPECT_EQ(BuildStoredMatrix(c.geometry, slab, MatrixFormat::kAutomatic, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StoredMatrixTest, RunsArtOnEitherFormat) {
  const EllipsePhantom phantom = EllipsePhantom::ModifiedSheppLogan(7.5);
  std::vector<FanCase> cases = {SymmetricFanCases()[0], AsymmetricFanCases()[2]};
  for (const FanCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Array3D sinogram = EllipsoidPhantom::ExtrudedFrom(phantom).Project(c.geometry, 2);
    const StoredMatrix m =
        BuildStoredMatrix(c.geometry, c.volume, MatrixFormat::kAutomatic, 0).value();
    ArtOptions options;
    options.iterations = 5;
    auto art = RunStoredArt(m, sinogram, options, {});
    ASSERT_TRUE(art.ok()) << art.status();
    EXPECT_LT(art->relative_residuals.back(), art->relative_residuals.front());
    options.views_per_block = 4;
    EXPECT_EQ(RunStoredArt(m, sinogram, options, {}).status().code(),
              m.symmetric() ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kOk);
  }
}

}  // namespace
}  // namespace tomo::core::system_matrix
