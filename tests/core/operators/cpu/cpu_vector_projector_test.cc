// Tests of CpuBackend's VectorGeometry projectors (core/operators/cpu/cpu_vector_projector.cc):
// forward projection against exact line integrals of ellipsoids for every kind of geometry,
// back projection against its definition (constant sets, the transpose of a brute-force
// splatting projector, the FDK weight), closeness to Joseph's transpose, agreement with the
// 2D parallel projector, and the argument checks.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/geometry/geometry_builders.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/operators/cpu/cpu_backend.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_arrays.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
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

// A few ellipsoids inside a radius of about 12 mm, jittered by the seed; z_scale stretches
// them along z.
EllipsoidPhantom RandomPhantom(std::mt19937_64& random, double z_scale) {
  std::uniform_real_distribution<double> jitter(-1.0, 1.0);
  std::vector<Ellipsoid> ellipsoids = {{{0, 0, 0}, {11, 9, 10}, 0.2, 1.0},
                                       {{3, 2, 1}, {4, 3, 5}, -0.5, 0.5},
                                       {{-4, -2, -3}, {2.5, 4, 3}, 0.0, -0.4},
                                       {{1, -5, 4}, {3, 2, 2}, 1.0, 0.8}};
  for (Ellipsoid& ellipsoid : ellipsoids) {
    ellipsoid.center_mm = ellipsoid.center_mm + Vec3{jitter(random), jitter(random), jitter(random)};
    ellipsoid.center_mm.z *= z_scale;
    ellipsoid.semi_axes_mm.z *= z_scale;
  }
  return EllipsoidPhantom(std::move(ellipsoids));
}

struct ProjectionCase {
  std::string name;
  VectorGeometry geometry;
  VolumeGeometry volume;
  double bound;  // on the relative RMS error against the exact line integrals
};

FanConeOptions ConeOptions(int64_t rows, int64_t columns, double spacing,
                           std::vector<double> angles) {
  FanConeOptions cone;
  cone.detector.rows = rows;
  cone.detector.columns = columns;
  cone.detector.row_spacing_mm = spacing;
  cone.detector.column_spacing_mm = spacing;
  cone.source_origin_mm = 100;
  cone.origin_detector_mm = 60;
  cone.angles_rad = std::move(angles);
  return cone;
}

TEST(CpuVectorProjectorTest, ForwardProjectionMatchesExactLineIntegrals) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const VolumeGeometry volume32 = VolumeGeometry::Create({32, 32, 32}, {1, 1, 1}, {}).value();
  std::vector<ProjectionCase> cases;

  DetectorLayout parallel;
  parallel.rows = 36;
  parallel.columns = 40;
  parallel.row_spacing_mm = 1;
  parallel.column_spacing_mm = 0.9;
  parallel.offset_u_mm = 0.3;
  // Oracle: EllipsoidPhantom's exact line integrals through the pixel centres. Measured
  // relative RMS errors over 20 seeds (32^3 voxels of 1 mm, supersampling 3, sharp-edged
  // ellipsoids down to 2 mm semi-axes): parallel 3D 0.031-0.037, flat and cylindrical
  // cones 0.038-0.048, helical 0.038-0.041, fan 2D 0.022-0.031. The error is
  // discretisation: with 64^3 voxels of 0.5 mm the 3D cases drop to 0.020-0.022. Bounds
  // 0.07 (3D) and 0.045 (fan).
  cases.push_back({"parallel 3D", MakeParallel3D(parallel, RandomAngles(6, random)).value(),
                   volume32, 0.07});

  FanConeOptions cone = ConeOptions(40, 44, 1.5, RandomAngles(6, random));
  cases.push_back({"circular cone, flat", MakeCircularCone(cone).value(), volume32, 0.07});

  FanConeOptions offset = cone;
  offset.detector.offset_u_mm = 4.3;
  offset.detector.offset_v_mm = -3.1;
  offset.detector.row_spacing_mm = 1.3;
  cases.push_back({"cone with offsets, shifted volume", MakeCircularCone(offset).value(),
                   VolumeGeometry::Create({32, 30, 34}, {1, 1.05, 0.95}, {0.4, -0.3, 0.2})
                       .value(),
                   0.07});

  FanConeOptions cylinder = cone;
  cylinder.shape = DetectorShape::kCylindrical;
  cases.push_back({"cone, cylindrical detector", MakeCircularCone(cylinder).value(), volume32,
                   0.07});

  HelicalOptions helical;
  helical.cone = ConeOptions(16, 44, 1.5, UniformAnglesRad(12, 0.3, 4 * M_PI));
  helical.pitch_mm_per_turn = 12;
  helical.z_start_mm = -12;
  cases.push_back({"helical cone", MakeHelicalCone(helical).value(), volume32, 0.07});

  for (const ProjectionCase& c : cases) {
    SCOPED_TRACE(c.name);
    const EllipsoidPhantom phantom = RandomPhantom(random, 1.0);
    const Array3D volume = phantom.Rasterize(c.volume, 3);
    Array3D projections(c.geometry.projection_dims());
    CpuBackend backend;
    ASSERT_TRUE(backend.ForwardProject(c.geometry, c.volume, volume, projections).ok());
    // Exact line integrals through the pixel centres, the rays Joseph follows.
    const double error = RelativeRms(projections, phantom.Project(c.geometry, 1));
    std::printf("forward projection, %s: relative RMS error %.4f\n", c.name.c_str(), error);
    EXPECT_LT(error, c.bound);
  }

  // 2D fan beam: one slice of 1 mm; the ellipsoids are long along z so that the slice's
  // mean density equals its central cross-section.
  FanConeOptions fan = ConeOptions(1, 48, 1.4, RandomAngles(16, random));
  const VectorGeometry fan_geometry = MakeFan2D(fan).value();
  const VolumeGeometry slice = VolumeGeometry::Create({32, 32, 1}, {1, 1, 1}, {}).value();
  const EllipsoidPhantom phantom = RandomPhantom(random, 1000.0);
  const Array3D image = phantom.Rasterize(slice, 3);
  Array3D sinogram(fan_geometry.projection_dims());
  CpuBackend backend;
  ASSERT_TRUE(backend.ForwardProject(fan_geometry, slice, image, sinogram).ok());
  const double error = RelativeRms(sinogram, phantom.Project(fan_geometry, 1));
  std::printf("forward projection, fan 2D: relative RMS error %.4f\n", error);
  EXPECT_LT(error, 0.045);
}

