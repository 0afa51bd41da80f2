#include "core/operators/cpu/cpu_radon_projector.h"

#include <cmath>
#include <random>
#include <vector>

#include "core/phantom/ellipsoid_phantom.h"
#include "core/phantom/ellipsoid_radon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_arrays.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

double Dot(const Array3D& a, const Array3D& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.size(); ++i) sum += static_cast<double>(a.data()[i]) * b.data()[i];
  return sum;
}

RadonGeometry RandomDirections(int count, int64_t samples, double spacing,
                               std::mt19937_64& random) {
  std::uniform_real_distribution<double> phi(-M_PI, M_PI), cos_theta(-1, 1), weight(0.05, 0.5);
  RadonGeometry g;
  g.num_samples = samples;
  g.sample_spacing_mm = spacing;
  for (int i = 0; i < count; ++i) {
    g.directions.push_back({phi(random), std::acos(cos_theta(random)), weight(random)});
  }
  return g;
}

TEST(CpuRadonProjectorTest, BackIsTheExactAdjointAtAnisotropicOffsetVoxels) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  auto volume_geometry = VolumeGeometry::Create({17, 12, 9}, {0.3, 0.45, 0.7}, {0.8, -1.1, 0.35});
  ASSERT_TRUE(volume_geometry.ok());
  // 25 samples of 0.27 mm (6.5 mm) do not cover the 6.9 mm diagonal: some voxels fall off
  // the ends, where the pair must still be exact.
  for (int64_t samples : {25, 40}) {
    SCOPED_TRACE(samples);
    const RadonGeometry g = RandomDirections(23, samples, 0.27, random);
    ASSERT_TRUE(ValidateRadonGeometry(g).ok());
    const Array3D x = testing::RandomArray(volume_geometry->dims(), random);
    const Array3D y = testing::RandomArray(g.projection_dims(), random);
    Array3D ax(g.projection_dims(), NAN), aty(volume_geometry->dims(), NAN);
    ASSERT_TRUE(RadonForwardCpu(g, *volume_geometry, x, ax, 3).ok());
    ASSERT_TRUE(RadonBackCpu(g, *volume_geometry, y, aty, 2).ok());
    const double lhs = Dot(ax, y), rhs = Dot(x, aty);
    EXPECT_GT(lhs, 0.0);
    EXPECT_NEAR(lhs, rhs, 2e-6 * std::abs(lhs));
  }
}

TEST(CpuRadonProjectorTest, BackIsTheExactAdjointAtEveryVoxelSize) {
  // The pair's units (value * mm^2 out of the forward projector, V / dt into the back
  // projector) must make it adjoint at any scale, not only at 1 mm; samples of 0.8 voxel.
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (double voxel : {0.1, 0.25, 0.5, 1.0, 2.0}) {
    SCOPED_TRACE(voxel);
    auto volume_geometry = VolumeGeometry::Create({11, 14, 7}, {voxel, 1.3 * voxel, 0.9 * voxel},
                                                  {0.5 * voxel, -2 * voxel, voxel});
    ASSERT_TRUE(volume_geometry.ok());
    const RadonGeometry g = RandomDirections(17, 30, 0.8 * voxel, random);
    const Array3D x = testing::RandomArray(volume_geometry->dims(), random);
    const Array3D y = testing::RandomArray(g.projection_dims(), random);
    Array3D ax(g.projection_dims(), NAN), aty(volume_geometry->dims(), NAN);
    ASSERT_TRUE(RadonForwardCpu(g, *volume_geometry, x, ax, 2).ok());
    ASSERT_TRUE(RadonBackCpu(g, *volume_geometry, y, aty, 2).ok());
    const double lhs = Dot(ax, y), rhs = Dot(x, aty);
    EXPECT_NEAR(lhs, rhs, 2e-6 * std::abs(lhs));
  }
}

