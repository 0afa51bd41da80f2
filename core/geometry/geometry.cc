#include "core/geometry/geometry.h"

#include "absl/strings/str_cat.h"

namespace tomo::core {
namespace {

struct KindName {
  std::string operator()(const VectorGeometry&) const { return "vector"; }
  std::string operator()(const RadonGeometry&) const { return "radon_3d"; }
};

struct DimsOf {
  Dims3 operator()(const VectorGeometry& g) const { return g.projection_dims(); }
  Dims3 operator()(const RadonGeometry& g) const { return g.projection_dims(); }
};

}  // namespace

std::string GeometryKindName(const Geometry& geometry) {
  return std::visit(KindName{}, geometry);
}

Dims3 ProjectionDims(const Geometry& geometry) { return std::visit(DimsOf{}, geometry); }

absl::Status UnsupportedGeometryKind(absl::string_view who, const Geometry& geometry,
                                     absl::string_view what_it_takes) {
  return absl::InvalidArgumentError(absl::StrCat(who, " cannot take a ",
                                                 GeometryKindName(geometry),
                                                 " geometry; it takes ", what_it_takes));
}

}  // namespace tomo::core
