#include "core/operators/backend.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"
#include "core/geometry/parallel_2d_form.h"
#include "core/operators/host_resident_operators.h"
#include "core/operators/parallel_2d_joseph.h"
#include "core/operators/projector_plan.h"
#include "core/operators/vector_operands.h"

namespace tomo::core {

namespace {

// The exact-transpose 2D pair of a ParallelGeometry2D (on its one-row vector form), after
// the operands' checks with the 2D projector's words.
absl::StatusOr<std::unique_ptr<Projector>> ExactParallel2DProjector(
    Backend& backend, const ParallelGeometry2D& geometry, const VolumeGeometry& volume_geometry,
    const Array3D& volume, const Array3D& projections) {
  TOMO_RETURN_IF_ERROR(CheckProjectorOperands(geometry, volume_geometry, volume, projections));
  TOMO_ASSIGN_OR_RETURN(VectorGeometry vectors,
                        ParallelGeometry2DAsVectors(geometry, volume_geometry));
  return backend.MakeProjector(vectors, volume_geometry, ProjectorModel::kJosephExactTranspose2D);
}

}  // namespace

absl::Status Backend::ForwardProject(const ParallelGeometry2D& geometry,
                                     const VolumeGeometry& volume_geometry, const Array3D& volume,
                                     Array3D& projections) {
  TOMO_ASSIGN_OR_RETURN(
      std::unique_ptr<Projector> projector,
      ExactParallel2DProjector(*this, geometry, volume_geometry, volume, projections));
  return projector->Forward(volume, projections);
}

absl::Status Backend::BackProject(const ParallelGeometry2D& geometry,
                                  const VolumeGeometry& volume_geometry,
                                  const Array3D& projections, Array3D& volume) {
  TOMO_ASSIGN_OR_RETURN(
      std::unique_ptr<Projector> projector,
      ExactParallel2DProjector(*this, geometry, volume_geometry, volume, projections));
  return projector->Back(projections, volume);
}

absl::Status Backend::ForwardProject(const VectorGeometry& geometry,
                                     const VolumeGeometry& volume_geometry, const Array3D& volume,
                                     Array3D& projections) {
  TOMO_RETURN_IF_ERROR(CheckVectorOperands(geometry, volume_geometry, volume, projections));
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<Projector> projector,
                        MakeProjector(geometry, volume_geometry, ProjectorModel::kJoseph));
  return projector->Forward(volume, projections);
}

absl::Status Backend::BackProject(const VectorGeometry& geometry,
                                  const VolumeGeometry& volume_geometry,
                                  const Array3D& projections, BackProjectionWeighting weighting,
                                  Array3D& volume) {
  TOMO_RETURN_IF_ERROR(CheckVectorOperands(geometry, volume_geometry, volume, projections));
  if (weighting == BackProjectionWeighting::kFdk && geometry.beam() != BeamKind::kCone) {
    return absl::InvalidArgumentError(
        "weighting: kFdk (the FDK distance weight) needs a cone beam; this geometry is a "
        "parallel beam");
  }
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<Projector> projector,
                        MakeProjector(geometry, volume_geometry, VoxelDrivenModel(weighting)));
  return projector->Back(projections, volume);
}

absl::Status Backend::FilterAndBackProject(const VectorGeometry& geometry,
                                           const VolumeGeometry& volume_geometry,
                                           const Array3D& projections, const RampFilter& filter,
                                           const FilteredBackProjectionWeights& weights,
                                           BackProjectionWeighting weighting, Array3D& volume) {
  TOMO_RETURN_IF_ERROR(CheckDimsMatch("projections", projections.dims(),
                                      geometry.projection_dims(), "(views, rows, columns)"));
  TOMO_RETURN_IF_ERROR(weights.Check(projections.dims()));
  Array3D weighted = projections.Clone();
  ApplyFilteredBackProjectionWeights(weights, weighted);
  TOMO_RETURN_IF_ERROR(FilterRows(filter, weighted));
  return BackProject(geometry, volume_geometry, weighted, weighting, volume);
}

