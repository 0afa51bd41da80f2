// Flat-field normalisation that tolerates bad pixels: T = (I - D) / (F - D) per pixel,
// except at a mask's bad pixels, whose readings are left for ReplaceUnusableReadings (set to
// NaN here, so that nothing downstream can mistake them for data).
// projection_preprocessing.h's ApplyDarkFlat is the strict form (a flat not above the dark
// field refuses the job).
//
//   TOMO_RETURN_IF_ERROR(NormaliseByFlat(projections, &dark, flat, &mask));
#pragma once

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/preprocessing/detector_mask.h"

namespace tomo::core {

// projections (views, rows, columns) in place; dark (may be null: 0) and flat are
// (1, rows, columns); mask may be null or empty. INVALID_ARGUMENT when the shapes differ,
// or when a pixel outside the mask has F - D not a finite number > 0.
absl::Status NormaliseByFlat(Array3D& projections, const Array3D* dark, const Array3D& flat,
                             const DetectorMask* mask);

}  // namespace tomo::core
