// ParallelGeometry2D: parallel-beam acquisition in the x-y plane, a validated value.
//
// Convention (docs/geometry.md): at view angle theta the detector axis is
// u = (cos theta, sin theta) and rays travel along (sin theta, -cos theta), so the ray
// through detector coordinate s is { s * u + t * ray }. Detector element k is centred at
//   s_k = (k - (num_detectors - 1) / 2) * detector_spacing_mm + detector_offset_mm.
// Angles are stored in radians. Projections of this geometry are Array3D of dims
// (num_views, 1, num_detectors). Field names in errors are those of
// tomoserve.v1.ParallelBeam2D.
//
//   TOMO_ASSIGN_OR_RETURN(auto geometry, ParallelGeometry2D::Create(
//       768, 0.5, 0.0, ParallelGeometry2D::UniformAngles(720, 0.0, M_PI)));
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/data/array3d.h"

namespace tomo::core {

class ParallelGeometry2D {
 public:
  // INVALID_ARGUMENT when num_detectors is outside [1, kMaxDetectors], the spacing is not
  // finite and > 0, the offset is not finite, there are no angles or more than kMaxViews,
  // or an angle is not finite.
  static absl::StatusOr<ParallelGeometry2D> Create(int64_t num_detectors,
                                                   double detector_spacing_mm,
                                                   double detector_offset_mm,
                                                   std::vector<double> angles_rad);
  static constexpr int64_t kMaxDetectors = 1 << 16;
  static constexpr int64_t kMaxViews = 1 << 20;

  // count angles start + i * span / count, in radians.
  static std::vector<double> UniformAngles(int64_t count, double start_rad, double span_rad);

  int64_t num_detectors() const { return num_detectors_; }
  int64_t num_views() const { return static_cast<int64_t>(angles_rad_.size()); }
  double detector_spacing_mm() const { return detector_spacing_mm_; }
  double detector_offset_mm() const { return detector_offset_mm_; }
  const std::vector<double>& angles_rad() const { return angles_rad_; }
  // Centre of detector element k (may be fractional), in mm along u.
  double detector_position_mm(double k) const {
    return (k - 0.5 * static_cast<double>(num_detectors_ - 1)) * detector_spacing_mm_ +
           detector_offset_mm_;
  }
  Dims3 projection_dims() const { return {num_views(), 1, num_detectors_}; }

 private:
  ParallelGeometry2D(int64_t n, double spacing, double offset, std::vector<double> angles)
      : num_detectors_(n),
        detector_spacing_mm_(spacing),
        detector_offset_mm_(offset),
        angles_rad_(std::move(angles)) {}
  int64_t num_detectors_;
  double detector_spacing_mm_;
  double detector_offset_mm_;
  std::vector<double> angles_rad_;
};

}  // namespace tomo::core
