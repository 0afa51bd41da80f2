// The JobSpec's geometry.radon_3d (EPR imaging's 3D Radon transform, docs/radon.md): its
// validation into a core::RadonGeometry, the input it takes and the projector its
// iterative methods run. Called by ValidateJobSpec (job_spec.h).
//
// Errors are INVALID_ARGUMENT naming the proto path, e.g.
//   "geometry.radon_3d.directions[3].theta_rad: 3.5 is out of range [0, pi]"
// (ValidateRadonGeometry's words, prefixed), or naming --max_views when the directions
// exceed the server's view limit.
//
//   TOMO_ASSIGN_OR_RETURN(core::RadonGeometry g, ValidateRadon3D(spec.geometry().radon_3d(),
//                                                                limits.max_views));
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/algorithms/reconstruction.h"
#include "core/geometry/radon_geometry.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

// Exactly one of directions (non-empty), uniform_solid_angle, equal_linear_angle; at most
// max_views directions; then the core's checks (ValidateRadonGeometry, the builders').
absl::StatusOr<core::RadonGeometry> ValidateRadon3D(const tomoserve::v1::Radon3D& radon,
                                                    uint32_t max_views);

// Plane integrals are values, not detector readings: raw float32 (either byte order), no
// files, no -ln. INVALID_ARGUMENT naming input.encoding, input.files or
// input.preprocessing.negative_log otherwise.
absl::Status CheckRadon3DInput(const tomoserve::v1::ProjectionInput& input);

// Sets every iterative method's projector to the plane-integral pair
// (ProjectorModel::kRadonPlaneIntegral), the one model that takes a RadonGeometry.
void UseRadonProjector(core::AlgorithmOptions& options);

}  // namespace tomo::server
