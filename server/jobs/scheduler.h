// Scheduler: which job runs where. It keeps the queue of committed jobs (priority, then
// FIFO) and one worker thread per device, each with its backend; a worker takes the
// highest-priority queued job, marks it RUNNING (counting Job.attempts), runs it
// (runner/job_execution.h) into results.partial/, publishes the results and ends the job
// SUCCEEDED, FAILED (the status as Job.error) or CANCELLED, or hands it back QUEUED when
// tomod stopped the run (not counted as an attempt).
//
// Reading ahead: while a worker runs a job, the input of the job the queue would hand out
// next is read into memory (InputPrefetcher).
//
// Reconstructing while uploading (upload_stream.h): when a new upload can be reconstructed
// while it arrives, the options allow it on some idle worker's device, no committed job
// waits in the queue and scheduling is neither paused nor draining, that worker follows
// the upload (AssignFollowerLocked). The commit then makes the job QUEUED but holds it for
// that worker, which marks it RUNNING and only writes the outputs. The worker lets go (the
// job then queues and runs from the spool as any other) when following fails, when a job
// is committed to the queue while no other worker is idle (a committed job never waits
// behind an upload), and on pause, drain and shutdown.
//
// Several devices for one job (multi_device_policy.h, tomod's --multi_device_jobs): when a
// worker takes a job that the policy lets take more devices, it also takes idle workers'
// slots (same device kind, in index order), marking them busy under the lock, and runs the
// job on all their backends from its own thread (ExecuteJob with several backends; Fdk
// drives each backend from a thread of its own). A lent worker's
// thread stays asleep: a busy slot takes no queued job and follows no upload. At the
// job's end (any end: success, failure, cancel, a stop that requeues it) the worker frees
// every slot it took, in the same commit. Job.devices lists them, Job.device the first.
// Uploads are followed by one device only.
//
// Early fetch: while a RUNNING job's worker writes the outputs, the reconstructed volume is
// the record's being_written (before the "write results" progress event).
//
// Progress steps are JobEvents in memory only (a run that a crash interrupts starts again
// from nothing), thinned to steps of JobManagerOptions::progress_step of the fraction.
//
// Locking: the queue, the slots and the flags are guarded by the job table's mutex; a run
// itself holds no lock. Every state change goes through the job table's Commit.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/algorithms/reconstruction.h"
#include "core/data/array3d.h"
#include "core/operators/backend.h"
#include "server/jobs/admission.h"
#include "server/jobs/input_prefetch.h"
#include "server/jobs/job_manager_options.h"
#include "server/jobs/job_queue.h"
#include "server/jobs/job_table.h"
#include "server/storage/spool.h"
#include "server/uploads/upload_stream.h"

namespace tomo::server {

class Scheduler {
 public:
  // Everything given must outlive the scheduler.
  Scheduler(const JobManagerOptions& options, const Spool& spool,
            const core::AlgorithmRegistry& registry, JobTable& table, Admission& admission);
  // Stop() and Join().
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // A backend for each device (a backend's error naming the device).
  absl::Status MakeBackends();
  // The workers (and the read-ahead) start taking jobs.
  void Start();
  // Stops the runs (their jobs handed back QUEUED unless a cancel was asked for) and makes
  // the workers end; Join() waits for them.
  void StopLocked(const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Join();

  // Queues a committed job (recovery: no follower to let go).
  void PushLocked(const std::string& id, int32_t priority) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues a committed job; when no worker is idle to take it, a follower lets go.
  void PushQueuedLocked(const std::string& id, int32_t priority)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A QUEUED job cancelled: out of the queue, its read-ahead input dropped, its follower
  // (if it was held for one) told.
  void RemoveLocked(JobRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new upload: sets an idle worker to follow it and returns the feed its writer reports
  // to, or null.
  std::shared_ptr<UploadFeed> AssignFollowerLocked(const std::string& id, JobRecord& record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the following of uploads: every follower (all) or the first one.
  void YieldFollowersLocked(bool all) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Paused or draining: no new job starts (running ones go on).
  void SetPausedLocked(bool paused) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetDrainingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  size_t queued() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.size(); }
  // Jobs RUNNING on a worker now.
  size_t running() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_; }
  // Devices running a job (their worker's own, or lent to a job of several devices) or
  // following an upload now.
  size_t busy_devices() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

 private:
  // A worker's state as the uploads and the queue see it.
  struct WorkerSlot {
    // Running a job (this worker's own, or one of another worker's that took this device
    // too), or following an upload.
    bool busy = false;
    std::string follow_id;  // the upload to follow, until the worker picks it up
    std::shared_ptr<UploadFeed> feed;  // while following
  };

  bool WorkerShouldWakeLocked(size_t index) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerLoop(size_t index);
  // The devices (worker indices) a job that worker index takes now runs on: index first,
  // then the idle ones the multi-device policy lets it take.
  std::vector<size_t> ChooseDevicesLocked(size_t index, const JobRecord& record) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the job RUNNING on devices (worker indices, the running worker's first; record
  // must be QUEUED and out of the queue), their slots busy; the run's cancel flag.
  std::shared_ptr<std::atomic<bool>> StartRunLocked(const std::vector<size_t>& devices,
                                                    JobRecord& record, WatcherFlushes& flushes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the job on devices (as StartRunLocked got them; the first is this thread's
  // worker) and frees their slots at its end. volume: the job's volume when a worker
  // reconstructed it while it was uploaded (only the outputs are written); else the job
  // runs from its input.
  void RunJob(const std::vector<size_t>& devices, const std::string& id,
              std::shared_ptr<const ValidatedJob> job, std::shared_ptr<std::atomic<bool>> cancel,
              std::optional<core::Array3D> volume = std::nullopt);
  // Worker index follows the upload of id, then runs the job, queues it or lets it go.
  void FollowUpload(size_t index, const std::string& id, std::shared_ptr<const ValidatedJob> job,
                    std::shared_ptr<UploadFeed> feed);
  void OnProgress(const std::string& id, const core::ProgressUpdate& update);
  // A run's ShareVolumeFn (job_execution.h): the volume becomes the record's being_written.
  void ShareVolumeBeingWritten(const std::string& id, std::shared_ptr<const core::Array3D> volume);

  const JobManagerOptions& options_;
  const Spool& spool_;
  const core::AlgorithmRegistry& registry_;
  JobTable& table_;
  Admission& admission_;
  absl::Mutex& mu_;  // the job table's
  std::vector<std::unique_ptr<core::Backend>> backends_;
  std::vector<std::thread> workers_;
  // Set by Start() when options_.prefetch_bytes > 0; thread-safe itself.
  std::unique_ptr<InputPrefetcher> prefetcher_;

  JobQueue queue_ ABSL_GUARDED_BY(mu_);
  // One per worker, sized by Start().
  std::vector<WorkerSlot> worker_slots_ ABSL_GUARDED_BY(mu_);
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tomo::server
