// Flat-field normalisation that tolerates bad pixels: T = (I - D) / (F - D) per pixel,
// except at a mask's bad pixels, whose readings are left for ReplaceUnusableReadings (set to
// NaN here, so that nothing downstream can mistake them for data).
// projection_preprocessing.h's ApplyDarkFlat is the strict form (a flat not above the dark
// field refuses the job).
//
//   TOMO_RETURN_IF_ERROR(NormaliseByFlat(projections, &dark, flat, &mask));
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/preprocessing/detector_mask.h"

namespace tomo::core {

// projections (views, rows, columns) in place; dark (may be null: 0) and flat are
// (1, rows, columns); mask may be null or empty. INVALID_ARGUMENT when the shapes differ,
// or when a pixel outside the mask has F - D not a finite number > 0.
absl::Status NormaliseByFlat(Array3D& projections, const Array3D* dark, const Array3D& flat,
                             const DetectorMask* mask);

// A flat field taken at one time: the mean of its frames and its place in the acquisition,
// counted in projections taken before it (0: before the scan; the view count: after it).
struct TimedFlat {
  Array3D mean;  // (1, rows, columns)
  double position = 0;
};

// The same with the flat of view v interpolated linearly between the timed flats around
// v + 1/2 (the middle of its exposure), held constant beyond the first and the last: a beam
// that decays between flats taken before and after the scan. INVALID_ARGUMENT as above, for
// fewer than two distinct positions, or for a flat not above the dark field at a pixel
// outside the mask in any of them.
absl::Status NormaliseByInterpolatedFlats(Array3D& projections, const Array3D* dark,
                                          const std::vector<TimedFlat>& flats,
                                          const DetectorMask* mask);

}  // namespace tomo::core
