// The Radon plane-integral projector pair on the CPU: the reference for RadonGeometry
// (core/geometry/radon_geometry.h), plain loops split across threads by ParallelFor.
//
// Model. Voxel j of value f_j, centred at x_j (VolumeGeometry), lies at the fractional
// sample index u_i(x_j) = x_j . n_i / dt + (S - 1) / 2 of direction i. With the hat
// Lambda(z) = max(0, 1 - |z|) (linear interpolation), voxel volume V = hx hy hz (mm^3):
//   forward  A:  p_ik = (V / dt) sum_j f_j Lambda(u_i(x_j) - k)
//   back     B:  f_j  = sum_i s_i sum_k p_ik Lambda(u_i(x_j) - k)
// A spreads each voxel's mass f_j V over the plane-integral samples so that the sum over k
// of p_ik dt is the object's mass for every direction: values per mm^3 (any unit) give
// plane integrals in value * mm^2, as EllipsoidRadonTransform. B reads each direction's
// samples by linear interpolation at u_i(x_j) (zero outside [0, S - 1]) and sums them times
// a per-direction scale s_i. With s_i = V / dt, B is A's exact transpose (RadonBackCpu);
// with quadrature weights it is the back projection of filtered back projection
// (core/algorithms/radon_fbp.h).
//
// Every function returns INVALID_ARGUMENT for an invalid geometry (ValidateRadonGeometry)
// or arrays whose dims differ from the geometry's (projections (directions, 1, samples),
// volumes (z, y, x)), and otherwise OK with every element of the output written.
// threads <= 0: DefaultThreadCount().
//
//   Array3D projections(geometry.projection_dims());
//   TOMO_RETURN_IF_ERROR(RadonForwardCpu(geometry, volume_geometry, volume, projections, 0));
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/geometry/radon_geometry.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

// projections = A volume (float64 sums, parallel over directions).
absl::Status RadonForwardCpu(const RadonGeometry& geometry, const VolumeGeometry& volume_geometry,
                             const Array3D& volume, Array3D& projections, int threads);

// volume = A^T projections, i.e. B with every s_i = V / dt.
absl::Status RadonBackCpu(const RadonGeometry& geometry, const VolumeGeometry& volume_geometry,
                          const Array3D& projections, Array3D& volume, int threads);

// volume = B projections with s_i = direction_scales[i] (float64 sums, parallel over lines
// of voxels along x). Also INVALID_ARGUMENT when direction_scales has not one finite value
// per direction.
absl::Status RadonBackScaledCpu(const RadonGeometry& geometry,
                                const VolumeGeometry& volume_geometry, const Array3D& projections,
                                const std::vector<double>& direction_scales, Array3D& volume,
                                int threads);

}  // namespace tomo::core
