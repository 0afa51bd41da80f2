#include "core/geometry/parallel_2d_form.h"

#include <cmath>
#include <vector>

#include "core/geometry/geometry_builders.h"

namespace tomo::core {

absl::StatusOr<VectorGeometry> ParallelGeometry2DAsVectors(const ParallelGeometry2D& geometry,
                                                           const VolumeGeometry& volume) {
  DetectorLayout detector;
  detector.rows = 1;
  detector.columns = geometry.num_detectors();
  detector.row_spacing_mm = volume.voxel_size_mm().z;
  detector.column_spacing_mm = geometry.detector_spacing_mm();
  detector.offset_u_mm = geometry.detector_offset_mm();
  return MakeParallel2D(detector, geometry.angles_rad());
}

std::optional<ParallelGeometry2D> ExactParallel2DForm(const VectorGeometry& geometry,
                                                      const VolumeGeometry& volume) {
  if (geometry.beam() != BeamKind::kParallel || geometry.detector() != DetectorShape::kFlat ||
      geometry.rows() != 1 || volume.size().z != 1 || geometry.num_views() == 0) {
    return std::nullopt;
  }
  // Relative tolerances: float64 rounding of builders' cos/sin and products, far below
  // anything a projector would notice.
  constexpr double kTolerance = 1e-9;
  const double spacing = Norm(geometry.views().front().u);
  const double offset = Dot(geometry.views().front().detector_center,
                            (1.0 / spacing) * geometry.views().front().u);
  const double slice_z = volume.z_mm(0.0);
  const double dz = volume.voxel_size_mm().z;
  std::vector<double> angles;
  angles.reserve(geometry.views().size());
  for (const ViewVectors& view : geometry.views()) {
    const Vec3& ray = view.source;
    const double u_norm = Norm(view.u);
    if (std::abs(ray.z) > kTolerance || std::abs(view.u.z) > kTolerance * u_norm ||
        std::abs(u_norm - spacing) > kTolerance * spacing) {
      return std::nullopt;
    }
    const Vec3 e = (1.0 / u_norm) * view.u;
    // ray = (e.y, -e.x, 0): u turned by -90 degrees.
    if (std::abs(ray.x - e.y) > kTolerance || std::abs(ray.y + e.x) > kTolerance) {
      return std::nullopt;
    }
    if (std::abs(Dot(view.detector_center, e) - offset) > kTolerance * (1 + std::abs(offset)) ||
        std::abs(view.detector_center.z - slice_z) > kTolerance * (dz + std::abs(slice_z)) ||
        std::abs(view.v.x) > kTolerance * dz || std::abs(view.v.y) > kTolerance * dz) {
      return std::nullopt;
    }
    angles.push_back(std::atan2(e.y, e.x));
  }
  absl::StatusOr<ParallelGeometry2D> form =
      ParallelGeometry2D::Create(geometry.columns(), spacing, offset, std::move(angles));
  if (!form.ok()) return std::nullopt;
  return *std::move(form);
}

}  // namespace tomo::core
