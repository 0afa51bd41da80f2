#include "runner/job_execution.h"

#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/data/array3d.h"
#include "core/data/finite_values.h"
#include "runner/job_center_of_rotation.h"
#include "runner/job_input.h"
#include "runner/job_outputs.h"

namespace tomo::server {

absl::Status NonFiniteValueError(float value, int64_t index, int64_t rows, int64_t columns) {
  const int64_t view = index / (rows * columns);
  const int64_t row = (index / columns) % rows;
  const int64_t column = index % columns;
  return absl::InvalidArgumentError(absl::StrCat(
      "input: value ", value, " at index ", index, " (view ", view, ", row ", row,
      ", detector ", column, ") is not finite; projections must be finite line integrals"));
}

absl::Status CheckFiniteViews(const float* values, int64_t first_view, int64_t count,
                              int64_t rows, int64_t columns) {
  const int64_t i = core::FirstNonFiniteIndex(values, count * rows * columns);
  if (i < 0) return absl::OkStatus();
  return NonFiniteValueError(values[i], first_view * rows * columns + i, rows, columns);
}

std::string ResultFileName(tomoserve::v1::OutputFormat format) {
  return OutputFileNames(format).front();
}

uint64_t EffectiveMemoryBudget(uint64_t job_bytes, uint64_t flag_bytes,
                               uint64_t device_free_bytes) {
  uint64_t budget = 0;
  for (uint64_t bytes : {job_bytes, flag_bytes, device_free_bytes}) {
    if (bytes != 0 && (budget == 0 || bytes < budget)) budget = bytes;
  }
  return budget;
}

absl::StatusOr<std::vector<tomoserve::v1::ResultFile>> ExecuteJob(
    const ValidatedJob& job, const std::string& input_path, const std::string& output_dir,
    core::Backend& backend, const core::AlgorithmRegistry& registry,
    const core::RunContext& context) {
  return ExecuteJob(job, input_path, output_dir, std::vector<core::Backend*>{&backend}, registry,
                    context);
}

absl::StatusOr<JobInput> ReadJobInput(const ValidatedJob& job, const std::string& input_path) {
  TOMO_ASSIGN_OR_RETURN(JobInput input, ResolveJobInput(job, input_path));
  const core::Dims3& d = input.projections.dims();
  TOMO_RETURN_IF_ERROR(CheckFiniteViews(input.projections.data(), 0, d.d0, d.d1, d.d2));
  return input;
}

absl::StatusOr<std::vector<tomoserve::v1::ResultFile>> ExecuteJob(
    const ValidatedJob& job, const std::string& input_path, const std::string& output_dir,
    const std::vector<core::Backend*>& backends, const core::AlgorithmRegistry& registry,
    const core::RunContext& context) {
  return ExecuteJob(job, input_path, JobInputStage(), output_dir, backends, registry, context);
}

absl::StatusOr<std::vector<tomoserve::v1::ResultFile>> ExecuteJob(
    const ValidatedJob& job, const std::string& input_path, JobInputStage stage,
    const std::string& output_dir, const std::vector<core::Backend*>& backends,
    const core::AlgorithmRegistry& registry, const core::RunContext& context,
    const ShareVolumeFn& share_volume) {
  TOMO_RETURN_IF_ERROR(context.CheckCancelled("read input"));
  context.Report({0.0, "read input", 0, 0});
  absl::StatusOr<JobInput> read;
  if (stage.prefetched.has_value()) {
    read = std::move(*stage.prefetched);
    stage.prefetched.reset();
  } else {
    read = ReadJobInput(job, input_path);
  }
  if (stage.on_input_read) stage.on_input_read();
  TOMO_ASSIGN_OR_RETURN(JobInput input, std::move(read));
  TOMO_ASSIGN_OR_RETURN(core::ReconstructionRequest request, RequestForInput(job, input));
  TOMO_RETURN_IF_ERROR(context.CheckCancelled("read input"));
  if (job.center_estimate.has_value()) {
    TOMO_ASSIGN_OR_RETURN(std::string note, EstimateJobCenterOfRotation(
                                                job, input, request, *backends.front(), context));
    input.notes.push_back(std::move(note));
  }
  for (const std::string& note : input.notes) {
    core::ProgressUpdate update{0.0, "read input", 0, 0};
    update.note = note;
    context.Report(update);
  }

  TOMO_ASSIGN_OR_RETURN(core::Array3D volume,
                        registry.RunOnBackends(request, input.projections, backends, context));
  const core::AcquisitionMetadata metadata = std::move(input.metadata);
  input.pinned_projections.reset();  // unregistered before the projections are freed
  input = JobInput();  // free the input before writing
  return WriteJobResults(job, request.volume,
                         std::make_shared<const core::Array3D>(std::move(volume)), metadata,
                         output_dir, context, share_volume);
}

absl::StatusOr<std::vector<tomoserve::v1::ResultFile>> WriteJobResults(
    const ValidatedJob& job, const core::VolumeGeometry& geometry,
    std::shared_ptr<const core::Array3D> volume, const core::AcquisitionMetadata& metadata,
    const std::string& output_dir, const core::RunContext& context,
    const ShareVolumeFn& share_volume) {
  TOMO_RETURN_IF_ERROR(context.CheckCancelled("write results"));
  // A volume with NaN or infinite voxels is no result, whatever made it (finite inputs
  // whose sums overflow float32, a numerical fault): the job fails saying so, and nothing
  // is shared or written.
  if (const int64_t bad = core::FirstNonFiniteIndex(volume->data(), volume->size()); bad >= 0) {
    const core::Dims3& d = volume->dims();
    return absl::OutOfRangeError(absl::StrCat(
        "result: the reconstructed volume is not finite (voxel z ", bad / (d.d1 * d.d2), ", y ",
        (bad / d.d2) % d.d1, ", x ", bad % d.d2, " is ", volume->data()[bad],
        "); the input's values or the parameters overflow float32 arithmetic; no result "
        "was written"));
  }
  // Shared before the stage is reported: a client that fetches on that event finds it.
  if (share_volume) share_volume(volume);
  context.Report({1.0, "write results", 0, 0});
  std::error_code error;
  std::filesystem::create_directories(output_dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create result directory ", output_dir, ": ", error.message()));
  }
  return WriteJobOutputs(*volume, geometry, job.outputs, job.output_settings, metadata,
                         output_dir);
}

}  // namespace tomo::server
