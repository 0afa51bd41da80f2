#include "server/jobs/job_manager.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/checked_arithmetic.h"
#include "core/base/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "runner/checksum.h"
#include "server/jobs/crash_log.h"
#include "runner/disk_space.h"
#include "runner/job_execution.h"
#include "runner/job_input.h"
#include "server/jobs/job_id.h"
#include "server/security/tenant_keys.h"
#include "server/telemetry/log.h"

namespace tomo::server {

namespace pb = ::tomoserve::v1;

namespace {

// The key the job table and the store index the job's idempotency key by (empty: none).
std::string ScopedKey(const pb::Job& job) {
  return ScopedIdempotencyKey(job.tenant(), job.spec().idempotency_key());
}

constexpr uint32_t kDefaultPageSize = 100;
constexpr uint32_t kMaxPageSize = 1000;
// Well below the 16 MiB message limit tomod and its clients set.
constexpr size_t kMaxListBytes = 8 << 20;
// Uploads this large to a tmpfs spool go through a mapping copied by this many threads
// (Upload): 8 threads into a mapping measured 2.8-3.6 GB/s for 540 MB where one write()
// gave 2.1 (bench/NOTES.md, v0.11).
constexpr uint64_t kMappedUploadMinBytes = uint64_t{64} << 20;
constexpr int kMappedUploadThreads = 8;

void SetTimestamp(google::protobuf::Timestamp* timestamp, absl::Time time) {
  const int64_t nanos = absl::ToUnixNanos(time);
  timestamp->set_seconds(nanos / 1000000000);
  timestamp->set_nanos(static_cast<int32_t>(nanos % 1000000000));
}

absl::Time FromTimestamp(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) + absl::Nanoseconds(timestamp.nanos());
}

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

bool IsUnfinished(pb::JobState state) {
  return state == pb::JOB_STATE_UPLOADING || state == pb::JOB_STATE_QUEUED ||
         state == pb::JOB_STATE_RUNNING;
}

}  // namespace

bool IsTerminal(pb::JobState state) {
  return state == pb::JOB_STATE_SUCCEEDED || state == pb::JOB_STATE_FAILED ||
         state == pb::JOB_STATE_CANCELLED;
}

// Watchers to Flush() once the manager's lock is released: declare before the MutexLock.
class JobManager::Flushes {
 public:
  Flushes() = default;
  Flushes(const Flushes&) = delete;
  Flushes& operator=(const Flushes&) = delete;
  ~Flushes() {
    for (JobWatcher* watcher : watchers_) watcher->Flush();
  }
  void Add(JobWatcher* watcher) { watchers_.push_back(watcher); }

 private:
  std::vector<JobWatcher*> watchers_;
};

namespace {

// The GPU's free memory now (0 for the CPU, or when the device is not listed): the default
// memory budget of a job on it.
uint64_t DeviceFreeBytes(const core::DeviceInfo& device) {
  if (device.kind != core::DeviceKind::kCuda) return 0;
  for (const core::DeviceInfo& listed : core::ListDevices()) {
    if (listed.id == device.id) return listed.memory_free_bytes;
  }
  return 0;
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
  if (!job.client().empty()) fields.emplace_back("client", job.client());
  if (!job.error().empty()) fields.emplace_back("error", job.error());
  const bool bad = job.state() == pb::JOB_STATE_FAILED;
  LogEvent(bad ? LogLevel::kWarning : LogLevel::kInfo, "job_state", job.id(), fields);
}

}  // namespace

JobManager::JobManager(JobManagerOptions options, const Spool& spool,
                       const core::AlgorithmRegistry& registry)
    : options_(std::move(options)), spool_(spool), registry_(registry) {}

JobManager::~JobManager() { Shutdown(); }

