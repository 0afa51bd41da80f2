#include "server/jobs/job_manager.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "runner/disk_space.h"
#include "runner/job_input.h"
#include "runner/job_execution.h"
#include "server/jobs/crash_log.h"
#include "server/jobs/job_id.h"
#include "server/security/tenant_keys.h"
#include "server/jobs/recovery.h"
#include "server/telemetry/log.h"

namespace tomo::server {

namespace pb = ::tomoserve::v1;

namespace {

constexpr uint32_t kDefaultPageSize = 100;
constexpr uint32_t kMaxPageSize = 1000;
// Well below the 16 MiB message limit tomod and its clients set.
constexpr size_t kMaxListBytes = 8 << 20;
// Uploads this large to a tmpfs spool go through a mapping copied by this many threads
// (Upload): 8 threads into a mapping measured 2.8-3.6 GB/s for 540 MB where one write()
// gave 2.1 (bench/NOTES.md, v0.11).
constexpr uint64_t kMappedUploadMinBytes = uint64_t{64} << 20;
constexpr int kMappedUploadThreads = 8;

std::string StateName(pb::JobState state) {
  std::string name = pb::JobState_Name(state);
  constexpr absl::string_view kPrefix = "JOB_STATE_";
  if (absl::string_view(name).substr(0, kPrefix.size()) == kPrefix) {
    return name.substr(kPrefix.size());
  }
  return name;
}

std::string StatusText(const absl::Status& status) {
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
}

// Every state change, one structured line with the job's id (the durable record is the
// truth; this is for people and log collectors).
void LogStateChange(pb::JobState from, const pb::Job& job, const std::string& message) {
  LogFields fields;
  if (from != pb::JOB_STATE_UNSPECIFIED) fields.emplace_back("from", JobStateLabel(from));
  fields.emplace_back("to", JobStateLabel(job.state()));
  if (!message.empty()) fields.emplace_back("message", message);
  if (job.attempts() > 0) fields.emplace_back("attempts", job.attempts());
  if (!job.device().empty()) fields.emplace_back("device", job.device());
  if (job.devices_size() > 1) fields.emplace_back("devices", absl::StrJoin(job.devices(), ","));
  if (!job.client().empty()) fields.emplace_back("client", job.client());
  if (!job.error().empty()) fields.emplace_back("error", job.error());
  const bool bad = job.state() == pb::JOB_STATE_FAILED;
  LogEvent(bad ? LogLevel::kWarning : LogLevel::kInfo, "job_state", job.id(), fields);
}

// Whether a spec with an idempotency key that a job has is a retry of that job's Submit.
bool SameSubmission(const pb::JobSpec& a, const pb::JobSpec& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

absl::Status KeyReusedError(const pb::Job& job) {
  return absl::AlreadyExistsError(absl::StrCat(
      "idempotency_key: \"", job.spec().idempotency_key(), "\" already belongs to job ",
      job.id(), ", submitted with a different spec; use a new key for a new job"));
}

AdmissionLimits LimitsOf(const JobManagerOptions& options) {
  AdmissionLimits limits;
  limits.limits = options.limits;
  limits.devices = options.devices;
  limits.memory_budget_bytes = options.memory_budget_bytes;
  limits.max_spool_bytes = options.max_spool_bytes;
  limits.tenant_max_unfinished_jobs = options.tenant_max_unfinished_jobs;
  limits.tenant_max_spool_bytes = options.tenant_max_spool_bytes;
  limits.min_free_spool_bytes = options.min_free_spool_bytes;
  limits.max_uploads_per_client = options.max_uploads_per_client;
  return limits;
}

}  // namespace

JobManager::JobManager(JobManagerOptions options, const Spool& spool,
                       const core::AlgorithmRegistry& registry)
    : options_(std::move(options)), spool_(spool), registry_(registry),
      table_(
          [this](JobRecord& record, const pb::Job& next, const std::string& message)
              ABSL_NO_THREAD_SAFETY_ANALYSIS { OnChangeLocked(record, next, message); },
          [this](JobRecord& record) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            admission_.OnEraseLocked(record);
          }),
      mu_(table_.mu()),
      admission_(LimitsOf(options_), registry_, table_.mu()),
      scheduler_(options_, spool_, registry_, table_, admission_),
      retention_(options_, spool_, table_) {}

JobManager::~JobManager() { Shutdown(); }

absl::Status JobManager::Start() {
  if (options_.devices.empty()) {
    return absl::FailedPreconditionError("no device to run jobs on");
  }
  if (options_.max_attempts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_attempts: ", options_.max_attempts, " is out of range [1, 2^32)"));
  }
  TOMO_RETURN_IF_ERROR(scheduler_.MakeBackends());
  TOMO_ASSIGN_OR_RETURN(std::unique_ptr<JobStore> store,
                        options_.open_store ? options_.open_store(spool_.DatabasePath())
                                            : JobStore::Open(spool_.DatabasePath()));
  RecoveryOptions recovery;
  recovery.limits = options_.limits;
  recovery.max_attempts = options_.max_attempts;
  recovery.crash_log_path = options_.crash_log_path;
  recovery.free_emergency_space = options_.free_emergency_space;
  TOMO_ASSIGN_OR_RETURN(RecoveredJobs recovered, RecoverJobs(*store, spool_, recovery));
  {
    WatcherFlushes flushes;  // nobody watches yet
    absl::MutexLock lock(&mu_);
    for (RecoveredJob& entry : recovered.jobs) {
      const std::string id = entry.stored.job.id();
      JobRecord& record = table_.records()[id];
      record.job = std::move(entry.stored.job);
      record.cancel_requested = entry.stored.cancel_requested;
      record.last_event.set_job_id(id);
      record.last_event.set_sequence(entry.stored.event_sequence);
      record.last_event.set_state(record.job.state());
      *record.last_event.mutable_progress() = record.job.progress();
      record.last_event.set_message("restored after a restart of tomod");
      SetTimestamp(record.last_event.mutable_time(), absl::Now());
      record.last_told = record.last_event;
      if (entry.next.has_value()) {
        // Written by recovery already.
        table_.Commit(record, std::move(*entry.next), entry.message,
                      JobTable::Durability::kWritten, flushes);
      }
      if (record.job.state() == pb::JOB_STATE_QUEUED) {
        record.validated = std::move(entry.validated);
        scheduler_.PushLocked(id, record.job.spec().priority());
        record.queued_at = absl::Now();
        if (entry.requeued_after_run && options_.metrics != nullptr) {
          options_.metrics->Requeued("restart");
        }
      }
      if (!record.job.spec().idempotency_key().empty()) {
        table_.keys()[ScopedIdempotencyKey(record.job.tenant(),
                                           record.job.spec().idempotency_key())] = id;
      }
      admission_.AddRecoveredLocked(record, entry.file_bytes);
    }
  }
  table_.Open(std::move(store), options_.free_emergency_space);
  if (!options_.crash_log_path.empty()) {
    TOMO_RETURN_IF_ERROR(InstallCrashHandler(options_.crash_log_path));
  }
  retention_.SweepExpired();
  scheduler_.Start();
  retention_.Start();
  return absl::OkStatus();
}

void JobManager::Drain(absl::Duration timeout, absl::string_view reason) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  scheduler_.SetDrainingLocked();
  if (drain_reason_.empty()) {
    drain_reason_ = std::string(reason);
    Log(absl::StrCat("draining (", reason, "): refusing new jobs, waiting up to ",
                     absl::FormatDuration(timeout), " for ", scheduler_.running(),
                     " running jobs and ", admission_.uploading(), " uploads in progress"));
  }
  // Uploads that began before the drain may still commit: their clients are mid-Submit.
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return drain_cut_short_ || (scheduler_.running() == 0 && admission_.uploading() == 0);
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&idle), timeout)) {
    Log(absl::StrCat("drain: ", scheduler_.running(), " jobs still running and ",
                     admission_.uploading(), " uploads in progress after ",
                     absl::FormatDuration(timeout),
                     "; the runs are stopped and their jobs queued again"));
  }
}

