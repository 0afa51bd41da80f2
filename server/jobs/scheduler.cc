#include "server/jobs/scheduler.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runner/job_execution.h"
#include "runner/job_input.h"
#include "server/jobs/crash_log.h"
#include "server/telemetry/log.h"

namespace tomo::server {

namespace pb = ::tomoserve::v1;

namespace {

std::string StatusText(const absl::Status& status) {
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
}

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

Scheduler::Scheduler(const JobManagerOptions& options, const Spool& spool,
                     const core::AlgorithmRegistry& registry, JobTable& table,
                     Admission& admission)
    : options_(options), spool_(spool), registry_(registry), table_(table),
      admission_(admission), mu_(table.mu()) {}

Scheduler::~Scheduler() {
  {
    absl::MutexLock lock(&mu_);
    StopLocked("tomod is shutting down");
  }
  Join();
}

absl::Status Scheduler::MakeBackends() {
  for (const core::DeviceInfo& device : options_.devices) {
    absl::StatusOr<std::unique_ptr<core::Backend>> backend = core::MakeBackend(device);
    if (!backend.ok()) {
      return absl::Status(backend.status().code(),
                          absl::StrCat("device ", device.id, ": ", backend.status().message()));
    }
    backends_.push_back(std::move(*backend));
  }
  return absl::OkStatus();
}

void Scheduler::Start() {
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
  if (options_.multi_device.mode != MultiDeviceJobs::kOff && options_.devices.size() > 1) {
    Log(absl::StrCat("jobs of at least ", options_.multi_device.min_voxels,
                     " voxels that split over devices also take the idle devices of their "
                     "kind (--multi_device_jobs=",
                     MultiDeviceJobsName(options_.multi_device.mode), ")"));
  }
  for (size_t i = 0; i < options_.devices.size(); ++i) {
    Log(absl::StrCat("worker ", i, " on ", options_.devices[i].id, " (",
                     options_.devices[i].name, ")"));
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

void Scheduler::StopLocked(const std::string& reason) {
  if (stopping_) return;
  stopping_ = true;
  YieldFollowersLocked(/*all=*/true);
  // Accepted jobs are never lost to a shutdown: a run is stopped and its job handed back
  // to the queue (durably), to run after the restart.
  for (auto& [id, record] : table_.records()) {
    if (record.cancel && !record.cancel->exchange(true)) {
      record.cancel_reason = reason;
      record.requeue_on_stop = true;
    }
  }
}

void Scheduler::Join() {
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
  if (prefetcher_ != nullptr) prefetcher_->Stop();
}

void Scheduler::PushLocked(const std::string& id, int32_t priority) { queue_.Push(id, priority); }

void Scheduler::PushQueuedLocked(const std::string& id, int32_t priority) {
  queue_.Push(id, priority);
  for (const WorkerSlot& slot : worker_slots_) {
    if (!slot.busy && slot.follow_id.empty()) return;  // that worker takes it
  }
  YieldFollowersLocked(/*all=*/false);
}

void Scheduler::RemoveLocked(JobRecord& record) {
  queue_.Remove(record.job.id());
  if (record.feed) record.feed->Finish(UploadFeed::End::kAborted);  // held for it
  if (prefetcher_ != nullptr) prefetcher_->Drop(record.job.id());
}

void Scheduler::SetPausedLocked(bool paused) {
  paused_ = paused;
  if (paused) YieldFollowersLocked(/*all=*/true);
}

void Scheduler::SetDrainingLocked() {
  draining_ = true;
  YieldFollowersLocked(/*all=*/true);  // the jobs would only wait in the queue
}

bool Scheduler::WorkerShouldWakeLocked(size_t index) const {
  // A draining tomod starts nothing new: queued jobs wait for the restart. A worker whose
  // device is lent to another worker's job sleeps until that job ends.
  const WorkerSlot& slot = worker_slots_[index];
  return stopping_ || !slot.follow_id.empty() ||
         (!slot.busy && !paused_ && !draining_ && !queue_.empty());
}

size_t Scheduler::busy_devices() const {
  return static_cast<size_t>(std::count_if(worker_slots_.begin(), worker_slots_.end(),
                                           [](const WorkerSlot& slot) { return slot.busy; }));
}

std::vector<size_t> Scheduler::ChooseDevicesLocked(size_t index, const JobRecord& record) const {
  std::vector<size_t> devices = {index};
  if (options_.multi_device.mode == MultiDeviceJobs::kOff || record.validated == nullptr) {
    return devices;
  }
  // Only devices of the worker's kind: a CPU slab beside GPU slabs would hold the job up.
  std::vector<size_t> idle;
  for (size_t i = 0; i < worker_slots_.size(); ++i) {
    const WorkerSlot& slot = worker_slots_[i];
    if (i == index || slot.busy || !slot.follow_id.empty()) continue;
    if (options_.devices[i].kind != options_.devices[index].kind) continue;
    idle.push_back(i);
  }
  const size_t extra = ExtraDevicesForJob(options_.multi_device,
                                          CandidateOf(*record.validated, registry_), idle.size(),
                                          queue_.size());
  devices.insert(devices.end(), idle.begin(), idle.begin() + static_cast<ptrdiff_t>(extra));
  return devices;
}

std::shared_ptr<std::atomic<bool>> Scheduler::StartRunLocked(const std::vector<size_t>& devices,
                                                             JobRecord& record,
                                                             WatcherFlushes& flushes) {
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  pb::Job next = record.job;
  next.set_state(pb::JOB_STATE_RUNNING);
  next.clear_notes();  // each run notes its own findings
  next.set_device(options_.devices[devices.front()].id);
  next.clear_devices();
  std::vector<std::string> ids;
  for (size_t d : devices) {
    ids.push_back(options_.devices[d].id);
    next.add_devices(options_.devices[d].id);
    worker_slots_[d].busy = true;
  }
  next.set_attempts(next.attempts() + 1);
  SetTimestamp(next.mutable_started(), absl::Now());
  record.cancel = cancel;
  record.requeue_on_stop = false;
  ++running_;
  if (options_.metrics != nullptr) options_.metrics->RunStarted(devices.size());
  const std::string where = absl::StrJoin(ids, ", ");
  const std::string message =
      next.attempts() == 1 ? absl::StrCat("running on ", where)
                           : absl::StrCat("running on ", where, " (attempt ", next.attempts(),
                                          " of ", options_.max_attempts, ")");
  table_.Commit(record, std::move(next), message, JobTable::Durability::kPersist, flushes);
  return cancel;
}

void Scheduler::WorkerLoop(size_t index) {
  struct Wake {
    const Scheduler* scheduler;
    size_t index;
  } wake{this, index};
  for (;;) {
    std::string id;
    std::shared_ptr<const ValidatedJob> job;
    std::shared_ptr<std::atomic<bool>> cancel;
    std::shared_ptr<UploadFeed> follow;
    std::vector<size_t> devices;
    JobTable::Ticket started = 0;
    {
      WatcherFlushes flushes;
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Wake* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return w->scheduler->WorkerShouldWakeLocked(w->index);
          },
          &wake));
      if (stopping_) return;
      WorkerSlot& slot = worker_slots_[index];
      if (!slot.follow_id.empty()) {
        id = std::move(slot.follow_id);
        slot.follow_id.clear();
        auto it = table_.records().find(id);
        if (it == table_.records().end()) {  // the upload failed before this worker woke
          slot.busy = false;
          slot.feed.reset();
          if (options_.metrics != nullptr) options_.metrics->UploadFollowed("aborted");
          continue;
        }
        follow = slot.feed;
        job = it->second.validated;
      } else {
        id = *queue_.PopFirst();
        JobRecord& record = table_.records().at(id);
        job = record.validated;
        devices = ChooseDevicesLocked(index, record);
        cancel = StartRunLocked(devices, record, flushes);
        started = record.last_ticket;
      }
    }
    if (follow != nullptr) {
      FollowUpload(index, id, std::move(job), std::move(follow));
    } else {
      // The run starts once RUNNING is durable (this job's own write: a crash in the run is
      // then charged to it), whether or not the write succeeded (the writer logged that).
      table_.WaitDurable(started).IgnoreError();
      RunJob(devices, id, std::move(job), std::move(cancel));
    }
  }
}

std::shared_ptr<UploadFeed> Scheduler::AssignFollowerLocked(const std::string& id,
                                                            JobRecord& record) {
  if (options_.reconstruct_while_uploading == WhileUploading::kNever) return nullptr;
  // A committed job waiting in the queue goes first; paused or draining, nothing starts.
  if (stopping_ || paused_ || draining_ || !queue_.empty()) return nullptr;
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

void Scheduler::YieldFollowersLocked(bool all) {
  for (WorkerSlot& slot : worker_slots_) {
    if (slot.feed == nullptr || slot.feed->end() != UploadFeed::End::kNone) continue;
    slot.feed->Finish(UploadFeed::End::kYielded);
    if (!all) return;
  }
}

void Scheduler::FollowUpload(size_t index, const std::string& id,
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
  JobTable::Ticket started = 0;
  const char* outcome = "given_up";
  {
    WatcherFlushes flushes;
    absl::MutexLock lock(&mu_);
    WorkerSlot& slot = worker_slots_[index];
    slot.feed.reset();
    auto it = table_.records().find(id);
    if (it != table_.records().end()) {
      JobRecord& record = it->second;
      record.feed.reset();
      const bool held = record.held_for_follower;
      record.held_for_follower = false;
      if (held && record.job.state() == pb::JOB_STATE_QUEUED) {
        if (volume.ok() && !stopping_ && !paused_ && !draining_) {
          cancel = StartRunLocked({index}, record, flushes);
          started = record.last_ticket;
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
  if (cancel != nullptr) {
    table_.WaitDurable(started).IgnoreError();
    RunJob({index}, id, std::move(job), std::move(cancel), std::move(*volume));
  }
}

void Scheduler::RunJob(const std::vector<size_t>& devices, const std::string& id,
                       std::shared_ptr<const ValidatedJob> job,
                       std::shared_ptr<std::atomic<bool>> cancel,
                       std::optional<core::Array3D> volume) {
  const size_t index = devices.front();  // this thread's worker
  // The record says RUNNING (durably, see WorkerLoop); a fatal signal from here on names
  // this job in the crash log.
  ScopedRunMark mark(id);
  if (!options_.crash_on_job_name_for_testing.empty()) {
    std::string name;
    {
      absl::MutexLock lock(&mu_);
      name = table_.records().at(id).job.spec().name();
    }
    if (name == options_.crash_on_job_name_for_testing) {
      throw std::length_error("a job named to crash tomod (--testing_crash_on_job_name)");
    }
  }
  core::RunContext context;
  context.is_cancelled = [cancel] { return cancel->load(std::memory_order_relaxed); };
  // Each device runs its share within the budget: the least free memory among them.
  uint64_t device_free = 0;
  std::vector<core::Backend*> backends;
  for (size_t d : devices) {
    const uint64_t free_bytes = DeviceFreeBytes(options_.devices[d]);
    if (free_bytes > 0 && (device_free == 0 || free_bytes < device_free)) device_free = free_bytes;
    backends.push_back(backends_[d].get());
  }
  context.memory_budget_bytes = EffectiveMemoryBudget(
      job->memory_budget_bytes, options_.memory_budget_bytes, device_free);
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
  // one runs: under the lock, so that a cancel of that job, which drops its input, cannot
  // come in between.
  auto prefetch_next = [this, index] {
    if (prefetcher_ == nullptr) return;
    absl::MutexLock lock(&mu_);
    if (stopping_ || paused_ || draining_) return;
    prefetcher_->PrefetchNext(
        index, queue_,
        [this](const std::string& next_id)
            ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> std::optional<PrefetchJob> {
              auto it = table_.records().find(next_id);
              if (it == table_.records().end() || it->second.validated == nullptr) {
                return std::nullopt;
              }
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
                         spool_.ResultsPartialDir(id), backends, registry_,
                         context, share_volume);
  }
  if (results.ok() && !cancel->load()) {
    absl::Status published = spool_.PublishResults(id);
    if (!published.ok()) results = published;
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);

  bool remove_results = false;
  {
    WatcherFlushes flushes;
    absl::MutexLock lock(&mu_);
    JobRecord& record = table_.records().at(id);  // a RUNNING job cannot be deleted
    // Fetches that hold the volume keep it; from the commit on, FindResult gives the file.
    record.being_written.reset();
    --running_;
    for (size_t d : devices) worker_slots_[d].busy = false;
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
      next.clear_devices();
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
      admission_.AddResultsLocked(record, bytes);
      message = absl::StrFormat("succeeded in %.3f s", seconds);
    } else {
      next.set_state(pb::JOB_STATE_FAILED);
      next.set_error(StatusText(results.status()));
      message = absl::StrCat("failed: ", next.error());
      remove_results = true;
    }
    table_.Commit(record, std::move(next), message, JobTable::Durability::kPersist, flushes);
    record.cancel.reset();  // after the commit, which counts the run as this process's
  }
  if (remove_results) {
    std::filesystem::remove_all(spool_.ResultsPartialDir(id), ignored);
    std::filesystem::remove_all(spool_.ResultsDir(id), ignored);
  }
}

void Scheduler::ShareVolumeBeingWritten(const std::string& id,
                                        std::shared_ptr<const core::Array3D> volume) {
  {
    absl::MutexLock lock(&mu_);
    auto it = table_.records().find(id);
    if (it != table_.records().end() && it->second.job.state() == pb::JOB_STATE_RUNNING) {
      it->second.being_written = std::move(volume);
    }
  }
  if (options_.before_writing_results) options_.before_writing_results(id);
}

void Scheduler::OnProgress(const std::string& id, const core::ProgressUpdate& update) {
  WatcherFlushes flushes;
  absl::MutexLock lock(&mu_);
  auto it = table_.records().find(id);
  if (it == table_.records().end() || it->second.job.state() != pb::JOB_STATE_RUNNING) return;
  JobRecord& record = it->second;
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
  table_.Commit(record, std::move(next), update.note, JobTable::Durability::kMemoryOnly,
                flushes);
}

}  // namespace tomo::server
