#include "core/operators/filtered_back_projection_weights.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"

namespace tomo::core {

absl::Status FilteredBackProjectionWeights::Check(const Dims3& dims) const {
  const int64_t view_size = dims.d1 * dims.d2;
  const int64_t pixel_size = static_cast<int64_t>(pixel.size());
  if (pixel_size != 0 && pixel_size != view_size && pixel_size != dims.d0 * view_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "weights.pixel: ", pixel_size, " values; expected 0, rows x columns = ", view_size,
        " or views x rows x columns = ", dims.d0 * view_size));
  }
  const int64_t column_size = static_cast<int64_t>(column.size());
  if (column_size != 0 && column_size != dims.d0 * dims.d2) {
    return absl::InvalidArgumentError(absl::StrCat("weights.column: ", column_size,
                                                   " values; expected 0 or views x columns = ",
                                                   dims.d0 * dims.d2));
  }
  return absl::OkStatus();
}

void ApplyFilteredBackProjectionWeights(const FilteredBackProjectionWeights& weights,
                                        Array3D& projections) {
  const Dims3 dims = projections.dims();
  const int64_t view_size = dims.d1 * dims.d2;
  const bool shared = weights.pixel_shared_by_views(dims);
  ParallelFor(dims.d0, [&](int64_t view_begin, int64_t view_end) {
    for (int64_t v = view_begin; v < view_end; ++v) {
      float* values = projections.data() + v * view_size;
      if (!weights.pixel.empty()) {
        const float* pixel = weights.pixel.data() + (shared ? 0 : v * view_size);
        for (int64_t i = 0; i < view_size; ++i) values[i] *= pixel[i];
      }
      if (!weights.column.empty()) {
        const float* column = weights.column.data() + v * dims.d2;
        for (int64_t r = 0; r < dims.d1; ++r) {
          float* row = values + r * dims.d2;
          for (int64_t c = 0; c < dims.d2; ++c) row[c] *= column[c];
        }
      }
    }
  });
}

}  // namespace tomo::core
