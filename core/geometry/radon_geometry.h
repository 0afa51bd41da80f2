// RadonGeometry: the 3D Radon transform's acquisition (EPR imaging): plane integrals of the
// object over the planes { x : x . n = t } for a set of unit directions n (the gradient
// directions) and S equally spaced offsets t along each, a plain value checked by
// ValidateRadonGeometry.
//
// Direction i is n_i = (sin theta cos phi, sin theta sin phi, cos theta) in the object frame
// (docs/geometry.md), with a quadrature weight: the solid angle (sr) that the direction
// stands for. Because the plane integral at -n and offset -t is the one at n and t, a
// direction stands for both n and -n; a set therefore never holds both (validation refuses
// it), and weights that cover the whole sphere once sum to 2 pi (a hemisphere's solid
// angle), as the builders below make them.
//
// Sample k of a direction is at t_k = (k - (S - 1) / 2) dt mm, centred on the origin of the
// object frame (not on the volume's centre). Projections are Array3D (directions, 1,
// samples): views, one detector row, columns.
//
//   TOMO_ASSIGN_OR_RETURN(RadonGeometry g, MakeUniformSolidAngleRadon(208, 256, 0.5));
//   Array3D projections(g.projection_dims());
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/geometry/vec3.h"

namespace tomo::core {

struct RadonDirection {
  double phi_rad = 0;    // azimuth from +x towards +y
  double theta_rad = 0;  // polar angle from +z
  double weight_sr = 0;  // solid angle the direction stands for (together with its opposite)
  // (sin theta cos phi, sin theta sin phi, cos theta).
  Vec3 unit() const;
};

struct RadonGeometry {
  std::vector<RadonDirection> directions;
  int64_t num_samples = 0;       // S
  double sample_spacing_mm = 0;  // dt
  int64_t num_directions() const { return static_cast<int64_t>(directions.size()); }
  // (directions, 1, samples).
  Dims3 projection_dims() const { return {num_directions(), 1, num_samples}; }
  // t_k = (k - (S - 1) / 2) dt, in mm; k may be fractional.
  double sample_t_mm(double k) const {
    return (k - 0.5 * static_cast<double>(num_samples - 1)) * sample_spacing_mm;
  }
};

// Limits of ValidateRadonGeometry. 65536 directions is far beyond the hundreds to thousands
// of EPR acquisitions, and keeps the repeated-direction check (sorted by z, neighbours in z
// compared) fast for equal-linear-angle sets, whose bands share one z.
inline constexpr int64_t kMaxRadonDirections = 1 << 16;
inline constexpr int64_t kMaxRadonSamples = 1 << 16;
// Two directions (or one and the other's opposite) closer than this are the same plane
// family measured twice.
inline constexpr double kMinRadonDirectionSeparationRad = 1e-6;

// OK, or INVALID_ARGUMENT naming the field ("directions[12].theta_rad", "num_samples"), the
// value and the allowed range when: there are no directions or more than
// kMaxRadonDirections; phi is not finite or outside [-2 pi, 2 pi]; theta is not finite or
// outside [0, pi]; a weight is not finite and > 0; two directions, or one and the other's
// opposite, are closer than kMinRadonDirectionSeparationRad ("directions[j]" names the later
// one and the earlier); num_samples outside [2, kMaxRadonSamples]; sample_spacing_mm not
// finite and > 0.
absl::Status ValidateRadonGeometry(const RadonGeometry& geometry);

// The uniform-solid-angle scheme: `count` directions spread evenly over the hemisphere
// z > 0 (a generalised spiral: cos theta_i = 1 - (i + 1/2) / count, phi_i = i times the
// golden angle, so that each direction is the centre of one of `count` bands of equal area),
// every weight 2 pi / count. Validated; INVALID_ARGUMENT as ValidateRadonGeometry, or for
// count < 1.
absl::StatusOr<RadonGeometry> MakeUniformSolidAngleRadon(int64_t count, int64_t num_samples,
                                                         double sample_spacing_mm);

// The equal-linear-angle scheme: phi_i = i * 2 pi / num_phi (i < num_phi) and theta_j =
// (j + 1/2) * (pi / 2) / num_theta (j < num_theta), the midpoints of equal steps over the
// hemisphere; direction (i, j) at index j * num_phi + i. Its weight is the area of its cell,
// dphi (cos(theta_j - dtheta/2) - cos(theta_j + dtheta/2)) = sin theta_j dphi dtheta times
// sinc(dtheta / 2), so that the weights sum to 2 pi exactly. Validated; INVALID_ARGUMENT as
// ValidateRadonGeometry, or for num_phi or num_theta < 1.
absl::StatusOr<RadonGeometry> MakeEqualLinearAngleRadon(int64_t num_phi, int64_t num_theta,
                                                        int64_t num_samples,
                                                        double sample_spacing_mm);

}  // namespace tomo::core
