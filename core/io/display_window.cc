#include "core/io/display_window.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tomo::core {
namespace {

// The value at percentile p (0..100) of values (reordered), nearest rank.
double Percentile(std::vector<float>& values, double p) {
  const size_t n = values.size();
  size_t rank = static_cast<size_t>(std::llround(p / 100.0 * static_cast<double>(n - 1)));
  rank = std::min(rank, n - 1);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(rank),
                   values.end());
  return values[rank];
}

}  // namespace

uint8_t DisplayWindow::Grey(double value) const {
  const double t = (value - lower) / (upper - lower);
  if (!(t > 0.0)) return 0;  // NaN too
  if (t >= 1.0) return 255;
  return static_cast<uint8_t>(std::lround(t * 255.0));
}

DisplayWindow RobustDisplayWindow(const Array3D& volume) {
  const Dims3& d = volume.dims();
  const int64_t cz = d.d0 / 2, cy = d.d1 / 2, cx = d.d2 / 2;
  std::vector<float> values;
  values.reserve(static_cast<size_t>(d.d1 * d.d2 + d.d0 * d.d2 + d.d0 * d.d1));
  for (int64_t y = 0; y < d.d1; ++y) {
    for (int64_t x = 0; x < d.d2; ++x) values.push_back(volume.at(cz, y, x));
  }
  for (int64_t z = 0; z < d.d0; ++z) {
    for (int64_t x = 0; x < d.d2; ++x) values.push_back(volume.at(z, cy, x));
    for (int64_t y = 0; y < d.d1; ++y) values.push_back(volume.at(z, y, cx));
  }
  values.erase(std::remove_if(values.begin(), values.end(),
                              [](float v) { return !std::isfinite(v); }),
               values.end());
  if (values.empty()) return {};
  DisplayWindow window;
  window.lower = Percentile(values, kWindowLowerPercentile);
  window.upper = Percentile(values, kWindowUpperPercentile);
  if (!(window.upper > window.lower)) {
    const double middle = window.lower;
    window.lower = middle - 0.5;
    window.upper = middle + 0.5;
  }
  return window;
}

}  // namespace tomo::core
