#include "tests/end_to_end/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace tomo::testing {
namespace {

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::vector<std::string> MergedEnvironment(const std::vector<std::string>& changes) {
  std::map<std::string, std::string> vars;
  std::vector<std::string> order;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    std::string name = entry.substr(0, eq);
    if (!vars.count(name)) order.push_back(name);
    vars[name] = entry;
  }
  for (const std::string& change : changes) {
    size_t eq = change.find('=');
    std::string name = change.substr(0, eq);
    if (eq == std::string::npos || eq + 1 == change.size()) {
      vars.erase(name);
      continue;
    }
    if (!vars.count(name)) order.push_back(name);
    vars[name] = change;
  }
  std::vector<std::string> merged;
  for (const std::string& name : order) {
    auto it = vars.find(name);
    if (it != vars.end()) merged.push_back(it->second);
  }
  return merged;
}

}  // namespace

ChildProcess::~ChildProcess() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    Wait(absl::Seconds(10));
  }
}

absl::Status ChildProcess::Start(const std::vector<std::string>& argv,
                                 const std::string& stdout_path,
                                 const std::string& stderr_path,
                                 const std::vector<std::string>& env) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdout_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> environment = MergedEnvironment(env);
  std::vector<char*> envp;
  for (const std::string& e : environment) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("posix_spawn ", argv[0], ": ", std::strerror(rc)));
  }
  pid_ = pid;
  exit_code_.reset();
  return absl::OkStatus();
}

void ChildProcess::Signal(int signal_number) {
  if (running()) ::kill(pid_, signal_number);
}

std::optional<int> ChildProcess::Poll() {
  if (exit_code_.has_value() || pid_ <= 0) return exit_code_;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) exit_code_ = DecodeWaitStatus(status);
  return exit_code_;
}

std::optional<int> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (std::optional<int> code = Poll(); code.has_value()) return code;
    if (absl::Now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

std::string ProcessResult::Describe() const {
  return absl::StrCat("command: ", command, "\nexit code: ", exit_code,
                      timed_out ? " (timed out)" : "", "\nstdout:\n", out, "\nstderr:\n", err);
}

std::vector<std::string> ProcessResult::ErrLines() const { return SplitLines(err); }
std::vector<std::string> ProcessResult::OutLines() const { return SplitLines(out); }

ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& scratch_dir,
                         absl::Duration timeout, const std::vector<std::string>& env) {
  static std::atomic<int> counter{0};
  const int n = counter.fetch_add(1);
  const std::string out_path = absl::StrCat(scratch_dir, "/run", n, ".out");
  const std::string err_path = absl::StrCat(scratch_dir, "/run", n, ".err");
  ProcessResult result;
  result.command = absl::StrJoin(argv, " ");
  ChildProcess child;
  absl::Status started = child.Start(argv, out_path, err_path, env);
  if (!started.ok()) {
    result.err = std::string(started.message());
    return result;
  }
  std::optional<int> code = child.Wait(timeout);
  if (!code.has_value()) {
    result.timed_out = true;
    child.Signal(SIGKILL);
    child.Wait(absl::Seconds(10));
  } else {
    result.exit_code = *code;
  }
  result.out = ReadFileOrEmpty(out_path);
  result.err = ReadFileOrEmpty(err_path);
  return result;
}

}  // namespace tomo::testing