absl::Status JobManager::Start() {
  if (options_.devices.empty()) {
    return absl::FailedPreconditionError("no device to run jobs on");
  }
  if (options_.max_attempts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_attempts: ", options_.max_attempts, " is out of range [1, 2^32)"));
  }
  for (const core::DeviceInfo& device : options_.devices) {
    absl::StatusOr<std::unique_ptr<core::Backend>> backend = core::MakeBackend(device);
    if (!backend.ok()) {
      return absl::Status(backend.status().code(),
                          absl::StrCat("device ", device.id, ": ", backend.status().message()));
    }
    backends_.push_back(std::move(*backend));
  }
  TOMO_RETURN_IF_ERROR(Recover());
  if (!options_.crash_log_path.empty()) {
    TOMO_RETURN_IF_ERROR(InstallCrashHandler(options_.crash_log_path));
  }
  SweepExpiredJobs();
  if (options_.prefetch_bytes > 0) {
    // Inputs read ahead are page-locked for CUDA workers: their copies go straight to the
    // device (InputPrefetcher's "Memory").
    InputPrefetchOptions prefetch_options;
    prefetch_options.pin_inputs =
        std::any_of(options_.devices.begin(), options_.devices.end(),
                    [](const core::DeviceInfo& d) { return d.kind == core::DeviceKind::kCuda; });
    prefetcher_ = std::make_unique<InputPrefetcher>(
        options_.devices.size(), options_.prefetch_bytes, options_.metrics, prefetch_options);
  }
  {
    absl::MutexLock lock(&mu_);
    worker_slots_.resize(options_.devices.size());
  }
  for (size_t i = 0; i < options_.devices.size(); ++i) {
    Log(absl::StrCat("worker ", i, " on ", options_.devices[i].id, " (",
                     options_.devices[i].name, ")"));
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
  if (options_.result_ttl > absl::ZeroDuration()) {
    sweeper_ = std::thread([this] { SweepLoop(); });
  }
  return absl::OkStatus();
}

absl::Status JobManager::Recover() {
  TOMO_ASSIGN_OR_RETURN(store_, JobStore::Open(spool_.DatabasePath()));
  std::vector<std::string> unreadable;
  TOMO_ASSIGN_OR_RETURN(std::vector<StoredJob> stored, store_->LoadAll(&unreadable));
  for (const std::string& id : unreadable) {
    Log(absl::StrCat("job ", QuoteJobId(id), ": its record in ", store_->path(),
                     " does not parse; it is left there, with its files, for inspection"));
  }
  CrashHistory crashes;
  if (!options_.crash_log_path.empty()) {
    TOMO_ASSIGN_OR_RETURN(crashes, ReadCrashLog(options_.crash_log_path));
    if (crashes.crashed_since_last_start) {
      Log(absl::StrCat("tomod stopped on ", crashes.last_crash_signal, " ",
                       crashes.last_crash_jobs.empty()
                           ? std::string("outside any job's run")
                           : absl::StrCat("in the run of job ",
                                          absl::StrJoin(crashes.last_crash_jobs, ", "))));
    }
  }
  size_t uploads_removed = 0, queued = 0, requeued = 0, ended = 0, finished = 0, strays = 0;
  Flushes flushes;  // nobody watches yet
  absl::MutexLock lock(&mu_);
  for (StoredJob& entry : stored) {
    const std::string id = entry.job.id();
    if (!IsValidJobId(id)) {
      // Never used as a path: the id names the job's directory.
      Log(absl::StrCat("job database: dropping a record with the invalid id ", QuoteJobId(id)));
      TOMO_RETURN_IF_ERROR(StoreWithRoom([&] { return store_->Delete(id); }));
      continue;
    }
    const pb::JobState state = entry.job.state();
    if (state == pb::JOB_STATE_UPLOADING || state == pb::JOB_STATE_UNSPECIFIED) {
      // Nobody was answered for it: its upload is lost with the connection.
      TOMO_RETURN_IF_ERROR(StoreWithRoom([&] { return store_->Delete(id); }));
      spool_.RemoveJobDir(id).IgnoreError();
      ++uploads_removed;
      continue;
    }
    Record& record = jobs_[id];
    record.job = std::move(entry.job);
    record.cancel_requested = entry.cancel_requested;
    record.last_event.set_job_id(id);
    record.last_event.set_sequence(entry.event_sequence);
    record.last_event.set_state(record.job.state());
    *record.last_event.mutable_progress() = record.job.progress();
    record.last_event.set_message("restored after a restart of tomod");
    SetTimestamp(record.last_event.mutable_time(), absl::Now());
    if (state == pb::JOB_STATE_RUNNING || IsTerminal(state)) {
      // Results of an interrupted run, or of a failed one whose clean-up a crash stopped.
      std::error_code ignored;
      std::filesystem::remove_all(spool_.ResultsPartialDir(id), ignored);
      if (state != pb::JOB_STATE_SUCCEEDED) {
        std::filesystem::remove_all(spool_.ResultsDir(id), ignored);
      }
    }

    if (state == pb::JOB_STATE_QUEUED || state == pb::JOB_STATE_RUNNING) {
      absl::StatusOr<ValidatedJob> validated = ValidateJobSpec(record.job.spec(), options_.limits);
      pb::Job next = record.job;
      std::string message;
      if (!validated.ok()) {
        next.set_state(pb::JOB_STATE_FAILED);
        next.set_error(absl::StrCat(
            "FAILED_PRECONDITION: after a restart, this tomod's limits refuse the job's spec: ",
            StatusText(validated.status())));
        message = absl::StrCat("failed: ", next.error());
      } else if (state == pb::JOB_STATE_RUNNING && record.cancel_requested) {
        next.set_state(pb::JOB_STATE_CANCELLED);
        message = "cancelled while running (tomod stopped before the run had ended)";
      } else if (state == pb::JOB_STATE_RUNNING && crashes.crashed_since_last_start &&
                 crashes.last_crash_jobs.count(id) == 0) {
        // A fatal signal in another job's run (or outside any run) stopped this one: not
        // its fault, so the run is given back.
        next.set_state(pb::JOB_STATE_QUEUED);
        next.set_attempts(next.attempts() > 0 ? next.attempts() - 1 : 0);
        next.clear_device();
        next.clear_started();
        next.clear_progress();
        message = absl::StrCat(
            "queued again: tomod crashed (", crashes.last_crash_signal, ") ",
            crashes.last_crash_jobs.empty()
                ? std::string("outside any job's run")
                : absl::StrCat("in the run of job ", absl::StrJoin(crashes.last_crash_jobs, ", ")),
            "; this run does not count as an attempt");
      } else if (state == pb::JOB_STATE_RUNNING && next.attempts() >= options_.max_attempts) {
        next.set_state(pb::JOB_STATE_FAILED);
        const auto crashed = crashes.crashes_by_job.find(id);
        const uint32_t crashed_runs =
            crashed == crashes.crashes_by_job.end() ? 0 : static_cast<uint32_t>(crashed->second);
        if (crashed_runs >= next.attempts()) {
          next.set_error(absl::StrCat(
              "INTERNAL: the job crashed tomod's worker process (", crashes.last_crash_signal,
              ") in each of its ", next.attempts(),
              " runs; it is failed as poison and not run again (--max_attempts is ",
              options_.max_attempts, "); its input or parameters trigger a fault in tomod"));
        } else {
          next.set_error(absl::StrCat(
              "ABORTED: tomod stopped during each of the job's ", next.attempts(), " runs",
              crashed_runs > 0 ? absl::StrCat(" (", crashed_runs, " of them crashes in its run)")
                               : std::string(),
              "; --max_attempts is ", options_.max_attempts, ", so it is not run again"));
        }
        message = absl::StrCat("failed: ", next.error());
      } else if (state == pb::JOB_STATE_RUNNING) {
        next.set_state(pb::JOB_STATE_QUEUED);
        next.clear_device();
        next.clear_started();
        next.clear_progress();
        message = absl::StrCat("queued again: tomod stopped during run ", next.attempts(),
                               " of at most ", options_.max_attempts);
      }
      if (IsTerminal(next.state())) SetTimestamp(next.mutable_finished(), absl::Now());
      if (next.state() != state) {
        TOMO_RETURN_IF_ERROR(
            CommitLocked(record, std::move(next), message, Durability::kPersist, flushes));
      }
      if (record.job.state() == pb::JOB_STATE_QUEUED) {
        record.validated = std::make_shared<const ValidatedJob>(std::move(*validated));
        queue_.Push(id, record.job.spec().priority());
        ++(state == pb::JOB_STATE_RUNNING ? requeued : queued);
        record.queued_at = absl::Now();
        if (state == pb::JOB_STATE_RUNNING && options_.metrics != nullptr) {
          options_.metrics->Requeued("restart");
        }
      } else {
        ++ended;
      }
    } else {
      ++finished;
    }
    if (!record.job.spec().idempotency_key().empty()) keys_[ScopedKey(record.job)] = id;
    record.disk_bytes = spool_.JobDiskBytes(id);
    if (record.validated != nullptr && !IsTerminal(record.job.state())) {
      // A job that will run again: its outputs are reserved as at admission.
      record.reserved_output_bytes = ExpectedOutputBytes(*record.validated).value_or(0);
      record.disk_bytes += record.reserved_output_bytes;
      pending_bytes_ += record.reserved_output_bytes;
    }
    spool_bytes_ += record.disk_bytes;
  }
  client_jobs_.clear();
  std::set<std::string> unfinished;
  for (const auto& [id, record] : jobs_) {
    CountClientLocked(record.job.client(), pb::JOB_STATE_UNSPECIFIED, record.job.state());
    if (!IsTerminal(record.job.state())) unfinished.insert(id);
  }
  if (!options_.crash_log_path.empty()) {
    // Crashes of jobs that will run again are remembered; the rest is forgotten. A full
    // disk must not keep tomod from starting: the old log then stays (its lines counted
    // again at the next start, which only errs towards failing a crashing job sooner).
    if (absl::Status rewritten = RewriteCrashLog(options_.crash_log_path, unfinished);
        !rewritten.ok()) {
      Log(absl::StrCat("cannot rewrite the crash log: ", rewritten.message()),
          LogLevel::kWarning);
    }
  }
  for (const std::string& dir : spool_.ListJobDirs()) {
    if (jobs_.count(dir) == 0 &&
        std::find(unreadable.begin(), unreadable.end(), dir) == unreadable.end()) {
      spool_.RemoveJobDir(dir).IgnoreError();
      ++strays;
    }
  }
  Log(absl::StrCat("job database ", store_->path(), ": ", jobs_.size(), " jobs (", queued,
                   " queued, ", requeued, " queued again after an interrupted run, ", ended,
                   " ended at start-up, ", finished, " finished); removed ", uploads_removed,
                   " unfinished uploads and ", strays, " job directories without a record; ",
                   spool_bytes_, " bytes of job files"));
  return absl::OkStatus();
}

void JobManager::Drain(absl::Duration timeout, absl::string_view reason) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  YieldFollowersLocked(/*all=*/true);  // the jobs would only wait in the queue
  if (drain_reason_.empty()) {
    drain_reason_ = std::string(reason);
    Log(absl::StrCat("draining (", reason, "): refusing new jobs, waiting up to ",
                     absl::FormatDuration(timeout), " for ", running_, " running jobs and ",
                     uploading_, " uploads in progress"));
  }
  // Uploads that began before the drain may still commit: their clients are mid-Submit.
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return drain_cut_short_ || (running_ == 0 && uploading_ == 0);
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&idle), timeout)) {
    Log(absl::StrCat("drain: ", running_, " jobs still running and ", uploading_,
                     " uploads in progress after ", absl::FormatDuration(timeout),
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
    stopping_ = true;
    if (drain_reason_.empty()) drain_reason_ = "tomod is shutting down";
    YieldFollowersLocked(/*all=*/true);
    // Accepted jobs are never lost to a shutdown: a run is stopped and its job handed back
    // to the queue (durably), to run after the restart.
    for (auto& [id, record] : jobs_) {
      if (record.cancel && !record.cancel->exchange(true)) {
        record.cancel_reason = drain_reason_;
        record.requeue_on_stop = true;
      }
    }
  }
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
  if (prefetcher_ != nullptr) prefetcher_->Stop();
  if (sweeper_.joinable()) sweeper_.join();
  Flushes flushes;
  absl::MutexLock lock(&mu_);
  watches_closed_ = true;
  for (auto& [id, record] : jobs_) {
    for (JobWatcher* watcher : record.watchers) {
      if (watcher->Close(absl::UnavailableError("tomod is shutting down"))) flushes.Add(watcher);
    }
    record.watchers.clear();
  }
}

absl::Status JobManager::CommitLocked(Record& record, pb::Job next, const std::string& message,
                                      Durability durability, Flushes& flushes) {
  pb::JobEvent event;
  event.set_job_id(next.id());
  event.set_sequence(record.last_event.sequence() + 1);
  if (durability == Durability::kPersist) {
    const StoredJob stored{next, record.cancel_requested, event.sequence()};
    TOMO_RETURN_IF_ERROR(StoreWithRoom([&] { return store_->Put(stored); }));
  }
  CountClientLocked(next.client(), record.job.state(), next.state());
  MeasureLocked(record, next);
  const pb::JobState from = record.job.state();
  record.job = std::move(next);
  if (from == pb::JOB_STATE_UPLOADING || IsTerminal(record.job.state())) {
    ReleaseReservationLocked(record);
  }
  if (from != record.job.state()) LogStateChange(from, record.job, message);
  event.set_state(record.job.state());
  *event.mutable_progress() = record.job.progress();
  event.set_message(message);
  SetTimestamp(event.mutable_time(), absl::Now());
  record.last_event = event;
  for (JobWatcher* watcher : record.watchers) {
    if (watcher->Enqueue(event)) flushes.Add(watcher);
  }
  if (IsTerminal(record.job.state())) record.watchers.clear();
  return absl::OkStatus();
}

void JobManager::CommitOrLogLocked(Record& record, pb::Job next, const std::string& message,
                                   Flushes& flushes) {
  absl::Status status = CommitLocked(record, next, message, Durability::kPersist, flushes);
  if (status.ok()) return;
  Log(absl::StrCat("job ", next.id(), ": cannot record the change to ",
                   StateName(next.state()), " (", StatusText(status),
                   "); after a restart the job is what the database last held"),
      LogLevel::kError);
  CommitLocked(record, std::move(next), message, Durability::kMemoryOnly, flushes).IgnoreError();
}

void JobManager::MeasureLocked(Record& record, const pb::Job& next) {
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

void JobManager::CountClientLocked(const std::string& client, pb::JobState from, pb::JobState to) {
  if (client.empty() || IsUnfinished(from) == IsUnfinished(to)) return;
  if (IsUnfinished(to)) {
    ++client_jobs_[client];
    return;
  }
  auto it = client_jobs_.find(client);
  if (it == client_jobs_.end()) return;
  if (--it->second == 0) client_jobs_.erase(it);
}

void JobManager::ReleaseReservationLocked(Record& record) {
  // The input is on disk once the upload ended (committed or not).
  pending_bytes_ -= std::min(pending_bytes_, record.pending_input_bytes);
  record.pending_input_bytes = 0;
  if (!IsTerminal(record.job.state())) return;
  // The outputs are written (their size added to disk_bytes) or never will be.
  pending_bytes_ -= std::min(pending_bytes_, record.reserved_output_bytes);
  spool_bytes_ -= std::min(spool_bytes_, record.reserved_output_bytes);
  record.disk_bytes -= std::min(record.disk_bytes, record.reserved_output_bytes);
  record.reserved_output_bytes = 0;
}

absl::Status JobManager::StoreWithRoom(const std::function<absl::Status()>& change) const {
  absl::Status status = change();
  if (absl::IsResourceExhausted(status) && options_.free_emergency_space &&
      options_.free_emergency_space()) {
    Log(absl::StrCat("job database write failed for want of space (", status.message(),
                     "); freed the spool's reserve and tried again"));
    status = change();
  }
  return status;
}

JobManager::RecordMap::iterator JobManager::EraseLocked(RecordMap::iterator it) {
  Record& record = it->second;
  CountClientLocked(record.job.client(), record.job.state(), pb::JOB_STATE_UNSPECIFIED);
  spool_bytes_ -= std::min(spool_bytes_, record.disk_bytes);
  pending_bytes_ -= std::min(pending_bytes_,
                             record.pending_input_bytes + record.reserved_output_bytes);
  const std::string key = ScopedKey(record.job);
  if (!key.empty()) {
    auto known = keys_.find(key);
    if (known != keys_.end() && known->second == it->first) keys_.erase(known);
  }
  return jobs_.erase(it);
}

absl::StatusOr<JobManager::Record*> JobManager::FindLocked(absl::string_view id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("job ", QuoteJobId(id), " not found"));
  }
  return &it->second;
}

