#include "server/jobs/admission.h"

#include <algorithm>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/checked_arithmetic.h"
#include "core/base/status_macros.h"
#include "runner/job_execution.h"

namespace tomo::server {

namespace pb = ::tomoserve::v1;

namespace {

// What admission reserves at once: the outputs' bound and the input's first step.
uint64_t FirstReservation(const SpoolNeed& need) {
  return need.output_bytes + std::min(need.input_bytes, kUploadReservationStep);
}

}  // namespace

absl::StatusOr<AdmittedSpec> Admission::CheckSpec(const pb::JobSpec& spec) const {
  absl::StatusOr<ValidatedJob> checked = ValidateJobSpec(spec, limits_.limits);
  if (!checked.ok()) return checked.status();
  TOMO_RETURN_IF_ERROR(CheckFitsSomeDevice(*checked));
  AdmittedSpec admitted;
  admitted.validated = std::make_shared<const ValidatedJob>(std::move(*checked));
  // The room the job will take: its input and (a bound of) its outputs.
  TOMO_ASSIGN_OR_RETURN(admitted.need, JobSpoolNeed(*admitted.validated));
  return admitted;
}

absl::Status Admission::CheckFitsSomeDevice(const ValidatedJob& job) const {
  // The need by kind of device (a method's may differ: art's tiled kernels on CUDA), each
  // counted once.
  std::map<core::DeviceKind, uint64_t> need_on;
  const auto need_of = [&](core::DeviceKind kind) {
    const auto found = need_on.find(kind);
    if (found != need_on.end()) return found->second;
    return need_on[kind] = registry_.MinimumDeviceBytesOn(job.request, kind);
  };
  uint64_t least = limits_.devices.empty() ? registry_.MinimumDeviceBytes(job.request)
                                           : std::numeric_limits<uint64_t>::max();
  if (least == 0) return absl::OkStatus();
  struct Refusal {
    std::string device;
    uint64_t budget, needed;
  };
  std::vector<Refusal> refusals;
  for (const core::DeviceInfo& device : limits_.devices) {
    const uint64_t needed = need_of(device.kind);
    // Admission goes by the device's total memory: what is free changes from job to job.
    const uint64_t budget = EffectiveMemoryBudget(
        job.memory_budget_bytes, limits_.memory_budget_bytes,
        device.kind == core::DeviceKind::kCpu ? 0 : device.memory_total_bytes);
    if (needed == 0 || budget == 0 || needed <= budget) return absl::OkStatus();
    least = std::min(least, needed);
    refusals.push_back({device.id, budget, needed});
  }
  std::vector<std::string> budgets;
  for (const Refusal& r : refusals) {
    budgets.push_back(absl::StrCat(r.device, " ", r.budget,
                                   r.needed != least ? absl::StrCat(" (it needs ", r.needed, " there)")
                                                     : std::string()));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "the job needs at least ", least, " bytes of device memory (",
      core::AlgorithmName(job.request.algorithm),
      " split as far as it goes), more than any device allows: ", absl::StrJoin(budgets, ", "),
      " bytes (the smallest of the device's memory, --memory_budget_bytes ",
      limits_.memory_budget_bytes, " and the job's memory_budget_bytes ",
      job.memory_budget_bytes, "; 0: unset)"));
}

absl::Status Admission::CheckTenantQuotas(const TenantUsage& tenant,
                                          uint64_t need_bytes) const {
  const uint32_t max_jobs = limits_.tenant_max_unfinished_jobs;
  const uint64_t max_bytes = limits_.tenant_max_spool_bytes;
  const std::string who = tenant.tenant.empty() ? std::string("the default tenant")
                                                : absl::StrCat("tenant ", tenant.tenant);
  if (max_jobs > 0 && tenant.unfinished_jobs >= max_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "quota tenant_max_unfinished_jobs: ", who, " has ", tenant.unfinished_jobs,
        " unfinished jobs (uploading, queued or running), the limit is ", max_jobs,
        " (--tenant_max_unfinished_jobs); wait for one to end or cancel one"));
  }
  if (max_bytes > 0 && need_bytes > max_bytes - std::min(max_bytes, tenant.spool_bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "quota tenant_max_spool_bytes: ", who, "'s jobs hold or reserve ", tenant.spool_bytes,
        " spool bytes and this job needs ", need_bytes, " (its input and the bound of its "
        "outputs), ", tenant.spool_bytes + need_bytes, " in all, over the limit of ", max_bytes,
        " (--tenant_max_spool_bytes); delete finished jobs to make room"));
  }
  return absl::OkStatus();
}