TEST(CpuVectorProjectorTest, BackProjectionOfAConstantIsViewsTimesTheConstant) {
  // Inside the field of view each view's bilinear weights sum to 1 (the voxel-driven back
  // projection applies no ray weight), so B c = num_views * c exactly up to rounding.
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  DetectorLayout detector;
  detector.rows = 30;
  detector.columns = 40;
  detector.row_spacing_mm = 0.8;
  detector.column_spacing_mm = 1.1;
  const int num_views = 9;
  const VectorGeometry geometry = MakeParallel3D(detector, RandomAngles(num_views, random)).value();
  const VolumeGeometry volume = VolumeGeometry::Create({16, 14, 18}, {1, 1.2, 1}, {}).value();
  const float constant = std::uniform_real_distribution<float>(0.5f, 2.0f)(random);
  Array3D projections(geometry.projection_dims(), constant);
  Array3D image(volume.dims());
  CpuBackend backend;
  ASSERT_TRUE(backend
                  .BackProject(geometry, volume, projections, BackProjectionWeighting::kNone,
                               image)
                  .ok());
  for (int64_t i = 0; i < image.size(); ++i) {
    ASSERT_NEAR(image.data()[i], num_views * constant, 1e-5 * num_views * constant) << i;
  }
}

// The test's own detector position of a point: (row, column) and the FDK weight, found
// by solving the intersection as a 3x3 linear system (flat) or from the arc's definition
// (cylindrical). false when the point does not project.
bool DetectorPosition(const VectorGeometry& geometry, int64_t view, const Vec3& p, double& row,
                      double& column, double& fdk_weight) {
  const ViewVectors& w = geometry.views()[static_cast<size_t>(view)];
  const double row_center = 0.5 * (geometry.rows() - 1);
  const double column_center = 0.5 * (geometry.columns() - 1);
  if (geometry.detector() == DetectorShape::kCylindrical) {
    const Vec3 vh = Normalized(w.v);
    const Vec3 to_center = w.detector_center - w.source;
    const double height_center = Dot(to_center, vh);
    const Vec3 in_plane = to_center - height_center * vh;
    const double radius = Norm(in_plane);
    const Vec3 wh = Normalized(in_plane);
    const Vec3 eh = Normalized(Cross(vh, wh));  // u's direction in the builders
    const Vec3 x = p - w.source;
    const double a = Dot(x, wh), b = Dot(x, eh), rho = std::hypot(a, b);
    if (a <= 0) return false;
    column = std::atan2(b, a) * radius / Norm(w.u) + column_center;
    row = (Dot(x, vh) * radius / rho - height_center) / Norm(w.v) + row_center;
    fdk_weight = (radius / rho) * (radius / rho);
    return true;
  }
  // Solve  start + t dir = c + a u + b v  for (t, a, b) by Cramer's rule.
  const bool cone = geometry.beam() == BeamKind::kCone;
  const Vec3 dir = cone ? p - w.source : w.source;
  const Vec3 rhs = p - w.detector_center;  // p + t dir = c + a u + b v, t relative to p
  // [ -dir  u  v ] (t, a, b) = rhs
  const Vec3 m = -dir;
  const double det = Dot(m, Cross(w.u, w.v));
  const double t = Dot(rhs, Cross(w.u, w.v)) / det;
  const double a = Dot(m, Cross(rhs, w.v)) / det;
  const double b = Dot(m, Cross(w.u, rhs)) / det;
  if (cone && 1 + t <= 0) return false;  // behind the source: q = s + (1 + t)(p - s)
  column = a + column_center;
  row = b + row_center;
  fdk_weight = (1 + t) * (1 + t);
  return true;
}