absl::StatusOr<const JobManager::Record*> JobManager::FindLocked(absl::string_view id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("job ", QuoteJobId(id), " not found"));
  }
  return &it->second;
}

// ---------------------------------------------------------------- upload

namespace {

// Whether a spec with an idempotency key that a job has is a retry of that job's Submit.
bool SameSubmission(const pb::JobSpec& a, const pb::JobSpec& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

absl::Status KeyReusedError(const pb::Job& job) {
  return absl::AlreadyExistsError(absl::StrCat(
      "idempotency_key: \"", job.spec().idempotency_key(), "\" already belongs to job ",
      job.id(), ", submitted with a different spec; use a new key for a new job"));
}

}  // namespace

absl::Status JobManager::CheckInputHeaders(const std::string& id) const {
  std::shared_ptr<const ValidatedJob> validated;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second.validated == nullptr) {
      return absl::NotFoundError(absl::StrCat("job ", id, " is no longer uploading"));
    }
    validated = it->second.validated;
  }
  return CheckJobInputHeaders(*validated, spool_.InputPath(id));
}

absl::Status JobManager::CheckFitsSomeDevice(const ValidatedJob& job) const {
  const uint64_t needed = registry_.MinimumDeviceBytes(job.request);
  if (needed == 0) return absl::OkStatus();
  std::vector<std::string> budgets;
  for (const core::DeviceInfo& device : options_.devices) {
    // Admission goes by the device's total memory: what is free changes from job to job.
    const uint64_t budget = EffectiveMemoryBudget(
        job.memory_budget_bytes, options_.memory_budget_bytes,
        device.kind == core::DeviceKind::kCpu ? 0 : device.memory_total_bytes);
    if (budget == 0 || needed <= budget) return absl::OkStatus();
    budgets.push_back(absl::StrCat(device.id, " ", budget));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "the job needs at least ", needed, " bytes of device memory (", core::AlgorithmName(job.request.algorithm),
      " split as far as it goes), more than any device allows: ", absl::StrJoin(budgets, ", "),
      " bytes (the smallest of the device's memory, --memory_budget_bytes ",
      options_.memory_budget_bytes, " and the job's memory_budget_bytes ",
      job.memory_budget_bytes, "; 0: unset)"));
}

