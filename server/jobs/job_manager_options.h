// JobManagerOptions: what tomod's flags set for its job manager (job_manager.h) and the
// parts it is made of (admission, scheduler, retention, recovery).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/devices/devices.h"
#include "runner/job_spec.h"
#include "server/jobs/input_prefetch.h"
#include "server/jobs/multi_device_policy.h"
#include "server/storage/job_store.h"
#include "server/telemetry/tomod_metrics.h"

namespace tomo::server {

// Which workers may reconstruct a job while it is uploaded (tomod's
// --reconstruct_while_uploading): none, those whose backend sends the data to a device
// (where compute would otherwise wait for the whole upload), or every worker (the CPU's
// stream only collects the views; for tests of the path without a GPU).
enum class WhileUploading { kNever, kOnDevices, kOnAnyWorker };

struct JobManagerOptions {
  ServerLimits limits;
  // One worker thread each, in this order.
  std::vector<core::DeviceInfo> devices;
  // tomod's --multi_device_jobs and --multi_device_min_voxels: whether a large job may
  // also take other idle devices (multi_device_policy.h); off by default.
  MultiDevicePolicy multi_device;
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
  // hold or reserve (JobRecord::disk_bytes, as max_spool_bytes counts); 0: no limit.
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
  // tomod's --max_uploads_per_client: uploads in progress one client may have (counted by
  // BeginUpload's client, as --max_jobs_per_client); 0: no limit.
  uint32_t max_uploads_per_client = 16;
  // tomod's --upload_idle_timeout: a Submit or SubmitStripe stream whose client sends
  // nothing for this long while tomod waits for its next message is ended and its job
  // removed (uploads/idle_uploads.h); zero: never.
  absl::Duration upload_idle_timeout = absl::Minutes(2);
  // Which workers may follow an upload (see above).
  WhileUploading reconstruct_while_uploading = WhileUploading::kOnDevices;
  // Opens the job store at a path (<spool>/tomod.db); empty: SQLite (SqliteJobStore). A
  // store shared by several daemons, or a slow one for tests, comes in here.
  std::function<absl::StatusOr<std::unique_ptr<JobStore>>(const std::string& path)> open_store;
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

}  // namespace tomo::server
