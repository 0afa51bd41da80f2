// JobManager: tomod's jobs from upload to deletion, the queue, and one worker thread per
// device. It knows nothing of gRPC: the service (reconstruction_service.h) maps its calls
// and statuses onto the wire.
//
// A job's way: BeginUpload() validates the spec before anything is stored and creates the
// job UPLOADING with a spool directory; Upload::Append() writes the projections to
// <spool>/jobs/<id>/input.bin; Upload::Commit() checks size and CRC-32, fsyncs the file and
// its directories and commits the job QUEUED. A worker takes the highest-priority queued
// job (FIFO within a priority), marks it RUNNING (counting Job.attempts), runs ExecuteJob()
// on its device into results.partial/, fsyncs and renames that to results/, and ends the
// job SUCCEEDED, FAILED (with the status as Job.error) or CANCELLED. An Upload that is
// destroyed or fails before its commit removes the job and its files.
//
// Early fetch: while a RUNNING job's worker writes the outputs, the reconstructed volume
// is shared (before the "write results" progress event) and FindResult of the raw result
// (volume.raw) returns it as ResultLocation::being_written, so that a fetch streams it from
// memory while the file is written; the fetch ends only when the job does (SUCCEEDED: the
// file is durable and its CRC-32 recorded). The record drops the volume when the run ends.
//
// Reconstructing while uploading (upload_stream.h): when BeginUpload creates a job that
// CanReconstructWhileUploading, the options allow it on some idle worker's device, no
// committed job waits in the queue and scheduling is neither paused nor draining, that
// worker follows the upload: it reads the views back as they reach the spool file and
// feeds them to the algorithm's view stream. The commit then makes the job QUEUED
// (durably) but keeps it out of the queue for that worker, which marks it RUNNING and only
// writes the outputs. The worker lets go (the job then queues and runs from the spool as
// any other) when following fails, when a job is committed to the queue while no other
// worker is idle (a committed job never waits behind an upload), and on pause, drain and
// shutdown; a cancel of the committed job ends it CANCELLED as usual.
//
// Durability: the records live in SQLite at <spool>/tomod.db (JobStore). Every state
// change goes through one place, CommitLocked(), which writes the record (fsynced) before
// any caller, Submit reply or watcher is told; progress steps are not written (a run that
// a crash interrupts starts again from the beginning anyway). Start() rebuilds the jobs
// from the database, which is the truth at start-up:
//   UPLOADING            removed with its files (nobody was answered);
//   QUEUED               queued again, in priority and creation order;
//   RUNNING              queued again while Job.attempts < max_attempts, else FAILED
//                        naming the attempts (a job that crashes tomod must not crash it
//                        forever); CANCELLED when a cancel had been asked for. When the
//                        crash log (options.crash_log_path) names the job whose run a
//                        fatal signal interrupted, only that job is charged the run: it
//                        ends FAILED as poison once each of its max_attempts runs crashed
//                        tomod, and the other RUNNING jobs are queued again with their
//                        attempt given back;
//   SUCCEEDED, FAILED,   kept as they were, results fetchable;
//   CANCELLED
// and removes job directories that have no record (leftovers of a crash).
//
// Tenants: a job belongs to BeginUpload's tenant (Job.tenant, persisted in the record);
// idempotency keys are unique within a tenant (another tenant's key is another key), and
// per-tenant quotas bound a tenant's unfinished jobs and spool bytes. Who may see which
// job is the service's business (security/principal.h); ListJobs can list one tenant's.
//
// Idempotency: a spec with an idempotency_key that a committed job (of the same tenant) has (also one committed
// before a restart) creates nothing: BeginUpload returns an Upload that is already done
// (Upload::existing_job()); a different spec with that key is ALREADY_EXISTS. Two uploads
// with one key may run at once: the first to commit wins, the other is removed and answers
// with the winner. A key is free again once its job is deleted.
//
// Retention: with result_ttl > 0, finished jobs are deleted (record, then files) that long
// after they ended, by a sweep every sweep interval and once at Start(). With
// max_spool_bytes > 0, an upload that would bring the spool's job files (uploads in
// progress counted at their full size, unfinished jobs with the bound of their outputs)
// over it is refused with RESOURCE_EXHAUSTED; so is one whose input and outputs do not fit
// the spool file system's free space less what accepted jobs will still write and
// min_free_spool_bytes. A database write that fails on a full disk is tried again after
// free_emergency_space (deletes, and the state changes of running jobs, go through).
//
// Stopping: Drain() (tomod's SIGTERM) refuses new uploads and lets the running jobs and
// the uploads in progress end for a while; Shutdown() then stops what still runs and hands
// those jobs back as QUEUED, durably and without counting the run as an attempt, so a
// stop never loses or ends an accepted job (only a cancel asked for ends it CANCELLED).
//
// Limits per client: BeginUpload's client (Job.client, persisted) is counted while its job
// is UPLOADING, QUEUED or RUNNING; --max_jobs_per_client bounds that count.
//
// Observability: every state change is logged as a structured "job_state" event with the
// job's id (log.h) and counted in JobManagerOptions::metrics (submissions, outcomes, the
// upload / queue-wait / run durations, requeues).
//
// Every state change and progress step is a JobEvent with a strictly increasing sequence
// per job (continued across restarts from the last durable event; progress events of a
// run that a crash interrupted may be numbered again); watchers (JobWatcher) get the
// current state first and then every event in order. Progress events are thinned to
// steps of JobManagerOptions::progress_step of the fraction.
//
// Thread safety: all methods are thread-safe. Errors: NOT_FOUND for unknown ids (naming
// the id), FAILED_PRECONDITION for operations the job's state forbids (naming the state),
// INVALID_ARGUMENT / RESOURCE_EXHAUSTED from validation and limits, ALREADY_EXISTS for a
// reused idempotency key, UNAVAILABLE while draining or shutting down (naming why), the
// JobStore's errors when the database cannot be written (the change is then not made).
//
//   JobManager manager(options, *spool, registry);
//   TOMO_RETURN_IF_ERROR(manager.Start());   // opens <spool>/tomod.db and recovers
//   TOMO_ASSIGN_OR_RETURN(std::unique_ptr<Upload> upload, manager.BeginUpload(spec));
//   if (!upload->existing_job()) TOMO_RETURN_IF_ERROR(upload->Append(bytes));
//   TOMO_ASSIGN_OR_RETURN(tomoserve::v1::Job job, upload->Commit(bytes.size(), crc));
//   ...
//   manager.Drain(absl::Seconds(30), "tomod is draining (SIGTERM)");
//   manager.Shutdown();   // requeues the jobs still running, joins the workers
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/algorithms/reconstruction.h"
#include "core/data/array3d.h"
#include "core/devices/devices.h"
#include "core/operators/backend.h"
#include "transfer/chunk_writer.h"
#include "transfer/mapped_file_writer.h"
#include "server/jobs/input_prefetch.h"
#include "server/jobs/job_queue.h"
#include "runner/job_spec.h"
#include "server/storage/job_store.h"
#include "server/storage/spool.h"
#include "server/telemetry/tomod_metrics.h"
#include "server/uploads/upload_stream.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