absl::Status JobManager::CheckTenantQuotasLocked(absl::string_view tenant,
                                                 uint64_t need_bytes) const {
  const uint32_t max_jobs = options_.tenant_max_unfinished_jobs;
  const uint64_t max_bytes = options_.tenant_max_spool_bytes;
  if (max_jobs == 0 && max_bytes == 0) return absl::OkStatus();
  size_t unfinished = 0;
  uint64_t bytes = 0;
  for (const auto& [id, record] : jobs_) {
    if (record.job.tenant() != tenant) continue;
    if (!IsTerminal(record.job.state())) ++unfinished;
    bytes += record.disk_bytes;
  }
  const std::string who = tenant.empty() ? std::string("the default tenant")
                                         : absl::StrCat("tenant ", tenant);
  if (max_jobs > 0 && unfinished >= max_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "quota tenant_max_unfinished_jobs: ", who, " has ", unfinished,
        " unfinished jobs (uploading, queued or running), the limit is ", max_jobs,
        " (--tenant_max_unfinished_jobs); wait for one to end or cancel one"));
  }
  if (max_bytes > 0 && need_bytes > max_bytes - std::min(max_bytes, bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "quota tenant_max_spool_bytes: ", who, "'s jobs hold or reserve ", bytes,
        " spool bytes and this job needs ", need_bytes, " (its input and the bound of its "
        "outputs), ", bytes + need_bytes, " in all, over the limit of ", max_bytes,
        " (--tenant_max_spool_bytes); delete finished jobs to make room"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Upload>> JobManager::BeginUpload(const pb::JobSpec& spec,
                                                                absl::string_view client,
                                                                absl::string_view tenant) {
  absl::StatusOr<ValidatedJob> checked = ValidateJobSpec(spec, options_.limits);
  if (!checked.ok()) return checked.status();
  TOMO_RETURN_IF_ERROR(CheckFitsSomeDevice(*checked));
  auto validated = std::make_shared<const ValidatedJob>(std::move(*checked));
  const uint64_t input_bytes = validated->input_bytes;
  // The room the job will take: its input and (a bound of) its outputs.
  TOMO_ASSIGN_OR_RETURN(const SpoolNeed need, JobSpoolNeed(*validated));
  const uint64_t need_bytes = need.total_bytes();
  absl::StatusOr<uint64_t> free_bytes = FileSystemFreeBytes(spool_.root());
  {
    absl::MutexLock lock(&mu_);
    if (!accepting_ || store_ == nullptr || !drain_reason_.empty()) {
      return absl::UnavailableError(absl::StrCat(
          drain_reason_.empty() ? "tomod is shutting down" : drain_reason_,
          ": not accepting new jobs; submit again once it has restarted (with the same "
          "idempotency_key), or to another tomod"));
    }
    if (!spec.idempotency_key().empty()) {
      auto known = keys_.find(ScopedIdempotencyKey(tenant, spec.idempotency_key()));
      if (known != keys_.end()) {
        const pb::Job& job = jobs_.at(known->second).job;
        if (!SameSubmission(job.spec(), spec)) return KeyReusedError(job);
        Log(absl::StrCat("job ", job.id(), " submitted again with its idempotency key; "
                         "nothing new is stored"));
        return std::unique_ptr<Upload>(new Upload(this, job));
      }
    }
    const uint32_t per_client = options_.limits.max_jobs_per_client;
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
    TOMO_RETURN_IF_ERROR(CheckTenantQuotasLocked(tenant, need_bytes));
    const size_t length = queue_.size() + uploading_;
    if (length >= options_.limits.max_queue_length) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "queue is full: ", length, " jobs queued or uploading, the server's limit is ",
          options_.limits.max_queue_length, " (--max_queue_length)"));
    }
    const std::string need_text =
        absl::StrCat(need_bytes, " bytes (input.size_bytes ", input_bytes,
                     " and at most ", need.output_bytes, " of outputs)");
    if (options_.max_spool_bytes > 0 &&
        need_bytes > options_.max_spool_bytes - std::min(options_.max_spool_bytes, spool_bytes_)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "spool is full: the job needs ", need_text, ", which would bring the spool's job "
          "files to ", spool_bytes_ + need_bytes, " bytes, over the server's limit of ",
          options_.max_spool_bytes, " bytes (--max_spool_bytes); ", spool_bytes_,
          " bytes are in use or reserved by accepted jobs; delete finished jobs to make room"));
    }
    if (!free_bytes.ok()) return free_bytes.status();
    const uint64_t kept = core::CheckedAdd<uint64_t>(pending_bytes_, options_.min_free_spool_bytes)
                              .value_or(UINT64_MAX);
    const uint64_t usable = *free_bytes - std::min(*free_bytes, kept);
    if (need_bytes > usable) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "spool file system is full: the job needs ", need_text, "; ", spool_.root(),
          " has ", *free_bytes, " bytes free, of which ", pending_bytes_,
          " are promised to accepted jobs and ", options_.min_free_spool_bytes,
          " kept for the job database (--min_free_spool_bytes), leaving ", usable,
          "; delete finished jobs to make room"));
    }
    ++uploading_;  // holds the place while the directory is made
    spool_bytes_ += need_bytes;  // and the room
    pending_bytes_ += need_bytes;
  }
  const std::string id = NewJobId();
  absl::Status status = spool_.CreateJobDir(id);
  absl::StatusOr<AppendFile> file = status.ok() ? AppendFile::Create(spool_.InputPath(id))
                                                : absl::StatusOr<AppendFile>(status);
  Flushes flushes;
  absl::MutexLock lock(&mu_);
  auto give_back = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    --uploading_;
    spool_bytes_ -= std::min(spool_bytes_, need_bytes);
    pending_bytes_ -= std::min(pending_bytes_, need_bytes);
    spool_.RemoveJobDir(id).IgnoreError();
  };
  if (!file.ok()) {
    give_back();
    return absl::Status(file.status().code(),
                        absl::StrCat("cannot store the upload: ", file.status().message()));
  }
  Record& record = jobs_[id];
  record.disk_bytes = need_bytes;
  record.pending_input_bytes = input_bytes;
  record.reserved_output_bytes = need.output_bytes;
  pb::Job job;
  job.set_id(id);
  job.set_state(pb::JOB_STATE_UPLOADING);
  job.set_client(std::string(client));
  job.set_tenant(std::string(tenant));
  *job.mutable_spec() = spec;
  SetTimestamp(job.mutable_created(), absl::Now());
  status = CommitLocked(record, std::move(job), "uploading", Durability::kPersist, flushes);
  if (!status.ok()) {
    jobs_.erase(id);  // not EraseLocked: give_back returns the reservation
    give_back();
    return absl::Status(status.code(),
                        absl::StrCat("cannot record the upload: ", status.message()));
  }
  record.validated = std::move(validated);
  std::shared_ptr<UploadFeed> feed = AssignFollowerLocked(id, record);
  return std::unique_ptr<Upload>(
      new Upload(this, id, input_bytes, std::move(*file), std::move(feed)));
}

