// What the `tomo` commands share: global options, exit codes, the one-line error report,
// and formatting of jobs, sizes and times.
//
// Exit codes (also in `tomo --help`):
//   0 success   1 error   2 usage (bad command line)   3 the job FAILED or was CANCELLED
//   4 not found (no such job or result)   5 refused as invalid (spec, data)
//   6 tomod unreachable
//
// Every failure prints exactly one line on stderr, "tomo: <what failed>: <message>" (when
// stderr is not a terminal, "progress: " lines may come before it).
//
//   return Fail("status " + id, client.GetJob(id).status());
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"
#include "client/cli/progress_bar.h"
#include "absl/status/status.h"
#include "client/tomo_client.h"
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
    "5 refused as invalid (spec or data), 6 tomod unreachable, 130 interrupted (Ctrl-C).\n"
    "On failure exactly one line \"tomo: <what failed>: <message>\" goes to stderr (besides\n"
    "\"progress: \" lines when stderr is not a terminal; -q leaves them out).\n"
    "Environment: TOMO_SERVER is the default of --server (else 127.0.0.1:50051);\n"
    "TOMO_TLS_CA, TOMO_TLS_CERT, TOMO_TLS_KEY of --tls-ca, --tls-cert, --tls-key;\n"
    "TOMO_TOKEN is the bearer token (else the file of --token-file or TOMO_TOKEN_FILE).";

struct GlobalOptions {
  std::string server = "127.0.0.1:50051";
  bool quiet = false;  // no progress bars
  bool json = false;   // --json: JSON on stdout instead of text (below)
  // TLS (--tls-ca alone: TLS checking the server against that CA; the system's roots with
  // --tls; --tls-cert and --tls-key: mutual TLS) and the bearer token's file.
  bool tls = false;
  std::string tls_ca, tls_cert, tls_key;
  std::string token_file;
  // Filled from the above (and TOMO_TOKEN) once the command line is parsed.
  client::ClientOptions connection;
};

// options with the connection's credentials and bearer token (global.connection).
client::ClientOptions ClientOptionsFor(const GlobalOptions& global,
                                       client::ClientOptions options = {});

// --json, every command: stdout carries one JSON object (watch: one a line per event)
// instead of text. Commands that print messages of tomod (status, list, info, watch) or
// their own object print it themselves and call JsonPrinted(); the others give their paths
// to PrintPath and other values to JsonField, and RunCli prints {"files": [...], fields...}
// when the command succeeded. Errors stay one line on stderr.
void PrintPath(const GlobalOptions& global, const std::string& path);
void JsonField(const std::string& key, const nlohmann::ordered_json& value);
void JsonPrinted();

// A subcommand and what runs when the command line chose it; run returns the exit code.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

void AddJobCommands(CLI::App& app, const GlobalOptions& global, std::vector<Command>& commands);
void AddLocalCommands(CLI::App& app, const GlobalOptions& global,
                      std::vector<Command>& commands);
// `tomo spec`, `tomo validate` (client/cli/spec_commands.cc).
void AddSpecCommands(CLI::App& app, const GlobalOptions& global,
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

// Fail() for a status from tomod. A connection that could not be made (UNAVAILABLE or
// DEADLINE_EXCEEDED with gRPC's connection words) becomes one line saying what to check,
// without gRPC's internals:
//   "cannot reach tomod at 127.0.0.1:50051 (connection refused): is tomod running there?
//    --server or TOMO_SERVER give its address"
// Other statuses (tomod's own UNAVAILABLE "shutting down" among them) go as they are.
int FailRpc(const GlobalOptions& global, absl::string_view what, const absl::Status& status);
// The one-line wording above, or nullopt when status is not a failure to connect.
std::optional<std::string> ConnectionProblem(const std::string& server,
                                             const absl::Status& status);

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

// How progress is shown: a bar when stderr is a terminal, plain "progress: " lines when it
// is not, nothing with --quiet.
ProgressStyle ProgressWanted(const GlobalOptions& global);

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
