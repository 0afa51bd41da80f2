#include "server/jobs/crash_log.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "server/storage/spool.h"

namespace tomo::server {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr size_t kMarkBytes = 128;

std::atomic<int> log_fd{-1};
thread_local char run_mark[kMarkBytes];
thread_local size_t run_mark_length = 0;

const char* SignalName(int signal_number) {
  switch (signal_number) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
    default:
      return "SIG?";
  }
}

// Async-signal-safe: fixed buffers, write(2), fsync(2), signal(2), raise(3).
void OnFatalSignal(int signal_number) {
  const int fd = log_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    char line[kMarkBytes + 16];
    size_t n = 0;
    if (run_mark_length > 0) {
      for (size_t i = 0; i < run_mark_length; ++i) line[n++] = run_mark[i];
    } else {
      line[n++] = '-';
    }
    line[n++] = ' ';
    for (const char* name = SignalName(signal_number); *name != '\0'; ++name) line[n++] = *name;
    line[n++] = '\n';
    ssize_t ignored = ::write(fd, line, n);
    (void)ignored;
    ::fsync(fd);
  }
  // SA_RESETHAND restored the default action: the signal now does what it would have.
  ::raise(signal_number);
}

}  // namespace

absl::Status InstallCrashHandler(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  const int old = log_fd.exchange(fd);
  if (old >= 0) ::close(old);
  for (int signal_number : kFatalSignals) {
    struct sigaction action = {};
    action.sa_handler = OnFatalSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND | SA_NODEFER;
    if (::sigaction(signal_number, &action, nullptr) != 0) {
      return absl::InternalError(absl::StrCat("cannot install the handler of ",
                                              SignalName(signal_number), ": ",
                                              std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

ScopedRunMark::ScopedRunMark(const std::string& job_id) {
  run_mark_length = 0;  // the handler sees no half-written id
  const size_t n = std::min(job_id.size(), kMarkBytes);
  std::memcpy(run_mark, job_id.data(), n);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  run_mark_length = n;
}

ScopedRunMark::~ScopedRunMark() { run_mark_length = 0; }

absl::StatusOr<CrashHistory> ReadCrashLog(const std::string& path) {
  CrashHistory history;
  std::ifstream in(path);
  if (!in.is_open()) {
    if (errno == ENOENT) return history;
    return absl::InternalError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line == "#start") {
      history.last_crash_jobs.clear();
      history.last_crash_signal.clear();
      history.crashed_since_last_start = false;
      continue;
    }
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() != 2 || fields[0].empty()) continue;  // a torn line
    history.crashed_since_last_start = true;
    history.last_crash_signal = fields[1];
    if (fields[0] == "-") continue;
    ++history.crashes_by_job[fields[0]];
    history.last_crash_jobs.insert(fields[0]);
  }
  return history;
}

absl::Status RewriteCrashLog(const std::string& path, const std::set<std::string>& keep) {
  std::string kept;
  std::ifstream in(path);
  std::string line;
  while (in.is_open() && std::getline(in, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() == 2 && keep.count(fields[0]) > 0) absl::StrAppend(&kept, line, "\n");
  }
  absl::StrAppend(&kept, "#start\n");
  return WriteFileAtomically(path, kept);
}

}  // namespace tomo::server
