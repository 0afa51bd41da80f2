// What the `tomo` commands share: global options, exit codes, the one-line error report,
// and formatting of jobs, sizes and times.
//
// Exit codes (also in `tomo --help`):
//   0 success   1 error   2 usage (bad command line)   3 the job FAILED or was CANCELLED
//   4 not found (no such job or result)   5 refused as invalid (spec, data)
//   6 tomod unreachable
//
// Every failure prints exactly one line on stderr, "tomo: <what failed>: <message>".
//
//   return Fail("status " + id, client.GetJob(id).status());
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "google/protobuf/timestamp.pb.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,
  kExitUsage = 2,
  kExitJobFailed = 3,
  kExitNotFound = 4,
  kExitInvalid = 5,
  kExitUnavailable = 6,
};

inline constexpr char kExitCodesHelp[] =
    "Exit codes: 0 success, 1 error, 2 usage, 3 job failed or cancelled, 4 not found,\n"
    "5 refused as invalid (spec or data), 6 tomod unreachable. On failure exactly one line\n"
    "\"tomo: <what failed>: <message>\" goes to stderr.\n"
    "Environment: TOMO_SERVER is the default of --server (else 127.0.0.1:50051).";

struct GlobalOptions {
  std::string server = "127.0.0.1:50051";
  bool quiet = false;  // no progress bars
};

// A subcommand and what runs when the command line chose it; run returns the exit code.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

void AddJobCommands(CLI::App& app, const GlobalOptions& global, std::vector<Command>& commands);
void AddLocalCommands(CLI::App& app, const GlobalOptions& global,
                      std::vector<Command>& commands);
// `tomo cor` (client/cli/cor_command.cc).
void AddCenterOfRotationCommands(CLI::App& app, std::vector<Command>& commands);
// `tomo preview` (client/cli/output_commands.h).
void AddOutputCommands(CLI::App& app, const GlobalOptions& global,
                       std::vector<Command>& commands);

// Parses the command line and runs the chosen command; main() returns this.
int RunCli(int argc, char** argv);

int ExitCodeFor(const absl::Status& status);
// Prints "tomo: <what>: <message>" (one line) to stderr; returns ExitCodeFor(status), or
// `code` when given.
int Fail(absl::string_view what, const absl::Status& status);
int Fail(absl::string_view what, absl::string_view message, int code);

// Newlines and carriage returns become spaces.
std::string OneLine(absl::string_view text);
// "12.3 MiB"
std::string HumanBytes(uint64_t bytes);
// RFC 3339 in UTC to the second (or millisecond), "-" when unset.
std::string FormatTime(const google::protobuf::Timestamp& time, bool milliseconds = false);
// "fbp (window ram-lak)"
std::string DescribeAlgorithm(const tomoserve::v1::Algorithm& algorithm);
// One line, e.g. "cone beam, 360 views over 360 deg, 96x96 detector of 0.67 x 0.67 mm, ...".
std::string DescribeGeometry(const tomoserve::v1::Geometry& geometry);
// "ram-lak" <-> FILTER_WINDOW_RAM_LAK
std::string WindowName(tomoserve::v1::FilterWindow window);
std::vector<std::string> WindowNames();
bool ParseWindow(const std::string& name, tomoserve::v1::FilterWindow* window);

// True when progress bars should be drawn: stderr is a terminal and not --quiet.
bool ProgressWanted(const GlobalOptions& global);

// Total size of the data files; when spec.input.size_bytes is 0 it is set to it, when it
// is set and differs: INVALID_ARGUMENT naming input.size_bytes.
absl::Status MatchDataSize(const std::vector<std::string>& data_paths,
                           tomoserve::v1::JobSpec* spec);

// The --data arguments as the files to upload, back to back: a directory stands for its
// regular files (hidden ones skipped) sorted by name (a DICOM-CT-PD series or a TIFF stack).
// Then spec.input.files: for TIFF and DICOM-CT-PD encodings, and whenever several files are
// given and the spec lists none, one entry per file (its name, its size, role PROJECTIONS);
// when the spec lists files (raw data with dark and flat fields, say), their count and
// sizes must match the paths in order (INVALID_ARGUMENT naming input.files[i]). Finally
// MatchDataSize. NOT_FOUND for a path that does not exist.
absl::Status PrepareInputFiles(std::vector<std::string>* data_paths,
                               tomoserve::v1::JobSpec* spec);

}  // namespace tomo::cli
