// Geometry: the closed set of acquisition kinds, one value type.
//
//  - VectorGeometry (vector_geometry.h): rays. Every parallel, fan, cone, helical and
//    free-vector acquisition, 2D (one detector row, one slice) or 3D.
//  - RadonGeometry (radon_geometry.h): plane integrals along unit directions (EPR imaging's
//    3D Radon transform).
//
// Code that reads a Geometry visits it exhaustively (std::visit with one overload per kind),
// so a new kind fails to compile until every reader takes it; code that can take only some
// kinds says so with UnsupportedGeometryKind, an INVALID_ARGUMENT naming what refused which
// kind, never a bad_variant_access.
//
//   Geometry geometry = MakeCircularCone(options).value();
//   Dims3 dims = ProjectionDims(geometry);
#pragma once

#include <string>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/data/array3d.h"
#include "core/geometry/radon_geometry.h"
#include "core/geometry/vector_geometry.h"

namespace tomo::core {

using Geometry = std::variant<VectorGeometry, RadonGeometry>;

// "vector" or "radon_3d" (the JobSpec's words for the kinds).
std::string GeometryKindName(const Geometry& geometry);

// (views, rows, columns) of the projections of a geometry.
Dims3 ProjectionDims(const Geometry& geometry);

// INVALID_ARGUMENT: "<who> cannot take a <kind> geometry; it takes <what_it_takes>".
absl::Status UnsupportedGeometryKind(absl::string_view who, const Geometry& geometry,
                                     absl::string_view what_it_takes);

}  // namespace tomo::core