// Brute-force pixel-driven projector: splats each voxel onto its detector position with
// bilinear weights (the transpose of the voxel-driven back projection).
Array3D Splat(const VectorGeometry& geometry, const VolumeGeometry& volume, const Array3D& x,
              bool fdk) {
  Array3D out(geometry.projection_dims());
  for (int64_t v = 0; v < geometry.num_views(); ++v) {
    for (int64_t iz = 0; iz < volume.size().z; ++iz) {
      for (int64_t iy = 0; iy < volume.size().y; ++iy) {
        for (int64_t ix = 0; ix < volume.size().x; ++ix) {
          double row, column, weight;
          if (!DetectorPosition(geometry, v, {volume.x_mm(ix), volume.y_mm(iy), volume.z_mm(iz)},
                                row, column, weight)) {
            continue;
          }
          if (!fdk) weight = 1;
          const int64_t r0 = static_cast<int64_t>(std::floor(row));
          const int64_t c0 = static_cast<int64_t>(std::floor(column));
          for (int64_t r = r0; r <= r0 + 1; ++r) {
            for (int64_t c = c0; c <= c0 + 1; ++c) {
              if (r < 0 || r >= geometry.rows() || c < 0 || c >= geometry.columns()) continue;
              const double hat = (1 - std::abs(row - r)) * (1 - std::abs(column - c));
              out.at(v, r, c) += static_cast<float>(weight * hat * x.at(iz, iy, ix));
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<ProjectionCase> TinyCases(std::mt19937_64& random) {
  std::vector<ProjectionCase> cases;
  const VolumeGeometry volume =
      VolumeGeometry::Create({7, 6, 5}, {1.1, 0.9, 1.2}, {0.3, -0.2, 0.4}).value();
  DetectorLayout parallel;
  parallel.rows = 6;
  parallel.columns = 9;
  parallel.row_spacing_mm = 1.1;
  parallel.column_spacing_mm = 0.9;
  parallel.offset_u_mm = 0.35;
  parallel.offset_v_mm = -0.2;
  cases.push_back({"parallel 3D", MakeParallel3D(parallel, RandomAngles(3, random)).value(),
                   volume, 0});
  FanConeOptions cone = ConeOptions(6, 9, 1.5, RandomAngles(3, random));
  cone.source_origin_mm = 20;
  cone.origin_detector_mm = 10;
  cone.detector.offset_u_mm = 0.7;
  cone.detector.offset_v_mm = -0.4;
  cases.push_back({"cone, flat, offsets", MakeCircularCone(cone).value(), volume, 0});
  cone.shape = DetectorShape::kCylindrical;
  cases.push_back({"cone, cylindrical, offsets", MakeCircularCone(cone).value(), volume, 0});
  return cases;
}

TEST(CpuVectorProjectorTest, BackProjectionIsTheTransposeOfASplattingProjector) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (const ProjectionCase& c : TinyCases(random)) {
    for (bool fdk : {false, true}) {
      if (fdk && c.geometry.beam() == BeamKind::kParallel) continue;
      SCOPED_TRACE(c.name + (fdk ? ", kFdk" : ", kNone"));
      const Array3D x = RandomArray(c.volume.dims(), random);
      const Array3D y = RandomArray(c.geometry.projection_dims(), random);
      Array3D back(c.volume.dims());
      CpuBackend backend;
      ASSERT_TRUE(backend
                      .BackProject(c.geometry, c.volume, y,
                                   fdk ? BackProjectionWeighting::kFdk
                                       : BackProjectionWeighting::kNone,
                                   back)
                      .ok());
      const double splat = Dot(Splat(c.geometry, c.volume, x, fdk), y);
      const double gather = Dot(x, back);
      ASSERT_GT(splat, 0);  // the voxels do reach the detector
      EXPECT_NEAR(gather / splat, 1.0, 1e-5);
    }
  }
}

TEST(CpuVectorProjectorTest, FdkWeightIsTheDistanceRatioSquared) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (DetectorShape shape : {DetectorShape::kFlat, DetectorShape::kCylindrical}) {
    FanConeOptions cone = ConeOptions(20, 24, 1.5, RandomAngles(1, random));
    cone.shape = shape;
    cone.source_origin_mm = 30;
    cone.detector.offset_u_mm = 1.3;
    const VectorGeometry geometry = MakeCircularCone(cone).value();
    const VolumeGeometry volume = VolumeGeometry::Create({12, 12, 10}, {1, 1, 1}, {}).value();
    SCOPED_TRACE(shape == DetectorShape::kFlat ? "flat" : "cylindrical");
    const Array3D y = RandomArray(geometry.projection_dims(), random);
    Array3D plain(volume.dims()), weighted(volume.dims());
    CpuBackend backend;
    ASSERT_TRUE(
        backend.BackProject(geometry, volume, y, BackProjectionWeighting::kNone, plain).ok());
    ASSERT_TRUE(
        backend.BackProject(geometry, volume, y, BackProjectionWeighting::kFdk, weighted).ok());
    const ViewVectors& w = geometry.views()[0];
    const Vec3 vh = Normalized(w.v);
    const Vec3 normal = Normalized(Cross(w.u, w.v));
    const Vec3 to_center = w.detector_center - w.source;
    const Vec3 in_plane = to_center - Dot(to_center, vh) * vh;
    int64_t nonzero = 0;
    for (int64_t iz = 0; iz < volume.size().z; ++iz) {
      for (int64_t iy = 0; iy < volume.size().y; ++iy) {
        for (int64_t ix = 0; ix < volume.size().x; ++ix) {
          const Vec3 x = Vec3{volume.x_mm(ix), volume.y_mm(iy), volume.z_mm(iz)} - w.source;
          double ratio;
          if (shape == DetectorShape::kFlat) {
            ratio = Dot(to_center, normal) / Dot(x, normal);  // D / U
          } else {
            const Vec3 x_in_plane = x - Dot(x, vh) * vh;
            ratio = Norm(in_plane) / Norm(x_in_plane);  // R / rho
          }
          const double expected = ratio * ratio * plain.at(iz, iy, ix);
          nonzero += plain.at(iz, iy, ix) != 0;
          ASSERT_NEAR(weighted.at(iz, iy, ix), expected, 1e-5 * std::abs(expected) + 1e-6)
              << iz << " " << iy << " " << ix;
        }
      }
    }
    EXPECT_GT(nonzero, volume.voxel_count() / 2);
  }
}

TEST(CpuVectorProjectorTest, BackProjectionIsCloseToJosephsTranspose) {
  // Per view, Joseph's A^T spreads a ray's value over the voxels near it with weights that
  // add up, per voxel, to about V / (pixel area seen from the voxel, perpendicular to the
  // ray). Parallel beam, 1 mm voxels and 1 mm pixels: that is 1, as in B (kNone).
  // Cone beam, flat detector: V / (|u| |v| cos a) (D / U)^2 with a the ray's angle to the
  // detector normal, so A^T is close to V / (|u| |v|) times B (kFdk), off by 1 / cos a.
  // Measured <Ax, y> / <x, By> on random positive x, y over 10 seeds: parallel
  // 0.9993-1.0003; cone (half cone angle about 9 degrees) 1.0017-1.0026. Asserted within
  // 0.05 and 0.1.
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const VolumeGeometry volume = VolumeGeometry::Create({16, 16, 16}, {1, 1, 1}, {}).value();
  CpuBackend backend;
  const Array3D x = RandomArray(volume.dims(), random);

  DetectorLayout detector;
  detector.rows = 24;
  detector.columns = 30;
  detector.row_spacing_mm = 1;
  detector.column_spacing_mm = 1;
  const VectorGeometry parallel = MakeParallel3D(detector, RandomAngles(8, random)).value();
  FanConeOptions cone_options = ConeOptions(28, 36, 1.5, RandomAngles(8, random));
  const VectorGeometry cone = MakeCircularCone(cone_options).value();
  for (const VectorGeometry* geometry : {&parallel, &cone}) {
    const bool is_cone = geometry->beam() == BeamKind::kCone;
    SCOPED_TRACE(is_cone ? "cone" : "parallel");
    const Array3D y = RandomArray(geometry->projection_dims(), random);
    Array3D ax(geometry->projection_dims()), by(volume.dims());
    ASSERT_TRUE(backend.ForwardProject(*geometry, volume, x, ax).ok());
    ASSERT_TRUE(backend
                    .BackProject(*geometry, volume, y,
                                 is_cone ? BackProjectionWeighting::kFdk
                                         : BackProjectionWeighting::kNone,
                                 by)
                    .ok());
    const ViewVectors& w = geometry->views()[0];
    const double scale = 1.0 / (Norm(w.u) * Norm(w.v));  // V = 1 mm^3
    const double ratio = Dot(ax, y) / (scale * Dot(x, by));
    std::printf("%s: <Ax, y> / <x, By> = %.5f (Joseph A, voxel-driven B)\n",
                is_cone ? "cone, kFdk, scaled" : "parallel 3D", ratio);
    EXPECT_NEAR(ratio, 1.0, is_cone ? 0.1 : 0.05);
  }
}

TEST(CpuVectorProjectorTest, TwoDimensionalParallelMatchesTheParallel2DProjector) {
  // Same Joseph rays both ways; the positions are computed along different routes (float64
  // rounding only), and the choice of axis agrees except at exactly 45 degrees (random
  // angles avoid it). Measured max |difference| 0 to 5e-11 of the largest value (the same
  // float64 sums, rounded to float); asserted 1e-4.
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::vector<double> angles = RandomAngles(23, random);
  DetectorLayout detector;
  detector.columns = 37;
  detector.column_spacing_mm = 0.8;
  detector.offset_u_mm = 0.6;
  detector.row_spacing_mm = 0.7;
  const VectorGeometry vector = MakeParallel2D(detector, angles).value();
  const ParallelGeometry2D planar = ParallelGeometry2D::Create(37, 0.8, 0.6, angles).value();
  const VolumeGeometry volume =
      VolumeGeometry::Create({24, 21, 1}, {0.9, 0.9, 0.7}, {0.5, -0.3, 0}).value();
  const Array3D x = RandomArray(volume.dims(), random);
  Array3D p_vector(vector.projection_dims()), p_planar(vector.projection_dims());
  CpuBackend backend;
  ASSERT_TRUE(backend.ForwardProject(vector, volume, x, p_vector).ok());
  ASSERT_TRUE(backend.ForwardProject(planar, volume, x, p_planar).ok());
  double largest = 0, difference = 0;
  for (int64_t i = 0; i < p_planar.size(); ++i) {
    largest = std::max(largest, static_cast<double>(std::abs(p_planar.data()[i])));
    difference = std::max(difference,
                          static_cast<double>(std::abs(p_planar.data()[i] - p_vector.data()[i])));
  }
  std::printf("2D parallel, vector vs ParallelGeometry2D: max |difference| / max = %.2e\n",
              difference / largest);
  EXPECT_LT(difference, 1e-4 * largest);
}

TEST(CpuVectorProjectorTest, RefusesMismatchedDimsAndFdkForParallelBeams) {
  DetectorLayout detector;
  detector.rows = 8;
  detector.columns = 10;
  detector.row_spacing_mm = 1;
  detector.column_spacing_mm = 1;
  const VectorGeometry geometry = MakeParallel3D(detector, {0.0, 1.0}).value();
  const VolumeGeometry volume = VolumeGeometry::Create({6, 6, 4}, {1, 1, 1}, {}).value();
  CpuBackend backend;
  Array3D good_volume(volume.dims()), good_projections(geometry.projection_dims());
  Array3D bad_volume({4, 6, 5}), bad_projections({2, 8, 11});

  absl::Status status = backend.ForwardProject(geometry, volume, bad_volume, good_projections);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("volume"));
  status = backend.ForwardProject(geometry, volume, good_volume, bad_projections);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("projections"));
  status = backend.BackProject(geometry, volume, bad_projections, BackProjectionWeighting::kNone,
                               good_volume);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  status = backend.BackProject(geometry, volume, good_projections, BackProjectionWeighting::kNone,
                               bad_volume);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  status = backend.BackProject(geometry, volume, good_projections, BackProjectionWeighting::kFdk,
                               good_volume);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("kFdk"));
}

}  // namespace
}  // namespace tomo::core
