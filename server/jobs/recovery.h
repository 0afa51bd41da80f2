// Recovery: tomod's jobs at start-up, rebuilt from the job store, which is the truth then.
//   UPLOADING            removed with its files (nobody was answered);
//   QUEUED               queued again, in priority and creation order;
//   RUNNING              queued again while Job.attempts < max_attempts, else FAILED
//                        naming the attempts (a job that crashes tomod must not crash it
//                        forever); CANCELLED when a cancel had been asked for. When the
//                        crash log names the job whose run a fatal signal interrupted, only
//                        that job is charged the run: it ends FAILED as poison once each of
//                        its max_attempts runs crashed tomod, and the other RUNNING jobs
//                        are queued again with their attempt given back;
//   SUCCEEDED, FAILED,   kept as they were, results fetchable;
//   CANCELLED
// A QUEUED or RUNNING job whose spec this tomod's limits refuse ends FAILED. Records with
// an invalid id are dropped; job directories without a record are removed (leftovers of a
// crash), as are the partial results of interrupted runs. Every change is written to the
// store before RecoverJobs returns; the crash log keeps the crashes of jobs that will run
// again.
//
// Not thread-safe (start-up, before anything else uses the store or the spool).
//
//   TOMO_ASSIGN_OR_RETURN(RecoveredJobs recovered, RecoverJobs(*store, spool, options));
//   for (RecoveredJob& job : recovered.jobs) { ... install it ... }
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runner/job_spec.h"
#include "server/storage/job_store.h"
#include "server/storage/spool.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

struct RecoveryOptions {
  ServerLimits limits;
  uint32_t max_attempts = 3;
  // The crash log (crash_log.h); empty: none.
  std::string crash_log_path;
  // As JobManagerOptions::free_emergency_space.
  std::function<bool()> free_emergency_space;
};

struct RecoveredJob {
  // As the store held it at start-up.
  StoredJob stored;
  // The change recovery made (already written, with event sequence + 1), and its message.
  std::optional<tomoserve::v1::Job> next;
  std::string message;
  // Set when the job is QUEUED (to be queued again).
  std::shared_ptr<const ValidatedJob> validated;
  // QUEUED again after an interrupted run.
  bool requeued_after_run = false;
  // Bytes of its files on the spool.
  uint64_t file_bytes = 0;
};

struct RecoveredJobs {
  // In id (creation) order.
  std::vector<RecoveredJob> jobs;
};

absl::StatusOr<RecoveredJobs> RecoverJobs(JobStore& store, const Spool& spool,
                                          const RecoveryOptions& options);

}  // namespace tomo::server
