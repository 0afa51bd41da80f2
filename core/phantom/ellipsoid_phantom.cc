#include "core/phantom/ellipsoid_phantom.h"

#include <algorithm>
#include <cmath>

#include "core/base/parallel_for.h"

namespace tomo::core {
namespace {

constexpr double kPi = 3.14159265358979323846;

// The 3D Shepp-Logan head of Kak and Slaney, "Principles of Computerized Tomographic
// Imaging" (1988), table on p. 102 (with the book's errata; cross-checked against the
// "kak-slaney" table of tsadakane/sl3d): centres, semi-axes and the rotation about z on
// [-1, 1]^3. The densities are not the book's (2, -0.98, -0.02,
// ...) but those of Toft's modified 2D phantom (1, -0.8, -0.2, -0.2, then 0.1), so that
// the inner structures show on a linear grey scale as in EllipsePhantom::ModifiedSheppLogan;
// the last ellipsoid keeps the book's negative sign. Note the inner ellipsoids are centred
// at z = -0.25 (ventricles and tumours) or z = 0.625; the z = 0 slice cuts only the skull,
// the brain and ellipsoid 5.
struct UnitEllipsoid {
  double x0, y0, z0, a, b, c, phi_deg, density;
};
constexpr UnitEllipsoid kSheppLogan3D[] = {
    {0.0, 0.0, 0.0, 0.69, 0.92, 0.90, 0.0, 1.0},
    {0.0, 0.0, 0.0, 0.6624, 0.874, 0.88, 0.0, -0.8},
    {-0.22, 0.0, -0.25, 0.41, 0.16, 0.21, 108.0, -0.2},
    {0.22, 0.0, -0.25, 0.31, 0.11, 0.22, 72.0, -0.2},
    {0.0, 0.35, -0.25, 0.21, 0.25, 0.50, 0.0, 0.1},
    {0.0, 0.1, -0.25, 0.046, 0.046, 0.046, 0.0, 0.1},
    {-0.08, -0.65, -0.25, 0.046, 0.023, 0.02, 0.0, 0.1},
    {0.06, -0.65, -0.25, 0.046, 0.023, 0.02, 90.0, 0.1},
    {0.06, -0.105, 0.625, 0.056, 0.04, 0.10, 90.0, 0.1},
    {0.0, 0.1, 0.625, 0.056, 0.056, 0.10, 0.0, -0.1},
};

// Offsets of `count` points spread evenly across a unit interval centred on 0 (midpoint
// rule), so that supersampled means converge to the cell's mean.
double SubsampleOffset(int j, int count) {
  return (static_cast<double>(j) + 0.5) / static_cast<double>(count) - 0.5;
}

// p in the ellipsoid's unit-sphere frame: rotate the offset from the centre by -phi about z
// and divide by the semi-axes. A direction (is_direction) is not shifted by the centre.
Vec3 ToUnitFrame(const Ellipsoid& e, const Vec3& p, bool is_direction) {
  const Vec3 d = is_direction ? p : p - e.center_mm;
  const double c = std::cos(e.rotation_rad);
  const double s = std::sin(e.rotation_rad);
  return {(c * d.x + s * d.y) / e.semi_axes_mm.x, (-s * d.x + c * d.y) / e.semi_axes_mm.y,
          d.z / e.semi_axes_mm.z};
}

}  // namespace

EllipsoidPhantom EllipsoidPhantom::ExtrudedFrom(const EllipsePhantom& phantom) {
  std::vector<Ellipsoid> ellipsoids;
  for (const Ellipse& e : phantom.ellipses()) {
    ellipsoids.push_back({{e.center_x_mm, e.center_y_mm, 0.0},
                          {e.semi_axis_a_mm, e.semi_axis_b_mm, kExtrusionHalfHeightMm},
                          e.rotation_rad,
                          e.density});
  }
  return EllipsoidPhantom(std::move(ellipsoids));
}

EllipsoidPhantom EllipsoidPhantom::SheppLogan3D(double radius_mm) {
  std::vector<Ellipsoid> ellipsoids;
  for (const UnitEllipsoid& e : kSheppLogan3D) {
    ellipsoids.push_back(Ellipsoid{{e.x0 * radius_mm, e.y0 * radius_mm, e.z0 * radius_mm},
                                   {e.a * radius_mm, e.b * radius_mm, e.c * radius_mm},
                                   e.phi_deg * kPi / 180.0,
                                   e.density});
  }
  return EllipsoidPhantom(std::move(ellipsoids));
}

double EllipsoidPhantom::DensityAt(const Vec3& point_mm) const {
  double density = 0;
  for (const Ellipsoid& e : ellipsoids_) {
    const Vec3 q = ToUnitFrame(e, point_mm, /*is_direction=*/false);
    if (Dot(q, q) <= 1.0) density += e.density;
  }
  return density;
}

Array3D EllipsoidPhantom::Rasterize(const VolumeGeometry& volume, int supersampling) const {
  const int samples = std::max(1, supersampling);
  const Dims3 dims = volume.dims();
  Array3D image(dims);
  const Vec3 voxel = volume.voxel_size_mm();
  const double inverse_count = 1.0 / (static_cast<double>(samples) * samples * samples);
  ParallelFor(dims.d0 * dims.d1, [&](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line) {
      const int64_t iz = line / dims.d1;
      const int64_t iy = line % dims.d1;
      for (int64_t ix = 0; ix < dims.d2; ++ix) {
        double sum = 0;
        for (int k = 0; k < samples; ++k) {
          const double z =
              volume.z_mm(static_cast<double>(iz)) + SubsampleOffset(k, samples) * voxel.z;
          for (int j = 0; j < samples; ++j) {
            const double y =
                volume.y_mm(static_cast<double>(iy)) + SubsampleOffset(j, samples) * voxel.y;
            for (int i = 0; i < samples; ++i) {
              const double x =
                  volume.x_mm(static_cast<double>(ix)) + SubsampleOffset(i, samples) * voxel.x;
              sum += DensityAt({x, y, z});
            }
          }
        }
        image.at(iz, iy, ix) = static_cast<float>(sum * inverse_count);
      }
    }
  });
  return image;
}

