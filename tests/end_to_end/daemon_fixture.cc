#include "tests/end_to_end/daemon_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"

namespace tomo::testing {

int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t size = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}
namespace {

namespace fs = std::filesystem;

std::string MakeTempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(base && *base ? base : "/tmp", "/tomo-e2e-XXXXXX");
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) return "";
  return std::string(buffer.data());
}

std::string Tail(const std::string& text, size_t max_chars = 4000) {
  return text.size() <= max_chars ? text : "..." + text.substr(text.size() - max_chars);
}

}  // namespace

std::string MakeScratchDir() { return MakeTempDir(); }

std::string BinaryPath(const char* name, const char* built) {
  const char* dir = std::getenv("TOMO_E2E_BIN_DIR");
  return dir && *dir ? absl::StrCat(dir, "/", name) : std::string(built);
}

double ParseRmse(const std::string& out) {
  for (const std::string& line : SplitLines(out)) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    double value = 0;
    if (parts.size() == 2 && parts[0] == "RMSE" && absl::SimpleAtod(parts[1], &value)) {
      return value;
    }
  }
  ADD_FAILURE() << "no \"RMSE <value>\" line in:\n" << out;
  return 1e30;
}

void DaemonTest::SetUp() {
  dir_ = MakeTempDir();
  ASSERT_FALSE(dir_.empty()) << "cannot create a temporary directory";
  StartDaemon();
}