void JobManager::CutDrainShort() {
  absl::MutexLock lock(&mu_);
  drain_cut_short_ = true;
}

void JobManager::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    accepting_ = false;
    if (drain_reason_.empty()) drain_reason_ = "tomod is shutting down";
    scheduler_.StopLocked(drain_reason_);
  }
  scheduler_.Join();
  retention_.Stop();
  // The runs' last changes are durable and told before the watches close.
  table_.Close();
  table_.CloseWatches(absl::UnavailableError("tomod is shutting down"));
}

void JobManager::OnChangeLocked(JobRecord& record, const pb::Job& next,
                                const std::string& message) {
  const pb::JobState from = record.job.state();
  admission_.OnChangeLocked(record, next);
  MeasureLocked(record, next);
  if (from != next.state()) LogStateChange(from, next, message);
}

void JobManager::MeasureLocked(JobRecord& record, const pb::Job& next) {
  const pb::JobState from = record.job.state(), to = next.state();
  if (from == to) return;
  const absl::Time now = absl::Now();
  if (to == pb::JOB_STATE_QUEUED) record.queued_at = now;
  TomodMetrics* metrics = options_.metrics;
  if (metrics == nullptr) return;
  metrics->StateChanged(from, to);
  if (from == pb::JOB_STATE_UPLOADING && to == pb::JOB_STATE_QUEUED && next.has_created()) {
    metrics->StageDone(TomodMetrics::Stage::kUpload,
                       absl::ToDoubleSeconds(now - FromTimestamp(next.created())));
  }
  if (from == pb::JOB_STATE_QUEUED && to == pb::JOB_STATE_RUNNING &&
      record.queued_at != absl::InfinitePast()) {
    metrics->StageDone(TomodMetrics::Stage::kQueueWait,
                       absl::ToDoubleSeconds(now - record.queued_at));
  }
  if (from == pb::JOB_STATE_RUNNING && record.job.has_started() && record.cancel != nullptr) {
    // Only runs of this process: a RUNNING record restored after a crash has no run here.
    metrics->StageDone(TomodMetrics::Stage::kRun,
                       absl::ToDoubleSeconds(now - FromTimestamp(record.job.started())));
  }
}