absl::StatusOr<pb::Job> JobManager::CommitUpload(const std::string& id, bool* superseded) {
  Flushes flushes;
  absl::MutexLock lock(&mu_);
  if (!accepting_) return absl::UnavailableError("tomod is shutting down; not accepting jobs");
  TOMO_ASSIGN_OR_RETURN(Record * record, FindLocked(id));
  const std::string key = ScopedKey(record->job);
  if (!key.empty()) {
    auto known = keys_.find(key);
    if (known != keys_.end()) {
      // Another upload with this key committed while this one ran: it is the job.
      const pb::Job winner = jobs_.at(known->second).job;
      if (!SameSubmission(winner.spec(), record->job.spec())) return KeyReusedError(winner);
      store_->Delete(id).IgnoreError();  // an UPLOADING record; start-up would remove it too
      const absl::Status gone = absl::AbortedError(absl::StrCat(
          "job ", id, " was removed: job ", winner.id(), " has the same idempotency_key"));
      for (JobWatcher* watcher : record->watchers) {
        if (watcher->Close(gone)) flushes.Add(watcher);
      }
      if (record->feed) record->feed->Finish(UploadFeed::End::kAborted);
      --uploading_;
      EraseLocked(jobs_.find(id));
      *superseded = true;
      Log(absl::StrCat("job ", id, " removed: its idempotency key is job ", winner.id(), "'s"));
      return winner;
    }
  }
  pb::Job next = record->job;
  next.set_state(pb::JOB_STATE_QUEUED);
  next.set_input_bytes(record->validated->input_bytes);
  const std::string message =
      absl::StrCat("queued (", next.input_bytes(), " bytes, priority ", next.spec().priority(),
                   ", queue length ", queue_.size() + 1, ")");
  TOMO_RETURN_IF_ERROR(
      CommitLocked(*record, std::move(next), message, Durability::kPersist, flushes));
  --uploading_;
  if (record->feed) {
    // Its follower has (nearly) reconstructed it: the job waits for that worker.
    record->held_for_follower = true;
    record->feed->Finish(UploadFeed::End::kCommitted);
  } else {
    PushQueuedLocked(id, record->job.spec().priority());
  }
  if (!key.empty()) keys_[key] = id;
  return record->job;
}

void JobManager::AbortUpload(const std::string& id, const absl::Status& reason) {
  absl::Status forgotten;
  {
    Flushes flushes;
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second.job.state() == pb::JOB_STATE_UPLOADING) {
      --uploading_;
      const absl::Status gone = absl::AbortedError(
          absl::StrCat("job ", id, " was removed: its upload failed: ", reason.message()));
      for (JobWatcher* watcher : it->second.watchers) {
        if (watcher->Close(gone)) flushes.Add(watcher);
      }
      if (it->second.feed) it->second.feed->Finish(UploadFeed::End::kAborted);
      // When this fails, the next start-up removes the UPLOADING record.
      forgotten = StoreWithRoom([&] { return store_->Delete(id); });
      EraseLocked(it);
    }
  }
  absl::Status removed = spool_.RemoveJobDir(id);
  Log(absl::StrCat("job ", id, " upload aborted, job removed: ", StatusText(reason),
                   removed.ok() ? "" : absl::StrCat(" (", removed.message(), ")"),
                   forgotten.ok() ? "" : absl::StrCat(" (", forgotten.message(), ")")));
}

