#include "core/phantom/ellipse_phantom.h"

#include <algorithm>
#include <cmath>

#include "core/base/parallel_for.h"

namespace tomo::core {
namespace {

// Toft's modified Shepp-Logan head on [-1, 1]^2: the original geometry with contrasts
// raised so that the inner structures are visible on a linear grey scale.
struct UnitEllipse {
  double x0, y0, a, b, phi_deg, density;
};
constexpr UnitEllipse kModifiedSheppLogan[] = {
    {0.0, 0.0, 0.69, 0.92, 0.0, 1.0},      {0.0, -0.0184, 0.6624, 0.874, 0.0, -0.8},
    {0.22, 0.0, 0.11, 0.31, -18.0, -0.2},  {-0.22, 0.0, 0.16, 0.41, 18.0, -0.2},
    {0.0, 0.35, 0.21, 0.25, 0.0, 0.1},     {0.0, 0.1, 0.046, 0.046, 0.0, 0.1},
    {0.0, -0.1, 0.046, 0.046, 0.0, 0.1},   {-0.08, -0.605, 0.046, 0.023, 0.0, 0.1},
    {0.0, -0.605, 0.023, 0.023, 0.0, 0.1}, {0.06, -0.605, 0.023, 0.046, 0.0, 0.1},
};

// Offsets of `count` points spread evenly across a unit interval centred on 0 (midpoint
// rule), so that supersampled means converge to the cell's mean.
double SubsampleOffset(int j, int count) {
  return (static_cast<double>(j) + 0.5) / static_cast<double>(count) - 0.5;
}

}  // namespace

EllipsePhantom EllipsePhantom::ModifiedSheppLogan(double radius_mm) {
  std::vector<Ellipse> ellipses;
  for (const UnitEllipse& e : kModifiedSheppLogan) {
    ellipses.push_back(Ellipse{e.x0 * radius_mm, e.y0 * radius_mm, e.a * radius_mm, e.b * radius_mm,
                               e.phi_deg * M_PI / 180.0, e.density});
  }
  return EllipsePhantom(std::move(ellipses));
}

double EllipsePhantom::DensityAt(double x_mm, double y_mm) const {
  double density = 0;
  for (const Ellipse& e : ellipses_) {
    const double dx = x_mm - e.center_x_mm;
    const double dy = y_mm - e.center_y_mm;
    const double c = std::cos(e.rotation_rad);
    const double s = std::sin(e.rotation_rad);
    // Coordinates in the ellipse's own frame: rotate the offset by -phi.
    const double along_a = (c * dx + s * dy) / e.semi_axis_a_mm;
    const double along_b = (-s * dx + c * dy) / e.semi_axis_b_mm;
    if (along_a * along_a + along_b * along_b <= 1.0) density += e.density;
  }
  return density;
}

Array3D EllipsePhantom::Rasterize(const VolumeGeometry& volume, int supersampling) const {
  const int samples = std::max(1, supersampling);
  const Dims3 dims = volume.dims();
  Array3D image(dims);
  const double dx = volume.voxel_size_mm().x;
  const double dy = volume.voxel_size_mm().y;
  const double inverse_count = 1.0 / (static_cast<double>(samples) * samples);
  ParallelFor(dims.d1, [&](int64_t y_begin, int64_t y_end) {
    for (int64_t iy = y_begin; iy < y_end; ++iy) {
      for (int64_t ix = 0; ix < dims.d2; ++ix) {
        double sum = 0;
        for (int j = 0; j < samples; ++j) {
          const double y = volume.y_mm(static_cast<double>(iy)) + SubsampleOffset(j, samples) * dy;
          for (int i = 0; i < samples; ++i) {
            const double x =
                volume.x_mm(static_cast<double>(ix)) + SubsampleOffset(i, samples) * dx;
            sum += DensityAt(x, y);
          }
        }
        const float mean = static_cast<float>(sum * inverse_count);
        for (int64_t iz = 0; iz < dims.d0; ++iz) image.at(iz, iy, ix) = mean;
      }
    }
  });
  return image;
}

double EllipsePhantom::LineIntegral(double s_mm, double theta_rad) const {
  const double cos_theta = std::cos(theta_rad);
  const double sin_theta = std::sin(theta_rad);
  double integral = 0;
  for (const Ellipse& e : ellipses_) {
    // Chord of an ellipse with semi-axes A, B at distance s' from its centre, measured
    // along the direction alpha (relative to its own axes) of the detector axis:
    //   2 A B sqrt(a2 - s'^2) / a2,  a2 = A^2 cos^2 alpha + B^2 sin^2 alpha.
    const double alpha = theta_rad - e.rotation_rad;
    const double ca = std::cos(alpha);
    const double sa = std::sin(alpha);
    const double a = e.semi_axis_a_mm;
    const double b = e.semi_axis_b_mm;
    const double a2 = a * a * ca * ca + b * b * sa * sa;
    const double shifted = s_mm - (e.center_x_mm * cos_theta + e.center_y_mm * sin_theta);
    const double discriminant = a2 - shifted * shifted;
    if (discriminant > 0) integral += 2.0 * e.density * a * b * std::sqrt(discriminant) / a2;
  }
  return integral;
}

Array3D EllipsePhantom::ParallelProjections(const ParallelGeometry2D& geometry,
                                            int supersampling) const {
  const int samples = std::max(1, supersampling);
  Array3D projections(geometry.projection_dims());
  const int64_t num_detectors = geometry.num_detectors();
  ParallelFor(geometry.num_views(), [&](int64_t view_begin, int64_t view_end) {
    for (int64_t v = view_begin; v < view_end; ++v) {
      const double theta = geometry.angles_rad()[static_cast<size_t>(v)];
      for (int64_t k = 0; k < num_detectors; ++k) {
        double sum = 0;
        for (int j = 0; j < samples; ++j) {
          // Sub-positions across the element's width, in fractional element indices.
          const double position =
              geometry.detector_position_mm(static_cast<double>(k) + SubsampleOffset(j, samples));
          sum += LineIntegral(position, theta);
        }
        projections.at(v, 0, k) = static_cast<float>(sum / samples);
      }
    }
  });
  return projections;
}

}  // namespace tomo::core