// ---------------------------------------------------------------- upload

absl::Status JobManager::CheckInputHeaders(const std::string& id) const {
  std::shared_ptr<const ValidatedJob> validated;
  {
    absl::MutexLock lock(&mu_);
    auto it = table_.records().find(id);
    if (it == table_.records().end() || it->second.validated == nullptr) {
      return absl::NotFoundError(absl::StrCat("job ", id, " is no longer uploading"));
    }
    validated = it->second.validated;
  }
  return CheckJobInputHeaders(*validated, spool_.InputPath(id));
}

absl::StatusOr<pb::Job> JobManager::DurableJob(const std::string& id) {
  JobTable::Ticket ticket;
  {
    absl::MutexLock lock(&mu_);
    TOMO_ASSIGN_OR_RETURN(const JobRecord* record, table_.Find(id));
    ticket = record->last_ticket;
  }
  TOMO_RETURN_IF_ERROR(table_.WaitDurable(ticket));
  absl::MutexLock lock(&mu_);
  TOMO_ASSIGN_OR_RETURN(const JobRecord* record, table_.Find(id));
  if (record->job.state() == pb::JOB_STATE_UPLOADING) {
    return absl::AbortedError(absl::StrCat("job ", id, " could not be committed; submit again"));
  }
  return record->job;
}

void JobManager::ForgetAdmittingLocked(absl::string_view tenant, uint64_t bytes) {
  auto it = admitting_.find(tenant);
  if (it == admitting_.end()) return;
  it->second.unfinished_jobs -= std::min<size_t>(it->second.unfinished_jobs, 1);
  it->second.spool_bytes -= std::min(it->second.spool_bytes, bytes);
  if (it->second.unfinished_jobs == 0) admitting_.erase(it);
}

TenantUsage JobManager::TenantUsageLocked(absl::string_view tenant) const {
  TenantUsage usage;
  usage.tenant = std::string(tenant);
  if (auto it = admitting_.find(tenant); it != admitting_.end()) {
    usage.unfinished_jobs = it->second.unfinished_jobs;
    usage.spool_bytes = it->second.spool_bytes;
  }
  for (const auto& [id, record] : table_.records()) {
    if (record.job.tenant() != tenant) continue;
    if (!IsTerminal(record.job.state())) ++usage.unfinished_jobs;
    usage.spool_bytes += record.disk_bytes;
  }
  return usage;
}

