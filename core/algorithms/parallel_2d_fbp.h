// Filtered back projection for 2D parallel-beam data:
//   f(x) = integral over [0, pi) of (p_theta * h)(x . u_theta) d theta,
// computed as ramp filter (RampFilter) -> BackProject -> scale by the angular step.
// Views are weighted by their share of the angular range, so uneven angle sets work; a
// full 360-degree scan is handled by that same weighting (each direction seen twice).
//
// Progress stages: "filter", "back projection". Cancellation is checked between stages.
//
//   TOMO_ASSIGN_OR_RETURN(Array3D image, Fbp(geometry, volume, sinogram, {}, backend, context));
#pragma once

#include "absl/status/statusor.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/filters/ramp_filter.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/backend.h"

namespace tomo::core {

struct FbpOptions {
  FilterOptions filter;
};

absl::StatusOr<Array3D> Fbp(const ParallelGeometry2D& geometry, const VolumeGeometry& volume,
                            const Array3D& projections, const FbpOptions& options,
                            Backend& backend, const RunContext& context);

}  // namespace tomo::core
