// Validation of a tomoserve.v1.JobSpec and its conversion to the core's request: the one
// place where proto and core meet (docs/architecture.md). Used by tomod before it stores
// any data and by `tomo local`.
//
// Every error is INVALID_ARGUMENT with the field's path in the proto, its value and the
// allowed range, e.g.
//   "geometry.parallel_2d.num_detectors: 0 is out of range [1, 65536]"
//   "input.size_bytes: 1000 does not match the geometry: 720 views x 1 row x 768 detectors
//    x 4 bytes = 2211840"
// or RESOURCE_EXHAUSTED naming the server limit that the spec exceeds and the tomod flag
// that sets it (--max_voxels, --max_upload_bytes; --max_iterations is INVALID_ARGUMENT: an
// absurd iteration count is a wrong spec). Defaults applied:
// volume.size.z 0 means 1; volume.voxel_size_mm.z 0 means the x size (unused in 2D);
// fbp.window UNSPECIFIED means RAM_LAK; fbp.cutoff unset means 1; outputs empty means
// [RAW_FLOAT32]. The view count is checked against limits.max_views (INVALID_ARGUMENT
// naming --max_views).
// memory_budget_bytes is carried as given (any value; 0 means the device's free memory).
//
//   TOMO_ASSIGN_OR_RETURN(ValidatedJob job, ValidateJobSpec(spec, limits));
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/algorithms/reconstruction.h"
#include "core/io/display_window.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

struct ServerLimits {
  uint64_t max_upload_bytes = 16ull << 30;
  uint64_t max_voxels = 1ull << 32;
  uint32_t max_views = 100000;
  uint32_t max_queue_length = 1000;
  // Unfinished jobs per client (JobManager counts them); 0: no limit.
  uint32_t max_jobs_per_client = 250;
  uint32_t max_iterations = 1000;
};

// The check every iterative algorithm's iteration count goes through (field: its path in
// the proto, e.g. "algorithm.sirt.iterations"): INVALID_ARGUMENT naming --max_iterations
// when iterations exceeds limits.max_iterations. Direct methods (FBP, FDK) have no
// iterations and are not checked.
absl::Status CheckIterations(absl::string_view field, uint64_t iterations,
                             const ServerLimits& limits);

// JobSpec.output_options, validated: "output_options.water_attenuation_per_mm" a finite
// value > 0 when set, "output_options.window" finite with upper > lower when set; and a
// DICOM series needs the water attenuation here unless the input is DICOM-CT-PD.
struct OutputSettings {
  std::optional<double> water_attenuation_per_mm;
  std::optional<core::DisplayWindow> window;  // volume units (1/mm)
};

struct ValidatedJob {
  core::ReconstructionRequest request;
  uint64_t input_bytes = 0;  // what the upload must total
  // Outputs with defaults applied (never empty, never UNSPECIFIED).
  std::vector<tomoserve::v1::OutputFormat> outputs;
  // JobSpec.memory_budget_bytes as given: 0 means the device's free memory (the runner
  // takes the smallest non-zero of this, its flag and the device's free memory).
  uint64_t memory_budget_bytes = 0;
  OutputSettings output_settings;
  // JobSpec.input as validated (encoding, files, preprocessing): runner/job_input.h turns
  // the upload into projections with it.
  tomoserve::v1::ProjectionInput input;
  // geometry.from_input_files: request.geometry is only a placeholder (a circular cone with
  // one view per projection file) until ResolveJobInput reads the geometry from the files.
  bool geometry_from_input_files = false;
  // JobSpec.geometry as validated (a centre of rotation column moved into the detector
  // offset): GeometryWith rebuilds it with a file's angles or an estimated centre.
  tomoserve::v1::Geometry geometry_spec;
  // geometry.*.center_of_rotation.estimate: the runner estimates the centre from the
  // projections (server/job_center_of_rotation.h) before the algorithm runs.
  std::optional<tomoserve::v1::CenterOfRotationEstimate> center_estimate = std::nullopt;
};

absl::StatusOr<ValidatedJob> ValidateJobSpec(const tomoserve::v1::JobSpec& spec,
                                             const ServerLimits& limits);

// What the input changes in the spec's geometry when the job runs.
struct GeometryChanges {
  std::vector<double> angles_deg;     // one per view (input.hdf5.angles_from_file); empty: kept
  std::optional<double> offset_u_mm;  // an estimated centre of rotation; unset: kept
};

// The job's geometry with those changes: the spec's geometry rebuilt and checked as a spec's
// would be. INVALID_ARGUMENT naming input.hdf5.angles_from_file when the angle count differs
// from the views or the geometry has no angles; the geometry's own errors (against the
// volume).
absl::StatusOr<core::Geometry> GeometryWith(const ValidatedJob& job,
                                            const GeometryChanges& changes);

}  // namespace tomo::server
