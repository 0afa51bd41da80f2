// The weights a filtered back projection (FDK, parallel-beam FBP) applies to the
// projections before the ramp filter:
//   weighted(v, r, c) = projections(v, r, c) * pixel(v or none, r, c) * column(v, c)
// FDK's cosine weight is the pixel factor (one map shared by every view of a circular
// orbit whose detector turns with the source, else one map per view); Parker's or the full
// scan's 1/2, the view's angular share and the distance scale are the column factor. An
// empty vector stands for 1. Keeping the two factors apart lets a device backend apply
// them on the device from views x columns + rows x columns values instead of a full array.
//
//   FilteredBackProjectionWeights weights;
//   weights.column.assign(views * columns, 0.5f);
//   TOMO_RETURN_IF_ERROR(weights.Check(projections.dims()));
//   ApplyFilteredBackProjectionWeights(weights, projections);
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "core/data/array3d.h"

namespace tomo::core {

struct FilteredBackProjectionWeights {
  // Empty, rows x columns (every view) or views x rows x columns.
  std::vector<float> pixel;
  // Empty or views x columns.
  std::vector<float> column;

  bool pixel_shared_by_views(const Dims3& dims) const {
    return static_cast<int64_t>(pixel.size()) == dims.d1 * dims.d2;
  }
  // INVALID_ARGUMENT naming the field, its size and the sizes allowed for projections of
  // `dims` (views, rows, columns).
  absl::Status Check(const Dims3& dims) const;
};

// projections *= weights, in place (weights checked by the caller).
void ApplyFilteredBackProjectionWeights(const FilteredBackProjectionWeights& weights,
                                        Array3D& projections);

}  // namespace tomo::core
