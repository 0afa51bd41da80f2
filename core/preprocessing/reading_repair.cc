#include "core/preprocessing/reading_repair.h"

#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/base/parallel_for.h"

namespace tomo::core {
namespace {

// Interpolation along one line of n values with stride `stride` starting at `line`:
// estimate[i] and weight[i] (0 or 1) gain this line's estimate for each unusable i.
void InterpolateAlongLine(const float* line, const unsigned char* unusable, int64_t n,
                          int64_t stride, float* estimate, unsigned char* has_estimate,
                          std::vector<int64_t>& previous) {
  previous.resize(static_cast<size_t>(n));
  int64_t last = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!unusable[i * stride]) last = i;
    previous[static_cast<size_t>(i)] = last;
  }
  int64_t next = -1;
  for (int64_t i = n - 1; i >= 0; --i) {
    if (!unusable[i * stride]) {
      next = i;
      continue;
    }
    const int64_t before = previous[static_cast<size_t>(i)];
    if (before < 0 && next < 0) continue;
    float value;
    if (before < 0) {
      value = line[next * stride];
    } else if (next < 0) {
      value = line[before * stride];
    } else {
      const double w = static_cast<double>(i - before) / static_cast<double>(next - before);
      value = static_cast<float>((1.0 - w) * line[before * stride] + w * line[next * stride]);
    }
    estimate[i * stride] = value;
    has_estimate[i * stride] = 1;
  }
}

}  // namespace

absl::StatusOr<ReadingRepairCounts> ReplaceUnusableReadings(Array3D& readings,
                                                           const ReadingRepairOptions& options) {
  const Dims3& d = readings.dims();
  const int64_t rows = d.d1, columns = d.d2, pixels = rows * columns;
  const DetectorMask* mask =
      options.mask != nullptr && !options.mask->empty() ? options.mask : nullptr;
  if (mask != nullptr && (mask->rows() != rows || mask->columns() != columns)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad-pixel mask: ", mask->rows(), " x ", mask->columns(),
        " (rows x columns) does not match the projections' ", rows, " x ", columns));
  }
  if (!(options.max_bad_fraction > 0.0) || !(options.max_bad_fraction <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_bad_fraction: ", options.max_bad_fraction, " is out of range (0, 1]"));
  }
  const int64_t mask_bad = mask != nullptr ? mask->CountBad() : 0;
  const int64_t allowed =
      static_cast<int64_t>(std::floor(options.max_bad_fraction * static_cast<double>(pixels)));
  std::atomic<int64_t> other{0};
  absl::Mutex mu;
  int64_t failed_view = -1, failed_count = 0;
  ParallelFor(d.d0, [&](int64_t first, int64_t end) {
    std::vector<unsigned char> unusable(static_cast<size_t>(pixels));
    std::vector<unsigned char> has_row(static_cast<size_t>(pixels)),
        has_column(static_cast<size_t>(pixels));
    std::vector<float> by_row(static_cast<size_t>(pixels)), by_column(static_cast<size_t>(pixels));
    std::vector<int64_t> previous;
    int64_t local_other = 0;
    for (int64_t v = first; v < end; ++v) {
      float* view = readings.data() + v * pixels;
      int64_t count = 0, count_other = 0;
      for (int64_t i = 0; i < pixels; ++i) {
        const float value = view[i];
        const bool masked = mask != nullptr && mask->bad(i);
        const bool broken =
            !std::isfinite(value) || (options.replace_non_positive && !(value > 0.0f));
        unusable[static_cast<size_t>(i)] = masked || broken;
        count += masked || broken;
        count_other += !masked && broken;
      }
      local_other += count_other;
      if (count == 0) continue;
      if (count > allowed || count == pixels) {
        absl::MutexLock lock(&mu);
        if (failed_view < 0 || v < failed_view) {
          failed_view = v;
          failed_count = count;
        }
        continue;
      }
      std::fill(has_row.begin(), has_row.end(), 0);
      std::fill(has_column.begin(), has_column.end(), 0);
      for (int64_t r = 0; r < rows; ++r) {
        InterpolateAlongLine(view + r * columns, unusable.data() + r * columns, columns, 1,
                             by_row.data() + r * columns, has_row.data() + r * columns,
                             previous);
      }
      if (rows > 1) {
        for (int64_t c = 0; c < columns; ++c) {
          InterpolateAlongLine(view + c, unusable.data() + c, rows, columns, by_column.data() + c,
                               has_column.data() + c, previous);
        }
      }
      // The view's mean of usable readings: the last resort for a pixel whose row and
      // column are wholly unusable.
      double sum = 0;
      for (int64_t i = 0; i < pixels; ++i) {
        if (!unusable[static_cast<size_t>(i)]) sum += view[i];
      }
      const float mean = static_cast<float>(sum / static_cast<double>(pixels - count));
      for (int64_t i = 0; i < pixels; ++i) {
        const size_t k = static_cast<size_t>(i);
        if (!unusable[k]) continue;
        if (has_row[k] && has_column[k]) {
          view[i] = 0.5f * (by_row[k] + by_column[k]);
        } else if (has_row[k]) {
          view[i] = by_row[k];
        } else if (has_column[k]) {
          view[i] = by_column[k];
        } else {
          view[i] = mean;
        }
      }
    }
    other += local_other;
  });
  if (failed_view >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input: view ", failed_view, " has ", failed_count, " unusable readings of ", pixels,
        " (bad pixels, readings at or below the dark level, or not finite numbers), more than "
        "the ", options.max_bad_fraction * 100.0, "% (", allowed,
        ") that can be replaced from their neighbours; the view holds no usable projection "
        "(input.preprocessing.bad_pixels.max_bad_fraction sets the limit)"));
  }
  return ReadingRepairCounts{mask_bad * d.d0, other.load()};
}

}  // namespace tomo::core
