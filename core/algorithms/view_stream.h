// ViewStream: a reconstruction fed with its views in order as they arrive (Algorithm::
// BeginViewStream), so that a job is reconstructed while its projections upload. The
// volume equals the algorithm's Run on all the views. Which algorithms stream, and how, is
// theirs to say (today FDK and parallel-beam FBP of vector geometries, FdkStream).
//
//   TOMO_ASSIGN_OR_RETURN(auto stream, registry.BeginViewStream(request, backend, context));
//   TOMO_RETURN_IF_ERROR(stream->AddViews(0, first_views, count));  ...
//   TOMO_ASSIGN_OR_RETURN(Array3D volume, stream->Finish());
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/data/array3d.h"

namespace tomo::core {

class ViewStream {
 public:
  virtual ~ViewStream() = default;
  // The next `count` views, [first_view, first_view + count), each rows x columns floats
  // one after the other (read before the call returns). INVALID_ARGUMENT when they are not
  // the next views or run past the geometry's.
  virtual absl::Status AddViews(int64_t first_view, const float* views, int64_t count) = 0;
  virtual int64_t views_added() const = 0;
  // After the last view: the volume. FAILED_PRECONDITION when views are missing; once only
  // (FAILED_PRECONDITION after that).
  virtual absl::StatusOr<Array3D> Finish() = 0;
};

}  // namespace tomo::core
