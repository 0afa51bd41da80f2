// The filtered back projection of any geometry kind, as the registry's "fbp" runs it and as
// the iterative methods' FBP start computes it: for a vector geometry FBP with Joseph's
// exact-transpose pair on a 2D parallel beam (ExactParallel2DForm), else Fdk (parallel-beam
// FBP, fan-beam FBP, FDK); for a Radon geometry RadonFbp on the backend's Radon operators.
//
//   TOMO_ASSIGN_OR_RETURN(Array3D volume, FbpForGeometry(request.geometry, request.volume,
//                                                        projections, filter, backend, context));
#pragma once

#include "absl/status/statusor.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/filters/ramp_filter.h"
#include "core/geometry/geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/backend.h"

namespace tomo::core {

// The methods' errors (INVALID_ARGUMENT for bad filter options or dims, FAILED_PRECONDITION
// for a helical orbit, CANCELLED).
absl::StatusOr<Array3D> FbpForGeometry(const Geometry& geometry, const VolumeGeometry& volume,
                                       const Array3D& projections, const FilterOptions& filter,
                                       Backend& backend, const RunContext& context);

}  // namespace tomo::core
