#include "core/io/projection_preprocessing.h"

#include <atomic>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/data/dims_check.h"

namespace tomo::core {

absl::StatusOr<Array3D> MeanFrame(const Array3D& frames, absl::string_view name) {
  const Dims3& d = frames.dims();
  if (d.d0 < 1 || d.d1 < 1 || d.d2 < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", DimsText(d), " holds no frame to average"));
  }
  const int64_t pixels = d.d1 * d.d2;
  Array3D mean({1, d.d1, d.d2});
  std::vector<double> sum(static_cast<size_t>(pixels), 0.0);
  for (int64_t f = 0; f < d.d0; ++f) {
    const float* frame = frames.data() + f * pixels;
    for (int64_t i = 0; i < pixels; ++i) sum[static_cast<size_t>(i)] += frame[i];
  }
  for (int64_t i = 0; i < pixels; ++i) {
    mean.data()[i] = static_cast<float>(sum[static_cast<size_t>(i)] / static_cast<double>(d.d0));
  }
  return mean;
}

absl::Status ApplyDarkFlat(Array3D& projections, const Array3D* dark, const Array3D& flat) {
  const Dims3& p = projections.dims();
  const Dims3 frame{1, p.d1, p.d2};
  if (absl::Status s = CheckDimsMatch("flat field", flat.dims(), frame, "(frames, rows, columns)");
      !s.ok()) {
    return s;
  }
  if (dark != nullptr) {
    if (absl::Status s =
            CheckDimsMatch("dark field", dark->dims(), frame, "(frames, rows, columns)");
        !s.ok()) {
      return s;
    }
  }
  const int64_t pixels = p.d1 * p.d2;
  // 1 / (F - D) per pixel, checked once.
  std::vector<float> inverse_gain(static_cast<size_t>(pixels));
  for (int64_t i = 0; i < pixels; ++i) {
    const float d = dark != nullptr ? dark->data()[i] : 0.0f;
    const float range = flat.data()[i] - d;
    if (!(range > 0.0f) || !std::isfinite(range)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flat field: at (row ", i / p.d2, ", column ", i % p.d2, ") flat ", flat.data()[i],
          " minus dark ", d, " = ", range,
          "; the flat field must be above the dark field at every pixel"));
    }
    inverse_gain[static_cast<size_t>(i)] = 1.0f / range;
  }
  ParallelFor(p.d0, [&](int64_t first, int64_t end) {
    for (int64_t v = first; v < end; ++v) {
      float* view = projections.data() + v * pixels;
      for (int64_t i = 0; i < pixels; ++i) {
        const float d = dark != nullptr ? dark->data()[i] : 0.0f;
        view[i] = (view[i] - d) * inverse_gain[static_cast<size_t>(i)];
      }
    }
  });
  return absl::OkStatus();
}

absl::StatusOr<int64_t> NegativeLog(Array3D& transmission, float min_transmission) {
  if (!(min_transmission > 0.0f) || !(min_transmission <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_transmission: ", min_transmission, " is out of range (0, 1]"));
  }
  std::atomic<int64_t> clamped{0};
  const int64_t count = transmission.size();
  constexpr int64_t kBlock = 1 << 16;
  ParallelFor((count + kBlock - 1) / kBlock, [&](int64_t first, int64_t end) {
    int64_t local = 0;
    for (int64_t b = first; b < end; ++b) {
      float* values = transmission.data() + b * kBlock;
      const int64_t n = std::min(kBlock, count - b * kBlock);
      for (int64_t i = 0; i < n; ++i) {
        float t = values[i];
        // !(t >= min) also catches NaN.
        if (!(t >= min_transmission)) {
          t = min_transmission;
          ++local;
        }
        values[i] = -std::log(t);
      }
    }
    clamped += local;
  });
  return clamped.load();
}

}  // namespace tomo::core
