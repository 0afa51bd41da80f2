#include "core/preprocessing/ring_filter.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"

namespace tomo::core {

absl::Status RemoveStripesBySorting(Array3D& projections, int64_t window) {
  const Dims3& d = projections.dims();
  const int64_t views = d.d0, rows = d.d1, columns = d.d2;
  if (window < 3 || window % 2 == 0 || window > std::max<int64_t>(3, columns)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring filter window: ", window, " is out of range; an odd number of columns in [3, ",
        std::max<int64_t>(3, columns), "]"));
  }
  if (columns < 3 || views < 2) return absl::OkStatus();
  const int64_t half = window / 2;
  ParallelFor(rows, [&](int64_t first, int64_t end) {
    std::vector<float> column(static_cast<size_t>(views));
    std::vector<float> sorted(static_cast<size_t>(views * columns));
    std::vector<double> correction(static_cast<size_t>(columns));
    std::vector<float> neighbours;
    neighbours.reserve(static_cast<size_t>(window));
    for (int64_t r = first; r < end; ++r) {
      auto at = [&](int64_t v, int64_t c) -> float& {
        return projections.data()[(v * rows + r) * columns + c];
      };
      // Each column sorted along the views: the object's part varies smoothly from column
      // to column, a stripe is a step.
      for (int64_t c = 0; c < columns; ++c) {
        for (int64_t v = 0; v < views; ++v) column[static_cast<size_t>(v)] = at(v, c);
        std::sort(column.begin(), column.end());
        for (int64_t v = 0; v < views; ++v) {
          sorted[static_cast<size_t>(v * columns + c)] = column[static_cast<size_t>(v)];
        }
      }
      // The median of `window` columns across each sorted row (the window shrinks at the
      // edges, keeping its centre); a column's correction is the mean over the views of
      // the median minus its value, one offset per column, so that only what is constant
      // along the column (a full stripe) is taken out.
      std::fill(correction.begin(), correction.end(), 0.0);
      for (int64_t v = 0; v < views; ++v) {
        const float* line = sorted.data() + v * columns;
        for (int64_t c = 0; c < columns; ++c) {
          const int64_t reach = std::min({half, c, columns - 1 - c});
          neighbours.assign(line + c - reach, line + c + reach + 1);
          auto middle = neighbours.begin() + static_cast<std::ptrdiff_t>(reach);
          std::nth_element(neighbours.begin(), middle, neighbours.end());
          correction[static_cast<size_t>(c)] += *middle - line[c];
        }
      }
      for (int64_t c = 0; c < columns; ++c) {
        const float offset = static_cast<float>(correction[static_cast<size_t>(c)] /
                                                static_cast<double>(views));
        for (int64_t v = 0; v < views; ++v) at(v, c) += offset;
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace tomo::core
