// The JobSpec's algorithm.art (ART on a stored system matrix, docs/system_matrix.md):
// validation into core::StoredArtOptions. Called by ValidateJobSpec (job_spec.h).
//
// Errors are INVALID_ARGUMENT naming the proto path, its value and the allowed range, e.g.
//   "algorithm.art.relaxation: 2.5 is out of range (0, 2)"
//   "algorithm.art.views_per_block: 4 needs matrix_format MATRIX_FORMAT_CSR ..."
#pragma once

#include "absl/status/statusor.h"
#include "core/algorithms/stored_art_options.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

// geometry: the JobSpec's (ART takes geometry.fan_2d only); views: its view count.
// Iterations above --max_iterations are ValidateJobSpec's check (CheckIterations).
absl::StatusOr<core::StoredArtOptions> ValidateStoredMatrixArt(
    const tomoserve::v1::StoredMatrixArtOptions& given, const tomoserve::v1::Geometry& geometry,
    int64_t views);

}  // namespace tomo::server
