// EllipsoidPhantom: a sum of constant-density ellipsoids whose line integrals along any ray
// are exact (the chord length through each ellipsoid times its density), the oracle for 3D
// and for every geometry of the vector model, fan and cone beams included.
//
// Ellipsoid i occupies { p : R^T (p - c) inside the axis-aligned ellipsoid with semi-axes
// (a, b, c) }, where R turns +x by rotation_rad about +z (as the 2D ellipses; tilted 3D
// Shepp-Logan variants are not needed), and adds `density` (per mm) there. Coordinates mm.
// The 3D Shepp-Logan phantom is Kak and Slaney's, with the contrasts of Toft's modified 2D
// version, defined on [-1, 1]^3 and scaled to a radius. It is not a stack of the 2D
// phantom: the inner ellipsoids sit at z = -0.25 and 0.625 (of the radius), so the z = 0
// slice holds only the skull, the brain (not shifted in y as in 2D) and a cut of ellipsoid
// 5; the z = -0.25 slice resembles EllipsePhantom::ModifiedSheppLogan.
//
//   auto phantom = EllipsoidPhantom::SheppLogan3D(/*radius_mm=*/128.0);
//   Array3D truth = phantom.Rasterize(volume, /*supersampling=*/2);
//   Array3D projections = phantom.Project(geometry, /*supersampling=*/2);
#pragma once

#include <functional>
#include <vector>

#include "core/data/array3d.h"
#include "core/phantom/ellipse_phantom.h"
#include "core/geometry/vec3.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

struct Ellipsoid {
  Vec3 center_mm;
  Vec3 semi_axes_mm;  // a, b, c along the rotated x, y and z axes
  double rotation_rad = 0;  // about +z, counter-clockwise from +x
  double density = 0;       // added inside, per mm
};

class EllipsoidPhantom {
 public:
  explicit EllipsoidPhantom(std::vector<Ellipsoid> ellipsoids)
      : ellipsoids_(std::move(ellipsoids)) {}
  static EllipsoidPhantom SheppLogan3D(double radius_mm);
  // The 2D ellipses extruded along z (each a very tall ellipsoid, kExtrusionHalfHeightMm),
  // so that in-plane rays of any 2D geometry, fan beams included, see exactly the 2D
  // phantom's line integrals and its z = 0 slice is the 2D phantom.
  static EllipsoidPhantom ExtrudedFrom(const EllipsePhantom& phantom);
  static constexpr double kExtrusionHalfHeightMm = 1e6;

  const std::vector<Ellipsoid>& ellipsoids() const { return ellipsoids_; }

  double DensityAt(const Vec3& point_mm) const;
  // Mean density over each voxel by supersampling^3 points per voxel.
  Array3D Rasterize(const VolumeGeometry& volume, int supersampling) const;
  // Exact integral along the whole line (both directions) through ray.origin along
  // ray.direction (unit).
  double LineIntegral(const Ray& ray) const;
  // For every view and pixel, the mean of supersampling^2 exact line integrals through
  // points spread evenly over the pixel (for one-row geometries, supersampling along the
  // row only). Computed in float64, parallel over views.
  Array3D Project(const VectorGeometry& geometry, int supersampling) const;

  // The same for the part of the phantom between two heights, z in [z_min_mm, z_max_mm]
  // (the rest cut away): consistent data for a volume that covers only that slab of a
  // longer object, as iterative methods on the slab assume. Infinite bounds give the whole
  // phantom (up to rounding).
  double LineIntegral(const Ray& ray, double z_min_mm, double z_max_mm) const;
  Array3D Project(const VectorGeometry& geometry, int supersampling, double z_min_mm,
                  double z_max_mm) const;

 private:
  // Project's loop over views (in parallel), pixels and subsamples, with the line integral
  // given.
  static Array3D ProjectRays(const VectorGeometry& geometry, int supersampling,
                             const std::function<double(const Ray&)>& integral);
  std::vector<Ellipsoid> ellipsoids_;
};

}  // namespace tomo::core