TEST(CpuRadonProjectorTest, ForwardKeepsEachDirectionsMassAndPlacesAVoxelByLinearInterpolation) {
  auto volume_geometry = VolumeGeometry::Create({5, 4, 3}, {0.5, 0.25, 1.5}, {1, 2, -3});
  ASSERT_TRUE(volume_geometry.ok());
  RadonGeometry g;
  g.directions = {{0.3, 0.9, 1}, {2.0, 2.2, 1}, {-1.0, 0.1, 1}};
  g.num_samples = 41;
  g.sample_spacing_mm = 0.4;
  Array3D volume(volume_geometry->dims());
  volume.at(2, 1, 3) = 2.0f;  // voxel (x 3, y 1, z 2)
  Array3D projections(g.projection_dims(), NAN);
  ASSERT_TRUE(RadonForwardCpu(g, *volume_geometry, volume, projections, 1).ok());
  const Vec3 centre{volume_geometry->x_mm(3), volume_geometry->y_mm(1), volume_geometry->z_mm(2)};
  const double voxel_volume = 0.5 * 0.25 * 1.5;
  for (int64_t i = 0; i < 3; ++i) {
    const double u = Dot(centre, g.directions[static_cast<size_t>(i)].unit()) / 0.4 + 20;
    const int64_t k0 = static_cast<int64_t>(std::floor(u));
    const double frac = u - k0;
    double mass = 0;
    for (int64_t k = 0; k < 41; ++k) {
      double expected = 0;
      if (k == k0) expected = (1 - frac) * 2 * voxel_volume / 0.4;
      if (k == k0 + 1) expected = frac * 2 * voxel_volume / 0.4;
      EXPECT_NEAR(projections.at(i, 0, k), expected, 1e-6) << i << " " << k;
      mass += projections.at(i, 0, k) * 0.4;
    }
    EXPECT_NEAR(mass, 2 * voxel_volume, 1e-6);
  }
}

// The model's sample k is the hat-weighted mean (1 - |t - t_k| / dt over |t - t_k| < dt) of
// the plane integrals of the object: for voxels of uniform density that is what spreading
// each voxel's mass onto its two neighbouring samples gives, up to the voxels' own extent.
// The mean is taken here by the midpoint rule over 64 points.
Array3D HatAveragedTransform(const EllipsoidPhantom& phantom, const RadonGeometry& g) {
  Array3D out(g.projection_dims());
  for (int64_t i = 0; i < g.num_directions(); ++i) {
    const Vec3 n = g.directions[static_cast<size_t>(i)].unit();
    for (int64_t k = 0; k < g.num_samples; ++k) {
      double sum = 0, weights = 0;
      for (int j = 0; j < 64; ++j) {
        const double o = -1 + (j + 0.5) / 32.0;
        const double w = 1 - std::abs(o);
        sum += w * EllipsoidPlaneIntegral(phantom, n, g.sample_t_mm(k + o));
        weights += w;
      }
      out.at(i, 0, k) = static_cast<float>(sum / weights);
    }
  }
  return out;
}

struct Errors {
  double max_relative = 0, rms_relative = 0;
};
Errors Compare(const Array3D& actual, const Array3D& exact) {
  double max_exact = 0, max_diff = 0, sum_diff2 = 0, sum_exact2 = 0;
  for (int64_t i = 0; i < exact.size(); ++i) {
    max_exact = std::max(max_exact, std::abs(static_cast<double>(exact.data()[i])));
    const double diff = actual.data()[i] - exact.data()[i];
    max_diff = std::max(max_diff, std::abs(diff));
    sum_diff2 += diff * diff;
    sum_exact2 += static_cast<double>(exact.data()[i]) * exact.data()[i];
  }
  return {max_diff / max_exact, std::sqrt(sum_diff2 / sum_exact2)};
}

