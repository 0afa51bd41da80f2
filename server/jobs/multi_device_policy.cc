#include "server/jobs/multi_device_policy.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tomo::server {

absl::StatusOr<MultiDeviceJobs> ParseMultiDeviceJobs(absl::string_view value) {
  if (value == "off") return MultiDeviceJobs::kOff;
  if (value == "idle") return MultiDeviceJobs::kIdle;
  return absl::InvalidArgumentError(
      absl::StrCat("--multi_device_jobs: \"", value, "\" is not one of off, idle"));
}

std::string MultiDeviceJobsName(MultiDeviceJobs mode) {
  return mode == MultiDeviceJobs::kIdle ? "idle" : "off";
}

size_t ExtraDevicesForJob(const MultiDevicePolicy& policy, const MultiDeviceCandidate& job,
                          size_t idle_others, size_t queued_behind) {
  if (policy.mode != MultiDeviceJobs::kIdle || !job.splits || job.voxels < policy.min_voxels) {
    return 0;
  }
  // The jobs waiting now get a device each before this one takes a second.
  return idle_others > queued_behind ? idle_others - queued_behind : 0;
}

MultiDeviceCandidate CandidateOf(const ValidatedJob& job, const core::AlgorithmRegistry& registry) {
  MultiDeviceCandidate candidate;
  candidate.voxels = static_cast<uint64_t>(job.request.volume.dims().count());
  // The core says which runs share their work among devices (fbp's Fdk slabs; sirt, sart,
  // os_sart and cgls on vector geometries); the others run on the first backend given.
  candidate.splits = registry.SplitsOverBackends(job.request);
  return candidate;
}

}  // namespace tomo::server
