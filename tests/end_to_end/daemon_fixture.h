// DaemonTest: a GoogleTest fixture that starts the real tomod on a free loopback port with
// a fresh spool (--listen 127.0.0.1:0 --port_file, metrics off), runs the real tomo binary
// against it, and at the end stops tomod with SIGTERM, expecting exit code 0.
//
// The binaries are those of this build ($<TARGET_FILE:tomod>, $<TARGET_FILE:tomo>), or
// $TOMO_E2E_BIN_DIR/tomod and /tomo when that variable is set.
//
// Each test gets its own temporary directory (kept, with tomod's log, when the test
// fails) so tests may run in parallel under ctest.
//
//   TEST_F(DaemonTest, Info) {
//     ProcessResult r = Tomo({"info"});
//     EXPECT_EQ(r.exit_code, 0) << r.Describe();
//   }
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/end_to_end/process.h"

namespace tomo::testing {

// The binaries under test: those this build made (`built`), or `name` in $TOMO_E2E_BIN_DIR
// (for running a built test binary elsewhere, with bundled binaries).
std::string BinaryPath(const char* name, const char* built);

// The value of the "RMSE <value>" line that `tomo compare` prints (a test failure and a huge
// value when there is none).
double ParseRmse(const std::string& out);

inline constexpr absl::Duration kTomoTimeout = absl::Seconds(300);

// A fresh directory under $TMPDIR (else /tmp) for a test that runs no daemon; "" on failure.
std::string MakeScratchDir();

// A loopback TCP port that was free a moment ago (for flags that take a port number and
// not 0, such as tomod's --metrics_port).
int FreeLoopbackPort();

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Starts tomod (SetUp does; call again after StopDaemon to restart on the same spool).
  // env: "NAME=value" entries for tomod's environment (see ChildProcess::Start).
  void StartDaemon(const std::vector<std::string>& extra_flags = {},
                   const std::vector<std::string>& env = {});
  // SIGTERM, then waits; returns the exit code (-1 when it did not stop within timeout; it
  // is then killed).
  int StopDaemon(absl::Duration timeout = absl::Seconds(120));
  // SIGKILL, as a crash: tomod cleans nothing up. Waits until it is gone; its log is kept
  // as tomod.log.<n> (n = 0, 1, ...) so that StartDaemon's fresh log does not replace it.
  void KillDaemon();
  // Waits for tomod to exit on its own (a crash): its exit code (128 + signal for a
  // signal), or nullopt when it still runs after timeout. Its log is kept as KillDaemon
  // keeps it.
  std::optional<int> WaitForDaemonExit(absl::Duration timeout);

  // Sends tomod a signal (e.g. SIGHUP) and returns at once.
  void SignalDaemon(int signal_number) { tomod_.Signal(signal_number); }
  // The running tomod's process id (for /proc/<pid>/...).
  pid_t tomod_pid() const { return tomod_.pid(); }

  // Runs tomo with --server pointing at the daemon, then args.
  ProcessResult Tomo(const std::vector<std::string>& args, absl::Duration timeout = kTomoTimeout,
                     const std::vector<std::string>& env = {});
  // Runs tomo with exactly these args (no --server).
  ProcessResult TomoRaw(const std::vector<std::string>& args, absl::Duration timeout = kTomoTimeout,
                        const std::vector<std::string>& env = {});

  // A bad spec: `tomo local` and `tomo submit` with it and the data both exit with tomo's
  // invalid-argument code (5) and one error line containing `expected`.
  void ExpectRefusedLocallyAndByTheDaemon(const std::string& spec_path, const std::string& data,
                                          const std::string& expected);

  // Makes a phantom case in dir()/name with `tomo phantom`; returns its directory.
  std::string MakePhantom(const std::string& name, int size, int views,
                          const std::vector<std::string>& extra = {});

  const std::string& dir() const { return dir_; }
  const std::string& server() const { return server_; }
  std::string spool_dir() const { return dir_ + "/spool"; }
  std::string tomod_log() const { return dir_ + "/tomod.log"; }

 private:
  std::string dir_;
  std::string server_;
  ChildProcess tomod_;
  bool daemon_stopped_ = true;
  int kills_ = 0;
};

// True when stderr is exactly one line starting with "tomo: ", besides tomo's plain
// "progress: " lines (stderr is not a terminal in these tests).
::testing::AssertionResult OneErrorLine(const ProcessResult& result);

// Bytes of a file; empty when missing.
std::string FileBytes(const std::string& path);
// Names of the job folders in a spool (<spool>/jobs/*); empty when there are none.
std::vector<std::string> JobDirs(const std::string& spool);
void WriteBytes(const std::string& path, const std::string& bytes);

}  // namespace tomo::testing
