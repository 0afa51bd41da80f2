// From detector readings to line integrals for measured data: the whole correction chain
// of a job's input, in order (docs/inputs.md):
//   1. bad pixels: found from the dark and flat fields (detector_mask.h), joined with a
//      given mask (a mask file);
//   2. flat-field normalisation T = (I - D) / (F - D) (flat_normalisation.h), when a flat
//      field is given (F interpolated per view between flats taken at several times when
//      options.timed_flats has them);
//   3. unusable readings replaced from their neighbours in the same view: the bad pixels,
//      and before a -log every reading with T <= 0 or not finite (reading_repair.h);
//   4. -log with the transmission floor: T < floor is raised to the floor first. The floor
//      is the caller's, or automatic: half a detector count, 0.5 / median(F - D), when the
//      flat field is in counts (median gain >= 2), kept within [1e-6, 1e-2]; 1e-6
//      otherwise. Half a count is below any reading the detector can make, so only the
//      zero-count readings step 3 did not reach are raised.
//   5. the ring filter on the line integrals, when asked (ring_filter.h).
// Every count (bad pixels by cause, readings replaced, values raised to the floor, the
// floor) is in the report; Summary() is the line a job's log and events carry.
//
// With bad_pixels off, nothing is detected or replaced: a flat not above the dark field
// refuses the data (ApplyDarkFlat's rule) and T <= 0 meets the floor.
//
// Errors (INVALID_ARGUMENT, naming why the data cannot be used): more than
// max_bad_fraction of the detector's pixels bad; a view whose unusable readings exceed it;
// shapes that differ; options out of range.
//
//   DetectorCorrectionOptions options;
//   options.negative_log = true;
//   TOMO_ASSIGN_OR_RETURN(DetectorCorrectionReport report,
//                         CorrectDetectorReadings(projections, &dark, &flat, nullptr, options));
//   Log(report.Summary());
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/preprocessing/detector_mask.h"
#include "core/preprocessing/flat_normalisation.h"
#include "core/preprocessing/reading_repair.h"

namespace tomo::core {

struct DetectorCorrectionOptions {
  bool negative_log = false;
  std::optional<float> min_transmission;  // (0, 1]; unset: automatic (above)
  bool bad_pixels = true;
  double gain_outlier_ratio = kDefaultGainOutlierRatio;  // (1, inf)
  double max_bad_fraction = kDefaultMaxBadFraction;      // (0, 1]
  int64_t ring_filter_window = 0;  // 0: no ring filter; else odd, [3, columns]
  // Flats at several times, interpolated per view in step 2 (flat_normalisation.h); null or
  // empty: the one flat. The flat argument (their mean) still finds the bad pixels and the
  // floor.
  const std::vector<TimedFlat>* timed_flats = nullptr;
};

struct DetectorCorrectionReport {
  int64_t bad_pixels = 0;              // in the joined mask
  int64_t dead_pixels = 0;             // of those: F - D not above 0
  int64_t gain_outliers = 0;           // of those: gain far from the neighbours'
  int64_t mask_file_pixels = 0;        // marked by the given mask
  int64_t replaced_readings = 0;       // unusable readings of good pixels, all views
  int64_t clamped_transmissions = 0;   // raised to the floor
  float min_transmission = 0;          // the floor applied (0 without -log)
  bool automatic_floor = false;
  int64_t ring_filter_window = 0;      // the ring filter's, 0 when it did not run
  std::string Summary() const;
};

// projections (views, rows, columns) in place; dark and flat (1, rows, columns) or null
// (no dark: 0; no flat: the readings are transmissions already, or line integrals without
// negative_log); given_mask null or empty: none.
absl::StatusOr<DetectorCorrectionReport> CorrectDetectorReadings(
    Array3D& projections, const Array3D* dark, const Array3D* flat, const DetectorMask* given_mask,
    const DetectorCorrectionOptions& options);

// The automatic floor of step 4 for this flat (and dark; either may be null).
float AutomaticTransmissionFloor(const Array3D* dark, const Array3D* flat);

}  // namespace tomo::core
