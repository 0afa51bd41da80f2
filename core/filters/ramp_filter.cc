#include "core/filters/ramp_filter.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tomo::core {
namespace {

constexpr double kPi = 3.14159265358979323846;

// In-place radix-2 complex FFT (forward, unnormalised) of a power-of-two length. The
// response is computed once per filter on the host, in double, so a textbook transform
// is enough and keeps libtomocore off FFTW's double-precision library.
void Fft(std::vector<std::complex<double>>& values) {
  const size_t n = values.size();
  for (size_t i = 1, j = 0; i < n; ++i) {
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(values[i], values[j]);
  }
  for (size_t length = 2; length <= n; length <<= 1) {
    const double angle = -2.0 * kPi / static_cast<double>(length);
    for (size_t start = 0; start < n; start += length) {
      for (size_t m = 0; m < length / 2; ++m) {
        // Twiddles from sin/cos directly rather than by recurrence: no drift for long rows.
        const std::complex<double> twiddle(std::cos(angle * static_cast<double>(m)),
                                           std::sin(angle * static_cast<double>(m)));
        const std::complex<double> even = values[start + m];
        const std::complex<double> odd = values[start + m + length / 2] * twiddle;
        values[start + m] = even + odd;
        values[start + m + length / 2] = even - odd;
      }
    }
  }
}

int64_t PaddedLength(int64_t num_detectors) {
  const int64_t minimum = std::max<int64_t>(64, 2 * num_detectors);
  int64_t length = 1;
  while (length < minimum) length <<= 1;
  return length;
}

}  // namespace

// Windows follow the usual FBP conventions (ASTRA, TIGRE). With f in cycles per sample,
// f in [0, 0.5], the cut-off frequency f_c = 0.5 * cutoff, and W(f) = 0 for f > f_c:
//   Ram-Lak      W = 1
//   Shepp-Logan  W = sin(x) / x,  x = pi f / (2 f_c)
//   cosine       W = cos(pi f / (2 f_c))
//   Hamming      W = 0.54 + 0.46 cos(pi f / f_c)
//   Hann         W = 0.5 + 0.5 cos(pi f / f_c)
double RampFilter::Window(FilterWindow window, double f, double cutoff) {
  const double f_cut = 0.5 * cutoff;
  if (f > f_cut) return 0.0;
  switch (window) {
    case FilterWindow::kRamLak:
      return 1.0;
    case FilterWindow::kSheppLogan: {
      const double x = kPi * f / (2.0 * f_cut);
      return x == 0.0 ? 1.0 : std::sin(x) / x;
    }
    case FilterWindow::kCosine:
      return std::cos(kPi * f / (2.0 * f_cut));
    case FilterWindow::kHamming:
      return 0.54 + 0.46 * std::cos(kPi * f / f_cut);
    case FilterWindow::kHann:
      return 0.5 + 0.5 * std::cos(kPi * f / f_cut);
  }
  return 0.0;
}

absl::StatusOr<RampFilter> RampFilter::Create(const FilterOptions& options, int64_t num_detectors,
                                              double detector_spacing_mm, FilterOrder order) {
  if (!(options.cutoff > 0.0 && options.cutoff <= 1.0)) {  // also refuses NaN
    return absl::InvalidArgumentError(
        absl::StrCat("cutoff: ", options.cutoff, " is out of range (0, 1]"));
  }
  if (num_detectors < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_detectors: ", num_detectors, " must be >= 1"));
  }
  if (!std::isfinite(detector_spacing_mm) || detector_spacing_mm <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("detector_spacing_mm: ", detector_spacing_mm, " must be a finite value > 0"));
  }
  switch (options.window) {
    case FilterWindow::kRamLak:
    case FilterWindow::kSheppLogan:
    case FilterWindow::kCosine:
    case FilterWindow::kHamming:
    case FilterWindow::kHann:
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("window: ", static_cast<int>(options.window), " is not a known window"));
  }

  if (order != FilterOrder::kRamp && order != FilterOrder::kParabola) {
    return absl::InvalidArgumentError(
        absl::StrCat("order: ", static_cast<int>(order), " is not 1 (ramp) or 2 (parabola)"));
  }

  const int64_t length = PaddedLength(num_detectors);
  const double d = detector_spacing_mm;
  std::vector<std::complex<double>> kernel(static_cast<size_t>(length), 0.0);
  if (order == FilterOrder::kRamp) {
    // The band-limited ramp sampled in space (Kak & Slaney eq. 61), laid out circularly so
    // that its DFT is real and its zero-frequency term is right (a sampled |f| is not).
    kernel[0] = 1.0 / (4.0 * d * d);
    for (int64_t n = 1; n <= length / 2; n += 2) {
      const double value =
          -1.0 / ((static_cast<double>(n) * kPi * d) * (static_cast<double>(n) * kPi * d));
      kernel[static_cast<size_t>(n)] = value;
      kernel[static_cast<size_t>(length - n)] = value;
    }
  } else {
    // The band-limited parabola f^2 sampled in space (header), laid out circularly the same
    // way. Rows are at most length / 2 long, so every lag a row's linear convolution needs
    // (|n| < length / 2) has its exact value; n = length / 2 is its own mirror.
    kernel[0] = 1.0 / (12.0 * d * d * d);
    for (int64_t n = 1; n <= length / 2; ++n) {
      const double nd = static_cast<double>(n);
      const double value = (n % 2 == 0 ? 1.0 : -1.0) / (2.0 * kPi * kPi * nd * nd * d * d * d);
      kernel[static_cast<size_t>(n)] = value;
      if (n != length / 2) kernel[static_cast<size_t>(length - n)] = value;
    }
  }
  Fft(kernel);

  // d: the convolution sum approximates an integral over s. 1/L: FFTW's inverse is
  // unnormalised.
  std::vector<float> response(static_cast<size_t>(length / 2 + 1));
  for (int64_t k = 0; k <= length / 2; ++k) {
    const double f = static_cast<double>(k) / static_cast<double>(length);
    response[static_cast<size_t>(k)] =
        static_cast<float>(kernel[static_cast<size_t>(k)].real() * d *
                           Window(options.window, f, options.cutoff) / static_cast<double>(length));
  }
  return RampFilter(options, order, num_detectors, length, std::move(response));
}

}  // namespace tomo::core