Upload::Upload(JobManager* manager, std::string id, uint64_t expected_bytes, AppendFile file,
               std::shared_ptr<UploadFeed> feed)
    : manager_(manager), id_(std::move(id)), expected_bytes_(expected_bytes),
      feed_(std::move(feed)) {
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
  TOMO_ASSIGN_OR_RETURN(const Record* record, FindLocked(id));
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
  auto it = request.page_token().empty() ? jobs_.begin() : jobs_.upper_bound(request.page_token());
  size_t bytes = 0;
  for (; it != jobs_.end(); ++it) {
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
  Flushes flushes;
  absl::MutexLock lock(&mu_);
  TOMO_ASSIGN_OR_RETURN(Record * record, FindLocked(id));
  switch (record->job.state()) {
    case pb::JOB_STATE_QUEUED: {
      pb::Job next = record->job;
      next.set_state(pb::JOB_STATE_CANCELLED);
      SetTimestamp(next.mutable_finished(), absl::Now());
      TOMO_RETURN_IF_ERROR(CommitLocked(*record, std::move(next), "cancelled while queued",
                                        Durability::kPersist, flushes));
      queue_.Remove(record->job.id());
      if (record->feed) record->feed->Finish(UploadFeed::End::kAborted);  // held for it
      if (prefetcher_ != nullptr) prefetcher_->Drop(record->job.id());
      return record->job;
    }
    case pb::JOB_STATE_RUNNING:
      if (record->cancel && !record->cancel->exchange(true)) {
        record->cancel_reason = "cancelled by request";
        record->cancel_requested = true;
        // The run stops whether or not this is recorded; recorded, a crash before the run
        // has ended does not make the job run again.
        CommitOrLogLocked(*record, record->job, "cancel requested", flushes);
        Log(absl::StrCat("job ", record->job.id(), " cancel requested while running"));
      }
      return record->job;
    case pb::JOB_STATE_CANCELLED:
      return record->job;
    case pb::JOB_STATE_UPLOADING:
      return absl::FailedPreconditionError(
          absl::StrCat("job ", record->job.id(),
                       " is UPLOADING; end its Submit call instead of cancelling it"));
    default:
      return absl::FailedPreconditionError(
          absl::StrCat("job ", record->job.id(), " is ", StateName(record->job.state()),
                       "; only QUEUED and RUNNING jobs can be cancelled"));
  }
}

absl::Status JobManager::DeleteJob(absl::string_view id) {
  std::string job_id;
  {
    absl::MutexLock lock(&mu_);
    TOMO_ASSIGN_OR_RETURN(Record * record, FindLocked(id));
    if (!IsTerminal(record->job.state())) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", record->job.id(), " is ", StateName(record->job.state()),
                       "; cancel it first (only SUCCEEDED, FAILED and CANCELLED jobs can be "
                       "deleted)"));
    }
    job_id = record->job.id();
    // The record first: a crash before the files are gone leaves a directory without a
    // record, which start-up removes; the other order could leave a record without files.
    TOMO_RETURN_IF_ERROR(StoreWithRoom([&] { return store_->Delete(job_id); }));
    EraseLocked(jobs_.find(job_id));
  }
  absl::Status removed = spool_.RemoveJobDir(job_id);
  Log(absl::StrCat("job ", job_id, " deleted",
                   removed.ok() ? "" : absl::StrCat(" (", removed.message(), ")")));
  return absl::OkStatus();
}

size_t JobManager::SweepExpiredJobs() {
  if (options_.result_ttl <= absl::ZeroDuration()) return 0;
  std::vector<std::string> expired;
  {
    absl::MutexLock lock(&mu_);
    if (store_ == nullptr) return 0;
    const absl::Time cutoff = absl::Now() - options_.result_ttl;
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      const pb::Job& job = it->second.job;
      if (!IsTerminal(job.state()) || !job.has_finished() ||
          FromTimestamp(job.finished()) > cutoff) {
        ++it;
        continue;
      }
      absl::Status erased = StoreWithRoom([&] { return store_->Delete(it->first); });
      if (!erased.ok()) {
        Log(absl::StrCat("retention: cannot delete job ", it->first, ": ", StatusText(erased),
                         "; trying again at the next sweep"));
        break;
      }
      expired.push_back(it->first);
      it = EraseLocked(it);
    }
  }
  for (const std::string& id : expired) {
    absl::Status removed = spool_.RemoveJobDir(id);
    Log(absl::StrCat("job ", id, " deleted: it ended more than --result_ttl ",
                     absl::FormatDuration(options_.result_ttl), " ago",
                     removed.ok() ? "" : absl::StrCat(" (", removed.message(), ")")));
  }
  return expired.size();
}

void JobManager::SweepLoop() {
  absl::Duration interval = options_.sweep_interval;
  if (interval <= absl::ZeroDuration()) {
    interval = std::clamp(options_.result_ttl / 10, absl::Milliseconds(100), absl::Minutes(1));
  }
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval)) return;
    }
    SweepExpiredJobs();
  }
}

uint64_t JobManager::spool_used_bytes() const {
  absl::MutexLock lock(&mu_);
  return spool_bytes_;
}

absl::Status JobManager::Watch(absl::string_view id, JobWatcher* watcher) {
  Flushes flushes;
  absl::MutexLock lock(&mu_);
  TOMO_ASSIGN_OR_RETURN(Record * record, FindLocked(id));
  if (watcher->Enqueue(record->last_event)) flushes.Add(watcher);
  if (IsTerminal(record->job.state())) return absl::OkStatus();
  if (watches_closed_) {
    // Shutdown() has closed every watch: nothing will change any more.
    watcher->Close(absl::UnavailableError("tomod is shutting down"));
  } else {
    record->watchers.push_back(watcher);
  }
  return absl::OkStatus();
}

void JobManager::Unwatch(absl::string_view id, JobWatcher* watcher) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  auto& watchers = it->second.watchers;
  watchers.erase(std::remove(watchers.begin(), watchers.end(), watcher), watchers.end());
}

absl::StatusOr<JobManager::ResultLocation> JobManager::FindResult(absl::string_view id,
                                                                  absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  TOMO_ASSIGN_OR_RETURN(const Record* record, FindLocked(id));
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
  paused_ = paused;
  if (paused) YieldFollowersLocked(/*all=*/true);
}

size_t JobManager::queue_length() const {
  absl::MutexLock lock(&mu_);
  return queue_.size() + uploading_;
}

size_t JobManager::watcher_count() const {
  absl::MutexLock lock(&mu_);
  size_t count = 0;
  for (const auto& [id, record] : jobs_) count += record.watchers.size();
  return count;
}

std::map<pb::JobState, size_t> JobManager::JobCountsByState() const {
  absl::MutexLock lock(&mu_);
  std::map<pb::JobState, size_t> counts;
  for (const auto& [id, record] : jobs_) ++counts[record.job.state()];
  return counts;
}

// ---------------------------------------------------------------- workers

bool JobManager::WorkerShouldWakeLocked(size_t index) const {
  // A draining tomod starts nothing new: queued jobs wait for the restart.
  return stopping_ || !worker_slots_[index].follow_id.empty() ||
         (!paused_ && drain_reason_.empty() && !queue_.empty());
}

std::shared_ptr<std::atomic<bool>> JobManager::StartRunLocked(size_t index, Record& record,
                                                              Flushes& flushes) {
  const core::DeviceInfo& device = options_.devices[index];
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  pb::Job next = record.job;
  next.set_state(pb::JOB_STATE_RUNNING);
  next.clear_notes();  // each run notes its own findings
  next.set_device(device.id);
  next.set_attempts(next.attempts() + 1);
  SetTimestamp(next.mutable_started(), absl::Now());
  record.cancel = cancel;
  record.requeue_on_stop = false;
  ++running_;
  worker_slots_[index].busy = true;
  const std::string message =
      next.attempts() == 1 ? absl::StrCat("running on ", device.id)
                           : absl::StrCat("running on ", device.id, " (attempt ",
                                          next.attempts(), " of ", options_.max_attempts, ")");
  CommitOrLogLocked(record, std::move(next), message, flushes);
  return cancel;
}

