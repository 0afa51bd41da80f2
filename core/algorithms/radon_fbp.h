// Filtered back projection of the 3D Radon transform (EPR imaging): the volume from plane
// integrals along any set of directions (RadonGeometry), in one back projection stage (no
// equal-linear-angle requirement).
//
// The inversion formula: f(x) = -1/(8 pi^2) integral over the sphere of
// d^2/dt^2 Rf(n, x . n) dn. The second derivative of the plane integrals is even under
// (n, t) -> (-n, -t), so the sphere is twice the hemisphere that a RadonGeometry's
// directions stand for (radon_geometry.h), and with the parabola filter
// g = -1/(4 pi^2) d^2/dt^2 Rf (FilterOrder::kParabola, ramp_filter.h)
//   f(x) = integral over the hemisphere of g(n, x . n) dn ~ sum_i w_i g(n_i, x . n_i),
// the directions' weights w_i (solid angles summing to 2 pi) as the quadrature. So:
//   1. filter each direction's samples with the parabola (window and cut-off as for FBP);
//   2. back project: volume(x) = sum_i w_i g_i(x . n_i), g_i read by linear interpolation
//      (B of cpu_radon_projector.h with s_i = w_i).
// Plane integrals in value * mm^2 give a volume in value (the units of the object).
//
// The steps go through RadonOperators (core/operators/radon_operators.h), which a backend
// provides: CpuRadonOperators, CudaRadonOperators.
//
//   CpuRadonOperators operators(/*threads=*/0);
//   TOMO_ASSIGN_OR_RETURN(Array3D volume,
//                         RadonFbp(geometry, volume_geometry, projections, {}, operators));
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/filters/ramp_filter.h"
#include "core/geometry/radon_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/radon_operators.h"

namespace tomo::core {

struct RadonFbpOptions {
  FilterOptions filter;  // window and cut-off of the parabola filter
};

// The per-direction scales of the back projection: the weights w_i.
std::vector<double> RadonFbpDirectionScales(const RadonGeometry& geometry);

// The volume (z, y, x) of `volume_geometry` from `projections` (directions, 1, samples).
// INVALID_ARGUMENT for an invalid geometry (ValidateRadonGeometry), projections whose dims
// are not the geometry's, or filter options RampFilter refuses; otherwise the operators'
// errors.
absl::StatusOr<Array3D> RadonFbp(const RadonGeometry& geometry,
                                 const VolumeGeometry& volume_geometry, const Array3D& projections,
                                 const RadonFbpOptions& options, RadonOperators& operators);

}  // namespace tomo::core
