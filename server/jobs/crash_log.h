// CrashLog: which job's run a fatal signal of tomod interrupted, so that a job whose input
// crashes the worker process is identified as the cause and failed as poison after its
// attempts, and the other jobs that crash interrupted are not charged for it.
//
// <spool>/crashes is a text file of lines:
//   "<job id> <signal>"  a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, which an
//                        uncaught C++ exception raises) on a thread running that job
//   "- <signal>"         a fatal signal on a thread running no job
//   "#start"             written at each start-up once the lines above it are handled
// The handler (InstallCrashHandler) appends one line with write(2) and fsync(2), both
// async-signal-safe, then lets the signal kill the process as it would have (default
// action, re-raised: core dumps and exit codes are unchanged). A SIGKILL, the OOM killer
// or a power loss leaves no line: such a stop is no job's fault.
//
// Each worker thread marks the job it runs (ScopedRunMark); the mark is a thread_local
// buffer the handler reads.
//
// Thread safety: InstallCrashHandler once per process, before the workers start;
// ScopedRunMark on any thread; ReadCrashLog / RewriteCrashLog from one thread at start-up.
//
//   TOMO_RETURN_IF_ERROR(InstallCrashHandler(spool.root() + "/crashes"));
//   { ScopedRunMark mark(job_id); RunTheJob(); }
//   TOMO_ASSIGN_OR_RETURN(CrashHistory history, ReadCrashLog(path));
#pragma once

#include <map>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tomo::server {

// The file name of the log inside the spool.
inline constexpr char kCrashLogName[] = "crashes";

// Opens path for appending (created when missing) and installs the handler for the fatal
// signals. INTERNAL (naming the path or the signal) when either fails.
absl::Status InstallCrashHandler(const std::string& path);

// Marks this thread as running job_id for the handler until destroyed. Ids longer than
// the mark's buffer (far beyond the ids tomod makes) are cut.
class ScopedRunMark {
 public:
  explicit ScopedRunMark(const std::string& job_id);
  ~ScopedRunMark();
  ScopedRunMark(const ScopedRunMark&) = delete;
  ScopedRunMark& operator=(const ScopedRunMark&) = delete;
};

struct CrashHistory {
  // Fatal signals in each job's runs, over the whole log.
  std::map<std::string, int> crashes_by_job;
  // The jobs whose runs the last crash interrupted (the lines after the last "#start");
  // empty when tomod was stopped without a fatal signal.
  std::set<std::string> last_crash_jobs;
  // The last crash's signal name (e.g. "SIGABRT"); empty when there was none.
  std::string last_crash_signal;
  // Whether a fatal signal came since the last start (on a job's thread or not).
  bool crashed_since_last_start = false;
};

// The log at path; an empty history when the file does not exist. INTERNAL when it
// cannot be read.
absl::StatusOr<CrashHistory> ReadCrashLog(const std::string& path);

// Replaces the log (atomically) with the lines of the jobs in keep and one "#start" line
// after them: the crashes of jobs that are gone or ended are forgotten, and the next
// start sees only crashes that came after this one.
absl::Status RewriteCrashLog(const std::string& path, const std::set<std::string>& keep);

}  // namespace tomo::server
