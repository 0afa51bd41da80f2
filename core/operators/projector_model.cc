#include "core/operators/projector_model.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tomo::core {
namespace {

constexpr ProjectorModel kModels[] = {
    ProjectorModel::kJoseph, ProjectorModel::kVoxelDriven, ProjectorModel::kVoxelDrivenFdk,
    ProjectorModel::kJosephExactTranspose2D, ProjectorModel::kRadonPlaneIntegral};

}  // namespace

std::string ProjectorModelName(ProjectorModel model) {
  switch (model) {
    case ProjectorModel::kJoseph:
      return "joseph";
    case ProjectorModel::kVoxelDriven:
      return "voxel_driven";
    case ProjectorModel::kVoxelDrivenFdk:
      return "voxel_driven_fdk";
    case ProjectorModel::kJosephExactTranspose2D:
      return "joseph_exact_2d";
    case ProjectorModel::kRadonPlaneIntegral:
      return "radon_plane";
  }
  return "unknown";
}

absl::StatusOr<ProjectorModel> ParseProjectorModel(absl::string_view name) {
  std::string known;
  for (ProjectorModel model : kModels) {
    if (ProjectorModelName(model) == name) return model;
    absl::StrAppend(&known, known.empty() ? "" : ", ", ProjectorModelName(model));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("projector: \"", name, "\" is not a projector model; known: [", known, "]"));
}

}  // namespace tomo::core
