// Ring-artefact suppression on sinograms, after the sorting-based stripe removal of Vo,
// Atwood and Drakopoulos (Opt. Express 26(22):28396, 2018). A detector column that answers
// a little too strongly or weakly in every view is a stripe along the views in the sinogram
// and a ring around the axis in the image.
//
// For each detector row's sinogram (views x columns): the values of each column are sorted
// along the views, so that the object's structure, spread over the views, varies smoothly
// from column to column while a column's offset stays a step; a median of `window` columns
// across each sorted row is the stripe-free estimate. Where Vo et al. put the filtered
// values back view by view, we take out only their mean difference per column (one offset
// per column: a full stripe), which alters sharp-edged objects less (on the test phantom the
// per-value version changed the clean image three times as much). Partial stripes (a column
// wrong in some views only) are left. Leave the filter off unless the image has rings.
//
//   TOMO_RETURN_IF_ERROR(RemoveStripesBySorting(line_integrals, kDefaultStripeWindow));
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "core/data/array3d.h"

namespace tomo::core {

inline constexpr int64_t kDefaultStripeWindow = 5;

// In place on (views, rows, columns) line integrals. INVALID_ARGUMENT when window is not
// odd or not in [3, columns] (for columns >= 3).
absl::Status RemoveStripesBySorting(Array3D& projections, int64_t window);

}  // namespace tomo::core