absl::Status Admission::AdmitLocked(absl::string_view client, const SpoolNeed& need,
                                    const absl::StatusOr<uint64_t>& free_bytes, size_t queued,
                                    const std::string& spool_root, const TenantUsage& tenant) {
  const uint32_t per_client = limits_.limits.max_jobs_per_client;
  if (per_client > 0 && !client.empty()) {
    auto counted = client_jobs_.find(client);
    const size_t jobs = counted == client_jobs_.end() ? 0 : counted->second;
    if (jobs >= per_client) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "client ", client, " has ", jobs,
          " unfinished jobs (uploading, queued or running); the server's limit is ",
          per_client, " per client (--max_jobs_per_client); wait for one to end or cancel "
          "one"));
    }
  }
  const uint32_t uploads_per_client = limits_.max_uploads_per_client;
  if (uploads_per_client > 0 && !client.empty()) {
    auto counted = client_uploads_.find(client);
    const size_t uploads = counted == client_uploads_.end() ? 0 : counted->second;
    if (uploads >= uploads_per_client) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "client ", client, " has ", uploads, " uploads in progress; the server's limit is ",
          uploads_per_client, " per client (--max_uploads_per_client); end one (upload_end) "
          "before starting another"));
    }
  }
  TOMO_RETURN_IF_ERROR(CheckTenantQuotas(tenant, need.total_bytes()));
  const size_t length = queued + uploading_;
  if (length >= limits_.limits.max_queue_length) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "queue is full: ", length, " jobs queued or uploading, the server's limit is ",
        limits_.limits.max_queue_length, " (--max_queue_length)"));
  }
  const uint64_t need_bytes = need.total_bytes();
  const std::string need_text =
      absl::StrCat(need_bytes, " bytes (input.size_bytes ", need.input_bytes,
                   " and at most ", need.output_bytes, " of outputs)");
  const uint64_t max_spool = limits_.max_spool_bytes;
  if (max_spool > 0 && need_bytes > max_spool - std::min(max_spool, spool_bytes_)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "spool is full: the job needs ", need_text, ", which would bring the spool's job "
        "files to ", spool_bytes_ + need_bytes, " bytes, over the server's limit of ",
        max_spool, " bytes (--max_spool_bytes); ", spool_bytes_,
        " bytes are in use or reserved by accepted jobs; delete finished jobs to make room"));
  }
  if (!free_bytes.ok()) return free_bytes.status();
  const uint64_t kept = core::CheckedAdd<uint64_t>(pending_bytes_, limits_.min_free_spool_bytes)
                            .value_or(UINT64_MAX);
  const uint64_t usable = *free_bytes - std::min(*free_bytes, kept);
  if (need_bytes > usable) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "spool file system is full: the job needs ", need_text, "; ", spool_root, " has ",
        *free_bytes, " bytes free, of which ", pending_bytes_,
        " are promised to accepted jobs and ", limits_.min_free_spool_bytes,
        " kept for the job database (--min_free_spool_bytes), leaving ", usable,
        "; delete finished jobs to make room"));
  }
  ++uploading_;  // holds the place while the directory is made
  if (!client.empty()) ++client_uploads_[std::string(client)];
  // The outputs and the input's first step; the rest of the input as it arrives.
  const uint64_t reserved = FirstReservation(need);
  spool_bytes_ += reserved;
  pending_bytes_ += reserved;
  return absl::OkStatus();
}

void Admission::GiveBackLocked(absl::string_view client, const SpoolNeed& need) {
  if (uploading_ > 0) --uploading_;
  UploadEndedLocked(std::string(client));
  const uint64_t reserved = FirstReservation(need);
  spool_bytes_ -= std::min(spool_bytes_, reserved);
  pending_bytes_ -= std::min(pending_bytes_, reserved);
}

void Admission::TakeOverLocked(JobRecord& record, const SpoolNeed& need) {
  record.disk_bytes = FirstReservation(need);
  record.pending_input_bytes = std::min(need.input_bytes, kUploadReservationStep);
  record.reserved_output_bytes = need.output_bytes;
}

