#include "core/operators/parallel_2d_joseph.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"

namespace tomo::core {

std::vector<JosephViewParameters> MakeJosephViews(const ParallelGeometry2D& geometry,
                                                  const VolumeGeometry& volume_geometry) {
  const double ds = geometry.detector_spacing_mm();
  const double s_first = geometry.detector_position_mm(0);
  const double dx = volume_geometry.voxel_size_mm().x;
  const double dy = volume_geometry.voxel_size_mm().y;
  const double x_first = volume_geometry.x_mm(0);
  const double y_first = volume_geometry.y_mm(0);
  std::vector<JosephViewParameters> views;
  views.reserve(static_cast<size_t>(geometry.num_views()));
  for (const double theta : geometry.angles_rad()) {
    const double c = std::cos(theta);
    const double s = std::sin(theta);
    JosephViewParameters view;
    view.step_rows = std::abs(c) >= std::abs(s);
    if (view.step_rows) {
      // Row y meets the ray at x = (s_k - y sin) / cos.
      view.per_detector = ds / (c * dx);
      view.per_line = -dy * s / (c * dx);
      view.offset = (s_first - y_first * s) / (c * dx) - x_first / dx;
      view.path_length = dy / std::abs(c);
    } else {
      // Column x meets it at y = (s_k - x cos) / sin.
      view.per_detector = ds / (s * dy);
      view.per_line = -dx * c / (s * dy);
      view.offset = (s_first - x_first * c) / (s * dy) - y_first / dy;
      view.path_length = dx / std::abs(s);
    }
    views.push_back(view);
  }
  return views;
}

absl::Status CheckProjectorOperands(const ParallelGeometry2D& geometry,
                                    const VolumeGeometry& volume_geometry,
                                    const Array3D& volume, const Array3D& projections) {
  if (volume_geometry.size().z != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("size.z: ", volume_geometry.size().z,
                     " is not supported by the 2D parallel-beam projector, which needs 1"));
  }
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("volume", volume.dims(), volume_geometry.dims(), "(z, y, x)"));
  return CheckDimsMatch("projections", projections.dims(), geometry.projection_dims(),
                   "(views, rows, detectors)");
}

}  // namespace tomo::core