absl::StatusOr<std::unique_ptr<Upload>> JobManager::BeginUpload(const pb::JobSpec& spec,
                                                                absl::string_view client,
                                                                absl::string_view tenant) {
  TOMO_ASSIGN_OR_RETURN(AdmittedSpec admitted, admission_.CheckSpec(spec));
  const uint64_t input_bytes = admitted.validated->input_bytes;
  absl::StatusOr<uint64_t> free_bytes = FileSystemFreeBytes(spool_.root());
  std::string existing_id;
  {
    absl::MutexLock lock(&mu_);
    if (!accepting_ || !table_.is_open() || !drain_reason_.empty()) {
      return absl::UnavailableError(absl::StrCat(
          drain_reason_.empty() ? "tomod is shutting down" : drain_reason_,
          ": not accepting new jobs; submit again once it has restarted (with the same "
          "idempotency_key), or to another tomod"));
    }
    if (!spec.idempotency_key().empty()) {
      auto known = table_.keys().find(ScopedIdempotencyKey(tenant, spec.idempotency_key()));
      if (known != table_.keys().end()) {
        const pb::Job& job = table_.records().at(known->second).job;
        if (!SameSubmission(job.spec(), spec)) return KeyReusedError(job);
        existing_id = job.id();
      }
    }
    if (existing_id.empty()) {
      TOMO_RETURN_IF_ERROR(admission_.AdmitLocked(client, admitted.need, free_bytes,
                                                  scheduler_.queued(), spool_.root(),
                                                  TenantUsageLocked(tenant)));
      // Counted for the tenant's quotas until its record exists (the lock is let go
      // meanwhile, and a concurrent Submit of the tenant must see it).
      TenantUsage& admitting = admitting_[std::string(tenant)];
      ++admitting.unfinished_jobs;
      admitting.spool_bytes += admitted.need.total_bytes();
    }
  }
  if (!existing_id.empty()) {
    // Answered as that job's Submit was: once it is durable.
    TOMO_ASSIGN_OR_RETURN(pb::Job job, DurableJob(existing_id));
    Log(absl::StrCat("job ", job.id(), " submitted again with its idempotency key; "
                     "nothing new is stored"));
    return std::unique_ptr<Upload>(new Upload(this, std::move(job)));
  }
  const std::string id = NewJobId();
  absl::Status status = spool_.CreateJobDir(id);
  absl::StatusOr<AppendFile> file = status.ok() ? AppendFile::Create(spool_.InputPath(id))
                                                : absl::StatusOr<AppendFile>(status);
  JobTable::Ticket ticket = 0;
  {
    WatcherFlushes flushes;
    absl::MutexLock lock(&mu_);
    if (!file.ok()) {
      admission_.GiveBackLocked(client, admitted.need);
      ForgetAdmittingLocked(tenant, admitted.need.total_bytes());
    } else {
      JobRecord& record = table_.records()[id];
      admission_.TakeOverLocked(record, admitted.need);
      ForgetAdmittingLocked(tenant, admitted.need.total_bytes());
      pb::Job job;
      job.set_id(id);
      job.set_state(pb::JOB_STATE_UPLOADING);
      job.set_client(std::string(client));
      job.set_tenant(std::string(tenant));
      *job.mutable_spec() = spec;
      SetTimestamp(job.mutable_created(), absl::Now());
      ticket = table_.Commit(record, std::move(job), "uploading", JobTable::Durability::kPersist,
                             flushes);
      record.validated = admitted.validated;
    }
  }
  if (!file.ok()) {
    spool_.RemoveJobDir(id).IgnoreError();
    return absl::Status(file.status().code(),
                        absl::StrCat("cannot store the upload: ", file.status().message()));
  }
  status = table_.WaitDurable(ticket);
  std::shared_ptr<UploadFeed> feed;
  {
    WatcherFlushes flushes;
    absl::MutexLock lock(&mu_);
    auto it = table_.records().find(id);
    if (status.ok() && it != table_.records().end()) {
      feed = scheduler_.AssignFollowerLocked(id, it->second);
    } else if (it != table_.records().end()) {
      table_.Erase(it, absl::AbortedError(absl::StrCat("job ", id, " was removed: ",
                                                       status.message())),
                   flushes);
    }
  }
  if (!status.ok()) {
    spool_.RemoveJobDir(id).IgnoreError();
    return absl::Status(status.code(),
                        absl::StrCat("cannot record the upload: ", status.message()));
  }
  return std::unique_ptr<Upload>(
      new Upload(this, id, input_bytes, std::move(*file), std::move(feed)));
}

absl::StatusOr<uint64_t> JobManager::GrowUpload(const std::string& id, uint64_t received_bytes) {
  absl::StatusOr<uint64_t> free_bytes = FileSystemFreeBytes(spool_.root());
  absl::MutexLock lock(&mu_);
  TOMO_ASSIGN_OR_RETURN(JobRecord * record, table_.Find(id));
  TOMO_RETURN_IF_ERROR(
      admission_.GrowUploadLocked(*record, received_bytes, free_bytes, spool_.root()));
  return record->pending_input_bytes;
}

absl::StatusOr<pb::Job> JobManager::CommitUpload(const std::string& id, bool* superseded) {
  std::string winner_id;
  std::string key;
  pb::Job next;
  std::string message;
  JobTable::Ticket ticket = 0;
  {
    WatcherFlushes flushes;
    absl::MutexLock lock(&mu_);
    if (!accepting_) return absl::UnavailableError("tomod is shutting down; not accepting jobs");
    TOMO_ASSIGN_OR_RETURN(JobRecord * record, table_.Find(id));
    key = ScopedIdempotencyKey(record->job.tenant(), record->job.spec().idempotency_key());
    auto known = key.empty() ? table_.keys().end() : table_.keys().find(key);
    if (known != table_.keys().end()) {
      // Another upload with this key committed while this one ran: it is the job.
      const pb::Job& winner = table_.records().at(known->second).job;
      if (!SameSubmission(winner.spec(), record->job.spec())) return KeyReusedError(winner);
      winner_id = winner.id();
      table_.WriteDelete(id);  // an UPLOADING record; start-up would remove it too
      if (record->feed) record->feed->Finish(UploadFeed::End::kAborted);
      table_.Erase(table_.records().find(id),
                   absl::AbortedError(absl::StrCat("job ", id, " was removed: job ", winner_id,
                                                   " has the same idempotency_key")),
                   flushes);
      *superseded = true;
      Log(absl::StrCat("job ", id, " removed: its idempotency key is job ", winner_id, "'s"));
    } else {
      next = record->job;
      next.set_state(pb::JOB_STATE_QUEUED);
      next.set_input_bytes(record->validated->input_bytes);
      message = absl::StrCat("queued (", next.input_bytes(), " bytes, priority ",
                             next.spec().priority(), ", queue length ",
                             scheduler_.queued() + 1, ")");
      // Written first, made only once durable: a failed write leaves the job UPLOADING (its
      // upload then aborts). The key is claimed now, so that an upload with the same key
      // waits for this one.
      ticket = table_.Write(*record, next);
      record->committing = true;
      if (!key.empty()) table_.keys()[key] = id;
    }
  }
  if (!winner_id.empty()) return DurableJob(winner_id);
  const absl::Status written = table_.WaitDurable(ticket);
  WatcherFlushes flushes;
  absl::MutexLock lock(&mu_);
  TOMO_ASSIGN_OR_RETURN(JobRecord * record, table_.Find(id));
  record->committing = false;
  if (!written.ok()) {
    auto claimed = key.empty() ? table_.keys().end() : table_.keys().find(key);
    if (claimed != table_.keys().end() && claimed->second == id) table_.keys().erase(claimed);
    return written;
  }
  table_.Commit(*record, std::move(next), message, JobTable::Durability::kWritten, flushes);
  if (record->feed) {
    // Its follower has (nearly) reconstructed it: the job waits for that worker.
    record->held_for_follower = true;
    record->feed->Finish(UploadFeed::End::kCommitted);
  } else {
    scheduler_.PushQueuedLocked(id, record->job.spec().priority());
  }
  return record->job;
}

