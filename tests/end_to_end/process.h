// Child processes for end-to-end tests: start a binary with posix_spawn, stdin from
// /dev/null and stdout/stderr into files, wait for it with a timeout, signal it.
//
//   ChildProcess tomod;
//   ASSERT_TRUE(tomod.Start({TOMOD_BINARY, "--listen=127.0.0.1:0"}, dir + "/tomod.out",
//                           dir + "/tomod.err").ok());
//   ...
//   tomod.Signal(SIGTERM);
//   std::optional<int> code = tomod.Wait(absl::Seconds(30));  // nullopt: still running
//
//   ProcessResult r = RunProcess({TOMO_BINARY, "info"}, dir, absl::Seconds(60));
//   EXPECT_EQ(r.exit_code, 0) << r.Describe();
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tomo::testing {

class ChildProcess {
 public:
  ChildProcess() = default;
  // Kills (SIGKILL) and reaps a child still running.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // env: "NAME=value" entries added to (or replacing in) this process's environment;
  // "NAME=" alone removes NAME.
  absl::Status Start(const std::vector<std::string>& argv, const std::string& stdout_path,
                     const std::string& stderr_path, const std::vector<std::string>& env = {});
  bool running() const { return pid_ > 0 && !exit_code_.has_value(); }
  pid_t pid() const { return pid_; }
  void Signal(int signal_number);
  // The exit code (128 + signal for a child killed by a signal) once it has exited within
  // timeout, else nullopt.
  std::optional<int> Wait(absl::Duration timeout);
  // Non-blocking: has it exited?
  std::optional<int> Poll();

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

struct ProcessResult {
  int exit_code = -1;  // -1 when it timed out (it was then killed)
  bool timed_out = false;
  std::string out;
  std::string err;
  std::string command;
  // Command, exit code, stdout and stderr, for assertion messages.
  std::string Describe() const;
  // stderr's lines (without the newline).
  std::vector<std::string> ErrLines() const;
  std::vector<std::string> OutLines() const;
};

// Runs argv to its end (or timeout), capturing stdout and stderr through files in
// scratch_dir.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& scratch_dir,
                         absl::Duration timeout, const std::vector<std::string>& env = {});

std::string ReadFileOrEmpty(const std::string& path);
std::vector<std::string> SplitLines(const std::string& text);

}  // namespace tomo::testing
