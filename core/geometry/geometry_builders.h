// Builders: the familiar acquisition forms turned into a VectorGeometry.
//
// Common convention (docs/geometry.md): the rotation axis is z; at view angle theta
// (radians, counter-clockwise seen from +z) the rays travel along
//   r(theta) = (sin theta, -cos theta, 0)
// and the detector's columns run along e_u(theta) = (cos theta, sin theta, 0), its rows
// along +z. Parallel beams: ray direction r, detector centre at
//   detector_offset_u * e_u + detector_offset_v * z.
// Cone (and fan) beams: source at -source_origin_mm * r (+ z shift), detector centre at
//   origin_detector_mm * r + detector_offset_u * e_u + detector_offset_v * z  (+ z shift),
// so the central ray goes from the source through the rotation axis to the detector. This
// is the 2D parallel convention of ParallelGeometry2D extended to 3D: at theta = 0 the
// rays run along -y and detector column coordinates grow along +x.
// Offsets and spacings are in mm at the detector. Errors: INVALID_ARGUMENT naming the
// field as in tomoserve.v1 (e.g. "source_origin_mm: -5 must be a finite value > 0").
//
//   FanConeOptions cone;
//   cone.detector = {960, 1248, 0.32, 0.32};
//   cone.source_origin_mm = 780;
//   cone.origin_detector_mm = 420;
//   cone.angles_rad = UniformAnglesRad(496, 0, 2 * M_PI);
//   TOMO_ASSIGN_OR_RETURN(VectorGeometry geometry, MakeCircularCone(cone));
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/geometry/vector_geometry.h"

namespace tomo::core {

// count angles start + i * span / count.
std::vector<double> UniformAnglesRad(int64_t count, double start_rad, double span_rad);

struct DetectorLayout {
  int64_t rows = 1;
  int64_t columns = 0;
  double row_spacing_mm = 1;     // ignored for one-row (2D) detectors except as slice height
  double column_spacing_mm = 0;  // arc length per column for cylindrical detectors
  double offset_u_mm = 0;        // detector centre shift along e_u (cylindrical: along the arc)
  double offset_v_mm = 0;        // and along z
};

// 2D parallel beam: one row, equivalent to ParallelGeometry2D.
absl::StatusOr<VectorGeometry> MakeParallel2D(const DetectorLayout& detector,
                                              const std::vector<double>& angles_rad);
// 3D parallel beam (synchrotron micro-CT).
absl::StatusOr<VectorGeometry> MakeParallel3D(const DetectorLayout& detector,
                                              const std::vector<double>& angles_rad);

struct FanConeOptions {
  DetectorLayout detector;
  DetectorShape shape = DetectorShape::kFlat;  // kCylindrical: the arc of third-gen CT
  double source_origin_mm = 0;
  double origin_detector_mm = 0;
  std::vector<double> angles_rad;  // full scan: 2 pi; short scan: at least pi + fan angle
};

// 2D fan beam: one row (detector.rows must be 1).
absl::StatusOr<VectorGeometry> MakeFan2D(const FanConeOptions& options);
// Circular cone beam (CBCT, micro-CT).
absl::StatusOr<VectorGeometry> MakeCircularCone(const FanConeOptions& options);

struct HelicalOptions {
  FanConeOptions cone;
  double pitch_mm_per_turn = 0;  // table feed per 2 pi of rotation; may be negative
  double z_start_mm = 0;         // source z at angles_rad[0]
};

// Helical cone beam: source and detector move along z by pitch * (theta - theta_0) / 2 pi.
absl::StatusOr<VectorGeometry> MakeHelicalCone(const HelicalOptions& options);

// The fan angle a circular fan/cone geometry spans, edge to edge (for a centred flat
// detector 2 atan of the detector half-width over the source-detector distance; with an
// offset, the difference of the edges' atans; for a cylindrical one the arc's angle), for
// short-scan checks and Parker weights. options as accepted by MakeCircularCone.
double FanAngleRad(const FanConeOptions& options);

}  // namespace tomo::core
