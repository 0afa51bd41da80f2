// A job's estimated centre of rotation (geometry.*.center_of_rotation.estimate): from the
// resolved input's projections (after the preprocessing) of one detector row,
// core/calibration/center_of_rotation.h finds the column the axis projects onto, and the
// job's geometry is rebuilt with the detector offset it gives (and the file's angles when the
// input brought them). The returned line is for the job's notes, events and log.
//
// Errors: the estimate's (INVALID_ARGUMENT saying why no estimate is possible, e.g. opposing
// rays asked of a short scan), the rebuilt geometry's, CANCELLED.
//
//   if (job.center_estimate) {
//     TOMO_ASSIGN_OR_RETURN(std::string note,
//                           EstimateJobCenterOfRotation(job, input, request, backend, context));
//   }
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/algorithms/reconstruction.h"
#include "core/base/run_context.h"
#include "core/operators/backend.h"
#include "runner/job_input.h"
#include "runner/job_spec.h"

namespace tomo::server {

// Sets request.geometry; job.center_estimate must be set.
absl::StatusOr<std::string> EstimateJobCenterOfRotation(const ValidatedJob& job,
                                                        const JobInput& input,
                                                        core::ReconstructionRequest& request,
                                                        core::Backend& backend,
                                                        const core::RunContext& context);

}  // namespace tomo::server