void JobManager::AbortUpload(const std::string& id, const absl::Status& reason) {
  JobTable::Ticket ticket = 0;
  {
    WatcherFlushes flushes;
    absl::MutexLock lock(&mu_);
    auto it = table_.records().find(id);
    if (it != table_.records().end() && it->second.job.state() == pb::JOB_STATE_UPLOADING) {
      if (it->second.feed) it->second.feed->Finish(UploadFeed::End::kAborted);
      // When this fails, the next start-up removes the UPLOADING record.
      ticket = table_.WriteDelete(id);
      table_.Erase(it,
                   absl::AbortedError(absl::StrCat("job ", id, " was removed: its upload failed: ",
                                                   reason.message())),
                   flushes);
    }
  }
  absl::Status forgotten = table_.WaitDurable(ticket);
  absl::Status removed = spool_.RemoveJobDir(id);
  Log(absl::StrCat("job ", id, " upload aborted, job removed: ", StatusText(reason),
                   removed.ok() ? "" : absl::StrCat(" (", removed.message(), ")"),
                   forgotten.ok() ? "" : absl::StrCat(" (", forgotten.message(), ")")));
}

Upload::Upload(JobManager* manager, std::string id, uint64_t expected_bytes, AppendFile file,
               std::shared_ptr<UploadFeed> feed)
    : manager_(manager), id_(std::move(id)), expected_bytes_(expected_bytes),
      reserved_bytes_(std::min(expected_bytes, kUploadReservationStep)), feed_(std::move(feed)) {
  // The callbacks are read when the queue fills, after SetOnRoom.
  auto on_room = [this] {
    if (on_room_) on_room_();
  };
  std::function<void(uint64_t)> on_written;
  if (feed_ != nullptr) on_written = [feed = feed_](uint64_t bytes) { feed->Written(bytes); };
  const std::string path = file.path();
  if (expected_bytes >= kMappedUploadMinBytes && transfer::MappedFileWriter::Suits(file.fd())) {
    transfer::MappedFileWriter::Options options;
    options.copy_threads = kMappedUploadThreads;
    options.on_room = std::move(on_room);
    options.on_written = std::move(on_written);
    absl::StatusOr<std::unique_ptr<transfer::MappedFileWriter>> mapped =
        transfer::MappedFileWriter::Create(file.Release(), path, 0, expected_bytes,
                                           std::move(options));
    if (mapped.ok()) {
      mapped_ = std::move(*mapped);
    } else {
      writer_error_ = mapped.status();  // the first Append reports it
    }
    return;
  }
  transfer::ChunkWriter::Options options;
  options.on_room = std::move(on_room);
  options.on_written = std::move(on_written);
  writer_ = transfer::ChunkWriter::Create(file.Release(), path, std::move(options));
}

Upload::~Upload() {
  Abort(absl::CancelledError("the upload ended before upload_end"));
}

