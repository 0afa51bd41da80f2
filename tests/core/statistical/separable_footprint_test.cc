// Tests of SeparableFootprintProjector (core/statistical/separable_footprint.cc): projections
// of analytic ellipsoid phantoms against their exact pixel-averaged line integrals (circular
// and helical cones, anisotropic voxels and pixels, offsets), the adjoint pair
// <A x, y> = <x, A^T y>, VoxelFootprint against Forward of a single voxel, and the
// geometries the model refuses.
#include "core/statistical/separable_footprint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/geometry/geometry_builders.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_arrays.h"
#include "tests/core/random_seed.h"

namespace tomo::core::statistical {
namespace {

using ::testing::HasSubstr;
using testing::RandomAngles;
using testing::RandomArray;

double RelativeRms(const Array3D& value, const Array3D& reference) {
  double error = 0, norm = 0;
  for (int64_t i = 0; i < value.size(); ++i) {
    const double d = value.data()[i] - reference.data()[i];
    error += d * d;
    norm += static_cast<double>(reference.data()[i]) * reference.data()[i];
  }
  return std::sqrt(error / norm);
}

double Dot(const Array3D& a, const Array3D& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.size(); ++i) sum += static_cast<double>(a.data()[i]) * b.data()[i];
  return sum;
}

FanConeOptions Cone(int64_t rows, int64_t columns, double row_mm, double column_mm,
                    std::vector<double> angles) {
  FanConeOptions cone;
  cone.detector.rows = rows;
  cone.detector.columns = columns;
  cone.detector.row_spacing_mm = row_mm;
  cone.detector.column_spacing_mm = column_mm;
  cone.source_origin_mm = 90;
  cone.origin_detector_mm = 70;
  cone.angles_rad = std::move(angles);
  return cone;
}

// Smooth-edged content is not available analytically, so the error is dominated by the
// voxelisation of the ellipsoids' edges; large, low-contrast ellipsoids keep it small.
EllipsoidPhantom Phantom(std::mt19937_64& random) {
  std::uniform_real_distribution<double> jitter(-0.5, 0.5);
  std::vector<Ellipsoid> ellipsoids = {{{0, 0, 0}, {9, 8, 7}, 0.3, 0.02},
                                       {{2, 1, 1}, {3.5, 2.5, 3}, -0.4, 0.01},
                                       {{-3, -2, -2}, {2.5, 3, 2.5}, 0.0, -0.008}};
  for (Ellipsoid& e : ellipsoids) {
    e.center_mm = e.center_mm + Vec3{jitter(random), jitter(random), jitter(random)};
  }
  return EllipsoidPhantom(std::move(ellipsoids));
}

struct Case {
  std::string name;
  VectorGeometry geometry;
  VolumeGeometry volume;
};

std::vector<Case> Cases(std::mt19937_64& random) {
  std::vector<Case> cases;
  // Anisotropic voxels and pixels, none 1 mm; odd and non-square sizes.
  const VolumeGeometry volume =
      VolumeGeometry::Create({45, 41, 35}, {0.47, 0.52, 0.61}, {0.3, -0.2, 0.4}).value();
  FanConeOptions cone = Cone(48, 67, 0.83, 0.59, RandomAngles(7, random));
  cone.detector.offset_u_mm = 1.7;
  cone.detector.offset_v_mm = -0.9;
  cases.push_back({"circular cone", MakeCircularCone(cone).value(), volume});
  HelicalOptions helical;
  helical.cone = Cone(21, 67, 0.83, 0.59, UniformAnglesRad(9, 0.2, 4 * M_PI));
  helical.pitch_mm_per_turn = 9;
  helical.z_start_mm = -9;
  cases.push_back({"helical cone", MakeHelicalCone(helical).value(), volume});
  return cases;
}

TEST(SeparableFootprintProjectorTest, ForwardMatchesExactPixelAveragedLineIntegrals) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (const Case& c : Cases(random)) {
    SCOPED_TRACE(c.name);
    const EllipsoidPhantom phantom = Phantom(random);
    auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume);
    ASSERT_TRUE(sf.ok()) << sf.status();
    auto projections = sf->Forward(phantom.Rasterize(c.volume, 3));
    ASSERT_TRUE(projections.ok()) << projections.status();
    // The oracle: exact line integrals averaged over 3 x 3 points of each pixel, what the
    // footprint (a mean over the pixel) models. Measured relative RMS errors: 0.021-0.024
    // at these voxels of about 0.5 mm, 0.007 with voxels half as large (the error is the
    // voxelisation of the ellipsoids' edges and falls faster than the voxel size; a wrong
    // magnification or amplitude would not). Bound 0.035.
    const double error = RelativeRms(*projections, phantom.Project(c.geometry, 3));
    std::printf("[ measure ] SF forward, %s: relative RMS error %.4f\n", c.name.c_str(), error);
    EXPECT_LT(error, 0.035);
  }
}

