// Admission: whether tomod takes a new job, and the spool's accounting behind that answer.
// A spec is validated and its least device memory checked against every device before
// anything is stored (CheckSpec, no lock); then, under the job table's lock, AdmitLocked
// checks the client's unfinished jobs (--max_jobs_per_client) and uploads in progress
// (--max_uploads_per_client), the tenant's quotas (--tenant_max_unfinished_jobs,
// --tenant_max_spool_bytes: the tenant's jobs' spool bytes plus this job's whole room), the
// queue length (--max_queue_length), and that the job's
// whole room (its input and the bound of its outputs, disk_space.h) fits the spool's job
// files (--max_spool_bytes) and the spool file system's free space less what accepted jobs
// will still write and --min_free_spool_bytes. When all pass it reserves the outputs and
// the first kUploadReservationStep bytes of the input; the rest of the input is reserved as
// it arrives (GrowUploadLocked, one step at a time), so an upload that declares much and
// sends little holds little (one that stalls is ended by tomod's --upload_idle_timeout).
// An upload whose next step no longer fits ends RESOURCE_EXHAUSTED. Each refusal is
// RESOURCE_EXHAUSTED (INVALID_ARGUMENT for a bad spec) naming the limit, its flag and the
// numbers.
//
// The counts follow the jobs through the job table's change hook (OnChangeLocked) and
// erase hook (OnEraseLocked): a job's input is on disk once its upload ends; its outputs'
// reservation becomes their real size when it ends.
//
// Locking: the state is guarded by the job table's mutex (the lock given at construction).
//
//   TOMO_ASSIGN_OR_RETURN(AdmittedSpec admitted, admission.CheckSpec(spec));
//   { absl::MutexLock lock(&table.mu());
//     TOMO_RETURN_IF_ERROR(admission.AdmitLocked(client, admitted.need, free_bytes, queued)); }
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/algorithms/reconstruction.h"
#include "core/devices/devices.h"
#include "runner/disk_space.h"
#include "runner/job_spec.h"
#include "server/jobs/job_table.h"

namespace tomo::server {

struct AdmissionLimits {
  ServerLimits limits;
  std::vector<core::DeviceInfo> devices;
  uint64_t memory_budget_bytes = 0;   // --memory_budget_bytes
  uint64_t max_spool_bytes = 0;       // --max_spool_bytes (0: none)
  uint32_t tenant_max_unfinished_jobs = 0;  // --tenant_max_unfinished_jobs (0: none)
  uint64_t tenant_max_spool_bytes = 0;      // --tenant_max_spool_bytes (0: none)
  uint64_t min_free_spool_bytes = 0;  // --min_free_spool_bytes
  uint32_t max_uploads_per_client = 0;  // --max_uploads_per_client (0: none)
};

// What one tenant's jobs take now: the jobs UPLOADING, QUEUED or RUNNING, and the spool
// bytes they hold or reserve (JobRecord::disk_bytes).
struct TenantUsage {
  std::string tenant;  // empty: the default tenant
  size_t unfinished_jobs = 0;
  uint64_t spool_bytes = 0;
};

// A spec that passed validation, with the room it will take.
struct AdmittedSpec {
  std::shared_ptr<const ValidatedJob> validated;
  SpoolNeed need;
};

// How much more of an upload's input is reserved at a time.
inline constexpr uint64_t kUploadReservationStep = uint64_t{8} << 20;

class Admission {
 public:
  // registry must outlive it; mu is the job table's.
  Admission(AdmissionLimits limits, const core::AlgorithmRegistry& registry, absl::Mutex& mu)
      : limits_(std::move(limits)), registry_(registry), mu_(mu) {}

  // ValidateJobSpec, then the device memory check (RESOURCE_EXHAUSTED when the job's least
  // device memory exceeds the budget it would have on every device), then its room.
  absl::StatusOr<AdmittedSpec> CheckSpec(const tomoserve::v1::JobSpec& spec) const;
  // The limits above; on OK the room is reserved and the job counted as uploading.
  // queued: jobs QUEUED now. free_bytes: the spool file system's free space (its error is
  // returned when a check needs it). tenant: the usage of the job's tenant, for the
  // tenant quotas.
  absl::Status AdmitLocked(absl::string_view client, const SpoolNeed& need,
                           const absl::StatusOr<uint64_t>& free_bytes, size_t queued,
                           const std::string& spool_root, const TenantUsage& tenant = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An admitted job that was not created after all: its room and its place back.
  void GiveBackLocked(absl::string_view client, const SpoolNeed& need)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A created job's share of the reservation (its record takes it over).
  void TakeOverLocked(JobRecord& record, const SpoolNeed& need)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An upload of record has received received_bytes of its input: reserves up to the next
  // step beyond them (at most the input's size). RESOURCE_EXHAUSTED naming the job, the
  // bytes and --max_spool_bytes or the free space (free_bytes) when they do not fit.
  absl::Status GrowUploadLocked(JobRecord& record, uint64_t received_bytes,
                                const absl::StatusOr<uint64_t>& free_bytes,
                                const std::string& spool_root) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The job table's hooks (an upload ends when its job leaves UPLOADING or is erased).
  void OnChangeLocked(JobRecord& record, const tomoserve::v1::Job& next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnEraseLocked(JobRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A job's results were written: bytes more on the spool.
  void AddResultsLocked(JobRecord& record, uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A recovered job: files of disk_bytes (outputs reserved again when it will run).
  void AddRecoveredLocked(JobRecord& record, uint64_t file_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  uint64_t spool_bytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return spool_bytes_; }
  size_t uploading() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return uploading_; }
  const AdmissionLimits& limits() const { return limits_; }

 private:
  void CountClientLocked(const std::string& client, tomoserve::v1::JobState from,
                         tomoserve::v1::JobState to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseReservationLocked(JobRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UploadEndedLocked(const std::string& client) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckFitsSomeDevice(const ValidatedJob& job) const;
  // RESOURCE_EXHAUSTED when a job of need_bytes would take tenant over a tenant quota.
  absl::Status CheckTenantQuotas(const TenantUsage& tenant, uint64_t need_bytes) const;

  const AdmissionLimits limits_;
  const core::AlgorithmRegistry& registry_;
  absl::Mutex& mu_;
  // Client -> its jobs UPLOADING, QUEUED or RUNNING (what --max_jobs_per_client bounds).
  std::map<std::string, size_t, std::less<>> client_jobs_ ABSL_GUARDED_BY(mu_);
  // Sum of JobRecord::disk_bytes (and the room of admitted jobs not yet created).
  uint64_t spool_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Bytes accepted jobs will still write (pending_input_bytes and reserved_output_bytes):
  // the free space admission must leave them.
  uint64_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Jobs UPLOADING (with those admitted and being created).
  size_t uploading_ ABSL_GUARDED_BY(mu_) = 0;
  // Client -> its uploads in progress (what --max_uploads_per_client bounds).
  std::map<std::string, size_t, std::less<>> client_uploads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tomo::server
