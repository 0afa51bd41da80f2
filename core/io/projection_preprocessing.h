// From detector readings to line integrals: dark/flat-field correction and the -log
// transform, the JobSpec's input preprocessing for raw and TIFF inputs.
//
// With a dark field D (detector reading without X-rays) and a flat field F (reading with
// X-rays and no object), a reading I becomes the transmission
//   T = (I - D) / (F - D)
// and the line integral is p = -ln T (Beer-Lambert). Dark and flat fields may hold several
// frames (views); they are averaged pixel by pixel first, which lowers their noise.
//
// The guard for non-positive values: T <= 0 (a dead pixel, or noise that took a reading
// below the dark level) has no logarithm, and a tiny positive T gives a huge p that
// streaks the reconstruction. T is therefore clamped to at least min_transmission (1e-6
// by default, p <= 13.8) before the logarithm, and the number of clamped values is
// returned so that callers can report it. A flat field not above the dark field at some
// pixel (F - D <= 0) is a calibration error, refused as INVALID_ARGUMENT naming the pixel.
//
//   TOMO_ASSIGN_OR_RETURN(Array3D dark_mean, MeanFrame(dark, "dark"));
//   TOMO_RETURN_IF_ERROR(ApplyDarkFlat(projections, &dark_mean, flat_mean));
//   TOMO_ASSIGN_OR_RETURN(int64_t clamped, NegativeLog(projections));
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data/array3d.h"

namespace tomo::core {

inline constexpr float kDefaultMinTransmission = 1e-6f;

// The pixel-wise mean of frames (d0 frames of d1 x d2) as one frame (1, d1, d2).
// INVALID_ARGUMENT (naming `name`) when frames has no frame.
absl::StatusOr<Array3D> MeanFrame(const Array3D& frames, absl::string_view name);

// In place: I <- (I - D) / (F - D) for every view, D and F frames of (1, rows, columns);
// dark may be null (D = 0). INVALID_ARGUMENT when a frame's shape differs from the
// projections' (rows, columns) or when F - D <= 0 at a pixel (naming row, column, values).
absl::Status ApplyDarkFlat(Array3D& projections, const Array3D* dark, const Array3D& flat);

// In place: T <- -ln(max(T, min_transmission)). Returns how many values were clamped (T
// below min_transmission, NaN included). INVALID_ARGUMENT when min_transmission is not in
// (0, 1].
absl::StatusOr<int64_t> NegativeLog(Array3D& transmission,
                                    float min_transmission = kDefaultMinTransmission);

}  // namespace tomo::core
