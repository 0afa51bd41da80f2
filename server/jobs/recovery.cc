#include "server/jobs/recovery.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "server/jobs/crash_log.h"
#include "server/jobs/job_id.h"
#include "server/jobs/job_table.h"
#include "server/telemetry/log.h"

namespace tomo::server {

namespace pb = ::tomoserve::v1;

namespace {

std::string StatusText(const absl::Status& status) {
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
}

// The store's change, retried once after free_emergency_space when it failed for want of
// disk space (RESOURCE_EXHAUSTED).
absl::Status WithRoom(const RecoveryOptions& options, const std::function<absl::Status()>& change) {
  absl::Status status = change();
  if (absl::IsResourceExhausted(status) && options.free_emergency_space &&
      options.free_emergency_space()) {
    Log(absl::StrCat("job database write failed for want of space (", status.message(),
                     "); freed the spool's reserve and tried again"));
    status = change();
  }
  return status;
}

// What a QUEUED or RUNNING job becomes after the restart (nothing: it stays QUEUED).
std::optional<pb::Job> Decide(const StoredJob& entry, const absl::StatusOr<ValidatedJob>& validated,
                              const CrashHistory& crashes, const RecoveryOptions& options,
                              std::string* message) {
  const pb::JobState state = entry.job.state();
  const std::string& id = entry.job.id();
  pb::Job next = entry.job;
  if (!validated.ok()) {
    next.set_state(pb::JOB_STATE_FAILED);
    next.set_error(absl::StrCat(
        "FAILED_PRECONDITION: after a restart, this tomod's limits refuse the job's spec: ",
        StatusText(validated.status())));
    *message = absl::StrCat("failed: ", next.error());
  } else if (state == pb::JOB_STATE_RUNNING && entry.cancel_requested) {
    next.set_state(pb::JOB_STATE_CANCELLED);
    *message = "cancelled while running (tomod stopped before the run had ended)";
  } else if (state == pb::JOB_STATE_RUNNING && crashes.crashed_since_last_start &&
             crashes.last_crash_jobs.count(id) == 0) {
    // A fatal signal in another job's run (or outside any run) stopped this one: not its
    // fault, so the run is given back.
    next.set_state(pb::JOB_STATE_QUEUED);
    next.set_attempts(next.attempts() > 0 ? next.attempts() - 1 : 0);
    next.clear_device();
    next.clear_devices();
    next.clear_started();
    next.clear_progress();
    *message = absl::StrCat(
        "queued again: tomod crashed (", crashes.last_crash_signal, ") ",
        crashes.last_crash_jobs.empty()
            ? std::string("outside any job's run")
            : absl::StrCat("in the run of job ", absl::StrJoin(crashes.last_crash_jobs, ", ")),
        "; this run does not count as an attempt");
  } else if (state == pb::JOB_STATE_RUNNING && next.attempts() >= options.max_attempts) {
    next.set_state(pb::JOB_STATE_FAILED);
    const auto crashed = crashes.crashes_by_job.find(id);
    const uint32_t crashed_runs =
        crashed == crashes.crashes_by_job.end() ? 0 : static_cast<uint32_t>(crashed->second);
    if (crashed_runs >= next.attempts()) {
      next.set_error(absl::StrCat(
          "INTERNAL: the job crashed tomod's worker process (", crashes.last_crash_signal,
          ") in each of its ", next.attempts(),
          " runs; it is failed as poison and not run again (--max_attempts is ",
          options.max_attempts, "); its input or parameters trigger a fault in tomod"));
    } else {
      next.set_error(absl::StrCat(
          "ABORTED: tomod stopped during each of the job's ", next.attempts(), " runs",
          crashed_runs > 0 ? absl::StrCat(" (", crashed_runs, " of them crashes in its run)")
                           : std::string(),
          "; --max_attempts is ", options.max_attempts, ", so it is not run again"));
    }
    *message = absl::StrCat("failed: ", next.error());
  } else if (state == pb::JOB_STATE_RUNNING) {
    next.set_state(pb::JOB_STATE_QUEUED);
    next.clear_device();
    next.clear_devices();
    next.clear_started();
    next.clear_progress();
    *message = absl::StrCat("queued again: tomod stopped during run ", next.attempts(),
                            " of at most ", options.max_attempts);
  }
  if (next.state() == state) return std::nullopt;
  if (IsTerminal(next.state())) SetTimestamp(next.mutable_finished(), absl::Now());
  return next;
}

}  // namespace

absl::StatusOr<RecoveredJobs> RecoverJobs(JobStore& store, const Spool& spool,
                                          const RecoveryOptions& options) {
  std::vector<std::string> unreadable;
  TOMO_ASSIGN_OR_RETURN(std::vector<StoredJob> stored, store.LoadAll(&unreadable));
  for (const std::string& id : unreadable) {
    Log(absl::StrCat("job ", QuoteJobId(id), ": its record in ", store.path(),
                     " does not parse; it is left there, with its files, for inspection"));
  }
  CrashHistory crashes;
  if (!options.crash_log_path.empty()) {
    TOMO_ASSIGN_OR_RETURN(crashes, ReadCrashLog(options.crash_log_path));
    if (crashes.crashed_since_last_start) {
      Log(absl::StrCat("tomod stopped on ", crashes.last_crash_signal, " ",
                       crashes.last_crash_jobs.empty()
                           ? std::string("outside any job's run")
                           : absl::StrCat("in the run of job ",
                                          absl::StrJoin(crashes.last_crash_jobs, ", "))));
    }
  }
  RecoveredJobs recovered;
  size_t uploads_removed = 0, queued = 0, requeued = 0, ended = 0, finished = 0, strays = 0;
  uint64_t spool_bytes = 0;
  std::set<std::string> known, unfinished;
  for (StoredJob& entry : stored) {
    const std::string id = entry.job.id();
    if (!IsValidJobId(id)) {
      // Never used as a path: the id names the job's directory.
      Log(absl::StrCat("job database: dropping a record with the invalid id ", QuoteJobId(id)));
      TOMO_RETURN_IF_ERROR(WithRoom(options, [&] { return store.Delete(id); }));
      continue;
    }
    const pb::JobState state = entry.job.state();
    if (state == pb::JOB_STATE_UPLOADING || state == pb::JOB_STATE_UNSPECIFIED) {
      // Nobody was answered for it: its upload is lost with the connection.
      TOMO_RETURN_IF_ERROR(WithRoom(options, [&] { return store.Delete(id); }));
      spool.RemoveJobDir(id).IgnoreError();
      ++uploads_removed;
      continue;
    }
    if (state == pb::JOB_STATE_RUNNING || IsTerminal(state)) {
      // Results of an interrupted run, or of a failed one whose clean-up a crash stopped.
      std::error_code ignored;
      std::filesystem::remove_all(spool.ResultsPartialDir(id), ignored);
      if (state != pb::JOB_STATE_SUCCEEDED) {
        std::filesystem::remove_all(spool.ResultsDir(id), ignored);
      }
    }
    RecoveredJob job;
    if (state == pb::JOB_STATE_QUEUED || state == pb::JOB_STATE_RUNNING) {
      absl::StatusOr<ValidatedJob> validated = ValidateJobSpec(entry.job.spec(), options.limits);
      job.next = Decide(entry, validated, crashes, options, &job.message);
      if (job.next.has_value()) {
        const StoredJob changed{*job.next, entry.cancel_requested, entry.event_sequence + 1};
        TOMO_RETURN_IF_ERROR(WithRoom(options, [&] { return store.Put(changed); }));
      }
      const pb::JobState now = job.next.has_value() ? job.next->state() : state;
      if (now == pb::JOB_STATE_QUEUED) {
        job.validated = std::make_shared<const ValidatedJob>(std::move(*validated));
        job.requeued_after_run = state == pb::JOB_STATE_RUNNING;
        ++(state == pb::JOB_STATE_RUNNING ? requeued : queued);
        unfinished.insert(id);
      } else {
        ++ended;
      }
    } else {
      ++finished;
    }
    job.file_bytes = spool.JobDiskBytes(id);
    spool_bytes += job.file_bytes;
    known.insert(id);
    job.stored = std::move(entry);
    recovered.jobs.push_back(std::move(job));
  }
  if (!options.crash_log_path.empty()) {
    // Crashes of jobs that will run again are remembered; the rest is forgotten. A full
    // disk must not keep tomod from starting: the old log then stays (its lines counted
    // again at the next start, which only errs towards failing a crashing job sooner).
    if (absl::Status rewritten = RewriteCrashLog(options.crash_log_path, unfinished);
        !rewritten.ok()) {
      Log(absl::StrCat("cannot rewrite the crash log: ", rewritten.message()),
          LogLevel::kWarning);
    }
  }
  for (const std::string& dir : spool.ListJobDirs()) {
    if (known.count(dir) == 0 &&
        std::find(unreadable.begin(), unreadable.end(), dir) == unreadable.end()) {
      spool.RemoveJobDir(dir).IgnoreError();
      ++strays;
    }
  }
  Log(absl::StrCat("job database ", store.path(), ": ", recovered.jobs.size(), " jobs (", queued,
                   " queued, ", requeued, " queued again after an interrupted run, ", ended,
                   " ended at start-up, ", finished, " finished); removed ", uploads_removed,
                   " unfinished uploads and ", strays, " job directories without a record; ",
                   spool_bytes, " bytes of job files"));
  return recovered;
}

}  // namespace tomo::server
