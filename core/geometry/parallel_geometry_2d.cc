#include "core/geometry/parallel_geometry_2d.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tomo::core {
namespace {

// "1st", "2nd", "3rd", "4th", "11th", "21st": errors count values from one, as people do.
std::string Ordinal(int64_t n) {
  const int64_t last_two = n % 100;
  const int64_t last = n % 10;
  const char* suffix = "th";
  if (last_two < 11 || last_two > 13) {
    if (last == 1) suffix = "st";
    if (last == 2) suffix = "nd";
    if (last == 3) suffix = "rd";
  }
  return absl::StrCat(n, suffix);
}

}  // namespace

absl::StatusOr<ParallelGeometry2D> ParallelGeometry2D::Create(int64_t num_detectors,
                                                              double detector_spacing_mm,
                                                              double detector_offset_mm,
                                                              std::vector<double> angles_rad) {
  // Field names follow tomoserve.v1.ParallelBeam2D so that the server can prefix the path.
  if (num_detectors < 1 || num_detectors > kMaxDetectors) {
    return absl::InvalidArgumentError(absl::StrCat("num_detectors: ", num_detectors,
                                                   " is out of range [1, ", kMaxDetectors, "]"));
  }
  if (!std::isfinite(detector_spacing_mm) || detector_spacing_mm <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("detector_spacing_mm: ", detector_spacing_mm, " must be a finite value > 0"));
  }
  if (!std::isfinite(detector_offset_mm)) {
    return absl::InvalidArgumentError(
        absl::StrCat("detector_offset_mm: ", detector_offset_mm, " must be a finite value"));
  }
  const int64_t count = static_cast<int64_t>(angles_rad.size());
  if (count < 1 || count > kMaxViews) {
    return absl::InvalidArgumentError(
        absl::StrCat("angles: ", count, " views is out of range [1, ", kMaxViews, "]"));
  }
  for (int64_t i = 0; i < count; ++i) {
    const double angle = angles_rad[static_cast<size_t>(i)];
    if (std::isnan(angle)) {
      return absl::InvalidArgumentError(absl::StrCat("angles: ", Ordinal(i + 1), " value is NaN"));
    }
    if (std::isinf(angle)) {
      return absl::InvalidArgumentError(
          absl::StrCat("angles: ", Ordinal(i + 1), " value is ", angle, ", must be finite"));
    }
  }
  return ParallelGeometry2D(num_detectors, detector_spacing_mm, detector_offset_mm,
                            std::move(angles_rad));
}

std::vector<double> ParallelGeometry2D::UniformAngles(int64_t count, double start_rad,
                                                      double span_rad) {
  std::vector<double> angles;
  if (count <= 0) return angles;
  angles.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    // Multiply before dividing so that i * span / count is exact for common spans.
    angles.push_back(start_rad + static_cast<double>(i) * span_rad / static_cast<double>(count));
  }
  return angles;
}

}  // namespace tomo::core