TEST(CpuRadonProjectorTest, ForwardMatchesTheAnalyticTransformOfVoxelisedPhantoms) {
  // 56 x 60 x 52 voxels of 0.6 x 0.55 x 0.65 mm, off centre; samples of 0.5 mm.
  auto volume_geometry = VolumeGeometry::Create({56, 60, 52}, {0.6, 0.55, 0.65}, {0.4, -0.3, 0.2});
  ASSERT_TRUE(volume_geometry.ok());
  auto g = MakeUniformSolidAngleRadon(30, 71, 0.5);
  ASSERT_TRUE(g.ok());
  struct Case {
    const char* name;
    EllipsoidPhantom phantom;
    double max_relative, rms_relative;  // measured: 1.37e-2 / 5.0e-3 and 7.9e-3 / 2.1e-3
  };
  const Case cases[] = {
      // The 3D Shepp-Logan head of radius 16 mm: its skull, thinner than a voxel, and the
      // cancelling densities (1 - 0.8) make the hardest case.
      {"head", EllipsoidPhantom::SheppLogan3D(16.0), 2e-2, 7e-3},
      // Two tilted, offset ellipsoids.
      {"ellipsoids",
       EllipsoidPhantom(
           {{{1.0, -2.0, 1.5}, {12, 9, 7}, 0.5, 1.0}, {{-2, 3, 0}, {4, 3, 5}, -0.3, 0.5}}),
       1.2e-2, 3e-3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Array3D volume = c.phantom.Rasterize(*volume_geometry, 3);
    Array3D projections(g->projection_dims(), NAN);
    ASSERT_TRUE(RadonForwardCpu(*g, *volume_geometry, volume, projections, 0).ok());
    const Errors errors = Compare(projections, HatAveragedTransform(c.phantom, *g));
    ::testing::Test::RecordProperty(std::string(c.name) + "_max_relative_error",
                                    std::to_string(errors.max_relative));
    ::testing::Test::RecordProperty(std::string(c.name) + "_rms_relative_error",
                                    std::to_string(errors.rms_relative));
    EXPECT_LT(errors.max_relative, c.max_relative);
    EXPECT_LT(errors.rms_relative, c.rms_relative);
  }
}

TEST(CpuRadonProjectorTest, ScaledBackSumsTheScalesWhereDataAreConstant) {
  auto volume_geometry = VolumeGeometry::Create({7, 6, 5}, {1.0, 0.8, 1.2}, {});
  ASSERT_TRUE(volume_geometry.ok());
  auto g = MakeUniformSolidAngleRadon(9, 30, 0.5);
  ASSERT_TRUE(g.ok());
  const Array3D ones(g->projection_dims(), 1.0f);
  std::vector<double> scales;
  double total = 0;
  for (int i = 0; i < 9; ++i) {
    scales.push_back(0.1 * (i + 1));
    total += scales.back();
  }
  Array3D volume(volume_geometry->dims(), NAN);
  ASSERT_TRUE(RadonBackScaledCpu(*g, *volume_geometry, ones, scales, volume, 2).ok());
  for (int64_t i = 0; i < volume.size(); ++i) EXPECT_NEAR(volume.data()[i], total, 1e-5);
}

TEST(CpuRadonProjectorTest, RefusesMismatchedArraysAndBadGeometries) {
  auto volume_geometry = VolumeGeometry::Create({4, 4, 4}, {1, 1, 1}, {});
  ASSERT_TRUE(volume_geometry.ok());
  auto g = MakeUniformSolidAngleRadon(5, 8, 1.0);
  ASSERT_TRUE(g.ok());
  Array3D volume(volume_geometry->dims());
  Array3D projections(g->projection_dims());
  Array3D short_rows({5, 1, 7});
  absl::Status status = RadonForwardCpu(*g, *volume_geometry, volume, short_rows, 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("projections: dims (5, 1, 7) do not match"));
  Array3D wrong_volume({4, 4, 5});
  status = RadonBackCpu(*g, *volume_geometry, projections, wrong_volume, 1);
  EXPECT_THAT(status.message(), HasSubstr("volume: dims (4, 4, 5) do not match"));
  RadonGeometry bad = *g;
  bad.directions[3].weight_sr = -1;
  status = RadonBackCpu(bad, *volume_geometry, projections, volume, 1);
  EXPECT_EQ(status.message(), "directions[3].weight_sr: -1 must be a finite solid angle > 0");
  status = RadonBackScaledCpu(*g, *volume_geometry, projections, {1, 2}, volume, 1);
  EXPECT_EQ(status.message(), "direction_scales: 2 values for 5 directions");
  status = RadonBackScaledCpu(*g, *volume_geometry, projections, {1, 2, NAN, 4, 5}, volume, 1);
  EXPECT_EQ(status.message(), "direction_scales[2]: nan is not finite");
}

}  // namespace
}  // namespace tomo::core
