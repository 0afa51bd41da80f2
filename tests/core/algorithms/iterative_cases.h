// Test problems the iterative methods' tests share (sirt_test, block_iterative_test,
// cgls_test): analytic phantoms with their exact projections (the oracle), and the
// relative error against the phantom.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/data/array3d.h"
#include "core/geometry/geometry_builders.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/phantom/ellipse_phantom.h"
#include "core/phantom/ellipsoid_phantom.h"

namespace tomo::testing {

using core::Array3D;
using core::DetectorLayout;
using core::EllipsePhantom;
using core::EllipsoidPhantom;
using core::FanConeOptions;
using core::ParallelGeometry2D;
using core::VectorGeometry;
using core::VolumeGeometry;

constexpr double kIterativePi = 3.14159265358979323846;

// 2D: the modified Shepp-Logan of radius 28 mm on 64 x 64 pixels of 1 mm, 60 parallel views
// over 180 degrees, 80 detectors of 1 mm; the exact line integrals.
struct Problem2D {
  ParallelGeometry2D geometry;
  VectorGeometry vector_geometry;
  VolumeGeometry volume;
  Array3D projections;
  Array3D truth;
};

inline Problem2D MakeProblem2D(int64_t views = 60) {
  const EllipsePhantom phantom = EllipsePhantom::ModifiedSheppLogan(28.0);
  const std::vector<double> angles = ParallelGeometry2D::UniformAngles(views, 0.0, kIterativePi);
  ParallelGeometry2D geometry = ParallelGeometry2D::Create(80, 1.0, 0.0, angles).value();
  VolumeGeometry volume = VolumeGeometry::Create({64, 64, 1}, {1, 1, 1}, {}).value();
  DetectorLayout detector;
  detector.rows = 1;
  detector.columns = 80;
  detector.row_spacing_mm = 1;
  detector.column_spacing_mm = 1;
  VectorGeometry vectors = core::MakeParallel2D(detector, angles).value();
  Array3D projections = phantom.ParallelProjections(geometry, 4);
  Array3D truth = phantom.Rasterize(volume, 4);
  return {std::move(geometry), std::move(vectors), std::move(volume), std::move(projections),
          std::move(truth)};
}

// 3D: the 3D Shepp-Logan of radius 14 mm in 32^3 voxels of 1 mm, a circular cone (source
// 100 mm from the axis, detector 100 mm beyond it, 40 x 40 pixels of 2 mm), 48 views over
// 360 degrees; the exact line integrals.
struct Problem3D {
  VectorGeometry geometry;
  VolumeGeometry volume;
  Array3D projections;
  Array3D truth;
};

inline Problem3D MakeCone3D(int64_t views = 48) {
  const EllipsoidPhantom phantom = EllipsoidPhantom::SheppLogan3D(14.0);
  FanConeOptions cone;
  cone.detector = {40, 40, 2.0, 2.0, 0, 0};
  cone.source_origin_mm = 100;
  cone.origin_detector_mm = 100;
  cone.angles_rad = core::UniformAnglesRad(views, 0, 2 * kIterativePi);
  VectorGeometry geometry = core::MakeCircularCone(cone).value();
  VolumeGeometry volume = VolumeGeometry::Create({32, 32, 32}, {1, 1, 1}, {}).value();
  Array3D projections = phantom.Project(geometry, 2);
  Array3D truth = phantom.Rasterize(volume, 2);
  return {std::move(geometry), std::move(volume), std::move(projections), std::move(truth)};
}

// ||image - truth|| / ||truth||.
inline double RelativeError(const Array3D& image, const Array3D& truth) {
  double difference = 0, norm = 0;
  for (int64_t i = 0; i < truth.size(); ++i) {
    const double d = static_cast<double>(image.data()[i]) - truth.data()[i];
    difference += d * d;
    norm += static_cast<double>(truth.data()[i]) * truth.data()[i];
  }
  return std::sqrt(difference / norm);
}

inline double MaxAbsDifference(const Array3D& a, const Array3D& b) {
  double worst = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a.data()[i]) - b.data()[i]));
  }
  return worst;
}

}  // namespace tomo::testing