absl::StatusOr<bool> Upload::Append(std::string data) {
  if (existing_) return true;  // the job has its data already
  if (done_) return absl::FailedPreconditionError(absl::StrCat("upload of job ", id_, " ended"));
  if (data.size() > expected_bytes_ - received_bytes_) {
    absl::Status status = absl::InvalidArgumentError(absl::StrCat(
        "data: ", received_bytes_ + data.size(), " bytes received exceed input.size_bytes ",
        expected_bytes_));
    Abort(status);
    return status;
  }
  if (!writer_error_.ok()) {
    absl::Status status = writer_error_;
    Abort(status);
    return status;
  }
  const uint64_t offset = received_bytes_;
  if (offset + data.size() > reserved_bytes_) {
    // The input is reserved as it arrives (admission.h): the next step, or the end.
    absl::StatusOr<uint64_t> reserved = manager_->GrowUpload(id_, offset + data.size());
    if (!reserved.ok()) {
      Abort(reserved.status());
      return reserved.status();
    }
    reserved_bytes_ = *reserved;
  }
  received_bytes_ += data.size();
  auto chunk = std::make_shared<const std::string>(std::move(data));
  if (feed_ != nullptr) feed_->Received(chunk);  // the follower copies it from memory
  absl::StatusOr<bool> room =
      mapped_ ? mapped_->Append(offset, std::move(chunk)) : writer_->Append(std::move(chunk));
  if (!room.ok()) Abort(room.status());
  return room;
}

void Upload::CommitAsync(uint64_t total_bytes, uint32_t crc32,
                         std::function<void(absl::StatusOr<pb::Job>)> done,
                         std::function<absl::Status()> last_check) {
  if (existing_) return done(*existing_);
  if (done_) {
    return done(absl::FailedPreconditionError(absl::StrCat("upload of job ", id_, " ended")));
  }
  absl::Status status;
  if (total_bytes != expected_bytes_) {
    status = absl::InvalidArgumentError(
        absl::StrCat("upload_end.total_bytes: ", total_bytes,
                     " does not match input.size_bytes ", expected_bytes_));
  } else if (received_bytes_ != expected_bytes_) {
    status = absl::InvalidArgumentError(
        absl::StrCat("upload: ", received_bytes_, " bytes received, but input.size_bytes is ",
                     expected_bytes_));
  }
  if (!status.ok()) {
    Abort(status);
    return done(status);
  }
  if (mapped_) {
    // Finish waits for the copies and fsyncs: on a thread of its own, as the ChunkWriter's
    // FinishAsync runs on its writer thread, so that the caller (a gRPC thread) goes on.
    std::thread([this, crc32, done = std::move(done), last_check = std::move(last_check)] {
      absl::StatusOr<transfer::MappedFileWriter::Summary> copied = mapped_->Finish();
      absl::StatusOr<transfer::ChunkWriter::Summary> written =
          copied.ok() ? absl::StatusOr<transfer::ChunkWriter::Summary>(
                            transfer::ChunkWriter::Summary{copied->bytes, copied->crc32})
                      : copied.status();
      absl::StatusOr<pb::Job> job = CommitWritten(std::move(written), crc32, last_check);
      done(std::move(job));  // may destroy this Upload: nothing of it is touched after
    }).detach();
    return;
  }
  writer_->FinishAsync(
      /*sync=*/true, [this, crc32, done = std::move(done), last_check = std::move(last_check)](
                         absl::StatusOr<transfer::ChunkWriter::Summary> written) {
        absl::StatusOr<pb::Job> job = CommitWritten(std::move(written), crc32, last_check);
        done(std::move(job));  // may destroy this Upload: nothing of it is touched after
      });
}

absl::StatusOr<pb::Job> Upload::Commit(uint64_t total_bytes, uint32_t crc32) {
  absl::Notification committed;
  absl::StatusOr<pb::Job> result;
  CommitAsync(total_bytes, crc32, [&](absl::StatusOr<pb::Job> job) {
    result = std::move(job);
    committed.Notify();
  });
  committed.WaitForNotification();
  return result;
}

absl::StatusOr<pb::Job> Upload::CommitWritten(
    absl::StatusOr<transfer::ChunkWriter::Summary> written, uint32_t crc32,
    const std::function<absl::Status()>& last_check) {
  absl::Status status = written.status();
  if (status.ok() && crc32 != written->crc32) {
    status = absl::InvalidArgumentError(
        absl::StrFormat("upload_end.crc32: 0x%08x does not match the CRC-32 of the %d bytes "
                        "received, 0x%08x",
                        crc32, written->bytes, written->crc32));
  }
  // input.bin was fsynced by the writer; now its name in the job's directory, then the
  // directory's name in jobs/: all durable before the record says QUEUED.
  // DICOM-CT-PD and TIFF inputs: their headers are checked before the job exists, so a
  // corrupt file is refused here, naming the file and the tag or page.
  if (status.ok()) status = manager_->CheckInputHeaders(id_);
  if (status.ok()) status = FsyncDirectory(manager_->spool_.JobDir(id_));
  if (status.ok()) status = manager_->spool_.SyncJobsDir();
  if (status.ok() && last_check) status = last_check();
  if (!status.ok()) {
    Abort(status);
    return status;
  }
  bool superseded = false;
  absl::StatusOr<pb::Job> job = manager_->CommitUpload(id_, &superseded);
  if (!job.ok()) {
    Abort(job.status());
    return job.status();
  }
  done_ = true;
  if (superseded) manager_->spool_.RemoveJobDir(id_).IgnoreError();
  return job;
}