double EllipsoidPhantom::LineIntegral(const Ray& ray) const {
  double integral = 0;
  for (const Ellipsoid& e : ellipsoids_) {
    // Move the origin to the point of the line closest to the centre first: parallel rays
    // start 1e6 mm away, and the quadratic's terms would cancel catastrophically there.
    const Vec3 origin = ray.origin + Dot(e.center_mm - ray.origin, ray.direction) * ray.direction;
    // In the unit-sphere frame the line is q + t w (t still in mm along the ray); it meets
    // the sphere where |w|^2 t^2 + 2 (q.w) t + |q|^2 - 1 = 0, and the chord in mm is the
    // distance between the roots, sqrt(discriminant) / |w|^2.
    const Vec3 q = ToUnitFrame(e, origin, /*is_direction=*/false);
    const Vec3 w = ToUnitFrame(e, ray.direction, /*is_direction=*/true);
    const double a = Dot(w, w);
    const double half_b = Dot(q, w);
    const double c = Dot(q, q) - 1.0;
    const double quarter_discriminant = half_b * half_b - a * c;
    if (quarter_discriminant > 0) {
      integral += e.density * 2.0 * std::sqrt(quarter_discriminant) / a;
    }
  }
  return integral;
}

double EllipsoidPhantom::LineIntegral(const Ray& ray, double z_min_mm, double z_max_mm) const {
  double integral = 0;
  for (const Ellipsoid& e : ellipsoids_) {
    // As LineIntegral above, with the chord's two ends (t along the ray from the point
    // closest to the centre) clipped to the part of the line inside the slab.
    const Vec3 origin = ray.origin + Dot(e.center_mm - ray.origin, ray.direction) * ray.direction;
    const Vec3 q = ToUnitFrame(e, origin, /*is_direction=*/false);
    const Vec3 w = ToUnitFrame(e, ray.direction, /*is_direction=*/true);
    const double a = Dot(w, w);
    const double half_b = Dot(q, w);
    const double c = Dot(q, q) - 1.0;
    const double quarter_discriminant = half_b * half_b - a * c;
    if (quarter_discriminant <= 0) continue;
    const double half_chord = std::sqrt(quarter_discriminant) / a;
    double t0 = -half_b / a - half_chord, t1 = -half_b / a + half_chord;
    if (ray.direction.z == 0) {
      if (origin.z < z_min_mm || origin.z > z_max_mm) continue;
    } else {
      double enter = (z_min_mm - origin.z) / ray.direction.z;
      double leave = (z_max_mm - origin.z) / ray.direction.z;
      if (enter > leave) std::swap(enter, leave);
      t0 = std::max(t0, enter);
      t1 = std::min(t1, leave);
    }
    if (t1 > t0) integral += e.density * (t1 - t0);
  }
  return integral;
}

Array3D EllipsoidPhantom::Project(const VectorGeometry& geometry, int supersampling) const {
  return ProjectRays(geometry, supersampling, [&](const Ray& ray) { return LineIntegral(ray); });
}

Array3D EllipsoidPhantom::Project(const VectorGeometry& geometry, int supersampling,
                                  double z_min_mm, double z_max_mm) const {
  return ProjectRays(geometry, supersampling,
                     [&](const Ray& ray) { return LineIntegral(ray, z_min_mm, z_max_mm); });
}

Array3D EllipsoidPhantom::ProjectRays(const VectorGeometry& geometry, int supersampling,
                                      const std::function<double(const Ray&)>& integral) {
  const int samples = std::max(1, supersampling);
  const int64_t rows = geometry.rows();
  const int64_t columns = geometry.columns();
  // One-row (2D) geometries sample across the row only: their v is the slice thickness.
  const int row_samples = rows == 1 ? 1 : samples;
  const double inverse_count = 1.0 / (static_cast<double>(samples) * row_samples);
  Array3D projections(geometry.projection_dims());
  ParallelFor(geometry.num_views(), [&](int64_t view_begin, int64_t view_end) {
    for (int64_t view = view_begin; view < view_end; ++view) {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < columns; ++c) {
          double sum = 0;
          for (int j = 0; j < row_samples; ++j) {
            const double row =
                static_cast<double>(r) + (rows == 1 ? 0.0 : SubsampleOffset(j, row_samples));
            for (int i = 0; i < samples; ++i) {
              const double column = static_cast<double>(c) + SubsampleOffset(i, samples);
              sum += integral(geometry.PixelRay(view, row, column));
            }
          }
          projections.at(view, r, c) = static_cast<float>(sum * inverse_count);
        }
      }
    }
  });
  return projections;
}

}  // namespace tomo::core
