#include "core/preprocessing/detector_correction.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/io/projection_preprocessing.h"
#include "core/preprocessing/flat_normalisation.h"
#include "core/preprocessing/ring_filter.h"

namespace tomo::core {
namespace {

constexpr float kLowestFloor = 1e-6f;
constexpr float kHighestAutomaticFloor = 1e-2f;

}  // namespace

float AutomaticTransmissionFloor(const Array3D* dark, const Array3D* flat) {
  if (flat == nullptr || flat->size() == 0) return kLowestFloor;
  std::vector<float> gains;
  gains.reserve(static_cast<size_t>(flat->size()));
  for (int64_t i = 0; i < flat->size(); ++i) {
    const float g = flat->data()[i] - (dark != nullptr && dark->size() > 0 ? dark->data()[i] : 0);
    if (std::isfinite(g) && g > 0) gains.push_back(g);
  }
  if (gains.empty()) return kLowestFloor;
  auto middle = gains.begin() + static_cast<std::ptrdiff_t>(gains.size() / 2);
  std::nth_element(gains.begin(), middle, gains.end());
  const double median = *middle;
  // A flat normalised to about 1 is not in counts: no count to take half of.
  if (median < 2.0) return kLowestFloor;
  return std::clamp(static_cast<float>(0.5 / median), kLowestFloor, kHighestAutomaticFloor);
}

std::string DetectorCorrectionReport::Summary() const {
  std::string text = absl::StrCat("preprocessing: ", bad_pixels, " bad detector pixels");
  if (bad_pixels > 0) {
    absl::StrAppend(&text, " (", dead_pixels, " flat not above dark, ", gain_outliers,
                    " gain outliers, ", mask_file_pixels, " from the mask file)");
  }
  absl::StrAppend(&text, " replaced from their neighbours in every view; ", replaced_readings,
                  " further unusable readings replaced");
  if (min_transmission > 0) {
    absl::StrAppend(&text, "; ", clamped_transmissions,
                    " transmissions raised to the floor ",
                    absl::StrFormat("%.3g", min_transmission),
                    automatic_floor ? " (automatic: half a detector count)" : "");
  }
  if (ring_filter_window > 0) {
    absl::StrAppend(&text, "; ring filter (sorted columns, median of ", ring_filter_window,
                    ")");
  }
  return text;
}

absl::StatusOr<DetectorCorrectionReport> CorrectDetectorReadings(
    Array3D& projections, const Array3D* dark, const Array3D* flat, const DetectorMask* given_mask,
    const DetectorCorrectionOptions& options) {
  DetectorCorrectionReport report;
  const Dims3& p = projections.dims();
  const int64_t pixels = p.d1 * p.d2;
  if (dark != nullptr && dark->size() == 0) dark = nullptr;
  if (flat != nullptr && flat->size() == 0) flat = nullptr;
  if (options.min_transmission.has_value() &&
      !(*options.min_transmission > 0.0f && *options.min_transmission <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_transmission: ", *options.min_transmission, " is out of range (0, 1]"));
  }
  if (!options.bad_pixels) {
    if (options.timed_flats != nullptr && !options.timed_flats->empty()) {
      TOMO_RETURN_IF_ERROR(
          NormaliseByInterpolatedFlats(projections, dark, *options.timed_flats, nullptr));
    } else if (flat != nullptr) {
      TOMO_RETURN_IF_ERROR(ApplyDarkFlat(projections, dark, *flat));
    }
  } else {
    if (!(options.max_bad_fraction > 0.0) || !(options.max_bad_fraction <= 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "max_bad_fraction: ", options.max_bad_fraction, " is out of range (0, 1]"));
    }
    DetectorMask mask;
    if (given_mask != nullptr && !given_mask->empty()) {
      if (given_mask->rows() != p.d1 || given_mask->columns() != p.d2) {
        return absl::InvalidArgumentError(absl::StrCat(
            "bad-pixel mask: ", given_mask->rows(), " x ", given_mask->columns(),
            " (rows x columns) does not match the projections' ", p.d1, " x ", p.d2));
      }
      mask = *given_mask;
      report.mask_file_pixels = mask.CountBad();
    }
    if (flat != nullptr) {
      TOMO_ASSIGN_OR_RETURN(DetectorMask found,
                            BadPixelsFromFields(dark, *flat, options.gain_outlier_ratio));
      for (int64_t i = 0; i < pixels; ++i) {
        if (!found.bad(i)) continue;
        const float g = flat->data()[i] - (dark != nullptr ? dark->data()[i] : 0.0f);
        if (std::isfinite(g) && g > 0.0f) {
          ++report.gain_outliers;
        } else {
          ++report.dead_pixels;
        }
      }
      mask.Merge(found);
    }
    report.bad_pixels = mask.empty() ? 0 : mask.CountBad();
    const double fraction = static_cast<double>(report.bad_pixels) / static_cast<double>(pixels);
    if (report.bad_pixels > 0 && fraction > options.max_bad_fraction) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input: ", report.bad_pixels, " of the detector's ", pixels, " pixels are bad (",
          report.dead_pixels, " with the flat field not above the dark field, ",
          report.gain_outliers, " gain outliers, ", report.mask_file_pixels,
          " from the mask file): ", absl::StrFormat("%.3g", 100.0 * fraction),
          "%, more than max_bad_fraction ", options.max_bad_fraction * 100.0,
          "% can be replaced from their neighbours; check that the dark and flat fields "
          "belong to this scan"));
    }
    if (options.timed_flats != nullptr && !options.timed_flats->empty()) {
      TOMO_RETURN_IF_ERROR(
          NormaliseByInterpolatedFlats(projections, dark, *options.timed_flats, &mask));
    } else if (flat != nullptr) {
      TOMO_RETURN_IF_ERROR(NormaliseByFlat(projections, dark, *flat, &mask));
    }
    // Line integrals given as such (no mask, no -log) are the caller's to check.
    if (report.bad_pixels > 0 || options.negative_log) {
      ReadingRepairOptions repair;
      repair.mask = &mask;
      repair.replace_non_positive = options.negative_log;
      repair.max_bad_fraction = options.max_bad_fraction;
      TOMO_ASSIGN_OR_RETURN(ReadingRepairCounts counts,
                            ReplaceUnusableReadings(projections, repair));
      report.replaced_readings = counts.other_readings;
    }
  }
  if (options.negative_log) {
    report.automatic_floor = !options.min_transmission.has_value();
    report.min_transmission = options.min_transmission.has_value()
                                  ? *options.min_transmission
                                  : AutomaticTransmissionFloor(dark, flat);
    TOMO_ASSIGN_OR_RETURN(report.clamped_transmissions,
                          NegativeLog(projections, report.min_transmission));
  }
  if (options.ring_filter_window > 0) {
    TOMO_RETURN_IF_ERROR(RemoveStripesBySorting(projections, options.ring_filter_window));
    report.ring_filter_window = options.ring_filter_window;
  }
  return report;
}

}  // namespace tomo::core
