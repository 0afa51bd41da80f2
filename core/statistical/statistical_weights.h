// Statistical weights of PWLS: the data term (y - A x)^T W (y - A x) weighs each line
// integral y_i by w_i, the inverse of its variance. For transmission data the variance of
// y_i = -log(I_i / I0_i) is about 1 / lambda_i, lambda_i the photons detected, so w_i is
// the photon count: from DICOM-CT-PD photon statistics (counts directly), or from raw
// intensities with their flat field and the flat field's photon count per pixel.
//
// Arrays are (view, row, column) like the projections. A pixel with no photons (I <= 0)
// carries no information: weight 0 and line integral 0.
//
//   TOMO_ASSIGN_OR_RETURN(Array3D w, WeightsFromCounts(counts));
//   TOMO_ASSIGN_OR_RETURN(PostLogData data, PostLogFromIntensities(raw, flat, 1.0e5));
#pragma once

#include "absl/status/statusor.h"
#include "core/data/array3d.h"

namespace tomo::core::statistical {

// w = counts. INVALID_ARGUMENT naming the element (view, row, column) when a count is
// negative or not finite.
absl::StatusOr<Array3D> WeightsFromCounts(const Array3D& counts);

struct PostLogData {
  Array3D line_integrals;  // y = -log(I / I0)
  Array3D weights;         // w = flat_field_counts * I / I0
};

// flat_field: dims (1, rows, columns), one flat field for every view, or the intensities'
// dims. INVALID_ARGUMENT when the dims differ from those, flat_field_counts is not a finite
// value > 0, an intensity is negative or not finite, or a flat-field value is not a finite
// value > 0 (each naming the element and value).
absl::StatusOr<PostLogData> PostLogFromIntensities(const Array3D& intensities,
                                                   const Array3D& flat_field,
                                                   double flat_field_counts);

}  // namespace tomo::core::statistical