absl::Status Backend::FilterAndBackProjectInto(const VectorGeometry& geometry,
                                               const VolumeGeometry& volume_geometry,
                                               const Array3D& projections,
                                               const RampFilter& filter,
                                               const FilteredBackProjectionWeights& weights,
                                               BackProjectionWeighting weighting,
                                               float* volume_values) {
  Array3D volume = Array3D::Uninitialized(volume_geometry.dims());
  TOMO_RETURN_IF_ERROR(FilterAndBackProject(geometry, volume_geometry, projections, filter,
                                            weights, weighting, volume));
  ParallelCopy(volume.data(), volume.size(), volume_values);
  return absl::OkStatus();
}

namespace {

// Backend::BeginFilterAndBackProject's default: the views wait in a host array until Finish.
class HostFilterAndBackProjectStream final : public FilterAndBackProjectStream {
 public:
  HostFilterAndBackProjectStream(Backend& backend, const VectorGeometry& geometry,
                                 const VolumeGeometry& volume_geometry, const RampFilter& filter,
                                 const FilteredBackProjectionWeights& weights,
                                 BackProjectionWeighting weighting)
      : backend_(backend), geometry_(geometry), volume_geometry_(volume_geometry),
        filter_(filter), weights_(weights), weighting_(weighting),
        projections_(Array3D::Uninitialized(geometry.projection_dims())) {}

  absl::Status AddViews(int64_t first_view, const float* views, int64_t count) override {
    TOMO_RETURN_IF_ERROR(CheckNextViews(first_view, count, added_, geometry_.num_views()));
    const int64_t view_values = geometry_.rows() * geometry_.columns();
    std::copy(views, views + count * view_values, projections_.data() + first_view * view_values);
    added_ += count;
    return absl::OkStatus();
  }
  absl::Status Finish(Array3D& volume) override {
    TOMO_RETURN_IF_ERROR(CheckAllViews(added_, geometry_.num_views()));
    return backend_.FilterAndBackProject(geometry_, volume_geometry_, projections_, filter_,
                                         weights_, weighting_, volume);
  }
  int64_t views_added() const override { return added_; }

 private:
  Backend& backend_;
  const VectorGeometry geometry_;
  const VolumeGeometry volume_geometry_;
  const RampFilter filter_;
  const FilteredBackProjectionWeights weights_;
  const BackProjectionWeighting weighting_;
  Array3D projections_;
  int64_t added_ = 0;
};

}  // namespace

absl::Status CheckNextViews(int64_t first_view, int64_t count, int64_t added, int64_t views) {
  if (first_view != added) {
    return absl::InvalidArgumentError(absl::StrCat("first_view: ", first_view,
                                                   " is not the next view; ", added,
                                                   " views were added, in order"));
  }
  if (count < 0 || count > views - added) {
    return absl::InvalidArgumentError(absl::StrCat("count: ", count, " views from view ",
                                                   first_view, " run past the geometry's ",
                                                   views, " views"));
  }
  return absl::OkStatus();
}

absl::Status CheckAllViews(int64_t added, int64_t views) {
  if (added == views) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("Finish: ", views - added, " of the ", views,
                                                    " views were not added"));
}

absl::StatusOr<std::unique_ptr<FilterAndBackProjectStream>> Backend::BeginFilterAndBackProject(
    const VectorGeometry& geometry, const VolumeGeometry& volume_geometry,
    const RampFilter& filter, const FilteredBackProjectionWeights& weights,
    BackProjectionWeighting weighting) {
  TOMO_RETURN_IF_ERROR(weights.Check(geometry.projection_dims()));
  if (filter.num_detectors() != geometry.columns()) {
    return absl::InvalidArgumentError(absl::StrCat("filter: made for ", filter.num_detectors(),
                                                   " detector columns, the geometry has ",
                                                   geometry.columns()));
  }
  return std::unique_ptr<FilterAndBackProjectStream>(std::make_unique<HostFilterAndBackProjectStream>(
      *this, geometry, volume_geometry, filter, weights, weighting));
}

absl::StatusOr<std::unique_ptr<ResidentOperators>> Backend::MakeResidentOperators() {
  return std::unique_ptr<ResidentOperators>(std::make_unique<HostResidentOperators>(*this));
}

}  // namespace tomo::core
