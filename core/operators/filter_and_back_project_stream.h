// A filtered back projection (Backend::FilterAndBackProject) fed with views in order as
// they arrive, so that a job's reconstruction can run while its projections are still being
// uploaded. The result equals FilterAndBackProject on all the views at once (the CUDA stream
// sums the views in the same chunks as FilterAndBackProject does when they are added in
// pieces of its chunk size; other piece sizes change only the float summation order).
//
//   TOMO_ASSIGN_OR_RETURN(auto stream, backend.BeginFilterAndBackProject(
//       geometry, volume_geometry, filter, weights, BackProjectionWeighting::kFdk));
//   TOMO_RETURN_IF_ERROR(stream->AddViews(0, first_views.data(), 12));   // views 0..11
//   TOMO_RETURN_IF_ERROR(stream->AddViews(12, more.data(), 30));          // views 12..41
//   ...
//   TOMO_RETURN_IF_ERROR(stream->Finish(volume));
//
// One thread at a time; the backend must not be used for anything else until Finish returns
// or the stream is destroyed.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "core/data/array3d.h"
#include "core/filters/ramp_filter.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"
#include "core/operators/filtered_back_projection_weights.h"

namespace tomo::core {

enum class BackProjectionWeighting { kNone, kFdk, kMatched };

class FilterAndBackProjectStream {
 public:
  virtual ~FilterAndBackProjectStream() = default;
  // The next `count` views: views [first_view, first_view + count) of the geometry, each
  // rows x columns floats, one after the other in `views` (read before the call returns).
  // INVALID_ARGUMENT when first_view is not the view after the last one added, or the views
  // run past the geometry's last.
  virtual absl::Status AddViews(int64_t first_view, const float* views, int64_t count) = 0;
  // After the last view: volume (volume_geometry's dims) = the filtered back projection.
  // Overwrites. FAILED_PRECONDITION naming how many views are missing.
  virtual absl::Status Finish(Array3D& volume) = 0;
  // Views added so far.
  virtual int64_t views_added() const = 0;
};

// The checks every stream makes: AddViews' order and range, Finish's completeness.
absl::Status CheckNextViews(int64_t first_view, int64_t count, int64_t added, int64_t views);
absl::Status CheckAllViews(int64_t added, int64_t views);

}  // namespace tomo::core
