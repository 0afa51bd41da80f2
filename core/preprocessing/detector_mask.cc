#include "core/preprocessing/detector_mask.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/data/dims_check.h"

namespace tomo::core {

absl::StatusOr<DetectorMask> DetectorMask::FromBytes(const unsigned char* bytes, size_t size,
                                                     int64_t rows, int64_t columns,
                                                     absl::string_view name) {
  if (size != static_cast<size_t>(rows * columns)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", size, " bytes; a bad-pixel mask holds one byte per detector "
                     "pixel, ", rows, " rows x ", columns, " columns = ", rows * columns));
  }
  DetectorMask mask(rows, columns);
  for (size_t i = 0; i < size; ++i) mask.bad_[i] = bytes[i] != 0 ? 1 : 0;
  return mask;
}

int64_t DetectorMask::CountBad() const {
  int64_t count = 0;
  for (unsigned char b : bad_) count += b;
  return count;
}

void DetectorMask::Merge(const DetectorMask& other) {
  if (other.empty()) return;
  if (empty()) {
    *this = other;
    return;
  }
  for (size_t i = 0; i < bad_.size() && i < other.bad_.size(); ++i) bad_[i] |= other.bad_[i];
}

absl::StatusOr<DetectorMask> BadPixelsFromFields(const Array3D* dark, const Array3D& flat,
                                                 double gain_outlier_ratio) {
  if (!std::isfinite(gain_outlier_ratio) || !(gain_outlier_ratio > 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gain_outlier_ratio: ", gain_outlier_ratio, " is out of range (1, inf)"));
  }
  const Dims3& f = flat.dims();
  if (dark != nullptr) {
    if (absl::Status s = CheckDimsMatch("dark field", dark->dims(), f, "(1, rows, columns)");
        !s.ok()) {
      return s;
    }
  }
  const int64_t rows = f.d1, columns = f.d2, pixels = rows * columns;
  std::vector<float> gain(static_cast<size_t>(pixels));
  DetectorMask mask(rows, columns);
  for (int64_t i = 0; i < pixels; ++i) {
    const float g = flat.data()[i] - (dark != nullptr ? dark->data()[i] : 0.0f);
    gain[static_cast<size_t>(i)] = g;
    if (!std::isfinite(g) || !(g > 0.0f)) mask.Mark(i);
  }
  // Outliers against the median of the live pixels of the 5 x 5 neighbourhood (centre
  // included: with 24 neighbours one value cannot move the median far).
  constexpr int64_t kRadius = 2;
  std::vector<unsigned char> outlier(static_cast<size_t>(pixels), 0);
  ParallelFor(rows, [&](int64_t first, int64_t end) {
    std::vector<float> window;
    window.reserve((2 * kRadius + 1) * (2 * kRadius + 1));
    for (int64_t r = first; r < end; ++r) {
      for (int64_t c = 0; c < columns; ++c) {
        const int64_t i = r * columns + c;
        if (mask.bad(i)) continue;
        window.clear();
        for (int64_t rr = std::max<int64_t>(0, r - kRadius);
             rr <= std::min(rows - 1, r + kRadius); ++rr) {
          for (int64_t cc = std::max<int64_t>(0, c - kRadius);
               cc <= std::min(columns - 1, c + kRadius); ++cc) {
            const int64_t j = rr * columns + cc;
            if (!mask.bad(j)) window.push_back(gain[static_cast<size_t>(j)]);
          }
        }
        if (window.size() < 3) continue;  // too few live neighbours to call it an outlier
        auto middle = window.begin() + static_cast<std::ptrdiff_t>(window.size() / 2);
        std::nth_element(window.begin(), middle, window.end());
        const double median = *middle;
        const double g = gain[static_cast<size_t>(i)];
        if (g < median / gain_outlier_ratio || g > median * gain_outlier_ratio) {
          outlier[static_cast<size_t>(i)] = 1;
        }
      }
    }
  });
  for (int64_t i = 0; i < pixels; ++i) {
    if (outlier[static_cast<size_t>(i)]) mask.Mark(i);
  }
  return mask;
}

}  // namespace tomo::core
