// Analytic reconstruction for every geometry of the vector model:
//  - parallel beams (2D and 3D): ramp-filter the rows, back project (kNone), weight each
//    view by its share of the angular range (as Fbp for ParallelGeometry2D);
//  - fan and circular cone beams: FDK (Feldkamp, Davis and Kress): each projection is
//    cosine-weighted (the source-to-pixel cosine), ramp-filtered along rows (filter built
//    for the detector spacing scaled to the rotation axis), optionally Parker-weighted for a
//    short scan, and back projected with the FDK distance weight (kFdk); the result is
//    scaled by the angular step. Flat and cylindrical detectors. Full scans (2 pi) weight
//    each view by 1/2; short scans (range between pi + fan angle and 2 pi) use Parker's
//    weights (smooth, summing to 1 over conjugate rays).
// Helical trajectories are refused (FAILED_PRECONDITION: FDK needs a circular orbit; an
// iterative method or a helical FBP is needed).
//
// Circular orbit assumed: the sources lie on a circle about the z axis in one plane; the
// rotation angle of each view is taken from its source position. INVALID_ARGUMENT when the
// angular range is too short for the fan (naming the range and the minimum).
//
// Progress stages: "weight and filter", "back projection"; cancellation between stages
// and between view blocks of the back projection.
//
//   TOMO_ASSIGN_OR_RETURN(Array3D volume, Fdk(geometry, volume_geometry, projections,
//                                             {FilterOptions{}}, backend, context));
#pragma once

#include "absl/status/statusor.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/filters/ramp_filter.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/backend.h"

namespace tomo::core {

struct FdkOptions {
  FilterOptions filter;
};

absl::StatusOr<Array3D> Fdk(const VectorGeometry& geometry, const VolumeGeometry& volume,
                            const Array3D& projections, const FdkOptions& options,
                            Backend& backend, const RunContext& context);

}  // namespace tomo::core
