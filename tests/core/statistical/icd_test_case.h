// A small PWLS problem for the ICD tests (CPU and CUDA): a circular or helical cone with
// anisotropic voxels and pixels (none 1 mm), odd sizes and an off-centre volume; the data
// are the exact line integrals of an ellipsoid phantom with Poisson noise at a stated dose,
// the weights the detected counts.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "core/data/array3d.h"
#include "core/geometry/geometry_builders.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "core/statistical/separable_footprint.h"

namespace tomo::core::statistical {

struct IcdTestCase {
  VectorGeometry geometry;
  VolumeGeometry volume;
  EllipsoidPhantom phantom;
  Array3D line_integrals;
  Array3D weights;
};

// Dose: kIncidentPhotons per detector pixel without object.
constexpr double kIncidentPhotons = 2.0e4;

inline IcdTestCase MakeIcdTestCase(std::mt19937_64& random, bool helical, Size3 size = {19, 17, 15}) {
  std::uniform_real_distribution<double> jitter(-0.4, 0.4);
  const VolumeGeometry volume =
      VolumeGeometry::Create(size, {0.9, 0.85, 0.7}, {0.2, -0.3, 0.25}).value();
  FanConeOptions cone;
  cone.detector.rows = helical ? 15 : 25;
  cone.detector.columns = 37;
  cone.detector.row_spacing_mm = 1.1;
  cone.detector.column_spacing_mm = 0.95;
  cone.detector.offset_u_mm = 0.4;
  cone.source_origin_mm = 60;
  cone.origin_detector_mm = 45;
  VectorGeometry geometry = [&] {
    if (!helical) {
      cone.angles_rad = UniformAnglesRad(24, 0.1, 2 * M_PI);
      return MakeCircularCone(cone).value();
    }
    HelicalOptions options;
    options.cone = cone;
    options.cone.angles_rad = UniformAnglesRad(36, 0.1, 4 * M_PI);
    options.pitch_mm_per_turn = 6;
    options.z_start_mm = -6;
    return MakeHelicalCone(options).value();
  }();
  EllipsoidPhantom phantom({{{jitter(random), jitter(random), 0}, {7, 6, 5}, 0.2, 0.02},
                            {{2 + jitter(random), 1, 1}, {2.5, 2, 2}, -0.4, 0.01},
                            {{-2, -2 + jitter(random), -1}, {2, 2.5, 1.8}, 0.0, -0.006}});
  Array3D exact = phantom.Project(geometry, 2);
  Array3D line_integrals(exact.dims());
  Array3D weights(exact.dims());
  for (int64_t i = 0; i < exact.size(); ++i) {
    const double expected = kIncidentPhotons * std::exp(-static_cast<double>(exact.data()[i]));
    std::poisson_distribution<int64_t> poisson(expected);
    const double counts = std::max<double>(static_cast<double>(poisson(random)), 1.0);
    line_integrals.data()[i] = static_cast<float>(-std::log(counts / kIncidentPhotons));
    weights.data()[i] = static_cast<float>(counts);
  }
  return {std::move(geometry), volume, std::move(phantom), std::move(line_integrals),
          std::move(weights)};
}

}  // namespace tomo::core::statistical
