// Ramp filter for filtered back projection: the discrete ramp of Kak and Slaney (the DFT
// of the band-limited spatial kernel h(0) = 1/(4 d^2), h(odd n) = -1/(n pi d)^2, so the DC
// term is right) times an apodisation window, with a frequency cut-off.
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

struct FilterOptions {
  FilterWindow window = FilterWindow::kRamLak;
  double cutoff = 1.0;  // fraction of Nyquist, in (0, 1]
};

class RampFilter {
 public:
  // INVALID_ARGUMENT when cutoff is outside (0, 1], num_detectors < 1 or the spacing is
  // not finite and > 0.
  static absl::StatusOr<RampFilter> Create(const FilterOptions& options,
                                           int64_t num_detectors, double detector_spacing_mm);

  // The window's value at frequency f in cycles per sample, f in [0, 0.5]; 0 beyond the
  // cut-off. Closed forms, exposed for tests.
  static double Window(FilterWindow window, double f, double cutoff);

  const FilterOptions& options() const { return options_; }
  int64_t num_detectors() const { return num_detectors_; }
  int64_t padded_length() const { return padded_length_; }
  // Real response for the padded_length()/2 + 1 non-negative DFT frequencies, already
  // including the detector spacing (filtered data are in units of 1/mm^2 per line
  // integral) and the 1/padded_length() normalisation of an unnormalised inverse FFT.
  const std::vector<float>& response() const { return response_; }

 private:
  RampFilter(FilterOptions options, int64_t n, int64_t padded, std::vector<float> response)
      : options_(options), num_detectors_(n), padded_length_(padded),
        response_(std::move(response)) {}
  FilterOptions options_;
  int64_t num_detectors_;
  int64_t padded_length_;
  std::vector<float> response_;
};

}  // namespace tomo::core