absl::Status Admission::GrowUploadLocked(JobRecord& record, uint64_t received_bytes,
                                         const absl::StatusOr<uint64_t>& free_bytes,
                                         const std::string& spool_root) {
  if (received_bytes <= record.pending_input_bytes) return absl::OkStatus();
  const uint64_t input_bytes =
      record.validated != nullptr ? record.validated->input_bytes : received_bytes;
  const uint64_t target =
      std::min(input_bytes, core::CheckedAdd<uint64_t>(received_bytes, kUploadReservationStep)
                                .value_or(UINT64_MAX));
  if (target <= record.pending_input_bytes) return absl::OkStatus();
  const uint64_t more = target - record.pending_input_bytes;
  const std::string what =
      absl::StrCat("the upload of job ", record.job.id(), " has received ", received_bytes,
                   " of its ", input_bytes, " bytes and needs ", more, " more bytes of room");
  const uint64_t max_spool = limits_.max_spool_bytes;
  if (max_spool > 0 && more > max_spool - std::min(max_spool, spool_bytes_)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "spool is full: ", what, ", which would bring the spool's job files to ",
        spool_bytes_ + more, " bytes, over the server's limit of ", max_spool,
        " bytes (--max_spool_bytes); the job is removed"));
  }
  if (!free_bytes.ok()) return free_bytes.status();
  const uint64_t kept = core::CheckedAdd<uint64_t>(pending_bytes_, limits_.min_free_spool_bytes)
                            .value_or(UINT64_MAX);
  const uint64_t usable = *free_bytes - std::min(*free_bytes, kept);
  if (more > usable) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "spool file system is full: ", what, "; ", spool_root, " has ", *free_bytes,
        " bytes free, of which ", pending_bytes_, " are promised to accepted jobs and ",
        limits_.min_free_spool_bytes,
        " kept for the job database (--min_free_spool_bytes); the job is removed"));
  }
  spool_bytes_ += more;
  pending_bytes_ += more;
  record.disk_bytes += more;
  record.pending_input_bytes += more;
  return absl::OkStatus();
}

void Admission::UploadEndedLocked(const std::string& client) {
  if (client.empty()) return;
  auto it = client_uploads_.find(client);
  if (it == client_uploads_.end()) return;
  if (--it->second == 0) client_uploads_.erase(it);
}

void Admission::OnChangeLocked(JobRecord& record, const pb::Job& next) {
  const pb::JobState from = record.job.state(), to = next.state();
  CountClientLocked(next.client(), from, to);
  if (from == pb::JOB_STATE_UPLOADING && to != pb::JOB_STATE_UPLOADING) {
    if (uploading_ > 0) --uploading_;
    UploadEndedLocked(next.client());
  }
  if (from == pb::JOB_STATE_UPLOADING || IsTerminal(to)) {
    // The input is on disk once the upload ended (committed or not).
    pending_bytes_ -= std::min(pending_bytes_, record.pending_input_bytes);
    record.pending_input_bytes = 0;
  }
  if (IsTerminal(to)) ReleaseReservationLocked(record);
}

void Admission::ReleaseReservationLocked(JobRecord& record) {
  // The outputs are written (their size added to disk_bytes) or never will be.
  pending_bytes_ -= std::min(pending_bytes_, record.reserved_output_bytes);
  spool_bytes_ -= std::min(spool_bytes_, record.reserved_output_bytes);
  record.disk_bytes -= std::min(record.disk_bytes, record.reserved_output_bytes);
  record.reserved_output_bytes = 0;
}

void Admission::OnEraseLocked(JobRecord& record) {
  CountClientLocked(record.job.client(), record.job.state(), pb::JOB_STATE_UNSPECIFIED);
  if (record.job.state() == pb::JOB_STATE_UPLOADING) {
    if (uploading_ > 0) --uploading_;
    UploadEndedLocked(record.job.client());
  }
  spool_bytes_ -= std::min(spool_bytes_, record.disk_bytes);
  pending_bytes_ -= std::min(pending_bytes_,
                             record.pending_input_bytes + record.reserved_output_bytes);
}

void Admission::AddResultsLocked(JobRecord& record, uint64_t bytes) {
  record.disk_bytes += bytes;
  spool_bytes_ += bytes;
}

void Admission::AddRecoveredLocked(JobRecord& record, uint64_t file_bytes) {
  CountClientLocked(record.job.client(), pb::JOB_STATE_UNSPECIFIED, record.job.state());
  record.disk_bytes = file_bytes;
  if (record.validated != nullptr && !IsTerminal(record.job.state())) {
    // A job that will run again: its outputs are reserved as at admission.
    record.reserved_output_bytes = ExpectedOutputBytes(*record.validated).value_or(0);
    record.disk_bytes += record.reserved_output_bytes;
    pending_bytes_ += record.reserved_output_bytes;
  }
  spool_bytes_ += record.disk_bytes;
}

void Admission::CountClientLocked(const std::string& client, pb::JobState from, pb::JobState to) {
  if (client.empty() || IsUnfinished(from) == IsUnfinished(to)) return;
  if (IsUnfinished(to)) {
    ++client_jobs_[client];
    return;
  }
  auto it = client_jobs_.find(client);
  if (it == client_jobs_.end()) return;
  if (--it->second == 0) client_jobs_.erase(it);
}

}  // namespace tomo::server
