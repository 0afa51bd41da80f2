#include "server/job_manager.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/status_macros.h"
#include "server/checksum.h"
#include "server/job_execution.h"
#include "server/job_id.h"
#include "server/log.h"

namespace tomo::server {

namespace pb = ::tomoserve::v1;

namespace {

constexpr uint32_t kDefaultPageSize = 100;
constexpr uint32_t kMaxPageSize = 1000;
// Well below the 16 MiB message limit tomod and its clients set.
constexpr size_t kMaxListBytes = 8 << 20;

void SetTimestamp(google::protobuf::Timestamp* timestamp, absl::Time time) {
  const int64_t nanos = absl::ToUnixNanos(time);
  timestamp->set_seconds(nanos / 1000000000);
  timestamp->set_nanos(static_cast<int32_t>(nanos % 1000000000));
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

}  // namespace

JobManager::JobManager(JobManagerOptions options, const Spool& spool,
                       const core::AlgorithmRegistry& registry)
    : options_(std::move(options)), spool_(spool), registry_(registry) {}

JobManager::~JobManager() { Shutdown(); }

absl::Status JobManager::Start() {
  if (options_.devices.empty()) {
    return absl::FailedPreconditionError("no device to run jobs on");
  }
  for (const core::DeviceInfo& device : options_.devices) {
    absl::StatusOr<std::unique_ptr<core::Backend>> backend = core::MakeBackend(device);
    if (!backend.ok()) {
      return absl::Status(backend.status().code(),
                          absl::StrCat("device ", device.id, ": ", backend.status().message()));
    }
    backends_.push_back(std::move(*backend));
  }
  const std::vector<std::string> old_dirs = spool_.ListJobDirs();
  if (!old_dirs.empty()) {
    Log(absl::StrCat("spool ", spool_.root(), " holds ", old_dirs.size(),
                     " job directories of an earlier run; they are left untouched"));
  }
  for (size_t i = 0; i < options_.devices.size(); ++i) {
    Log(absl::StrCat("worker ", i, " on ", options_.devices[i].id, " (",
                     options_.devices[i].name, ")"));
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
  return absl::OkStatus();
}

void JobManager::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    accepting_ = false;
    stopping_ = true;
    for (auto& [id, record] : jobs_) {
      if (record.cancel) {
        record.cancel_reason = "tomod is shutting down";
        record.cancel->store(true);
      }
    }
  }
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
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

void JobManager::CommitLocked(Record& record, const std::string& message, Flushes& flushes) {
  // Issue 4: persist record.job here, before anyone is told.
  pb::JobEvent event;
  event.set_job_id(record.job.id());
  event.set_sequence(record.last_event.sequence() + 1);
  event.set_state(record.job.state());
  *event.mutable_progress() = record.job.progress();
  event.set_message(message);
  SetTimestamp(event.mutable_time(), absl::Now());
  record.last_event = event;
  for (JobWatcher* watcher : record.watchers) {
    if (watcher->Enqueue(event)) flushes.Add(watcher);
  }
  if (IsTerminal(record.job.state())) record.watchers.clear();
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

absl::StatusOr<std::unique_ptr<Upload>> JobManager::BeginUpload(const pb::JobSpec& spec) {
  TOMO_ASSIGN_OR_RETURN(ValidatedJob validated, ValidateJobSpec(spec, options_.limits));
  {
    absl::MutexLock lock(&mu_);
    if (!accepting_) return absl::UnavailableError("tomod is shutting down; not accepting jobs");
    const size_t length = queue_.size() + uploading_;
    if (length >= options_.limits.max_queue_length) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "queue is full: ", length, " jobs queued or uploading, the server's limit is ",
          options_.limits.max_queue_length, " (--max_queue_length)"));
    }
    ++uploading_;  // holds the place while the directory is made
  }
  const std::string id = NewJobId();
  absl::Status status = spool_.CreateJobDir(id);
  absl::StatusOr<AppendFile> file = status.ok() ? AppendFile::Create(spool_.InputPath(id))
                                                : absl::StatusOr<AppendFile>(status);
  Flushes flushes;
  absl::MutexLock lock(&mu_);
  if (!file.ok()) {
    --uploading_;
    spool_.RemoveJobDir(id).IgnoreError();
    return absl::Status(file.status().code(),
                        absl::StrCat("cannot store the upload: ", file.status().message()));
  }
  Record& record = jobs_[id];
  record.job.set_id(id);
  record.job.set_state(pb::JOB_STATE_UPLOADING);
  *record.job.mutable_spec() = spec;
  SetTimestamp(record.job.mutable_created(), absl::Now());
  record.validated = std::make_shared<const ValidatedJob>(std::move(validated));
  CommitLocked(record, "uploading", flushes);
  return std::unique_ptr<Upload>(
      new Upload(this, id, record.validated->input_bytes, std::move(*file)));
}

