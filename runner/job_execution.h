// Runs one validated job from its input file to its result files: decode the projections,
// run the algorithm on a backend, write each requested output format with its CRC-32.
// Shared by tomod's workers and `tomo local`, so both produce the same bytes.
//
// A worker that lets clients fetch the raw result while it is written (early fetch,
// job_manager.h) passes a ShareVolumeFn: it gets the reconstructed volume, shared, before
// the "write results" stage is reported and before any output file is written.
//
// Errors: INVALID_ARGUMENT for input data that cannot be decoded (size, NaN/Inf with the
// first index); CANCELLED when context says so; the algorithm's and backend's errors;
// INTERNAL/DATA_LOSS for files that cannot be written, naming the path.
//
//   TOMO_ASSIGN_OR_RETURN(auto results, ExecuteJob(job, "/spool/7/input.bin",
//                                                 "/spool/7/results", *backend, registry, ctx));
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/algorithms/reconstruction.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/operators/backend.h"
#include "runner/job_input.h"
#include "runner/job_spec.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

absl::StatusOr<std::vector<tomoserve::v1::ResultFile>> ExecuteJob(
    const ValidatedJob& job, const std::string& input_path, const std::string& output_dir,
    core::Backend& backend, const core::AlgorithmRegistry& registry,
    const core::RunContext& context);

// The same with the work of one job shared among several backends (devices; at least one):
// `tomo local --device cuda:0,cuda:1`. tomod runs each job on one device.
absl::StatusOr<std::vector<tomoserve::v1::ResultFile>> ExecuteJob(
    const ValidatedJob& job, const std::string& input_path, const std::string& output_dir,
    const std::vector<core::Backend*>& backends, const core::AlgorithmRegistry& registry,
    const core::RunContext& context);

// What a worker that reads inputs ahead (InputPrefetcher) gives ExecuteJob.
struct JobInputStage {
  // The job's input as ReadJobInput(job, input_path) gave it; empty: ExecuteJob reads it.
  std::optional<JobInput> prefetched;
  // Called once the input is in memory (or its read failed), before the algorithm runs:
  // from then on the spool is free for reading the next job's input. May be empty.
  std::function<void()> on_input_read;
};

// Receives the volume whose outputs are about to be written (the bytes of the raw result,
// volume.raw, to be), once, before the "write results" stage is reported. It may keep the
// volume as long as it likes; it must not block for long (the writing waits for it).
using ShareVolumeFn = std::function<void(std::shared_ptr<const core::Array3D> volume)>;

// The same for such a worker: the spool file is not read again when stage.prefetched has
// a value; without one, this is the ExecuteJob above. The outputs are the same bytes
// either way. share_volume (may be empty): see WriteJobResults.
absl::StatusOr<std::vector<tomoserve::v1::ResultFile>> ExecuteJob(
    const ValidatedJob& job, const std::string& input_path, JobInputStage stage,
    const std::string& output_dir, const std::vector<core::Backend*>& backends,
    const core::AlgorithmRegistry& registry, const core::RunContext& context,
    const ShareVolumeFn& share_volume = {});

// ExecuteJob's last stage, on its own for a volume reconstructed elsewhere (while the
// upload ran, upload_stream.h): each of job.outputs written into output_dir (created),
// reported as the "write results" stage; CANCELLED when context says so; OUT_OF_RANGE,
// naming the first voxel, when the volume holds a NaN or an infinity (nothing is then
// shared or written: such a job ends FAILED, never SUCCEEDED). share_volume,
// when set, gets volume first (after the cancellation check, before the stage is
// reported).
absl::StatusOr<std::vector<tomoserve::v1::ResultFile>> WriteJobResults(
    const ValidatedJob& job, const core::VolumeGeometry& geometry,
    std::shared_ptr<const core::Array3D> volume, const core::AcquisitionMetadata& metadata,
    const std::string& output_dir, const core::RunContext& context,
    const ShareVolumeFn& share_volume = {});

// OK when the count views of rows x columns values, which are views [first_view,
// first_view + count) of the input, are all finite; else INVALID_ARGUMENT naming the first
// that is not, with its index in the whole input, its view, row and detector.
absl::Status CheckFiniteViews(const float* values, int64_t first_view, int64_t count,
                              int64_t rows, int64_t columns);
// The INVALID_ARGUMENT above for `value`, found at `index` of the whole input.
absl::Status NonFiniteValueError(float value, int64_t index, int64_t rows, int64_t columns);

// ExecuteJob's "read input" stage: ResolveJobInput (job_input.h), then every projection
// value checked finite (INVALID_ARGUMENT naming the first that is not, with its view, row
// and detector). Thread-safe; no backend involved.
absl::StatusOr<JobInput> ReadJobInput(const ValidatedJob& job, const std::string& input_path);

// The memory budget of a run (RunContext::memory_budget_bytes): the smallest non-zero of
// the job's JobSpec.memory_budget_bytes, the runner's flag and the device's free memory
// (pass 0 for the CPU: no limit), or 0 (no limit) when all three are 0.
uint64_t EffectiveMemoryBudget(uint64_t job_bytes, uint64_t flag_bytes, uint64_t device_free_bytes);

// File name of an output format inside output_dir, e.g. "volume.raw".
std::string ResultFileName(tomoserve::v1::OutputFormat format);

}  // namespace tomo::server
