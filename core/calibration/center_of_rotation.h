// Estimating the centre of rotation of a circular scan: the detector column onto which the
// rotation axis projects (docs/geometry.md draws it), from the measured line integrals of
// one detector row.
//
// Column c (0 = the centre of the first column, fractional allowed) and the detector offset
// of our convention are one thing: detector element k sits at
//   u_k = (k - (columns - 1) / 2) pitch + offset_u,
// and the axis projects onto u = 0 (the central ray through the axis), so
//   offset_u = ((columns - 1) / 2 - c) pitch.
//
// Two methods:
//   kOpposingViews  opposing rays measure the same line. Parallel beams with views 180
//                   degrees apart (a 360-degree scan, or 180 degrees with both end views):
//                   p(theta + pi, s) = p(theta, -s), so view j is view i mirrored about c,
//                   m_j(k) = m_i(2c - k). Fan beams over a full circle: the ray (beta, gamma)
//                   is the ray (beta + pi + 2 gamma, -gamma), gamma the fan angle of column
//                   k about the axis' column (atan((k - c) pitch / D) flat, (k - c) pitch / D
//                   on an arc), interpolated between views. c minimises the mean squared
//                   difference (a 0.25-column grid, then a golden-section search; linear
//                   interpolation between columns).
//   kSharpness      any parallel or fan beam: the slice is reconstructed (FBP, Ram-Lak) for
//                   candidate columns and c minimises the entropy of the image's histogram
//                   (a wrong centre blurs edges into arcs and spreads the histogram; Donath
//                   et al., J. Opt. Soc. Am. A 23(5):1048, 2006). Candidates: every column
//                   within the search radius, then quarter and twentieth columns around the
//                   best. For short scans without opposing rays.
// kAutomatic takes opposing rays when the scan has them (parallel pairs, a full fan circle),
// else sharpness.
//
//   CorScan scan{.columns = 512, .column_spacing_mm = 0.65, .angles_rad = angles};
//   TOMO_ASSIGN_OR_RETURN(CorEstimate estimate,
//                         EstimateCenterOfRotation(sinogram, scan, {}, backend, context));
//   double offset_u = OffsetForCenterColumn(estimate.column, 512, 0.65);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/geometry/vector_geometry.h"
#include "core/operators/backend.h"

namespace tomo::core {

enum class CorMethod { kAutomatic, kOpposingViews, kSharpness };

// One detector row of a circular scan. source_origin_mm 0 means a parallel beam.
struct CorScan {
  int64_t columns = 0;
  double column_spacing_mm = 1;  // arc length per column for a cylindrical detector
  DetectorShape shape = DetectorShape::kFlat;
  double source_origin_mm = 0;
  double origin_detector_mm = 0;
  std::vector<double> angles_rad;
};

struct CorOptions {
  CorMethod method = CorMethod::kAutomatic;
  // Columns searched either side of the detector's centre; 0 means a quarter of the columns.
  double search_radius_columns = 0;
};

struct CorEstimate {
  double column = 0;
  CorMethod method = CorMethod::kAutomatic;  // the one used
  int64_t view_pairs = 0;  // opposing rays: parallel view pairs, or a fan's views, compared
  std::string Summary(int64_t columns, double column_spacing_mm) const;
};

// offset_u = ((columns - 1) / 2 - column) * pitch, and back.
double OffsetForCenterColumn(double column, int64_t columns, double column_spacing_mm);
double CenterColumnForOffset(double offset_u_mm, int64_t columns, double column_spacing_mm);

// sinogram: (views, 1, columns) line integrals of one detector row, one view per angle.
// INVALID_ARGUMENT when the shapes disagree, the radius leaves no candidate, or
// kOpposingViews is asked of a scan without opposing rays (the message says so); the reconstruction's errors for kSharpness; CANCELLED.
absl::StatusOr<CorEstimate> EstimateCenterOfRotation(const Array3D& sinogram,
                                                     const CorScan& scan,
                                                     const CorOptions& options, Backend& backend,
                                                     const RunContext& context);

}  // namespace tomo::core
