// MultiDevicePolicy: whether one job may run on several of tomod's devices at once
// (tomod's --multi_device_jobs and --multi_device_min_voxels), and how many it gets.
//
// off (the default): every job runs on one device, the worker's that took it.
// idle: a job whose algorithm splits its work over devices (SplitsOverDevices) and whose
// volume has at least min_voxels voxels also takes the other devices of its worker's kind
// that are idle when it starts, except as many as jobs still wait in the queue: a job
// queued at that moment never waits behind a multi-device job for a device that was free.
// The job keeps the devices it took until it ends and never waits for more; a device that
// becomes idle meanwhile takes the next queued job as usual. So a small job is never held
// up by a large one for longer than that one run.
//
//   MultiDevicePolicy policy{MultiDeviceJobs::kIdle, 1 << 27};
//   size_t extra = ExtraDevicesForJob(policy, {voxels, splits}, /*idle_others=*/3,
//                                     /*queued_behind=*/1);  // 2 when large and split
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/algorithms/reconstruction.h"
#include "runner/job_spec.h"

namespace tomo::server {

enum class MultiDeviceJobs { kOff, kIdle };

// 2^27 voxels (512^3): smaller jobs finish in moments on one GPU, and each further device
// first needs its own copy of the projections. Not yet measured on several GPUs.
inline constexpr uint64_t kDefaultMultiDeviceMinVoxels = uint64_t{1} << 27;

struct MultiDevicePolicy {
  MultiDeviceJobs mode = MultiDeviceJobs::kOff;
  // Smallest volume, in voxels, of a job that may take several devices.
  uint64_t min_voxels = kDefaultMultiDeviceMinVoxels;
};

// "off" or "idle"; INVALID_ARGUMENT naming --multi_device_jobs, the value and the allowed
// values otherwise.
absl::StatusOr<MultiDeviceJobs> ParseMultiDeviceJobs(absl::string_view value);
// The flag's spelling of mode.
std::string MultiDeviceJobsName(MultiDeviceJobs mode);

// What the policy needs to know of a job starting now.
struct MultiDeviceCandidate {
  uint64_t voxels = 0;  // of its volume
  bool splits = false;  // its algorithm shares the work among several backends
};

// How many devices besides its worker's a job starting now takes: 0 unless the policy
// is idle, the job splits and has at least min_voxels voxels; else the idle devices of
// its kind (idle_others, the worker's own not counted) less the jobs still queued
// behind it (queued_behind), never below 0.
size_t ExtraDevicesForJob(const MultiDevicePolicy& policy, const MultiDeviceCandidate& job,
                          size_t idle_others, size_t queued_behind);

// The job as the policy sees it: its volume's voxels, and whether its algorithm shares a
// run among several backends (core::AlgorithmRegistry::SplitsOverBackends: fbp on the
// cone-beam and vector geometries that Fdk reconstructs in z-slabs; sirt and cgls on
// vector geometries, their views split among the devices). An algorithm that does
// not would run on the first device and leave the others idle, so it never takes several.
MultiDeviceCandidate CandidateOf(const ValidatedJob& job, const core::AlgorithmRegistry& registry);

}  // namespace tomo::server
