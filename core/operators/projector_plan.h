// What a backend needs to make a projector: the (geometry, volume, model) triple checked and
// resolved into the form its implementation takes. Both backends resolve through here, so
// they accept and refuse the same triples with the same words.
//
//   TOMO_ASSIGN_OR_RETURN(ProjectorPlan plan, PlanProjector(geometry, volume, model));
//   std::visit(overloaded{[](const VectorProjectorPlan& p) {...}, ...}, plan);
#pragma once

#include <variant>

#include "absl/status/statusor.h"
#include "core/geometry/geometry.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/filter_and_back_project_stream.h"
#include "core/operators/projector_model.h"

namespace tomo::core {

// kJoseph, kVoxelDriven, kVoxelDrivenFdk: Joseph forward, voxel-driven back weighted so.
struct VectorProjectorPlan {
  VectorGeometry geometry;
  BackProjectionWeighting back_weighting;
};
// kJosephExactTranspose2D: the geometry's ParallelGeometry2D form.
struct ExactParallel2DProjectorPlan {
  ParallelGeometry2D geometry;
};
// kRadonPlaneIntegral.
struct RadonProjectorPlan {
  RadonGeometry geometry;
};

using ProjectorPlan =
    std::variant<VectorProjectorPlan, ExactParallel2DProjectorPlan, RadonProjectorPlan>;

// INVALID_ARGUMENT "projector: <model> ..." naming the model and the geometry's kind when
// the model does not take it (a vector model and a Radon geometry or the reverse;
// kVoxelDrivenFdk and a parallel beam; kJosephExactTranspose2D and anything but a 2D
// parallel beam, ExactParallel2DForm), and as VectorGeometry::CheckAgainstVolume and
// ValidateRadonGeometry.
absl::StatusOr<ProjectorPlan> PlanProjector(const Geometry& geometry,
                                            const VolumeGeometry& volume,
                                            ProjectorModel model);

// The model whose Back is the voxel-driven back projection with this weighting.
ProjectorModel VoxelDrivenModel(BackProjectionWeighting weighting);

}  // namespace tomo::core
