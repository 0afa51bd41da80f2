// EllipsePhantom: a sum of constant-density ellipses whose parallel-beam line integrals
// are known in closed form, the oracle against which reconstructions are judged.
//
// Ellipse i occupies { p : |R(-phi) (p - c)| in the ellipse with semi-axes (a, b) }, adds
// `density` (per mm) there. Coordinates are in mm. The modified Shepp-Logan phantom
// (Toft's contrast-enhanced version) is defined on [-1, 1]^2 and scaled to a radius.
//
//   auto phantom = EllipsePhantom::ModifiedSheppLogan(/*radius_mm=*/128.0);
//   Array3D truth = phantom.Rasterize(volume, /*supersampling=*/4);
//   Array3D sinogram = phantom.ParallelProjections(geometry, /*supersampling=*/4);
#pragma once

#include <vector>

#include "core/data/array3d.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

struct Ellipse {
  double center_x_mm = 0, center_y_mm = 0;
  double semi_axis_a_mm = 0, semi_axis_b_mm = 0;  // along the rotated x and y axes
  double rotation_rad = 0;                        // counter-clockwise from +x
  double density = 0;                             // added inside, per mm
};

class EllipsePhantom {
 public:
  explicit EllipsePhantom(std::vector<Ellipse> ellipses) : ellipses_(std::move(ellipses)) {}
  // The modified Shepp-Logan head phantom scaled so that [-1, 1] maps to
  // [-radius_mm, radius_mm].
  static EllipsePhantom ModifiedSheppLogan(double radius_mm);

  const std::vector<Ellipse>& ellipses() const { return ellipses_; }

  // Density at a point (mm).
  double DensityAt(double x_mm, double y_mm) const;
  // Mean density over each pixel of the z = 0 slice, by supersampling^2 points per pixel.
  // Returns an array of volume.dims() with every slice equal.
  Array3D Rasterize(const VolumeGeometry& volume, int supersampling) const;
  // Exact line integral along the ray at detector coordinate s (mm) and angle theta.
  double LineIntegral(double s_mm, double theta_rad) const;
  // Line integrals for every view and detector element, each the mean of
  // `supersampling` exact integrals spread evenly across the element's width.
  Array3D ParallelProjections(const ParallelGeometry2D& geometry, int supersampling) const;

 private:
  std::vector<Ellipse> ellipses_;
};

}  // namespace tomo::core