void Upload::Abort(const absl::Status& reason) {
  if (done_) return;
  done_ = true;
  // Stops the writer's threads (or, from its own callback, leaves it to end by itself)
  // before the directory goes.
  writer_.reset();
  mapped_.reset();
  manager_->AbortUpload(id_, reason);
}

// ---------------------------------------------------------------- queries and control

absl::StatusOr<pb::Job> JobManager::GetJob(absl::string_view id) const {
  absl::MutexLock lock(&mu_);
  TOMO_ASSIGN_OR_RETURN(const JobRecord* record, table_.Find(id));
  return record->job;
}

absl::StatusOr<pb::ListJobsResponse> JobManager::ListJobs(
    const pb::ListJobsRequest& request, const std::optional<std::string>& only_tenant) const {
  if (request.page_size() > kMaxPageSize) {
    return absl::InvalidArgumentError(absl::StrCat("page_size: ", request.page_size(),
                                                   " is out of range [0, ", kMaxPageSize,
                                                   "] (0 means ", kDefaultPageSize, ")"));
  }
  const uint32_t page_size = request.page_size() == 0 ? kDefaultPageSize : request.page_size();
  if (!request.page_token().empty() && !IsValidJobId(request.page_token())) {
    return absl::InvalidArgumentError(absl::StrCat("page_token: ",
                                                   QuoteJobId(request.page_token()),
                                                   " is not a token from ListJobs"));
  }
  std::set<int> states;
  for (int i = 0; i < request.states_size(); ++i) {
    const int state = request.states(i);
    // A number this tomod does not know (a newer client's state, or garbage) matches no
    // job; it is refused rather than silently giving an empty list.
    if (!pb::JobState_IsValid(state) || state == pb::JOB_STATE_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat(
          "states[", i, "]: ", state, " is not a job state; expected one of ",
          pb::JobState_Name(pb::JOB_STATE_UPLOADING), " .. ",
          pb::JobState_Name(pb::JobState_MAX), " (", pb::JOB_STATE_UPLOADING, " .. ",
          pb::JobState_MAX, ")"));
    }
    states.insert(state);
  }

  pb::ListJobsResponse response;
  absl::MutexLock lock(&mu_);
  const JobTable::RecordMap& jobs = table_.records();
  auto it = request.page_token().empty() ? jobs.begin() : jobs.upper_bound(request.page_token());
  size_t bytes = 0;
  for (; it != jobs.end(); ++it) {
    const pb::Job& job = it->second.job;
    if (!states.empty() && states.count(job.state()) == 0) continue;
    if (only_tenant && job.tenant() != *only_tenant) continue;
    const size_t job_bytes = job.ByteSizeLong();
    // A page also ends before it outgrows kMaxListBytes (specs with long angle lists).
    if (static_cast<uint32_t>(response.jobs_size()) == page_size ||
        (response.jobs_size() > 0 && bytes + job_bytes > kMaxListBytes)) {
      response.set_next_page_token(response.jobs(response.jobs_size() - 1).id());
      break;
    }
    bytes += job_bytes;
    *response.add_jobs() = job;
  }
  return response;
}

absl::StatusOr<pb::Job> JobManager::CancelJob(absl::string_view id) {
  JobTable::Ticket ticket = 0;
  pb::Job job;
  {
    WatcherFlushes flushes;
    absl::MutexLock lock(&mu_);
    TOMO_ASSIGN_OR_RETURN(JobRecord * record, table_.Find(id));
    switch (record->job.state()) {
      case pb::JOB_STATE_QUEUED: {
        pb::Job next = record->job;
        next.set_state(pb::JOB_STATE_CANCELLED);
        SetTimestamp(next.mutable_finished(), absl::Now());
        ticket = table_.Commit(*record, std::move(next), "cancelled while queued",
                               JobTable::Durability::kPersist, flushes);
        scheduler_.RemoveLocked(*record);
        break;
      }
      case pb::JOB_STATE_RUNNING:
        if (record->cancel && !record->cancel->exchange(true)) {
          record->cancel_reason = "cancelled by request";
          record->cancel_requested = true;
          // The run stops whether or not this is recorded; recorded, a crash before the run
          // has ended does not make the job run again.
          ticket = table_.Commit(*record, record->job, "cancel requested",
                                 JobTable::Durability::kPersist, flushes);
          Log(absl::StrCat("job ", record->job.id(), " cancel requested while running"));
        }
        break;
      case pb::JOB_STATE_CANCELLED:
        break;
      case pb::JOB_STATE_UPLOADING:
        return absl::FailedPreconditionError(
            absl::StrCat("job ", record->job.id(),
                         " is UPLOADING; end its Submit call instead of cancelling it"));
      default:
        return absl::FailedPreconditionError(
            absl::StrCat("job ", record->job.id(), " is ", StateName(record->job.state()),
                         "; only QUEUED and RUNNING jobs can be cancelled"));
    }
    job = record->job;
  }
  // Answered once the cancel is durable; when it cannot be recorded, the job is cancelled
  // here but after a restart it is what the store last held.
  TOMO_RETURN_IF_ERROR(table_.WaitDurable(ticket));
  return job;
}

