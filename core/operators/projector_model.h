// ProjectorModel: how a projector pair discretises the projection of a volume, chosen per
// algorithm run and made by a Backend for a (geometry, volume) pair (Backend::MakeProjector,
// ResidentOperators::MakeProjector).
//
// Units, for every model: volume values are per mm (attenuation), projections are the
// integrals of the volume along the measurement (line integrals for a VectorGeometry: mm x
// value; plane integrals for a RadonGeometry: mm^2 x value), so a projector's Forward
// matches the analytic phantoms' projections. Back is the adjoint of Forward in these units
// (exactly, or within the tolerance each model states), so that <A x, y> = <x, A^T y> and
// methods that need A^T (CGLS) converge at any voxel and pixel size.
//
//  - kJoseph (VectorGeometry): Forward is Joseph's ray-driven method (backend.h); Back is
//    voxel-driven, each view's bilinear sample weighted by BackProjectionWeighting::kMatched:
//    the voxel volume over the pixel area seen from the voxel (V / (|u x v| cos a), times
//    (D / U)^2 for cone beams), which is what Joseph's transpose adds up to per voxel. It
//    is the transpose up to interpolation and the spread of cos a over a cone beam's
//    detector (measured within 1% on parallel beams, 3% on cone beams up to 15 degrees
//    of half cone angle; the tests state each). The iterative methods' default.
//  - kVoxelDriven, kVoxelDrivenFdk (VectorGeometry): Forward as kJoseph; Back is the plain
//    voxel-driven interpolation (weight 1), or with the FDK distance weight (D / U)^2 (cone
//    beams only). These are the back projections of filtered back projection; they are
//    not adjoints of Forward.
//  - kJosephExactTranspose2D (a one-row parallel VectorGeometry whose rays lie in the
//    slice, see ExactParallel2DForm): Joseph's 2D method and its exact transpose, up to
//    float rounding. For methods that want the exact adjoint on 2D parallel beams.
//  - kRadonPlaneIntegral (RadonGeometry): plane integrals, each voxel's value times its
//    volume spread over the two nearest samples in t, and its exact transpose.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tomo::core {

enum class ProjectorModel {
  kJoseph,
  kVoxelDriven,
  kVoxelDrivenFdk,
  kJosephExactTranspose2D,
  kRadonPlaneIntegral,
};

// "joseph", "voxel_driven", "voxel_driven_fdk", "joseph_exact_2d", "radon_plane".
std::string ProjectorModelName(ProjectorModel model);
// The model of a name above; INVALID_ARGUMENT listing the names otherwise.
absl::StatusOr<ProjectorModel> ParseProjectorModel(absl::string_view name);

}  // namespace tomo::core
