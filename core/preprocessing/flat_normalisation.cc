#include "core/preprocessing/flat_normalisation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/data/dims_check.h"

namespace tomo::core {

absl::Status NormaliseByFlat(Array3D& projections, const Array3D* dark, const Array3D& flat,
                             const DetectorMask* mask) {
  const Dims3& p = projections.dims();
  const Dims3 frame{1, p.d1, p.d2};
  if (absl::Status s = CheckDimsMatch("flat field", flat.dims(), frame, "(1, rows, columns)");
      !s.ok()) {
    return s;
  }
  if (dark != nullptr) {
    if (absl::Status s = CheckDimsMatch("dark field", dark->dims(), frame, "(1, rows, columns)");
        !s.ok()) {
      return s;
    }
  }
  const bool masked = mask != nullptr && !mask->empty();
  if (masked && (mask->rows() != p.d1 || mask->columns() != p.d2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad-pixel mask: ", mask->rows(), " x ", mask->columns(),
        " (rows x columns) does not match the projections' ", p.d1, " x ", p.d2));
  }
  const int64_t pixels = p.d1 * p.d2;
  // 1 / (F - D) per pixel, NaN at bad pixels (their readings become NaN).
  std::vector<float> inverse_gain(static_cast<size_t>(pixels));
  std::vector<float> offset(static_cast<size_t>(pixels));
  for (int64_t i = 0; i < pixels; ++i) {
    const float d = dark != nullptr ? dark->data()[i] : 0.0f;
    offset[static_cast<size_t>(i)] = d;
    if (masked && mask->bad(i)) {
      inverse_gain[static_cast<size_t>(i)] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    const float range = flat.data()[i] - d;
    if (!(range > 0.0f) || !std::isfinite(range)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flat field: at (row ", i / p.d2, ", column ", i % p.d2, ") flat ", flat.data()[i],
          " minus dark ", d, " = ", range,
          "; the flat field must be above the dark field at every pixel not marked bad"));
    }
    inverse_gain[static_cast<size_t>(i)] = 1.0f / range;
  }
  ParallelFor(p.d0, [&](int64_t first, int64_t end) {
    for (int64_t v = first; v < end; ++v) {
      float* view = projections.data() + v * pixels;
      for (int64_t i = 0; i < pixels; ++i) {
        view[i] = (view[i] - offset[static_cast<size_t>(i)]) * inverse_gain[static_cast<size_t>(i)];
      }
    }
  });
  return absl::OkStatus();
}

absl::Status NormaliseByInterpolatedFlats(Array3D& projections, const Array3D* dark,
                                          const std::vector<TimedFlat>& flats,
                                          const DetectorMask* mask) {
  std::vector<const TimedFlat*> sorted;
  for (const TimedFlat& flat : flats) sorted.push_back(&flat);
  std::sort(sorted.begin(), sorted.end(),
            [](const TimedFlat* a, const TimedFlat* b) { return a->position < b->position; });
  if (sorted.size() < 2 || sorted.front()->position == sorted.back()->position) {
    return absl::InvalidArgumentError(
        "flat fields: interpolating them in views needs flats taken at two times at least "
        "(before and after the projections)");
  }
  const Dims3& p = projections.dims();
  const int64_t pixels = p.d1 * p.d2;
  // Each timed flat checked (and shaped) as a single flat would be, on one view.
  for (const TimedFlat* flat : sorted) {
    Array3D probe({1, p.d1, p.d2}, 1.0f);
    TOMO_RETURN_IF_ERROR(NormaliseByFlat(probe, dark, flat->mean, mask));
  }
  const bool masked = mask != nullptr && !mask->empty();
  ParallelFor(p.d0, [&](int64_t first, int64_t end) {
    for (int64_t v = first; v < end; ++v) {
      const double time = static_cast<double>(v) + 0.5;
      size_t after = 0;
      while (after < sorted.size() && sorted[after]->position < time) ++after;
      const TimedFlat* a = sorted[after == 0 ? 0 : std::min(after, sorted.size()) - 1];
      const TimedFlat* b = sorted[std::min(after, sorted.size() - 1)];
      const double w = b->position > a->position
                           ? std::clamp((time - a->position) / (b->position - a->position), 0.0, 1.0)
                           : 0.0;
      float* view = projections.data() + v * pixels;
      for (int64_t i = 0; i < pixels; ++i) {
        if (masked && mask->bad(i)) {
          view[i] = std::numeric_limits<float>::quiet_NaN();
          continue;
        }
        const float d = dark != nullptr ? dark->data()[i] : 0.0f;
        const double flat = (1 - w) * a->mean.data()[i] + w * b->mean.data()[i];
        view[i] = static_cast<float>((view[i] - d) / (flat - d));
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace tomo::core
