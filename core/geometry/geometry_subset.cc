#include "core/geometry/geometry_subset.h"

#include <numeric>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/geometry/radon_geometry.h"

namespace tomo::core {

absl::StatusOr<VectorGeometry> SubsetGeometry(const VectorGeometry& geometry,
                                              const std::vector<int64_t>& views) {
  std::vector<ViewVectors> vectors;
  vectors.reserve(views.size());
  for (int64_t v : views) {
    if (v < 0 || v >= geometry.num_views()) {
      return absl::InvalidArgumentError(
          absl::StrCat("view ", v, " is out of range [0, ", geometry.num_views(), ")"));
    }
    vectors.push_back(geometry.views()[static_cast<size_t>(v)]);
  }
  return VectorGeometry::Create(geometry.beam(), geometry.detector(), geometry.rows(),
                                geometry.columns(), std::move(vectors));
}

absl::StatusOr<Geometry> SubsetGeometry(const Geometry& geometry,
                                        const std::vector<int64_t>& views) {
  struct Visit {
    const std::vector<int64_t>& views;
    absl::StatusOr<Geometry> operator()(const VectorGeometry& vectors) const {
      TOMO_ASSIGN_OR_RETURN(VectorGeometry subset, SubsetGeometry(vectors, views));
      return Geometry(std::move(subset));
    }
    absl::StatusOr<Geometry> operator()(const RadonGeometry& radon) const {
      RadonGeometry subset;
      subset.num_samples = radon.num_samples;
      subset.sample_spacing_mm = radon.sample_spacing_mm;
      subset.directions.reserve(views.size());
      for (int64_t v : views) {
        if (v < 0 || v >= radon.num_directions()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "direction ", v, " is out of range [0, ", radon.num_directions(), ")"));
        }
        subset.directions.push_back(radon.directions[static_cast<size_t>(v)]);
      }
      return Geometry(std::move(subset));
    }
  };
  return std::visit(Visit{views}, geometry);
}

std::vector<int64_t> ViewRangeList(int64_t first, int64_t count) {
  std::vector<int64_t> views(static_cast<size_t>(count));
  std::iota(views.begin(), views.end(), first);
  return views;
}

}  // namespace tomo::core
