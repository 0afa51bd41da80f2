#include "core/geometry/parallel_geometry_2d.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

absl::Status CreateStatus(int64_t n, double spacing, double offset, std::vector<double> angles) {
  return ParallelGeometry2D::Create(n, spacing, offset, std::move(angles)).status();
}

TEST(ParallelGeometry2DTest, AcceptsValidInput) {
  auto geometry = ParallelGeometry2D::Create(768, 0.5, -1.25, {0.0, 0.1, 0.2});
  ASSERT_TRUE(geometry.ok()) << geometry.status();
  EXPECT_EQ(geometry->num_detectors(), 768);
  EXPECT_EQ(geometry->num_views(), 3);
  EXPECT_EQ(geometry->detector_spacing_mm(), 0.5);
  EXPECT_EQ(geometry->detector_offset_mm(), -1.25);
  EXPECT_EQ(geometry->projection_dims(), (Dims3{3, 1, 768}));
}

TEST(ParallelGeometry2DTest, NumDetectorsOutOfRangeNamesFieldValueAndRange) {
  for (int64_t n : {int64_t{0}, int64_t{-3}, ParallelGeometry2D::kMaxDetectors + 1}) {
    const absl::Status status = CreateStatus(n, 1.0, 0.0, {0.0});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), absl::StrCat("num_detectors: ", n, " is out of range [1, 65536]"));
  }
  EXPECT_TRUE(CreateStatus(ParallelGeometry2D::kMaxDetectors, 1.0, 0.0, {0.0}).ok());
  EXPECT_TRUE(CreateStatus(1, 1.0, 0.0, {0.0}).ok());
}

TEST(ParallelGeometry2DTest, DetectorSpacingMustBeFiniteAndPositive) {
  EXPECT_EQ(CreateStatus(10, -1.0, 0.0, {0.0}).message(),
            "detector_spacing_mm: -1 must be a finite value > 0");
  EXPECT_EQ(CreateStatus(10, 0.0, 0.0, {0.0}).message(),
            "detector_spacing_mm: 0 must be a finite value > 0");
  EXPECT_THAT(CreateStatus(10, kNaN, 0.0, {0.0}).message(),
              HasSubstr("detector_spacing_mm: nan must be a finite value > 0"));
  EXPECT_THAT(CreateStatus(10, kInf, 0.0, {0.0}).message(),
              HasSubstr("detector_spacing_mm: inf must be a finite value > 0"));
  EXPECT_EQ(CreateStatus(10, kInf, 0.0, {0.0}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParallelGeometry2DTest, DetectorOffsetMustBeFinite) {
  const absl::Status status = CreateStatus(10, 1.0, -kInf, {0.0});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "detector_offset_mm: -inf must be a finite value");
  EXPECT_TRUE(CreateStatus(10, 1.0, -12.5, {0.0}).ok());
}

TEST(ParallelGeometry2DTest, AnglesMustBeNonEmptyAndFinite) {
  const absl::Status empty = CreateStatus(10, 1.0, 0.0, {});
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.message(), "angles: 0 views is out of range [1, 1048576]");

  EXPECT_EQ(CreateStatus(10, 1.0, 0.0, {0.0, 0.1, kNaN}).message(), "angles: 3rd value is NaN");
  EXPECT_EQ(CreateStatus(10, 1.0, 0.0, {kNaN}).message(), "angles: 1st value is NaN");
  EXPECT_THAT(CreateStatus(10, 1.0, 0.0, {0.0, kInf}).message(),
              HasSubstr("angles: 2nd value is inf"));
  std::vector<double> twelve(12, 0.0);
  twelve[11] = -kInf;
  EXPECT_THAT(CreateStatus(10, 1.0, 0.0, twelve).message(),
              HasSubstr("angles: 12th value is -inf"));
  std::vector<double> many(23, 0.0);
  many[20] = kNaN;
  EXPECT_EQ(CreateStatus(10, 1.0, 0.0, many).message(), "angles: 21st value is NaN");
}

TEST(ParallelGeometry2DTest, UniformAnglesSpanWithoutTheEndPoint) {
  const std::vector<double> angles = ParallelGeometry2D::UniformAngles(4, 0.5, M_PI);
  ASSERT_EQ(angles.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(angles[i], 0.5 + i * M_PI / 4);
  EXPECT_TRUE(ParallelGeometry2D::UniformAngles(0, 0.0, M_PI).empty());
  const std::vector<double> full = ParallelGeometry2D::UniformAngles(720, 0.0, 2 * M_PI);
  EXPECT_EQ(full.size(), 720u);
  EXPECT_DOUBLE_EQ(full[180], M_PI / 2);  // exact quarter turns matter for 45-degree cases
  EXPECT_DOUBLE_EQ(full[719], 2 * M_PI * 719 / 720);
}

TEST(ParallelGeometry2DTest, DetectorPositionsAreCentredPlusOffset) {
  auto even = ParallelGeometry2D::Create(4, 0.5, 1.0, {0.0});
  ASSERT_TRUE(even.ok());
  EXPECT_DOUBLE_EQ(even->detector_position_mm(0), 1.0 - 0.75);
  EXPECT_DOUBLE_EQ(even->detector_position_mm(3), 1.0 + 0.75);
  EXPECT_DOUBLE_EQ(even->detector_position_mm(1.5), 1.0);  // the centre lies between 1 and 2

  auto odd = ParallelGeometry2D::Create(5, 2.0, 0.0, {0.0});
  ASSERT_TRUE(odd.ok());
  EXPECT_DOUBLE_EQ(odd->detector_position_mm(2), 0.0);
  EXPECT_DOUBLE_EQ(odd->detector_position_mm(0), -4.0);
  EXPECT_DOUBLE_EQ(odd->detector_position_mm(4), 4.0);
}

}  // namespace
}  // namespace tomo::core