TEST(SeparableFootprintProjectorTest, ForwardAndBackAreAnAdjointPair) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (const Case& c : Cases(random)) {
    SCOPED_TRACE(c.name);
    auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume);
    ASSERT_TRUE(sf.ok()) << sf.status();
    const Array3D x = RandomArray(c.volume.dims(), random);
    const Array3D y = RandomArray(c.geometry.projection_dims(), random);
    const Array3D ax = sf->Forward(x).value();
    const Array3D aty = sf->Back(y).value();
    const double left = Dot(ax, y), right = Dot(x, aty);
    // Both sides sum the same float64 products; the float32 outputs round each element to
    // 6e-8 relative.
    EXPECT_NEAR(left / right, 1.0, 1e-6) << left << " vs " << right;
    EXPECT_GT(left, 0);
  }
}

TEST(SeparableFootprintProjectorTest, VoxelFootprintIsTheForwardProjectionOfOneVoxel) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::vector<Case> cases = Cases(random);
  const Case& c = cases[0];
  auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume).value();
  std::uniform_int_distribution<int64_t> pick_x(0, c.volume.size().x - 1);
  std::uniform_int_distribution<int64_t> pick_y(0, c.volume.size().y - 1);
  std::uniform_int_distribution<int64_t> pick_z(0, c.volume.size().z - 1);
  for (int trial = 0; trial < 3; ++trial) {
    const int64_t ix = pick_x(random), iy = pick_y(random), iz = pick_z(random);
    Array3D one(c.volume.dims());
    one.at(iz, iy, ix) = 1;
    const Array3D projection = sf.Forward(one).value();
    Array3D from_footprint(c.geometry.projection_dims());
    const std::vector<FootprintEntry> entries = sf.VoxelFootprint(ix, iy, iz);
    ASSERT_FALSE(entries.empty());
    for (const FootprintEntry& e : entries) {
      EXPECT_GT(e.weight, 0);
      from_footprint.at(e.view, e.row, e.column) += static_cast<float>(e.weight);
    }
    for (int64_t i = 0; i < projection.size(); ++i) {
      ASSERT_NEAR(from_footprint.data()[i], projection.data()[i], 1e-6) << "element " << i;
    }
    // A voxel's projection integrates to its volume over the magnified detector area:
    // sum a_ij * pixel area ~ voxel volume * magnification^2 * sec; only check the order.
    double total = 0;
    for (const FootprintEntry& e : entries) total += e.weight;
    EXPECT_GT(total, 0);
  }
}

