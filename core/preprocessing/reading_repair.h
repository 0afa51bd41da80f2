// Replacing unusable detector readings from their neighbours in the same view, before the
// -log: a bad pixel (DetectorMask) in every view, and in single views the readings that
// have no logarithm (transmission <= 0: a reading at or below the dark level, a dropped
// frame line) or are not finite numbers.
//
// A replaced reading is the mean of two linear interpolations between the nearest usable
// readings: along its detector row and along its detector column (one of them where the
// other has no usable reading on both sides, the nearest usable one where neither has;
// the row only on a one-row detector). Readings are never replaced from other replaced
// ones. This is the neighbour interpolation that detector vendors' defect correction and
// tomography toolkits apply; on a smooth projection it errs by the curvature over the gap.
//
// A view whose unusable readings outnumber max_bad_fraction of its pixels cannot be
// repaired this way (a closed shutter, a lost frame): INVALID_ARGUMENT naming the view
// and the count.
//
//   ReadingRepairOptions options{.mask = &mask, .replace_non_positive = true};
//   TOMO_ASSIGN_OR_RETURN(ReadingRepairCounts counts, ReplaceUnusableReadings(t, options));
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/data/array3d.h"
#include "core/preprocessing/detector_mask.h"

namespace tomo::core {

inline constexpr double kDefaultMaxBadFraction = 0.1;

struct ReadingRepairOptions {
  const DetectorMask* mask = nullptr;  // may be null or empty: no bad pixel
  // Also replace readings <= 0 (transmissions before a -log); non-finite readings are
  // replaced always.
  bool replace_non_positive = false;
  double max_bad_fraction = kDefaultMaxBadFraction;  // (0, 1]
};

struct ReadingRepairCounts {
  int64_t bad_pixel_readings = 0;  // views x the mask's bad pixels
  int64_t other_readings = 0;      // unusable readings of good pixels
};

// In place on (views, rows, columns) readings. INVALID_ARGUMENT when the mask's shape is
// not (rows, columns), when max_bad_fraction is outside (0, 1], or for a view that cannot
// be repaired (above).
absl::StatusOr<ReadingRepairCounts> ReplaceUnusableReadings(Array3D& readings,
                                                           const ReadingRepairOptions& options);

}  // namespace tomo::core
