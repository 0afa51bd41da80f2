// Tests of core/geometry/detector_row_band.cc: the band of rows a volume projects onto is
// all a back projection of that volume reads (back projecting only the band's rows with the
// band's geometry gives the same volume), it is narrower than the detector for a slab of a
// cone-beam volume, and the band geometry has the same pixels.
#include "core/geometry/detector_row_band.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/geometry/geometry_builders.h"
#include "core/operators/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "tests/core/random_arrays.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using testing::RandomAngles;
using testing::RandomArray;

struct BandCase {
  std::string name;
  VectorGeometry geometry;
  VolumeGeometry slab;  // a z-slab of a volume, off the detector's middle
  bool narrower;        // the band must be narrower than the detector
};

std::vector<BandCase> Cases(std::mt19937_64& random) {
  std::vector<BandCase> cases;
  // The top third of a 24 x 20 x 18 volume (0.9 x 1.1 x 1.0 mm voxels), slices 12..17.
  const VolumeGeometry slab =
      VolumeGeometry::Create({24, 20, 6}, {0.9, 1.1, 1.0}, {0.4, -0.3, 6.1}).value();
  FanConeOptions cone;
  cone.detector = {40, 33, 1.1, 1.2, 1.3, -0.7};
  cone.source_origin_mm = 60;
  cone.origin_detector_mm = 35;
  cone.angles_rad = RandomAngles(9, random);
  cases.push_back({"cone-flat", MakeCircularCone(cone).value(), slab, true});
  FanConeOptions arc = cone;
  arc.shape = DetectorShape::kCylindrical;
  cases.push_back({"cone-cylindrical", MakeCircularCone(arc).value(), slab, true});
  cases.push_back({"parallel-3d",
                   MakeParallel3D({40, 33, 0.7, 1.0, 0.4, 1.5}, RandomAngles(7, random)).value(),
                   slab, true});
  // A slab beyond the detector's top edge: the band is the edge row.
  const VolumeGeometry high =
      VolumeGeometry::Create({10, 10, 3}, {1.0, 1.0, 1.0}, {0, 0, 40}).value();
  cases.push_back({"cone-slab-above", MakeCircularCone(cone).value(), high, true});
  return cases;
}

TEST(DetectorRowBandTest, BandRowsAloneGiveTheSameBackProjection) {
  std::mt19937_64 random(testing::TestSeed());
  SCOPED_TRACE(testing::SeedTrace(testing::TestSeed()));
  CpuBackend cpu;
  for (const BandCase& c : Cases(random)) {
    SCOPED_TRACE(c.name);
    const RowBand band = DetectorRowBand(c.geometry, c.slab);
    std::printf("[ measure  ] %-18s band [%lld, %lld) of %lld rows\n", c.name.c_str(),
                static_cast<long long>(band.first),
                static_cast<long long>(band.first + band.count),
                static_cast<long long>(c.geometry.rows()));
    ASSERT_GE(band.count, 1);
    ASSERT_LE(band.first + band.count, c.geometry.rows());
    if (c.narrower) {
      EXPECT_LT(band.count, c.geometry.rows());
    }
    auto band_geometry = RowBandGeometry(c.geometry, band);
    ASSERT_TRUE(band_geometry.ok()) << band_geometry.status();

    const Array3D projections = RandomArray(c.geometry.projection_dims(), random);
    Array3D band_projections(band_geometry->projection_dims());
    for (int64_t v = 0; v < c.geometry.num_views(); ++v) {
      for (int64_t r = 0; r < band.count; ++r) {
        for (int64_t k = 0; k < c.geometry.columns(); ++k) {
          band_projections.at(v, r, k) = projections.at(v, band.first + r, k);
        }
      }
    }
    const BackProjectionWeighting weighting = c.geometry.beam() == BeamKind::kCone
                                                  ? BackProjectionWeighting::kFdk
                                                  : BackProjectionWeighting::kNone;
    Array3D full(c.slab.dims(), -1.0f), from_band(c.slab.dims(), -2.0f);
    const absl::Status full_status =
        cpu.BackProject(c.geometry, c.slab, projections, weighting, full);
    ASSERT_TRUE(full_status.ok()) << full_status;
    const absl::Status band_status =
        cpu.BackProject(*band_geometry, c.slab, band_projections, weighting, from_band);
    ASSERT_TRUE(band_status.ok()) << band_status;
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < full.size(); ++i) {
      diff = std::max(diff, std::fabs(static_cast<double>(full.data()[i]) - from_band.data()[i]));
      scale = std::max(scale, std::fabs(static_cast<double>(full.data()[i])));
    }
    // Only the row coordinates' float64 rounding differs (detector centre moved).
    EXPECT_LE(diff, 1e-5 * std::max(scale, 1.0)) << "max |full - band| " << diff;
  }
}

TEST(DetectorRowBandTest, AWholeVolumeNeedsTheRowsItsShadowCovers) {
  // A volume whose shadow covers the whole detector gets every row.
  FanConeOptions cone;
  cone.detector = {16, 16, 1.0, 1.0, 0, 0};
  cone.source_origin_mm = 40;
  cone.origin_detector_mm = 40;
  cone.angles_rad = {0.0, 1.0, 2.0};
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const VolumeGeometry volume =
      VolumeGeometry::Create({12, 12, 12}, {1.0, 1.0, 1.0}, {0, 0, 0}).value();
  const RowBand band = DetectorRowBand(geometry, volume);
  EXPECT_EQ(band.first, 0);
  EXPECT_EQ(band.count, 16);
}

TEST(DetectorRowBandTest, BandGeometryHasTheSamePixels) {
  FanConeOptions cone;
  cone.detector = {21, 13, 0.8, 1.1, 0.5, -1.2};
  cone.shape = DetectorShape::kCylindrical;
  cone.source_origin_mm = 50;
  cone.origin_detector_mm = 30;
  cone.angles_rad = {0.3, 2.0};
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const RowBand band{5, 9};
  const VectorGeometry band_geometry = RowBandGeometry(geometry, band).value();
  EXPECT_EQ(band_geometry.rows(), 9);
  for (int64_t v = 0; v < 2; ++v) {
    for (int64_t r = 0; r < band.count; ++r) {
      for (double c : {0.0, 6.0, 12.0}) {
        const Vec3 a = band_geometry.PixelPosition(v, static_cast<double>(r), c);
        const Vec3 b = geometry.PixelPosition(v, static_cast<double>(r + band.first), c);
        EXPECT_NEAR(Norm(a - b), 0.0, 1e-9) << "view " << v << " row " << r << " column " << c;
      }
    }
  }
}

TEST(DetectorRowBandTest, RefusesBandsOutsideTheDetector) {
  const VectorGeometry geometry =
      MakeParallel3D({8, 8, 1.0, 1.0, 0, 0}, {0.0, 1.0}).value();
  for (RowBand band : {RowBand{0, 0}, RowBand{-1, 3}, RowBand{6, 3}}) {
    const auto result = RowBandGeometry(geometry, band);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(result.status().message().find("8 rows"), std::string::npos)
        << result.status().message();
  }
}

}  // namespace
}  // namespace tomo::core