void JobManager::WorkerLoop(size_t index) {
  struct Wake {
    const JobManager* manager;
    size_t index;
  } wake{this, index};
  for (;;) {
    std::string id;
    std::shared_ptr<const ValidatedJob> job;
    std::shared_ptr<std::atomic<bool>> cancel;
    std::shared_ptr<UploadFeed> follow;
    {
      Flushes flushes;
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Wake* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return w->manager->WorkerShouldWakeLocked(w->index);
          },
          &wake));
      if (stopping_) return;
      WorkerSlot& slot = worker_slots_[index];
      if (!slot.follow_id.empty()) {
        id = std::move(slot.follow_id);
        slot.follow_id.clear();
        auto it = jobs_.find(id);
        if (it == jobs_.end()) {  // the upload failed before this worker woke
          slot.busy = false;
          slot.feed.reset();
          if (options_.metrics != nullptr) options_.metrics->UploadFollowed("aborted");
          continue;
        }
        follow = slot.feed;
        job = it->second.validated;
      } else {
        id = *queue_.PopFirst();
        Record& record = jobs_.at(id);
        job = record.validated;
        cancel = StartRunLocked(index, record, flushes);
      }
    }
    if (follow != nullptr) {
      FollowUpload(index, id, std::move(job), std::move(follow));
    } else {
      RunJob(index, id, std::move(job), std::move(cancel));
    }
  }
}

std::shared_ptr<UploadFeed> JobManager::AssignFollowerLocked(const std::string& id,
                                                             Record& record) {
  if (options_.reconstruct_while_uploading == WhileUploading::kNever) return nullptr;
  // A committed job waiting in the queue goes first; paused or draining, nothing starts.
  if (stopping_ || paused_ || !drain_reason_.empty() || !queue_.empty()) return nullptr;
  if (!CanReconstructWhileUploading(*record.validated, registry_)) return nullptr;
  for (size_t i = 0; i < worker_slots_.size(); ++i) {
    WorkerSlot& slot = worker_slots_[i];
    if (slot.busy || !slot.follow_id.empty()) continue;
    if (options_.reconstruct_while_uploading == WhileUploading::kOnDevices &&
        !backends_[i]->PrefersFilterAndBackProject()) {
      continue;
    }
    auto feed = std::make_shared<UploadFeed>();
    slot.busy = true;
    slot.follow_id = id;
    slot.feed = feed;
    record.feed = feed;
    Log(absl::StrCat("job ", id, ": ", options_.devices[i].id,
                     " reconstructs it while it is uploaded"));
    return feed;
  }
  return nullptr;
}

void JobManager::PushQueuedLocked(const std::string& id, int32_t priority) {
  queue_.Push(id, priority);
  for (const WorkerSlot& slot : worker_slots_) {
    if (!slot.busy && slot.follow_id.empty()) return;  // that worker takes it
  }
  YieldFollowersLocked(/*all=*/false);
}

void JobManager::YieldFollowersLocked(bool all) {
  for (WorkerSlot& slot : worker_slots_) {
    if (slot.feed == nullptr || slot.feed->end() != UploadFeed::End::kNone) continue;
    slot.feed->Finish(UploadFeed::End::kYielded);
    if (!all) return;
  }
}

void JobManager::FollowUpload(size_t index, const std::string& id,
                              std::shared_ptr<const ValidatedJob> job,
                              std::shared_ptr<UploadFeed> feed) {
  // Still UPLOADING (removed at a restart), but a crash here is this job's, not another's.
  std::optional<ScopedRunMark> mark(std::in_place, id);
  core::RunContext context;
  context.memory_budget_bytes = EffectiveMemoryBudget(
      job->memory_budget_bytes, options_.memory_budget_bytes,
      DeviceFreeBytes(options_.devices[index]));
  FollowTimes times;
  absl::StatusOr<core::Array3D> volume =
      ReconstructWhileUploading(*job, spool_.InputPath(id), *feed, registry_, *backends_[index],
                                context, kFollowPieceBytes, &times);
  const UploadFeed::End ended = feed->end();
  // From here on the upload's end no longer matters to this worker.
  feed->Finish(UploadFeed::End::kYielded);
  std::shared_ptr<std::atomic<bool>> cancel;
  const char* outcome = "given_up";
  {
    Flushes flushes;
    absl::MutexLock lock(&mu_);
    WorkerSlot& slot = worker_slots_[index];
    slot.feed.reset();
    auto it = jobs_.find(id);
    if (it != jobs_.end()) {
      Record& record = it->second;
      record.feed.reset();
      const bool held = record.held_for_follower;
      record.held_for_follower = false;
      if (held && record.job.state() == pb::JOB_STATE_QUEUED) {
        if (volume.ok() && !stopping_ && !paused_ && drain_reason_.empty()) {
          cancel = StartRunLocked(index, record, flushes);
        } else if (!stopping_) {  // when stopping, QUEUED is durable: it runs after the restart
          PushQueuedLocked(id, record.job.spec().priority());
        }
      }
    }
    if (cancel == nullptr) slot.busy = false;
  }
  if (cancel != nullptr) {
    outcome = "used";
  } else if (ended == UploadFeed::End::kAborted) {
    outcome = "aborted";
  } else if (ended == UploadFeed::End::kYielded || volume.ok()) {
    outcome = "yielded";  // a volume made, but the job was not to run now
  }
  if (options_.metrics != nullptr) options_.metrics->UploadFollowed(outcome);
  Log(absl::StrCat("job ", id, ": reconstruction while uploading ", outcome,
                   volume.ok() ? "" : absl::StrCat(" (", StatusText(volume.status()), ")"),
                   absl::StrFormat("; %.3f s waiting for the upload, %.3f s reading back, "
                                   "%.3f s feeding the device, %.3f s finishing",
                                   times.waiting_s, times.reading_s, times.feeding_s,
                                   times.finishing_s)));
  mark.reset();  // RunJob marks its run itself
  if (cancel != nullptr) RunJob(index, id, std::move(job), std::move(cancel), std::move(*volume));
}

