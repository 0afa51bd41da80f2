#include "core/statistical/statistical_weights.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/data/dims_check.h"

namespace tomo::core::statistical {
namespace {

std::string ElementText(const Dims3& dims, int64_t i) {
  const int64_t column = i % dims.d2, row = (i / dims.d2) % dims.d1, view = i / (dims.d1 * dims.d2);
  return absl::StrCat("[", view, ", ", row, ", ", column, "]");
}

}  // namespace

absl::StatusOr<Array3D> WeightsFromCounts(const Array3D& counts) {
  Array3D weights = Array3D::Uninitialized(counts.dims());
  for (int64_t i = 0; i < counts.size(); ++i) {
    const float c = counts.data()[i];
    if (!(std::isfinite(c) && c >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("counts", ElementText(counts.dims(), i),
                                                     ": ", c, " must be a finite value >= 0"));
    }
    weights.data()[i] = c;
  }
  return weights;
}

absl::StatusOr<PostLogData> PostLogFromIntensities(const Array3D& intensities,
                                                   const Array3D& flat_field,
                                                   double flat_field_counts) {
  const Dims3& dims = intensities.dims();
  const Dims3 one_view{1, dims.d1, dims.d2};
  if (flat_field.dims() != one_view && flat_field.dims() != dims) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flat_field: dims ", DimsText(flat_field.dims()), " must be ", DimsText(one_view),
        " or the intensities' ", DimsText(dims), " (views, rows, columns)"));
  }
  if (!(std::isfinite(flat_field_counts) && flat_field_counts > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flat_field_counts: ", flat_field_counts, " must be a finite value > 0 (photons)"));
  }
  const int64_t per_view = dims.d1 * dims.d2;
  const bool shared = flat_field.dims() == one_view;
  PostLogData out{Array3D::Uninitialized(dims), Array3D::Uninitialized(dims)};
  for (int64_t i = 0; i < intensities.size(); ++i) {
    const float value = intensities.data()[i];
    const int64_t f = shared ? i % per_view : i;
    const float flat = flat_field.data()[f];
    if (!(std::isfinite(flat) && flat > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("flat_field", ElementText(flat_field.dims(), f),
                                                     ": ", flat, " must be a finite value > 0"));
    }
    if (!(std::isfinite(value) && value >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("intensities", ElementText(dims, i), ": ",
                                                     value, " must be a finite value >= 0"));
    }
    const double transmission = static_cast<double>(value) / flat;
    if (transmission > 0) {
      out.line_integrals.data()[i] = static_cast<float>(-std::log(transmission));
      out.weights.data()[i] = static_cast<float>(flat_field_counts * transmission);
    } else {
      out.line_integrals.data()[i] = 0.0f;
      out.weights.data()[i] = 0.0f;
    }
  }
  return out;
}

}  // namespace tomo::core::statistical