absl::Status JobManager::DeleteJob(absl::string_view id) {
  std::string job_id;
  JobTable::Ticket ticket = 0;
  {
    WatcherFlushes flushes;
    absl::MutexLock lock(&mu_);
    TOMO_ASSIGN_OR_RETURN(JobRecord * record, table_.Find(id));
    if (!IsTerminal(record->job.state())) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", record->job.id(), " is ", StateName(record->job.state()),
                       "; cancel it first (only SUCCEEDED, FAILED and CANCELLED jobs can be "
                       "deleted)"));
    }
    job_id = record->job.id();
    ticket = table_.WriteDelete(job_id);
    table_.Erase(table_.records().find(job_id), absl::OkStatus(), flushes);
  }
  // The record first: a crash before the files are gone leaves a directory without a
  // record, which start-up removes; the other order could leave a record without files.
  // When the removal cannot be recorded the files stay and the job is back after a restart.
  TOMO_RETURN_IF_ERROR(table_.WaitDurable(ticket));
  absl::Status removed = spool_.RemoveJobDir(job_id);
  Log(absl::StrCat("job ", job_id, " deleted",
                   removed.ok() ? "" : absl::StrCat(" (", removed.message(), ")")));
  return absl::OkStatus();
}

size_t JobManager::SweepExpiredJobs() { return retention_.SweepExpired(); }

uint64_t JobManager::spool_used_bytes() const {
  absl::MutexLock lock(&mu_);
  return admission_.spool_bytes();
}

absl::Status JobManager::Watch(absl::string_view id, JobWatcher* watcher) {
  return table_.Watch(id, watcher);
}

void JobManager::Unwatch(absl::string_view id, JobWatcher* watcher) {
  table_.Unwatch(id, watcher);
}

absl::StatusOr<JobManager::ResultLocation> JobManager::FindResult(absl::string_view id,
                                                                  absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  TOMO_ASSIGN_OR_RETURN(const JobRecord* record, table_.Find(id));
  const pb::Job& job = record->job;
  if (job.state() == pb::JOB_STATE_RUNNING && record->being_written != nullptr) {
    // Early fetch: the raw result's bytes are the volume's, named as job_outputs names it.
    const std::vector<pb::OutputFormat>& outputs = record->validated->outputs;
    const std::string raw_name = ResultFileName(pb::OUTPUT_FORMAT_RAW_FLOAT32);
    const bool raw_wanted = std::find(outputs.begin(), outputs.end(),
                                      pb::OUTPUT_FORMAT_RAW_FLOAT32) != outputs.end();
    if (raw_wanted && (name == raw_name ||
                       (name.empty() && outputs.front() == pb::OUTPUT_FORMAT_RAW_FLOAT32))) {
      ResultLocation location;
      location.file.set_name(raw_name);
      location.file.set_format(pb::OUTPUT_FORMAT_RAW_FLOAT32);
      location.file.set_size_bytes(record->being_written->size_bytes());
      location.being_written = record->being_written;
      return location;
    }
  }
  if (job.state() != pb::JOB_STATE_SUCCEEDED) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.id(), " is ", StateName(job.state()),
                     "; results exist only for SUCCEEDED jobs"));
  }
  std::vector<std::string> names;
  for (const pb::ResultFile& file : job.results()) {
    if (name.empty() || file.name() == name) {
      return ResultLocation{spool_.ResultPath(job.id(), file.name()), file, nullptr};
    }
    names.push_back(file.name());
  }
  return absl::NotFoundError(absl::StrCat("job ", job.id(), " has no result ",
                                          QuoteJobId(name), "; its results are: ",
                                          names.empty() ? "(none)" : absl::StrJoin(names, ", ")));
}

void JobManager::SetSchedulingPaused(bool paused) {
  absl::MutexLock lock(&mu_);
  scheduler_.SetPausedLocked(paused);
}

size_t JobManager::queue_length() const {
  absl::MutexLock lock(&mu_);
  return scheduler_.queued() + admission_.uploading();
}

size_t JobManager::busy_devices() const {
  absl::MutexLock lock(&mu_);
  return scheduler_.busy_devices();
}

size_t JobManager::watcher_count() const { return table_.watcher_count(); }

std::map<pb::JobState, size_t> JobManager::JobCountsByState() const {
  absl::MutexLock lock(&mu_);
  std::map<pb::JobState, size_t> counts;
  for (const auto& [id, record] : table_.records()) ++counts[record.job.state()];
  return counts;
}

}  // namespace tomo::server