void JobManager::RunJob(size_t index, const std::string& id,
                        std::shared_ptr<const ValidatedJob> job,
                        std::shared_ptr<std::atomic<bool>> cancel,
                        std::optional<core::Array3D> volume) {
  // The record says RUNNING (durably, StartRunLocked); a fatal signal from here on names
  // this job in the crash log.
  ScopedRunMark mark(id);
  if (!options_.crash_on_job_name_for_testing.empty()) {
    std::string name;
    {
      absl::MutexLock lock(&mu_);
      name = jobs_.at(id).job.spec().name();
    }
    if (name == options_.crash_on_job_name_for_testing) {
      throw std::length_error("a job named to crash tomod (--testing_crash_on_job_name)");
    }
  }
  core::RunContext context;
  context.is_cancelled = [cancel] { return cancel->load(std::memory_order_relaxed); };
  context.memory_budget_bytes = EffectiveMemoryBudget(
      job->memory_budget_bytes, options_.memory_budget_bytes,
      DeviceFreeBytes(options_.devices[index]));
  context.on_progress = [this, &id](const core::ProgressUpdate& update) {
    OnProgress(id, update);
  };
  const absl::Time start = absl::Now();
  // A run writes into results.partial/ and publishes it by a rename once every file is
  // fsynced, so a crash never leaves half a result where FetchResult would find it.
  // Leftovers of an interrupted earlier attempt go first.
  std::error_code ignored;
  std::filesystem::remove_all(spool_.ResultsPartialDir(id), ignored);
  std::filesystem::remove_all(spool_.ResultsDir(id), ignored);
  // This job's input when it was read ahead; once it is in memory (this worker's slot is
  // free again and the spool idle), the input of the job queued next is read while this
  // one runs: under mu_, so that a cancel of that job, which drops its input, cannot come
  // in between.
  auto prefetch_next = [this, index] {
    if (prefetcher_ == nullptr) return;
    absl::MutexLock lock(&mu_);
    if (stopping_ || paused_ || !drain_reason_.empty()) return;
    prefetcher_->PrefetchNext(
        index, queue_,
        [this](const std::string& next_id)
            ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> std::optional<PrefetchJob> {
              auto it = jobs_.find(next_id);
              if (it == jobs_.end() || it->second.validated == nullptr) return std::nullopt;
              return PrefetchJob{it->second.validated, spool_.InputPath(next_id)};
            });
  };
  // The volume goes to the record for early fetches of the raw result while it is written.
  const ShareVolumeFn share_volume = [this, &id](std::shared_ptr<const core::Array3D> shared) {
    ShareVolumeBeingWritten(id, std::move(shared));
  };
  absl::StatusOr<std::vector<pb::ResultFile>> results;
  if (volume.has_value()) {
    // Reconstructed while it was uploaded (FollowUpload): the plain input has no metadata.
    prefetch_next();
    auto shared = std::make_shared<const core::Array3D>(std::move(*volume));
    volume.reset();
    results = WriteJobResults(*job, job->request.volume, std::move(shared),
                              core::AcquisitionMetadata(), spool_.ResultsPartialDir(id), context,
                              share_volume);
  } else {
    JobInputStage input;
    if (prefetcher_ != nullptr) {
      input.prefetched = prefetcher_->Take(id);
      input.on_input_read = prefetch_next;
    }
    results = ExecuteJob(*job, spool_.InputPath(id), std::move(input),
                         spool_.ResultsPartialDir(id), {backends_[index].get()}, registry_,
                         context, share_volume);
  }
  if (results.ok() && !cancel->load()) {
    absl::Status published = spool_.PublishResults(id);
    if (!published.ok()) results = published;
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  bool remove_results = false;
  {
    Flushes flushes;
    absl::MutexLock lock(&mu_);
    Record& record = jobs_.at(id);  // a RUNNING job cannot be deleted
    // Fetches that hold the volume keep it; from the commit on, FindResult gives the file.
    record.being_written.reset();
    --running_;
    worker_slots_[index].busy = false;
    pb::Job next = record.job;
    SetTimestamp(next.mutable_finished(), absl::Now());
    std::string message;
    const bool stopped = cancel->load() || (!results.ok() && absl::IsCancelled(results.status()));
    if (stopped && record.requeue_on_stop && !record.cancel_requested) {
      // Handed back, not ended: the run was stopped by tomod, not by the job or its owner,
      // so it does not count against --max_attempts either.
      next.set_state(pb::JOB_STATE_QUEUED);
      next.set_attempts(next.attempts() > 0 ? next.attempts() - 1 : 0);
      next.clear_device();
      next.clear_started();
      next.clear_finished();
      next.clear_progress();
      message = absl::StrFormat(
          "queued again: %s; the run was stopped after %.3f s and does not count as an attempt",
          record.cancel_reason, seconds);
      queue_.Push(id, next.spec().priority());
      if (options_.metrics != nullptr) options_.metrics->Requeued("shutdown");
      remove_results = true;
    } else if (stopped) {
      next.set_state(pb::JOB_STATE_CANCELLED);
      message = absl::StrCat("cancelled while running: ",
                             record.cancel_reason.empty() ? std::string(results.status().message())
                                                          : record.cancel_reason);
      remove_results = true;
    } else if (results.ok()) {
      next.set_state(pb::JOB_STATE_SUCCEEDED);
      next.mutable_progress()->set_fraction(1.0);
      uint64_t bytes = 0;
      for (pb::ResultFile& file : *results) {
        bytes += file.size_bytes();
        *next.add_results() = std::move(file);
      }
      record.disk_bytes += bytes;
      spool_bytes_ += bytes;
      message = absl::StrFormat("succeeded in %.3f s", seconds);
    } else {
      next.set_state(pb::JOB_STATE_FAILED);
      next.set_error(StatusText(results.status()));
      message = absl::StrCat("failed: ", next.error());
      remove_results = true;
    }
    CommitOrLogLocked(record, std::move(next), message, flushes);
    record.cancel.reset();  // after the commit, which counts the run as this process's
  }
  if (remove_results) {
    std::filesystem::remove_all(spool_.ResultsPartialDir(id), ignored);
    std::filesystem::remove_all(spool_.ResultsDir(id), ignored);
  }
}

void JobManager::ShareVolumeBeingWritten(const std::string& id,
                                         std::shared_ptr<const core::Array3D> volume) {
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second.job.state() == pb::JOB_STATE_RUNNING) {
      it->second.being_written = std::move(volume);
    }
  }
  if (options_.before_writing_results) options_.before_writing_results(id);
}

void JobManager::OnProgress(const std::string& id, const core::ProgressUpdate& update) {
  Flushes flushes;
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.job.state() != pb::JOB_STATE_RUNNING) return;
  Record& record = it->second;
  const pb::Progress& last = record.job.progress();
  const double fraction = std::clamp(update.fraction, 0.0, 1.0);
  const bool news = !update.note.empty() || update.stage != last.stage() ||
                    update.iteration != last.iteration() ||
                    update.iterations_total != last.iterations_total() ||
                    fraction - last.fraction() >= options_.progress_step ||
                    (fraction >= 1.0 && last.fraction() < 1.0);
  if (!news) return;
  pb::Job next = record.job;
  pb::Progress* progress = next.mutable_progress();
  progress->set_fraction(fraction);
  progress->set_stage(update.stage);
  progress->set_iteration(update.iteration);
  progress->set_iterations_total(update.iterations_total);
  if (update.relative_residual >= 0) {
    progress->set_relative_residual(update.relative_residual);
  } else {
    progress->clear_relative_residual();
  }
  if (update.cost >= 0) {
    progress->set_cost(update.cost);
  } else {
    progress->clear_cost();
  }
  if (!update.note.empty()) {
    next.add_notes(update.note);
    LogEvent(LogLevel::kInfo, "job_note", id, {{"message", update.note}});
  }
  // Not written: after a crash the run starts again from nothing (the notes are written
  // with the job's final state).
  CommitLocked(record, std::move(next), update.note, Durability::kMemoryOnly, flushes)
      .IgnoreError();
}

}  // namespace tomo::server
