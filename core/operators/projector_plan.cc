#include "core/operators/projector_plan.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/geometry/parallel_2d_form.h"

namespace tomo::core {
namespace {

absl::Status ModelRefusesKind(ProjectorModel model, const Geometry& geometry,
                              const char* what_it_takes) {
  return UnsupportedGeometryKind(absl::StrCat("projector: ", ProjectorModelName(model)),
                                 geometry, what_it_takes);
}

}  // namespace

ProjectorModel VoxelDrivenModel(BackProjectionWeighting weighting) {
  switch (weighting) {
    case BackProjectionWeighting::kNone:
      return ProjectorModel::kVoxelDriven;
    case BackProjectionWeighting::kFdk:
      return ProjectorModel::kVoxelDrivenFdk;
    case BackProjectionWeighting::kMatched:
      return ProjectorModel::kJoseph;
  }
  return ProjectorModel::kVoxelDriven;
}

absl::StatusOr<ProjectorPlan> PlanProjector(const Geometry& geometry,
                                            const VolumeGeometry& volume,
                                            ProjectorModel model) {
  const VectorGeometry* vectors = std::get_if<VectorGeometry>(&geometry);
  switch (model) {
    case ProjectorModel::kJoseph:
    case ProjectorModel::kVoxelDriven:
    case ProjectorModel::kVoxelDrivenFdk: {
      if (vectors == nullptr) return ModelRefusesKind(model, geometry, "a vector geometry");
      if (model == ProjectorModel::kVoxelDrivenFdk && vectors->beam() != BeamKind::kCone) {
        return absl::InvalidArgumentError(
            "projector: voxel_driven_fdk (the FDK distance weight) needs a cone beam; this "
            "geometry is a parallel beam");
      }
      TOMO_RETURN_IF_ERROR(vectors->CheckAgainstVolume(volume));
      const BackProjectionWeighting weighting =
          model == ProjectorModel::kJoseph         ? BackProjectionWeighting::kMatched
          : model == ProjectorModel::kVoxelDriven ? BackProjectionWeighting::kNone
                                                  : BackProjectionWeighting::kFdk;
      return ProjectorPlan(VectorProjectorPlan{*vectors, weighting});
    }
    case ProjectorModel::kJosephExactTranspose2D: {
      if (vectors == nullptr) {
        return ModelRefusesKind(model, geometry, "a 2D parallel-beam vector geometry");
      }
      std::optional<ParallelGeometry2D> form = ExactParallel2DForm(*vectors, volume);
      if (!form.has_value()) {
        return absl::InvalidArgumentError(
            "projector: joseph_exact_2d takes only 2D parallel beams (one detector row, a "
            "one-slice volume, rays in the slice, one column spacing and offset for every "
            "view); this vector geometry is not one");
      }
      return ProjectorPlan(ExactParallel2DProjectorPlan{*std::move(form)});
    }
    case ProjectorModel::kRadonPlaneIntegral: {
      const RadonGeometry* radon = std::get_if<RadonGeometry>(&geometry);
      if (radon == nullptr) return ModelRefusesKind(model, geometry, "a radon_3d geometry");
      TOMO_RETURN_IF_ERROR(ValidateRadonGeometry(*radon));
      return ProjectorPlan(RadonProjectorPlan{*radon});
    }
  }
  return absl::InvalidArgumentError("projector: unknown model");
}

}  // namespace tomo::core
