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
// The parts (one folder, one mutex): the job table (job_table.h: the records, the single
// commit point, the watchers), admission (admission.h: validation, limits, the spool's
// accounting), the scheduler (scheduler.h: the queue, the workers, following uploads,
// reading ahead), recovery (recovery.h) and retention (retention.h). JobManager ties them
// together and owns the uploads' way in and a job's way out (cancel, delete).
//
// Durability: the records live in a JobStore (SQLite at <spool>/tomod.db by default). Every
// state change goes through JobTable::Commit, whose write a writer thread makes durable
// outside the table's lock (many jobs' changes in one fsync); watchers get a change's event
// only once it is durable, and a Submit reply only once its QUEUED record is (JobTable
// explains). Progress steps are not written (a run that a crash interrupts starts again
// from the beginning anyway). Start() rebuilds the jobs from the store (recovery.h).
//
// Tenants: a job belongs to BeginUpload's tenant (Job.tenant, persisted in the record);
// idempotency keys are unique within a tenant (another tenant's key is another key), and
// per-tenant quotas bound a tenant's unfinished jobs and spool bytes (admission.h). Who may
// see which job is the service's business (security/principal.h); ListJobs can list one
// tenant's.
//
// Idempotency: a spec with an idempotency_key that a committed job (of the same tenant) has (also one committed
// before a restart) creates nothing: BeginUpload returns an Upload that is already done
// (Upload::existing_job()); a different spec with that key is ALREADY_EXISTS. Two uploads
// with one key may run at once: the first to commit wins, the other is removed and answers
// with the winner. A key is free again once its job is deleted.
//
// Retention (retention.h): with result_ttl > 0, finished jobs are deleted that long after
// they ended. Admission (admission.h): the spool's limits; a database write that fails on a
// full disk is tried again after free_emergency_space.
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
// JobStore's errors when the database cannot be written: for a Submit the job is then not
// made; a cancel or a delete that cannot be recorded is made in memory only (after a
// restart the job is what the store last held, and a deleted job's files stay).
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

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
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
#include "runner/job_spec.h"
#include "server/jobs/admission.h"
#include "server/jobs/job_manager_options.h"
#include "server/jobs/job_table.h"
#include "server/jobs/retention.h"
#include "server/jobs/scheduler.h"
#include "server/storage/spool.h"
#include "server/uploads/upload_stream.h"
#include "transfer/chunk_writer.h"
#include "transfer/mapped_file_writer.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

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
  // Bytes of job files in the spool and reserved for them (an upload in progress: what it
  // has reserved so far, admission.h): what max_spool_bytes bounds.
  uint64_t spool_used_bytes() const;
  const std::vector<core::DeviceInfo>& devices() const { return options_.devices; }
  // Jobs QUEUED or UPLOADING (what --max_queue_length bounds).
  size_t queue_length() const;
  // Devices running a job or following an upload (Scheduler::busy_devices).
  size_t busy_devices() const;
  // Watchers registered over all jobs.
  size_t watcher_count() const;
  // How many jobs are in each state (states without jobs left out).
  std::map<tomoserve::v1::JobState, size_t> JobCountsByState() const;

 private:
  friend class Upload;

  // Upload's end: QUEUED once durable; or, when another upload with the same idempotency
  // key committed first, this job removed (*superseded set; the caller removes the files)
  // and that job.
  absl::StatusOr<tomoserve::v1::Job> CommitUpload(const std::string& id, bool* superseded);
  void AbortUpload(const std::string& id, const absl::Status& reason);
  // An upload has received received_bytes: its input's reservation grown (Admission::
  // GrowUploadLocked); the bytes now reserved, or RESOURCE_EXHAUSTED.
  absl::StatusOr<uint64_t> GrowUpload(const std::string& id, uint64_t received_bytes);
  // The job of id once its newest change is durable (a retried Submit's answer).
  absl::StatusOr<tomoserve::v1::Job> DurableJob(const std::string& id);
  // CheckJobInputHeaders (runner/job_input.h) on an upload's spooled input.
  absl::Status CheckInputHeaders(const std::string& id) const;
  // The job table's change hook: admission's counts, metrics, the state-change log line.
  void OnChangeLocked(JobRecord& record, const tomoserve::v1::Job& next,
                      const std::string& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stage durations and state counts of a change from record.job to next, into metrics.
  void MeasureLocked(JobRecord& record, const tomoserve::v1::Job& next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What tenant's jobs take now (for admission's quotas): its records in the table and its
  // jobs admitted whose records are not made yet (admitting_).
  TenantUsage TenantUsageLocked(absl::string_view tenant) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One admitted job of tenant (of bytes) has its record now, or was given back.
  void ForgetAdmittingLocked(absl::string_view tenant, uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const JobManagerOptions options_;
  const Spool& spool_;
  const core::AlgorithmRegistry& registry_;
  JobTable table_;
  absl::Mutex& mu_;  // the table's: guards what follows and the parts' state
  Admission admission_;
  Scheduler scheduler_;
  Retention retention_;
  // Per tenant: jobs admitted whose records BeginUpload has not made yet.
  std::map<std::string, TenantUsage, std::less<>> admitting_ ABSL_GUARDED_BY(mu_);
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Non-empty once Drain() or Shutdown() began: why new uploads are refused.
  std::string drain_reason_ ABSL_GUARDED_BY(mu_);
  bool drain_cut_short_ ABSL_GUARDED_BY(mu_) = false;
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
  // Of the input, reserved on the spool so far (admission.h: it grows as bytes arrive).
  uint64_t reserved_bytes_ = 0;
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