// A detector whose v points down the axis is the same detector with its rows in the other
// order; likewise a u reversed reverses the columns.
TEST(SeparableFootprintProjectorTest, ReversedDetectorVectorsReverseRowsAndColumns) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::vector<Case> cases = Cases(random);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<ViewVectors> flipped = c.geometry.views();
    for (ViewVectors& view : flipped) {
      view.u = -1.0 * view.u;
      view.v = -1.0 * view.v;
    }
    const VectorGeometry other = VectorGeometry::Create(BeamKind::kCone, DetectorShape::kFlat,
                                                        c.geometry.rows(), c.geometry.columns(),
                                                        flipped)
                                     .value();
    const Array3D x = RandomArray(c.volume.dims(), random);
    const Array3D a = SeparableFootprintProjector::Create(c.geometry, c.volume)->Forward(x).value();
    const Array3D b = SeparableFootprintProjector::Create(other, c.volume)->Forward(x).value();
    const Dims3 d = a.dims();
    double max_difference = 0, max_value = 0;
    for (int64_t v = 0; v < d.d0; ++v) {
      for (int64_t r = 0; r < d.d1; ++r) {
        for (int64_t col = 0; col < d.d2; ++col) {
          max_difference = std::max<double>(
              max_difference, std::abs(a.at(v, r, col) - b.at(v, d.d1 - 1 - r, d.d2 - 1 - col)));
          max_value = std::max<double>(max_value, std::abs(a.at(v, r, col)));
        }
      }
    }
    EXPECT_LT(max_difference, 1e-5 * max_value);
    EXPECT_GT(max_value, 0);
  }
}

TEST(SeparableFootprintProjectorTest, RefusesGeometriesTheModelCannotTake) {
  const VolumeGeometry volume = VolumeGeometry::Create({8, 8, 8}, {1, 1, 1}, {}).value();
  FanConeOptions cone = Cone(8, 16, 1, 1, UniformAnglesRad(4, 0, 2 * M_PI));
  const VectorGeometry flat = MakeCircularCone(cone).value();

  std::vector<ViewVectors> tilted = flat.views();
  tilted[2].v = Vec3{0.05, 0, 1};
  auto bad_v = SeparableFootprintProjector::Create(
      VectorGeometry::Create(BeamKind::kCone, DetectorShape::kFlat, 8, 16, tilted).value(),
      volume);
  ASSERT_FALSE(bad_v.ok());
  EXPECT_EQ(bad_v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_v.status().message(), HasSubstr("views[2].v"));
  EXPECT_THAT(bad_v.status().message(), HasSubstr("parallel to the rotation axis"));

  std::vector<ViewVectors> rolled = flat.views();
  rolled[1].u = rolled[1].u + Vec3{0, 0, 0.1};
  auto bad_u = SeparableFootprintProjector::Create(
      VectorGeometry::Create(BeamKind::kCone, DetectorShape::kFlat, 8, 16, rolled).value(),
      volume);
  ASSERT_FALSE(bad_u.ok());
  EXPECT_THAT(bad_u.status().message(), HasSubstr("views[1].u"));

  FanConeOptions cylinder = cone;
  cylinder.shape = DetectorShape::kCylindrical;
  auto curved =
      SeparableFootprintProjector::Create(MakeCircularCone(cylinder).value(), volume);
  ASSERT_FALSE(curved.ok());
  EXPECT_THAT(curved.status().message(), HasSubstr("flat detector"));

  DetectorLayout layout{8, 16, 1, 1, 0, 0};
  auto parallel = SeparableFootprintProjector::Create(
      MakeParallel3D(layout, UniformAnglesRad(4, 0, M_PI)).value(), volume);
  ASSERT_FALSE(parallel.ok());
  EXPECT_THAT(parallel.status().message(), HasSubstr("cone beams only"));

  // A volume beside the source (at (0, 90, 0) in view 0), reaching behind it.
  const VolumeGeometry beside =
      VolumeGeometry::Create({8, 8, 8}, {1, 1, 1}, {10, 90, 0}).value();
  auto behind = SeparableFootprintProjector::Create(flat, beside);
  ASSERT_FALSE(behind.ok());
  EXPECT_EQ(behind.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(behind.status().message(), HasSubstr("in front of"));

  auto sf = SeparableFootprintProjector::Create(flat, volume).value();
  auto wrong = sf.Forward(Array3D({8, 8, 7}));
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("volume"));
}

}  // namespace
}  // namespace tomo::core::statistical
