#include "core/system_matrix/row_art.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace tomo::core::system_matrix {

absl::StatusOr<ArtResult> RunRowArt(const CsrSystemMatrix& a, const Array3D& projections,
                                    const ArtOptions& options, const RunContext& context) {
  if (options.views_per_block != 0) {
    return absl::InvalidArgumentError(absl::StrCat("views_per_block: ", options.views_per_block,
                                                   " must be 0 for row ART (one row at a time)"));
  }
  TOMO_RETURN_IF_ERROR(ValidateArtOptions(options, /*symmetric_format=*/false, a.views()));
  const Dims3 expected{a.views(), 1, a.detector_columns()};
  if (projections.dims() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "projections: dims (", projections.dims().d0, ", ", projections.dims().d1, ", ",
        projections.dims().d2, ") must be (", expected.d0, ", 1, ", expected.d2, ")"));
  }
  const float* b = projections.data();
  double b_norm2 = 0;
  for (int64_t i = 0; i < projections.size(); ++i) b_norm2 += static_cast<double>(b[i]) * b[i];
  const std::vector<float> norms2 = a.RowNorms2();
  ArtResult result;
  result.image = Array3D({1, a.ny(), a.nx()});
  float* x = result.image.data();
  const auto& offsets = a.row_offsets();
  const auto& indices = a.column_indices();
  const auto& values = a.values();
  for (int64_t it = 1; it <= options.iterations; ++it) {
    TOMO_RETURN_IF_ERROR(context.CheckCancelled(absl::StrCat("art / iteration ", it)));
    double residual2 = 0;
    for (int64_t r = 0; r < a.rows(); ++r) {
      const size_t e0 = static_cast<size_t>(offsets[static_cast<size_t>(r)]);
      const size_t e1 = static_cast<size_t>(offsets[static_cast<size_t>(r) + 1]);
      double dot = 0;
      for (size_t e = e0; e < e1; ++e) dot += static_cast<double>(values[e]) * x[indices[e]];
      const double residual = b[r] - dot;
      residual2 += residual * residual;
      if (norms2[static_cast<size_t>(r)] <= 1e-20f) continue;
      const float step =
          static_cast<float>(options.relaxation * residual / norms2[static_cast<size_t>(r)]);
      for (size_t e = e0; e < e1; ++e) {
        float& xj = x[indices[e]];
        xj += step * values[e];
        if (options.nonnegative) xj = std::max(xj, 0.0f);
      }
    }
    const bool stop = FinishArtSweep(it, residual2, b_norm2, options, context, result);
    if (options.on_sweep) TOMO_RETURN_IF_ERROR(options.on_sweep(it, result.image));
    if (stop) break;
  }
  return result;
}

}  // namespace tomo::core::system_matrix