// Receives one job's events. Enqueue() and Close() are called with the manager's lock held
// and in event order; they must only record what they are given (no blocking, no RPC
// calls, no calls back into the manager). When one returns true, the manager calls
// Flush() once, after releasing its lock; until that Flush() has returned, the watcher
// must stay alive (a watcher returns true only when it is idle, so this is the token
// that lets exactly one party drive its writes).
class JobWatcher {
 public:
  virtual ~JobWatcher() = default;
  // An event; after a terminal state (SUCCEEDED, FAILED, CANCELLED) no more calls come.
  virtual bool Enqueue(const tomoserve::v1::JobEvent& event) = 0;
  // The watch ends without a terminal event: the job was removed, or tomod stops.
  virtual bool Close(const absl::Status& status) = 0;
  virtual void Flush() = 0;
};

// Which workers may reconstruct a job while it is uploaded (tomod's
// --reconstruct_while_uploading): none, those whose backend sends the data to a device
// (where compute would otherwise wait for the whole upload), or every worker (the CPU's
// stream only collects the views; for tests of the path without a GPU).
enum class WhileUploading { kNever, kOnDevices, kOnAnyWorker };

struct JobManagerOptions {
  ServerLimits limits;
  // One worker thread each, in this order.
  std::vector<core::DeviceInfo> devices;
  // Smallest change of Progress.fraction that makes a progress event.
  double progress_step = 0.01;
  // tomod's --memory_budget_bytes (0: none). A run's RunContext.memory_budget_bytes is the
  // smallest non-zero of the job's JobSpec.memory_budget_bytes, this and the GPU's free
  // memory when the job starts (EffectiveMemoryBudget; the CPU has no limit of its own).
  uint64_t memory_budget_bytes = 0;
  // tomod's --max_attempts: most runs of one job. A run interrupted by a crash of tomod
  // counts; after the last one the job ends FAILED at the next start. At least 1.
  uint32_t max_attempts = 3;
  // tomod's --result_ttl: finished jobs are deleted this long after they ended; zero: never.
  absl::Duration result_ttl = absl::ZeroDuration();
  // How often the retention sweep runs; zero: result_ttl / 10, within [100 ms, 1 min].
  absl::Duration sweep_interval = absl::ZeroDuration();
  // tomod's --tenant_max_unfinished_jobs and --tenant_max_spool_bytes: per tenant
  // (Job.tenant), most jobs uploading, queued or running, and most spool bytes its jobs
  // hold or reserve (Record::disk_bytes, as max_spool_bytes counts); 0: no limit.
  uint32_t tenant_max_unfinished_jobs = 0;
  uint64_t tenant_max_spool_bytes = 0;
  // tomod's --max_spool_bytes: bound on the spool's job files for new uploads; 0: none.
  // Admission counts each job at its input plus the bound of its outputs (disk_space.h).
  uint64_t max_spool_bytes = 0;
  // tomod's --min_free_spool_bytes: what admission leaves free on the spool's file system
  // (for the job database and the crash log) beyond what accepted jobs will still write;
  // a job that would go below it is RESOURCE_EXHAUSTED naming its need and the free space.
  uint64_t min_free_spool_bytes = 64ull << 20;
  // Called (from any thread, maybe with the manager's lock held: it must not call back
  // into the manager) when a write of the job database failed for want of space; returns
  // true when it freed some (tomod: its reserve file), and the write is tried once more.
  // Empty: no retry.
  std::function<bool()> free_emergency_space;
  // tomod's --prefetch_bytes: while a worker runs a job, the input of the job the queue
  // would hand out next is read into memory (InputPrefetcher, at most one per worker), up
  // to this many bytes over all workers; 0: no reading ahead.
  uint64_t prefetch_bytes = kDefaultPrefetchBytes;
  // Which workers may follow an upload (see above).
  WhileUploading reconstruct_while_uploading = WhileUploading::kOnDevices;
  // Where state changes, stage durations and requeues are counted; null: nowhere. Not
  // owned; must outlive the manager.
  TomodMetrics* metrics = nullptr;
  // Where fatal signals record the job whose run they interrupted (crash_log.h; tomod:
  // <spool>/crashes); empty: no record and no handler. Start() reads it: a job that
  // crashed the process is charged the run (after max_attempts such runs it ends FAILED as
  // poison), the other jobs that crash interrupted are queued again without it.
  std::string crash_log_path;
  // For tests of that: a job with this JobSpec.name throws from its worker (an uncaught
  // exception aborts tomod, as the reported std::length_error did); empty: never.
  std::string crash_on_job_name_for_testing;
  // For tests: called on the worker's thread with the job's id once its volume is shared
  // for early fetch, before the "write results" event and before any output is written.
  std::function<void(const std::string& job_id)> before_writing_results;
};

