// Runs an external program for a test (dciodvfy, Debian's python3 with pydicom) and
// returns its exit status and everything it printed (stdout and stderr together).
//
//   CommandResult result = RunCommand("dciodvfy -new " + path);
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace tomo::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

inline CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  std::FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), n);
  }
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// 'text' quoted for sh.
inline std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

}  // namespace tomo::testing