absl::StatusOr<pb::Job> JobManager::CommitUpload(const std::string& id) {
  Flushes flushes;
  absl::MutexLock lock(&mu_);
  if (!accepting_) return absl::UnavailableError("tomod is shutting down; not accepting jobs");
  TOMO_ASSIGN_OR_RETURN(Record * record, FindLocked(id));
  --uploading_;
  record->job.set_state(pb::JOB_STATE_QUEUED);
  record->job.set_input_bytes(record->validated->input_bytes);
  queue_.Push(id, record->job.spec().priority());
  CommitLocked(*record, "queued", flushes);
  Log(absl::StrCat("job ", id, " queued (", record->job.input_bytes(), " bytes, priority ",
                   record->job.spec().priority(), ", queue length ", queue_.size(), ")"));
  return record->job;
}

void JobManager::AbortUpload(const std::string& id, const absl::Status& reason) {
  {
    Flushes flushes;
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(id);
    if (it != jobs_.end()) {
      --uploading_;
      const absl::Status gone = absl::AbortedError(
          absl::StrCat("job ", id, " was removed: its upload failed: ", reason.message()));
      for (JobWatcher* watcher : it->second.watchers) {
        if (watcher->Close(gone)) flushes.Add(watcher);
      }
      jobs_.erase(it);
    }
  }
  absl::Status removed = spool_.RemoveJobDir(id);
  Log(absl::StrCat("job ", id, " upload aborted, job removed: ", StatusText(reason),
                   removed.ok() ? "" : absl::StrCat(" (", removed.message(), ")")));
}

Upload::~Upload() {
  Abort(absl::CancelledError("the upload ended before upload_end"));
}

absl::Status Upload::Append(absl::string_view data) {
  if (done_) return absl::FailedPreconditionError(absl::StrCat("upload of job ", id_, " ended"));
  if (data.size() > expected_bytes_ - received_bytes_) {
    absl::Status status = absl::InvalidArgumentError(absl::StrCat(
        "data: ", received_bytes_ + data.size(), " bytes received exceed input.size_bytes ",
        expected_bytes_));
    Abort(status);
    return status;
  }
  crc32_ = Crc32Update(crc32_, data.data(), data.size());
  absl::Status status = file_.Append(data);
  if (!status.ok()) {
    Abort(status);
    return status;
  }
  received_bytes_ += data.size();
  return absl::OkStatus();
}

absl::StatusOr<pb::Job> Upload::Commit(uint64_t total_bytes, uint32_t crc32) {
  if (done_) return absl::FailedPreconditionError(absl::StrCat("upload of job ", id_, " ended"));
  absl::Status status;
  if (total_bytes != expected_bytes_) {
    status = absl::InvalidArgumentError(
        absl::StrCat("upload_end.total_bytes: ", total_bytes,
                     " does not match input.size_bytes ", expected_bytes_));
  } else if (received_bytes_ != expected_bytes_) {
    status = absl::InvalidArgumentError(
        absl::StrCat("upload: ", received_bytes_, " bytes received, but input.size_bytes is ",
                     expected_bytes_));
  } else if (crc32 != crc32_) {
    status = absl::InvalidArgumentError(
        absl::StrFormat("upload_end.crc32: 0x%08x does not match the CRC-32 of the %d bytes "
                        "received, 0x%08x",
                        crc32, received_bytes_, crc32_));
  }
  if (status.ok()) status = file_.Sync();
  if (status.ok()) status = file_.Close();
  if (!status.ok()) {
    Abort(status);
    return status;
  }
  absl::StatusOr<pb::Job> job = manager_->CommitUpload(id_);
  if (!job.ok()) {
    Abort(job.status());
    return job.status();
  }
  done_ = true;
  return job;
}

void Upload::Abort(const absl::Status& reason) {
  if (done_) return;
  done_ = true;
  file_.Close().IgnoreError();
  manager_->AbortUpload(id_, reason);
}

// ---------------------------------------------------------------- queries and control

absl::StatusOr<pb::Job> JobManager::GetJob(absl::string_view id) const {
  absl::MutexLock lock(&mu_);
  TOMO_ASSIGN_OR_RETURN(const Record* record, FindLocked(id));
  return record->job;
}