bool IsTerminal(tomoserve::v1::JobState state);


class Upload;

class JobManager {
 public:
  // spool and registry must outlive the manager.
  JobManager(JobManagerOptions options, const Spool& spool,
             const core::AlgorithmRegistry& registry);
  // Shutdown().
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Makes a backend for each device, opens the job database and recovers its jobs (see
  // above), sweeps expired jobs and starts the workers. FAILED_PRECONDITION without devices,
  // INVALID_ARGUMENT for max_attempts 0; a backend's error naming the device; the
  // JobStore's errors.
  absl::Status Start();
  // The first half of a graceful stop (tomod's SIGTERM): new uploads are refused with
  // UNAVAILABLE naming reason, workers start no new job, and it waits until the running
  // jobs have ended and the uploads in progress have committed or failed, or timeout has
  // passed, or CutDrainShort() is called. Queued jobs stay queued. Shutdown() must follow.
  void Drain(absl::Duration timeout, absl::string_view reason);
  // Ends a Drain() that is waiting now (e.g. a second SIGTERM).
  void CutDrainShort();
  // Refuses new uploads; stops the running jobs and hands them back durably as QUEUED
  // (attempts not counted: the job runs again after the restart, nothing accepted is
  // lost), except those whose cancel was requested, which end CANCELLED; joins the
  // workers and closes every watch with UNAVAILABLE. Idempotent.
  void Shutdown();

  // Validates spec (INVALID_ARGUMENT / RESOURCE_EXHAUSTED); returns a finished Upload
  // holding the job of spec.idempotency_key when one is committed (ALREADY_EXISTS when its
  // spec differs); checks the queue length (RESOURCE_EXHAUSTED naming --max_queue_length)
  // and the spool's size (RESOURCE_EXHAUSTED naming --max_spool_bytes and the usage) and
  // creates the job UPLOADING.
  // client (Job.client; empty: not counted) is checked against limits.max_jobs_per_client
  // (RESOURCE_EXHAUSTED naming --max_jobs_per_client, the client and its count). tenant
  // (Job.tenant; empty: the default tenant) owns the job: its idempotency key is looked up
  // within the tenant, and the tenant quotas apply (RESOURCE_EXHAUSTED naming the quota,
  // the tenant's usage and the limit).
  absl::StatusOr<std::unique_ptr<Upload>> BeginUpload(const tomoserve::v1::JobSpec& spec,
                                                      absl::string_view client = "",
                                                      absl::string_view tenant = "");

  absl::StatusOr<tomoserve::v1::Job> GetJob(absl::string_view id) const;
  // Oldest first. INVALID_ARGUMENT for page_size > 1000, a token not from ListJobs or a
  // state number that is not a JobState (UNSPECIFIED included), naming it.
  // only_tenant: the jobs of that tenant alone (Job.tenant); nullopt: every job.
  absl::StatusOr<tomoserve::v1::ListJobsResponse> ListJobs(
      const tomoserve::v1::ListJobsRequest& request,
      const std::optional<std::string>& only_tenant = std::nullopt) const;
  // QUEUED: CANCELLED at once. RUNNING: the run is asked to stop and ends CANCELLED; the
  // job is returned still RUNNING. CANCELLED: returned as is. UPLOADING, SUCCEEDED,
  // FAILED: FAILED_PRECONDITION.
  absl::StatusOr<tomoserve::v1::Job> CancelJob(absl::string_view id);
  // Removes a finished job: its record (durably), then its spool directory.
  // FAILED_PRECONDITION while active.
  absl::Status DeleteJob(absl::string_view id);
  // Deletes the finished jobs that ended result_ttl ago or earlier; returns how many. Runs
  // periodically on its own thread; public for tests.
  size_t SweepExpiredJobs();

  // Registers watcher and gives it the job's latest event at once (through Enqueue), then
  // every later one. NOT_FOUND for an unknown id (watcher not called).
  absl::Status Watch(absl::string_view id, JobWatcher* watcher);
  // After Unwatch returns, the manager no longer calls watcher. Harmless when not watching.
  void Unwatch(absl::string_view id, JobWatcher* watcher);

  struct ResultLocation {
    // The published file; empty while being_written is set.
    std::string path;
    // Name, format and size; the CRC-32 only once the job SUCCEEDED.
    tomoserve::v1::ResultFile file;
    // Set while the job is RUNNING and its worker writes the outputs, for the raw result
    // (OUTPUT_FORMAT_RAW_FLOAT32's volume file) only: the volume whose float32 values are
    // the file's bytes. The file is durable once the job is SUCCEEDED (Watch tells); any
    // other end means these bytes are no result.
    std::shared_ptr<const core::Array3D> being_written;
  };
  // SUCCEEDED: the result file (name empty: the first result; NOT_FOUND for an unknown
  // name, listing the job's result names). RUNNING while its outputs are written, for the
  // raw result (by name, or the first result when that is it): the volume being written.
  // Else FAILED_PRECONDITION naming the state.
  absl::StatusOr<ResultLocation> FindResult(absl::string_view id, absl::string_view name) const;

  // While paused, workers take no new jobs (running ones go on). For maintenance and tests.
  void SetSchedulingPaused(bool paused);

  const ServerLimits& limits() const { return options_.limits; }
  const JobManagerOptions& options() const { return options_; }
  // Bytes of job files in the spool, uploads in progress counted at their full size: what
  // max_spool_bytes bounds.
  uint64_t spool_used_bytes() const;
  const std::vector<core::DeviceInfo>& devices() const { return options_.devices; }
  // Jobs QUEUED or UPLOADING (what --max_queue_length bounds).
  size_t queue_length() const;
  // Watchers registered over all jobs.
  size_t watcher_count() const;
  // How many jobs are in each state (states without jobs left out).
  std::map<tomoserve::v1::JobState, size_t> JobCountsByState() const;

 private:
  friend class Upload;
  class Flushes;
  struct Record {
    tomoserve::v1::Job job;
    std::shared_ptr<const ValidatedJob> validated;
    tomoserve::v1::JobEvent last_event;
    std::vector<JobWatcher*> watchers;
    // Set while RUNNING; the run polls it.
    std::shared_ptr<std::atomic<bool>> cancel;
    std::string cancel_reason;
    // Persisted: a crash during the cancel must not make the job run again.
    bool cancel_requested = false;
    // Set when Shutdown() stops the run: the job goes back to QUEUED, not CANCELLED.
    bool requeue_on_stop = false;
    // When it last became QUEUED in this process (start of its queue wait).
    absl::Time queued_at = absl::InfinitePast();
    // The job's share of spool_bytes_: its files, or while UPLOADING the full input size,
    // plus reserved_output_bytes until the job ends.
    uint64_t disk_bytes = 0;
    // Admission's bound of the outputs (disk_space.h), reserved from admission until the
    // job ends (then replaced by the results' real size); part of pending_bytes_ too.
    uint64_t reserved_output_bytes = 0;
    // The input's bytes still to come while UPLOADING (part of pending_bytes_).
    uint64_t pending_input_bytes = 0;
    // Set while a worker follows the upload (and, once committed, holds the job out of
    // the queue for that worker).
    std::shared_ptr<UploadFeed> feed;
    // QUEUED but not in queue_: committed while followed; the follower runs it or queues it.
    bool held_for_follower = false;
    // Set while RUNNING and the worker writes the outputs (early fetch, see above).
    std::shared_ptr<const core::Array3D> being_written;
  };
  // A worker's state as BeginUpload and the queue see it.
  struct WorkerSlot {
    bool busy = false;  // running a job or following an upload
    std::string follow_id;  // the upload to follow, until the worker picks it up
    std::shared_ptr<UploadFeed> feed;  // while following
  };
  using RecordMap = std::map<std::string, Record, std::less<>>;
  enum class Durability { kPersist, kMemoryOnly };

  // Upload's end: QUEUED; or, when another upload with the same idempotency key committed
  // first, this job removed (*superseded set; the caller removes the files) and that job.
  absl::StatusOr<tomoserve::v1::Job> CommitUpload(const std::string& id, bool* superseded);
  void AbortUpload(const std::string& id, const absl::Status& reason);

  // A terminal job's output reservation, replaced by its files (ends the job's share of
  // pending_bytes_); a committed upload's input, now on disk.
  void ReleaseReservationLocked(Record& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The store's change, retried once after options_.free_emergency_space when it failed
  // for want of disk space (RESOURCE_EXHAUSTED).
  absl::Status StoreWithRoom(const std::function<absl::Status()>& change) const;
  // Opens the store and rebuilds jobs_, queue_ and the spool accounting from it.
  absl::Status Recover();
  // The single point where a record changes: writes next to the store (kPersist), then
  // makes it the record's job and sends it as an event to the watchers. When the store
  // fails, nothing changes and its error is returned.
  absl::Status CommitLocked(Record& record, tomoserve::v1::Job next, const std::string& message,
                            Durability durability, Flushes& flushes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // For changes that must happen even when the store fails (a run's end): on a store
  // error, logs it and commits in memory only; after a restart the job is what the store
  // last held.
  void CommitOrLogLocked(Record& record, tomoserve::v1::Job next, const std::string& message,
                         Flushes& flushes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stage durations and state counts of a change from record.job to next, into metrics.
  void MeasureLocked(Record& record, const tomoserve::v1::Job& next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RESOURCE_EXHAUSTED when a job of need_bytes would take tenant over
  // tenant_max_unfinished_jobs or tenant_max_spool_bytes (counted over jobs_).
  absl::Status CheckTenantQuotasLocked(absl::string_view tenant, uint64_t need_bytes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps client_jobs_ as a job of that client changes from one state to another.
  void CountClientLocked(const std::string& client, tomoserve::v1::JobState from,
                         tomoserve::v1::JobState to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets a record: its bytes, its idempotency key, the entry. Not the store, not files.
  RecordMap::iterator EraseLocked(RecordMap::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SweepLoop();
  absl::StatusOr<Record*> FindLocked(absl::string_view id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<const Record*> FindLocked(absl::string_view id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WorkerShouldWakeLocked(size_t index) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerLoop(size_t index);
  // Marks the job RUNNING on worker index (record must be QUEUED and out of queue_); the
  // run's cancel flag.
  std::shared_ptr<std::atomic<bool>> StartRunLocked(size_t index, Record& record,
                                                    Flushes& flushes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // volume: the job's volume when a worker reconstructed it while it was uploaded (only
  // the outputs are written); else the job runs from its input.
  void RunJob(size_t index, const std::string& id, std::shared_ptr<const ValidatedJob> job,
              std::shared_ptr<std::atomic<bool>> cancel,
              std::optional<core::Array3D> volume = std::nullopt);
  // A new upload: sets an idle worker to follow it (see above) and returns the feed its
  // writer reports to, or null.
  std::shared_ptr<UploadFeed> AssignFollowerLocked(const std::string& id, Record& record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Worker index follows the upload of id, then runs the job, queues it or lets it go.
  void FollowUpload(size_t index, const std::string& id, std::shared_ptr<const ValidatedJob> job,
                    std::shared_ptr<UploadFeed> feed);
  // Queues a committed job; when no worker is idle to take it, a follower lets go.
  void PushQueuedLocked(const std::string& id, int32_t priority)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the following of uploads: every follower (all) or the first one.
  void YieldFollowersLocked(bool all) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnProgress(const std::string& id, const core::ProgressUpdate& update);
  // A run's ShareVolumeFn (job_execution.h): the volume becomes the record's being_written.
  void ShareVolumeBeingWritten(const std::string& id, std::shared_ptr<const core::Array3D> volume);

  const JobManagerOptions options_;
  const Spool& spool_;
  // RESOURCE_EXHAUSTED when the job's least device memory (Algorithm::MinimumDeviceBytes)
  // exceeds the budget it would have on every worker's device.
  absl::Status CheckFitsSomeDevice(const ValidatedJob& job) const;
  // CheckJobInputHeaders (runner/job_input.h) on an upload's spooled input.
  absl::Status CheckInputHeaders(const std::string& id) const;

  const core::AlgorithmRegistry& registry_;
  std::vector<std::unique_ptr<core::Backend>> backends_;
  std::vector<std::thread> workers_;
  // Set by Start() when options_.prefetch_bytes > 0; thread-safe itself.
  std::unique_ptr<InputPrefetcher> prefetcher_;
  std::thread sweeper_;
  // Set by Start(); thread-safe itself.
  std::unique_ptr<JobStore> store_;

  mutable absl::Mutex mu_;
  // Ordered by id, that is by creation time.
  RecordMap jobs_ ABSL_GUARDED_BY(mu_);
  // Scoped idempotency key (tenant_keys.h) -> id of the committed job that has it.
  std::map<std::string, std::string, std::less<>> keys_ ABSL_GUARDED_BY(mu_);
  // Client -> its jobs UPLOADING, QUEUED or RUNNING (what --max_jobs_per_client bounds);
  // kept by CommitLocked and EraseLocked, recounted by Recover.
  std::map<std::string, size_t, std::less<>> client_jobs_ ABSL_GUARDED_BY(mu_);
  // Sum of Record::disk_bytes.
  uint64_t spool_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Bytes accepted jobs will still write (Record::pending_input_bytes and
  // reserved_output_bytes): the free space admission must leave them.
  uint64_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  JobQueue queue_ ABSL_GUARDED_BY(mu_);
  size_t uploading_ ABSL_GUARDED_BY(mu_) = 0;
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Non-empty once Drain() or Shutdown() began: why new uploads are refused.
  std::string drain_reason_ ABSL_GUARDED_BY(mu_);
  bool drain_cut_short_ ABSL_GUARDED_BY(mu_) = false;
  // Jobs RUNNING on a worker now.
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  // One per worker, sized by Start().
  std::vector<WorkerSlot> worker_slots_ ABSL_GUARDED_BY(mu_);
  bool watches_closed_ ABSL_GUARDED_BY(mu_) = false;
};

// One job's upload: bytes go to the spool file, counted and checksummed on a
// transfer::ChunkWriter's threads, so the Submit stream's thread only queues them; a large
// input on a tmpfs spool goes through a transfer::MappedFileWriter instead (8 threads
// copying into a mapping: tmpfs serialises one file's write()s, and one writer thread held
// uploads near 2.3 GB/s on the H100 machine, bench/NOTES.md v0.11). Any
// error from Append or Commit, and destruction before a successful Commit, remove the job
// and its files. Append from one thread (the Submit stream's); CommitAsync's callback runs
// on the writer's thread, after the fsync.
class Upload {
 public:
  ~Upload();
  Upload(const Upload&) = delete;
  Upload& operator=(const Upload&) = delete;

  const std::string& job_id() const { return id_; }
  uint64_t expected_bytes() const { return expected_bytes_; }
  uint64_t received_bytes() const { return received_bytes_; }
  // Set when the spec's idempotency_key names a job that tomod already has: there is
  // nothing to upload; Append discards its data and Commit returns this job.
  const std::optional<tomoserve::v1::Job>& existing_job() const { return existing_; }
  // The input goes to the spool through a mapping copied by several threads (a large
  // input on tmpfs), not one writer thread.
  bool writes_through_mapping() const { return mapped_ != nullptr; }

  // Called (on the writer's thread) when a full queue has room again; set before Append.
  void SetOnRoom(std::function<void()> on_room) { on_room_ = std::move(on_room); }
  // Queues data for the spool file. true: append more now; false: the queue is full,
  // append again after the on_room callback. INVALID_ARGUMENT when the bytes would exceed
  // input.size_bytes; RESOURCE_EXHAUSTED when the spool's disk is full, INTERNAL for
  // other write errors (both from an earlier chunk, naming the file).
  absl::StatusOr<bool> Append(std::string data);
  // INVALID_ARGUMENT unless total_bytes == input.size_bytes == bytes received and crc32 is
  // their CRC-32, naming both values; then, once the file is written, fsync (file and
  // directories) and the job committed QUEUED, done gets the job (or the job an upload
  // with the same idempotency key committed first; this one is then removed), on the
  // writer's thread. done may destroy this Upload. last_check (may be empty) runs on that
  // thread just before the job becomes QUEUED; an error from it removes the job instead
  // (the Submit stream saw a message after upload_end).
  void CommitAsync(uint64_t total_bytes, uint32_t crc32,
                   std::function<void(absl::StatusOr<tomoserve::v1::Job>)> done,
                   std::function<absl::Status()> last_check = {});
  // The same, waiting for the result (for callers that may block: tests, tools).
  absl::StatusOr<tomoserve::v1::Job> Commit(uint64_t total_bytes, uint32_t crc32);
  // Removes the job and its files (no-op after Commit or an earlier abort).
  void Abort(const absl::Status& reason);

 private:
  friend class JobManager;
  // feed: given each chunk received and told of the bytes written as they land (a worker
  // follows the upload); may be null.
  Upload(JobManager* manager, std::string id, uint64_t expected_bytes, AppendFile file,
         std::shared_ptr<UploadFeed> feed);
  // An upload that is done already: existing is the job of the spec's idempotency key.
  Upload(JobManager* manager, tomoserve::v1::Job existing)
      : manager_(manager), id_(existing.id()), expected_bytes_(existing.input_bytes()),
        existing_(std::move(existing)), done_(true) {}
  // After the file is written and fsynced: checks, directory sync, the commit.
  absl::StatusOr<tomoserve::v1::Job> CommitWritten(
      absl::StatusOr<transfer::ChunkWriter::Summary> written, uint32_t crc32,
      const std::function<absl::Status()>& last_check = {});

  JobManager* manager_;
  std::string id_;
  uint64_t expected_bytes_;
  uint64_t received_bytes_ = 0;
  std::function<void()> on_room_;
  std::shared_ptr<UploadFeed> feed_;  // may be null
  // One of them (none for an existing job's Upload).
  std::unique_ptr<transfer::ChunkWriter> writer_;
  std::unique_ptr<transfer::MappedFileWriter> mapped_;
  absl::Status writer_error_;  // the MappedFileWriter could not be made
  std::optional<tomoserve::v1::Job> existing_;
  bool done_ = false;
};

}  // namespace tomo::server
