// Ramp filter for filtered back projection: the discrete ramp of Kak and Slaney (the DFT
// of the band-limited spatial kernel h(0) = 1/(4 d^2), h(odd n) = -1/(n pi d)^2, so the DC
// term is right) times an apodisation window, with a frequency cut-off.
//
// FilterOrder::kParabola makes the second-order filter of the 3D inverse Radon transform
// instead (the "parabola" filter of EPR imaging): f^2 (f in cycles per mm) in place of |f|,
// i.e. -1/(4 pi^2) d^2/dt^2, band-limited to |f| < 1/(2d). Its spatial kernel, the inverse
// Fourier transform of f^2 over the band sampled at t = n d, is
//   h(0) = 1/(12 d^3),  h(n) = (-1)^n / (2 pi^2 n^2 d^3)  (n != 0),
// whose samples sum to zero (sum 1/n^2 with alternating signs is -pi^2/12), so the DC term
// is 0 as it must be; the windows and cut-off apply as to the ramp. The kernel is in 1/mm^3,
// so filtered plane integrals (value * mm^2) come out in value, ready for the back
// projection of core/algorithms/radon_fbp.h.
//
// The frequency response is computed once on the host, in float64, and used by every
// backend, so CPU and CUDA filter with the very same numbers. Rows are zero-padded to
// padded_length() (a power of two >= 2 * num_detectors) before filtering to avoid
// wrap-around.
//
//   TOMO_ASSIGN_OR_RETURN(auto filter, RampFilter::Create({FilterWindow::kHann, 0.8}, 768, 0.5));
//   const std::vector<float>& h = filter.response();   // padded_length()/2 + 1 values
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace tomo::core {

enum class FilterWindow { kRamLak, kSheppLogan, kCosine, kHamming, kHann };

// The power of |f|: the ramp of line-integral FBP (1) or the parabola of the 3D Radon
// transform's inversion (2).
enum class FilterOrder { kRamp = 1, kParabola = 2 };

struct FilterOptions {
  FilterWindow window = FilterWindow::kRamLak;
  double cutoff = 1.0;  // fraction of Nyquist, in (0, 1]
};

class RampFilter {
 public:
  // INVALID_ARGUMENT when cutoff is outside (0, 1], num_detectors < 1, the spacing is
  // not finite and > 0, or the window or order is not one of the enum's.
  static absl::StatusOr<RampFilter> Create(const FilterOptions& options, int64_t num_detectors,
                                           double detector_spacing_mm,
                                           FilterOrder order = FilterOrder::kRamp);

  // The window's value at frequency f in cycles per sample, f in [0, 0.5]; 0 beyond the
  // cut-off. Closed forms, exposed for tests.
  static double Window(FilterWindow window, double f, double cutoff);

  const FilterOptions& options() const { return options_; }
  FilterOrder order() const { return order_; }
  int64_t num_detectors() const { return num_detectors_; }
  int64_t padded_length() const { return padded_length_; }
  // Real response for the padded_length()/2 + 1 non-negative DFT frequencies, already
  // including the detector spacing (filtered data are in units of 1/mm^2 per line
  // integral for the ramp, 1/mm^3 per plane integral for the parabola) and the
  // 1/padded_length() normalisation of an unnormalised inverse FFT.
  const std::vector<float>& response() const { return response_; }

 private:
  RampFilter(FilterOptions options, FilterOrder order, int64_t n, int64_t padded,
             std::vector<float> response)
      : options_(options), order_(order), num_detectors_(n), padded_length_(padded),
        response_(std::move(response)) {}
  FilterOptions options_;
  FilterOrder order_;
  int64_t num_detectors_;
  int64_t padded_length_;
  std::vector<float> response_;
};

}  // namespace tomo::core