absl::StatusOr<pb::ListJobsResponse> JobManager::ListJobs(
    const pb::ListJobsRequest& request) const {
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
  for (int state : request.states()) states.insert(state);

  pb::ListJobsResponse response;
  absl::MutexLock lock(&mu_);
  auto it = request.page_token().empty() ? jobs_.begin() : jobs_.upper_bound(request.page_token());
  size_t bytes = 0;
  for (; it != jobs_.end(); ++it) {
    const pb::Job& job = it->second.job;
    if (!states.empty() && states.count(job.state()) == 0) continue;
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
    case pb::JOB_STATE_QUEUED:
      queue_.Remove(record->job.id());
      record->job.set_state(pb::JOB_STATE_CANCELLED);
      SetTimestamp(record->job.mutable_finished(), absl::Now());
      CommitLocked(*record, "cancelled while queued", flushes);
      Log(absl::StrCat("job ", record->job.id(), " cancelled while queued"));
      return record->job;
    case pb::JOB_STATE_RUNNING:
      if (record->cancel && !record->cancel->exchange(true)) {
        record->cancel_reason = "cancelled by request";
        CommitLocked(*record, "cancel requested", flushes);
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
    jobs_.erase(job_id);
  }
  absl::Status removed = spool_.RemoveJobDir(job_id);
  Log(absl::StrCat("job ", job_id, " deleted",
                   removed.ok() ? "" : absl::StrCat(" (", removed.message(), ")")));
  return absl::OkStatus();
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
  if (job.state() != pb::JOB_STATE_SUCCEEDED) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.id(), " is ", StateName(job.state()),
                     "; results exist only for SUCCEEDED jobs"));
  }
  std::vector<std::string> names;
  for (const pb::ResultFile& file : job.results()) {
    if (name.empty() || file.name() == name) {
      return ResultLocation{spool_.ResultPath(job.id(), file.name()), file};
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

// ---------------------------------------------------------------- workers

bool JobManager::WorkerShouldWakeLocked() const {
  return stopping_ || (!paused_ && !queue_.empty());
}

void JobManager::WorkerLoop(size_t index) {
  const core::DeviceInfo& device = options_.devices[index];
  for (;;) {
    std::string id;
    std::shared_ptr<const ValidatedJob> job;
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    {
      Flushes flushes;
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &JobManager::WorkerShouldWakeLocked));
      if (stopping_) return;
      id = *queue_.PopFirst();
      Record& record = jobs_.at(id);
      record.job.set_state(pb::JOB_STATE_RUNNING);
      record.job.set_device(device.id);
      SetTimestamp(record.job.mutable_started(), absl::Now());
      record.cancel = cancel;
      job = record.validated;
      CommitLocked(record, absl::StrCat("running on ", device.id), flushes);
      Log(absl::StrCat("job ", id, " running on ", device.id));
    }
    RunJob(index, id, std::move(job), std::move(cancel));
  }
}

void JobManager::RunJob(size_t index, const std::string& id,
                        std::shared_ptr<const ValidatedJob> job,
                        std::shared_ptr<std::atomic<bool>> cancel) {
  core::RunContext context;
  context.is_cancelled = [cancel] { return cancel->load(std::memory_order_relaxed); };
  context.memory_budget_bytes = EffectiveMemoryBudget(
      job->memory_budget_bytes, options_.memory_budget_bytes,
      DeviceFreeBytes(options_.devices[index]));
  context.on_progress = [this, &id](const core::ProgressUpdate& update) {
    OnProgress(id, update);
  };
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<pb::ResultFile>> results =
      ExecuteJob(*job, spool_.InputPath(id), spool_.ResultsDir(id), *backends_[index],
                 registry_, context);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  bool remove_results = false;
  {
    Flushes flushes;
    absl::MutexLock lock(&mu_);
    Record& record = jobs_.at(id);  // a RUNNING job cannot be deleted
    record.cancel.reset();
    SetTimestamp(record.job.mutable_finished(), absl::Now());
    std::string message;
    if (cancel->load() || (!results.ok() && absl::IsCancelled(results.status()))) {
      record.job.set_state(pb::JOB_STATE_CANCELLED);
      message = absl::StrCat("cancelled while running: ",
                             record.cancel_reason.empty() ? std::string(results.status().message())
                                                          : record.cancel_reason);
      remove_results = true;
    } else if (results.ok()) {
      record.job.set_state(pb::JOB_STATE_SUCCEEDED);
      record.job.mutable_progress()->set_fraction(1.0);
      for (pb::ResultFile& file : *results) *record.job.add_results() = std::move(file);
      message = absl::StrFormat("succeeded in %.3f s", seconds);
    } else {
      record.job.set_state(pb::JOB_STATE_FAILED);
      record.job.set_error(StatusText(results.status()));
      message = absl::StrCat("failed: ", record.job.error());
      remove_results = true;
    }
    CommitLocked(record, message, flushes);
    Log(absl::StrCat("job ", id, " ", message));
  }
  if (remove_results) {
    std::error_code ignored;
    std::filesystem::remove_all(spool_.ResultsDir(id), ignored);
  }
}

void JobManager::OnProgress(const std::string& id, const core::ProgressUpdate& update) {
  Flushes flushes;
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.job.state() != pb::JOB_STATE_RUNNING) return;
  Record& record = it->second;
  const pb::Progress& last = record.job.progress();
  const double fraction = std::clamp(update.fraction, 0.0, 1.0);
  const bool news = update.stage != last.stage() || update.iteration != last.iteration() ||
                    update.iterations_total != last.iterations_total() ||
                    fraction - last.fraction() >= options_.progress_step ||
                    (fraction >= 1.0 && last.fraction() < 1.0);
  if (!news) return;
  pb::Progress* progress = record.job.mutable_progress();
  progress->set_fraction(fraction);
  progress->set_stage(update.stage);
  progress->set_iteration(update.iteration);
  progress->set_iterations_total(update.iterations_total);
  CommitLocked(record, "", flushes);
}

}  // namespace tomo::server