void DaemonTest::TearDown() {
  if (!daemon_stopped_) {
    const int code = StopDaemon();
    EXPECT_EQ(code, 0) << "tomod did not exit cleanly on SIGTERM; its log:\n"
                       << Tail(ReadFileOrEmpty(tomod_log()));
  }
  if (HasFailure()) {
    std::cerr << "kept the test directory " << dir_ << " (tomod log: " << tomod_log() << ")\n";
  } else if (!dir_.empty()) {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
}

void DaemonTest::StartDaemon(const std::vector<std::string>& extra_flags,
                             const std::vector<std::string>& env) {
  const std::string port_file = dir_ + "/port";
  std::error_code ignored;
  fs::remove(port_file, ignored);
  std::vector<std::string> argv = {BinaryPath("tomod", TOMOD_BINARY), "--listen=127.0.0.1:0",
                                   "--port_file=" + port_file, "--spool_dir=" + spool_dir(),
                                   // Off unless a test asks (a later flag wins): tests run in
                                   // parallel and would contend for the default port.
                                   "--metrics_port=0"};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  absl::Status started = tomod_.Start(argv, dir_ + "/tomod.out", tomod_log(), env);
  ASSERT_TRUE(started.ok()) << started;
  daemon_stopped_ = false;

  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (true) {
    std::string text(absl::StripAsciiWhitespace(ReadFileOrEmpty(port_file)));
    int port = 0;
    if (!text.empty() && absl::SimpleAtoi(text, &port) && port > 0) {
      server_ = absl::StrCat("127.0.0.1:", port);
      return;
    }
    if (std::optional<int> code = tomod_.Poll(); code.has_value()) {
      daemon_stopped_ = true;
      FAIL() << "tomod exited with " << *code << " before listening; its log:\n"
             << Tail(ReadFileOrEmpty(tomod_log()));
    }
    if (absl::Now() > deadline) {
      FAIL() << "tomod wrote no port to " << port_file << " within 60 s; its log:\n"
             << Tail(ReadFileOrEmpty(tomod_log()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int DaemonTest::StopDaemon(absl::Duration timeout) {
  if (daemon_stopped_) return tomod_.Poll().value_or(-1);
  daemon_stopped_ = true;
  tomod_.Signal(SIGTERM);
  std::optional<int> code = tomod_.Wait(timeout);
  if (!code.has_value()) {
    tomod_.Signal(SIGKILL);
    tomod_.Wait(absl::Seconds(10));
    return -1;
  }
  return *code;
}

void DaemonTest::KillDaemon() {
  if (daemon_stopped_) return;
  daemon_stopped_ = true;
  tomod_.Signal(SIGKILL);
  EXPECT_TRUE(tomod_.Wait(absl::Seconds(30)).has_value()) << "tomod survived SIGKILL";
  std::error_code ignored;
  fs::rename(tomod_log(), absl::StrCat(tomod_log(), ".", kills_++), ignored);
}

std::optional<int> DaemonTest::WaitForDaemonExit(absl::Duration timeout) {
  if (daemon_stopped_) return tomod_.Poll();
  std::optional<int> code = tomod_.Wait(timeout);
  if (!code.has_value()) return std::nullopt;
  daemon_stopped_ = true;
  std::error_code ignored;
  fs::rename(tomod_log(), absl::StrCat(tomod_log(), ".", kills_++), ignored);
  return code;
}

ProcessResult DaemonTest::Tomo(const std::vector<std::string>& args, absl::Duration timeout,
                               const std::vector<std::string>& env) {
  std::vector<std::string> argv = {"--server", server_};
  argv.insert(argv.end(), args.begin(), args.end());
  return TomoRaw(argv, timeout, env);
}

ProcessResult DaemonTest::TomoRaw(const std::vector<std::string>& args, absl::Duration timeout,
                                  const std::vector<std::string>& env) {
  std::vector<std::string> argv = {BinaryPath("tomo", TOMO_BINARY)};
  argv.insert(argv.end(), args.begin(), args.end());
  // The tests say where the server is; the caller's TOMO_SERVER must not leak in.
  std::vector<std::string> environment = {"TOMO_SERVER="};
  environment.insert(environment.end(), env.begin(), env.end());
  return RunProcess(argv, dir_, timeout, environment);
}

std::string DaemonTest::MakePhantom(const std::string& name, int size, int views,
                                    const std::vector<std::string>& extra) {
  const std::string out = dir_ + "/" + name;
  std::vector<std::string> args = {"phantom", "--out-dir", out, "--size",
                                   std::to_string(size), "--views", std::to_string(views)};
  args.insert(args.end(), extra.begin(), extra.end());
  ProcessResult r = TomoRaw(args);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.OutLines().size(), 3u) << r.Describe();
  return out;
}

void DaemonTest::ExpectRefusedLocallyAndByTheDaemon(const std::string& spec_path,
                                                    const std::string& data,
                                                    const std::string& expected) {
  constexpr int kExitInvalid = 5;
  for (bool daemon : {false, true}) {
    SCOPED_TRACE(daemon ? "tomod" : "tomo local");
    ProcessResult r = daemon ? Tomo({"submit", "--spec", spec_path, "--data", data})
                             : TomoRaw({"local", "--spec", spec_path, "--data", data, "--out",
                                        dir() + "/refused"});
    EXPECT_EQ(r.exit_code, kExitInvalid) << r.Describe();
    EXPECT_TRUE(OneErrorLine(r));
    EXPECT_THAT(r.err, ::testing::HasSubstr(expected)) << r.Describe();
  }
}

::testing::AssertionResult OneErrorLine(const ProcessResult& result) {
  // tomo's plain progress lines (stderr is no terminal here) aside.
  std::vector<std::string> lines;
  for (const std::string& line : result.ErrLines()) {
    if (line.rfind("progress: ", 0) != 0) lines.push_back(line);
  }
  if (lines.size() != 1) {
    return ::testing::AssertionFailure()
           << "expected exactly one line on stderr, got " << lines.size() << ":\n"
           << result.Describe();
  }
  if (lines[0].rfind("tomo: ", 0) != 0) {
    return ::testing::AssertionFailure()
           << "stderr does not start with \"tomo: \":\n" << result.Describe();
  }
  return ::testing::AssertionSuccess();
}

std::string FileBytes(const std::string& path) { return ReadFileOrEmpty(path); }

std::vector<std::string> JobDirs(const std::string& spool) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(spool + "/jobs", error)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace tomo::testing
