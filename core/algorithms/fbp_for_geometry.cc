#include "core/algorithms/fbp_for_geometry.h"

#include <memory>
#include <optional>
#include <variant>

#include "core/algorithms/filtered_back_projection.h"
#include "core/algorithms/parallel_2d_fbp.h"
#include "core/algorithms/radon_fbp.h"
#include "core/base/status_macros.h"
#include "core/geometry/parallel_2d_form.h"

namespace tomo::core {

absl::StatusOr<Array3D> FbpForGeometry(const Geometry& geometry, const VolumeGeometry& volume,
                                       const Array3D& projections, const FilterOptions& filter,
                                       Backend& backend, const RunContext& context) {
  struct Visit {
    const VolumeGeometry& volume;
    const Array3D& projections;
    const FilterOptions& filter;
    Backend& backend;
    const RunContext& context;
    absl::StatusOr<Array3D> operator()(const VectorGeometry& vectors) const {
      if (std::optional<ParallelGeometry2D> parallel = ExactParallel2DForm(vectors, volume)) {
        return Fbp(*parallel, volume, projections, FbpOptions{filter}, backend, context);
      }
      return Fdk(vectors, volume, projections, FdkOptions{filter}, backend, context);
    }
    absl::StatusOr<Array3D> operator()(const RadonGeometry& radon) const {
      TOMO_RETURN_IF_ERROR(context.CheckCancelled("fbp / radon"));
      std::unique_ptr<RadonOperators> operators = backend.MakeRadonOperators();
      context.Report({0.0, "filter and back projection"});
      TOMO_ASSIGN_OR_RETURN(
          Array3D result,
          RadonFbp(radon, volume, projections, RadonFbpOptions{filter}, *operators));
      context.Report({1.0, "filter and back projection"});
      return result;
    }
  };
  return std::visit(Visit{volume, projections, filter, backend, context}, geometry);
}

}  // namespace tomo::core
