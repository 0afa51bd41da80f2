// SubsetGeometry: the geometry of some of a geometry's views, in the order listed: the
// blocks of the block-iterative methods, the view parts of several devices, FDK's view
// chunks. For a RadonGeometry a view is a direction: the subset holds the listed directions
// (weights kept) and the same samples. INVALID_ARGUMENT for a view out of range.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/geometry/geometry.h"
#include "core/geometry/vector_geometry.h"

namespace tomo::core {

absl::StatusOr<VectorGeometry> SubsetGeometry(const VectorGeometry& geometry,
                                              const std::vector<int64_t>& views);
absl::StatusOr<Geometry> SubsetGeometry(const Geometry& geometry,
                                        const std::vector<int64_t>& views);
// The views [first, first + count), in order.
std::vector<int64_t> ViewRangeList(int64_t first, int64_t count);

}  // namespace tomo::core
