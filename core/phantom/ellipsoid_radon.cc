#include "core/phantom/ellipsoid_radon.h"

#include <algorithm>
#include <cmath>

#include "core/base/parallel_for.h"

namespace tomo::core {
namespace {

constexpr double kPi = 3.14159265358979323846;

}  // namespace

double EllipsoidPlaneIntegral(const EllipsoidPhantom& phantom, const Vec3& unit_normal,
                              double t_mm) {
  double integral = 0;
  for (const Ellipsoid& e : phantom.ellipsoids()) {
    // m = A R^T n: R turns +x by rotation_rad about +z (ellipsoid_phantom.h).
    const double c = std::cos(e.rotation_rad);
    const double s = std::sin(e.rotation_rad);
    const Vec3 m{e.semi_axes_mm.x * (c * unit_normal.x + s * unit_normal.y),
                 e.semi_axes_mm.y * (-s * unit_normal.x + c * unit_normal.y),
                 e.semi_axes_mm.z * unit_normal.z};
    const double m2 = Dot(m, m);
    const double offset = t_mm - Dot(e.center_mm, unit_normal);
    const double chord2 = m2 - offset * offset;
    if (chord2 <= 0) continue;
    const double abc = e.semi_axes_mm.x * e.semi_axes_mm.y * e.semi_axes_mm.z;
    integral += e.density * kPi * abc * chord2 / (m2 * std::sqrt(m2));
  }
  return integral;
}

Array3D EllipsoidRadonTransform(const EllipsoidPhantom& phantom, const RadonGeometry& geometry,
                                int supersampling) {
  const int samples = std::max(1, supersampling);
  Array3D projections(geometry.projection_dims());
  const int64_t num_samples = geometry.num_samples;
  ParallelFor(geometry.num_directions(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Vec3 n = geometry.directions[static_cast<size_t>(i)].unit();
      for (int64_t k = 0; k < num_samples; ++k) {
        double sum = 0;
        for (int j = 0; j < samples; ++j) {
          // Midpoints of `samples` equal parts of the sample's interval.
          const double offset = (static_cast<double>(j) + 0.5) / samples - 0.5;
          sum += EllipsoidPlaneIntegral(phantom, n,
                                        geometry.sample_t_mm(static_cast<double>(k) + offset));
        }
        projections.at(i, 0, k) = static_cast<float>(sum / samples);
      }
    }
  });
  return projections;
}

}  // namespace tomo::core
