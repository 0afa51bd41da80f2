#include "client/cli/cli_common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/channel_security.h"
#include "client/server_address.h"
#include "core/base/build_info.h"

namespace tomo::cli {
namespace {

namespace v1 = ::tomoserve::v1;

struct WindowEntry {
  const char* name;
  v1::FilterWindow window;
};
constexpr WindowEntry kWindows[] = {
    {"ram-lak", v1::FILTER_WINDOW_RAM_LAK}, {"shepp-logan", v1::FILTER_WINDOW_SHEPP_LOGAN},
    {"cosine", v1::FILTER_WINDOW_COSINE},   {"hamming", v1::FILTER_WINDOW_HAMMING},
    {"hann", v1::FILTER_WINDOW_HANN},
};

}  // namespace

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kNotFound:
      return kExitNotFound;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return kExitInvalid;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kExitUnavailable;
    default:
      return kExitError;
  }
}

std::string OneLine(absl::string_view text) {
  std::string line(text);
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

int Fail(absl::string_view what, absl::string_view message, int code) {
  std::fflush(stdout);
  std::fprintf(stderr, "tomo: %s: %s\n", OneLine(what).c_str(), OneLine(message).c_str());
  std::fflush(stderr);
  return code;
}

int Fail(absl::string_view what, const absl::Status& status) {
  std::string message(status.message());
  if (message.empty()) message = absl::StatusCodeToString(status.code());
  return Fail(what, message, ExitCodeFor(status));
}

namespace {

// What --json prints at the end (cli_common.h); one command runs per process.
struct JsonReport {
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
  std::vector<std::string> files;
  bool printed = false;
};

JsonReport& Report() {
  static auto* report = new JsonReport;
  return *report;
}

}  // namespace

void PrintPath(const GlobalOptions& global, const std::string& path) {
  if (global.json) {
    Report().files.push_back(path);
  } else {
    std::cout << path << "\n";
  }
}

void JsonField(const std::string& key, const nlohmann::ordered_json& value) {
  Report().fields[key] = value;
}

void JsonPrinted() { Report().printed = true; }

std::optional<std::string> ConnectionProblem(const std::string& server,
                                             const absl::Status& status) {
  if (status.code() != absl::StatusCode::kUnavailable &&
      status.code() != absl::StatusCode::kDeadlineExceeded) {
    return std::nullopt;
  }
  // gRPC's words for each way a connection fails, and ours.
  struct Cause {
    const char* grpc;
    const char* ours;
  };
  constexpr Cause kCauses[] = {
      {"connection refused", "connection refused"},
      {"dns resolution failed", "the host name does not resolve"},
      {"domain name not found", "the host name does not resolve"},
      {"name or service not known", "the host name does not resolve"},
      {"no route to host", "no route to the host"},
      {"network is unreachable", "the network is unreachable"},
      {"connection reset", "the connection was reset"},
      {"socket closed", "the connection was closed"},
      {"connection timed out", "no answer"},
      {"deadline exceeded", "no answer in time"},
      {"failed to connect", "no connection"},
      {"handshake", "the TLS handshake failed"},
  };
  const std::string message = absl::AsciiStrToLower(status.message());
  const char* cause = nullptr;
  for (const Cause& c : kCauses) {
    if (cause == nullptr && absl::StrContains(message, c.grpc)) cause = c.ours;
  }
  if (cause == nullptr) {
    if (status.code() == absl::StatusCode::kDeadlineExceeded) return std::nullopt;
    // UNAVAILABLE with tomod's own words (shutting down, degraded): not a connection problem.
    if (absl::StrContains(message, "tomod")) return std::nullopt;
    cause = "no connection";
  }
  return absl::StrCat("cannot reach tomod at ", server, " (", cause,
                      "): is tomod running there? --server or TOMO_SERVER give its address");
}

int FailRpc(const GlobalOptions& global, absl::string_view what, const absl::Status& status) {
  if (std::optional<std::string> problem = ConnectionProblem(global.server, status)) {
    return Fail(what, *problem, kExitUnavailable);
  }
  return Fail(what, status);
}

std::string HumanBytes(uint64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, units[unit]);
}

std::string FormatTime(const google::protobuf::Timestamp& time, bool milliseconds) {
  if (time.seconds() == 0 && time.nanos() == 0) return "-";
  const absl::Time t = absl::FromUnixSeconds(time.seconds()) + absl::Nanoseconds(time.nanos());
  return absl::FormatTime(milliseconds ? "%Y-%m-%dT%H:%M:%E3SZ" : "%Y-%m-%dT%H:%M:%SZ", t,
                          absl::UTCTimeZone());
}

std::string WindowName(v1::FilterWindow window) {
  if (window == v1::FILTER_WINDOW_UNSPECIFIED) window = v1::FILTER_WINDOW_RAM_LAK;
  for (const WindowEntry& entry : kWindows) {
    if (entry.window == window) return entry.name;
  }
  return absl::StrCat("window ", static_cast<int>(window));
}

std::vector<std::string> WindowNames() {
  std::vector<std::string> names;
  for (const WindowEntry& entry : kWindows) names.push_back(entry.name);
  return names;
}

bool ParseWindow(const std::string& name, v1::FilterWindow* window) {
  for (const WindowEntry& entry : kWindows) {
    if (name == entry.name) {
      *window = entry.window;
      return true;
    }
  }
  return false;
}

namespace {

std::string DescribeAngles(const v1::Angles& angles) {
  return angles.has_uniform() ? absl::StrFormat("%d views over %g deg", angles.uniform().count(),
                                                angles.uniform().span_deg())
                              : absl::StrFormat("%d views", angles.list().degrees_size());
}

std::string DescribeDetector(const v1::Detector& d) {
  return absl::StrFormat("%dx%d %sdetector of %g x %g mm", d.rows(), d.columns(),
                         d.shape() == v1::DETECTOR_SHAPE_CYLINDRICAL ? "cylindrical " : "",
                         d.row_spacing_mm(), d.column_spacing_mm());
}

std::string DescribeCone(const v1::ConeBeam& c) {
  return absl::StrFormat("%s, %s, source-origin %g mm, origin-detector %g mm",
                         DescribeAngles(c.angles()), DescribeDetector(c.detector()),
                         c.source_origin_mm(), c.origin_detector_mm());
}

}  // namespace

std::string DescribeGeometry(const v1::Geometry& g) {
  switch (g.kind_case()) {
    case v1::Geometry::kParallel2D:
      return absl::StrFormat("parallel 2D, %s, %d detectors x %g mm",
                             DescribeAngles(g.parallel_2d().angles()),
                             g.parallel_2d().num_detectors(),
                             g.parallel_2d().detector_spacing_mm());
    case v1::Geometry::kFan2D:
      return absl::StrFormat("fan 2D, %s, %d detectors x %g mm, source-origin %g mm, "
                             "origin-detector %g mm",
                             DescribeAngles(g.fan_2d().angles()), g.fan_2d().num_detectors(),
                             g.fan_2d().detector_spacing_mm(), g.fan_2d().source_origin_mm(),
                             g.fan_2d().origin_detector_mm());
    case v1::Geometry::kParallel3D:
      return absl::StrFormat("parallel 3D, %s, %s", DescribeAngles(g.parallel_3d().angles()),
                             DescribeDetector(g.parallel_3d().detector()));
    case v1::Geometry::kCone:
      return absl::StrCat("cone beam, ", DescribeCone(g.cone()));
    case v1::Geometry::kHelical:
      return absl::StrFormat("helical cone beam, %s, pitch %g mm per turn",
                             DescribeCone(g.helical().cone()), g.helical().pitch_mm_per_turn());
    case v1::Geometry::kVectors:
      return absl::StrFormat("%d views as vectors, %dx%d detector", g.vectors().views_size(),
                             g.vectors().rows(), g.vectors().columns());
    case v1::Geometry::kFromInputFiles:
      return "from the input files (DICOM-CT-PD)";
    case v1::Geometry::kRadon3D: {
      const v1::Radon3D& r = g.radon_3d();
      const std::string directions =
          r.has_uniform_solid_angle()
              ? absl::StrFormat("%d directions (uniform solid angle)",
                                r.uniform_solid_angle().count())
          : r.has_equal_linear_angle()
              ? absl::StrFormat("%d x %d directions (equal linear angle)",
                                r.equal_linear_angle().n_phi(), r.equal_linear_angle().n_theta())
              : absl::StrFormat("%d directions", r.directions_size());
      return absl::StrFormat("3D Radon, %s, %d samples x %g mm", directions, r.num_samples(),
                             r.sample_spacing_mm());
    }
    case v1::Geometry::KIND_NOT_SET:
      break;
  }
  return "-";
}

std::string DescribeAlgorithm(const v1::Algorithm& algorithm) {
  switch (algorithm.kind_case()) {
    case v1::Algorithm::kFbp: {
      std::string text = absl::StrCat("fbp (window ", WindowName(algorithm.fbp().window()));
      if (algorithm.fbp().has_cutoff()) absl::StrAppend(&text, ", cutoff ", algorithm.fbp().cutoff());
      return text + ")";
    }
    case v1::Algorithm::kSirt:
      return absl::StrCat("sirt (", algorithm.sirt().iterations(), " iterations)");
    case v1::Algorithm::kSart:
      return absl::StrCat("sart (", algorithm.sart().iterative().iterations(), " iterations)");
    case v1::Algorithm::kOsSart:
      return absl::StrCat("os_sart (", algorithm.os_sart().blocks(), " blocks, ",
                          algorithm.os_sart().iterative().iterations(), " iterations)");
    case v1::Algorithm::kCgls:
      return absl::StrCat("cgls (", algorithm.cgls().iterations(), " iterations)");
    case v1::Algorithm::kArt:
      return absl::StrCat("art on a stored matrix (", algorithm.art().iterations(),
                          " iterations, ",
                          v1::MatrixFormat_Name(algorithm.art().matrix_format()), ")");
    case v1::Algorithm::kIcd:
      return absl::StrCat("icd (", algorithm.icd().iterations() == 0 ? 4 : algorithm.icd().iterations(),
                          " iterations, start ",
                          algorithm.icd().start() == v1::ICD_START_ZERO ? "zero" : "fdk", ")");
    case v1::Algorithm::KIND_NOT_SET:
      return "(not set)";
  }
  return "(unknown)";
}

ProgressStyle ProgressWanted(const GlobalOptions& global) {
  if (global.quiet) return ProgressStyle::kNone;
  return ::isatty(STDERR_FILENO) == 1 ? ProgressStyle::kBar : ProgressStyle::kLines;
}

absl::Status MatchDataSize(const std::vector<std::string>& data_paths, v1::JobSpec* spec) {
  uint64_t total = 0;
  for (const std::string& path : data_paths) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      std::string message = absl::StrCat("cannot open ", path, ": ", std::strerror(errno));
      return errno == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
    }
    total += static_cast<uint64_t>(st.st_size);
  }
  if (spec->input().size_bytes() == 0) {
    spec->mutable_input()->set_size_bytes(total);
  } else if (spec->input().size_bytes() != total) {
    return absl::InvalidArgumentError(
        absl::StrCat("input.size_bytes: ", spec->input().size_bytes(),
                     " does not match the data: ", absl::StrJoin(data_paths, " + "), " holds ",
                     total, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status PrepareInputFiles(std::vector<std::string>* data_paths, v1::JobSpec* spec) {
  namespace fs = std::filesystem;
  std::vector<std::string> expanded;
  for (const std::string& path : *data_paths) {
    std::error_code error;
    if (!fs::is_directory(path, error)) {
      expanded.push_back(path);
      continue;
    }
    std::vector<std::string> inside;
    for (const fs::directory_entry& entry : fs::directory_iterator(path, error)) {
      const std::string name = entry.path().filename().string();
      if (!name.empty() && name[0] != '.' && entry.is_regular_file()) {
        inside.push_back(entry.path().string());
      }
    }
    if (error) return absl::InternalError(absl::StrCat("cannot list ", path, ": ", error.message()));
    if (inside.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": the directory holds no file"));
    }
    std::sort(inside.begin(), inside.end());
    expanded.insert(expanded.end(), inside.begin(), inside.end());
  }
  *data_paths = std::move(expanded);
  v1::ProjectionInput* input = spec->mutable_input();
  const bool file_encoding = input->encoding() == v1::DATA_ENCODING_TIFF ||
                             input->encoding() == v1::DATA_ENCODING_DICOM_CT_PD ||
                             input->encoding() == v1::DATA_ENCODING_HDF5;
  std::vector<uint64_t> sizes;
  for (const std::string& path : *data_paths) {
    std::error_code error;
    const uintmax_t size = fs::file_size(path, error);
    if (error) {
      const std::string message = absl::StrCat("cannot open ", path, ": ", error.message());
      return error == std::errc::no_such_file_or_directory ? absl::NotFoundError(message)
                                                            : absl::InternalError(message);
    }
    sizes.push_back(static_cast<uint64_t>(size));
  }
  if (input->files().empty() && (file_encoding || data_paths->size() > 1)) {
    for (size_t i = 0; i < data_paths->size(); ++i) {
      v1::InputFile* file = input->add_files();
      file->set_name(fs::path((*data_paths)[i]).filename().string());
      file->set_size_bytes(sizes[i]);
      file->set_role(v1::INPUT_ROLE_PROJECTIONS);
    }
  } else if (!input->files().empty()) {
    if (static_cast<size_t>(input->files_size()) != data_paths->size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input.files: the spec lists ", input->files_size(), " files, --data gives ",
          data_paths->size(), " (", absl::StrJoin(*data_paths, ", "), ")"));
    }
    for (int i = 0; i < input->files_size(); ++i) {
      v1::InputFile* file = input->mutable_files(i);
      if (file->name().empty()) file->set_name(fs::path((*data_paths)[i]).filename().string());
      if (file->size_bytes() == 0) file->set_size_bytes(sizes[static_cast<size_t>(i)]);
      if (file->size_bytes() != sizes[static_cast<size_t>(i)]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input.files[", i, "].size_bytes: ", file->size_bytes(), " but ",
            (*data_paths)[static_cast<size_t>(i)], " holds ", sizes[static_cast<size_t>(i)],
            " bytes"));
      }
    }
  }
  return MatchDataSize(*data_paths, spec);
}

namespace {

// global.connection from the TLS options and the token (TOMO_TOKEN, else --token-file).
absl::Status SetUpConnection(GlobalOptions& global) {
  if (global.tls || !global.tls_ca.empty() || !global.tls_cert.empty() ||
      !global.tls_key.empty()) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        client::MakeChannelCredentials({global.tls_ca, global.tls_cert, global.tls_key});
    if (!credentials.ok()) return credentials.status();
    global.connection.credentials = *credentials;
  }
  if (const char* token = std::getenv("TOMO_TOKEN"); token != nullptr && *token != '\0') {
    global.connection.bearer_token = std::string(absl::StripAsciiWhitespace(token));
  } else if (!global.token_file.empty()) {
    absl::StatusOr<std::string> token = client::ReadTokenFile(global.token_file);
    if (!token.ok()) return token.status();
    global.connection.bearer_token = *token;
  }
  return absl::OkStatus();
}

}  // namespace

client::ClientOptions ClientOptionsFor(const GlobalOptions& global,
                                       client::ClientOptions options) {
  options.credentials = global.connection.credentials;
  options.bearer_token = global.connection.bearer_token;
  return options;
}

int RunCli(int argc, char** argv) {
  CLI::App app{"tomo: the tomoserve client. Submits tomography jobs to tomod, watches and "
               "fetches them, or runs them here (tomo local).",
               "tomo"};
  app.set_version_flag("--version", "tomo " + core::BuildDescription());
  app.footer(kExitCodesHelp);
  app.require_subcommand(1);
  app.fallthrough();

  GlobalOptions global;
  app.add_option("--server", global.server,
                 "tomod address, host[:port] (port 50051 when left out; http:// or grpc:// "
                 "may precede it)")
      ->envname("TOMO_SERVER")
      ->capture_default_str();
  app.add_flag("--json", global.json,
               "print JSON on stdout instead of text: one object (watch: one a line per "
               "event); paths under \"files\"");
  app.add_flag("-q,--quiet", global.quiet,
               "no progress (a bar on a terminal, else \"progress: \" lines on stderr)");
  app.add_flag("--tls", global.tls,
               "speak TLS to tomod, checking its certificate against the system's trusted "
               "roots (implied by --tls-ca and --tls-cert)")
      ->envname("TOMO_TLS");
  app.add_option("--tls-ca", global.tls_ca,
                 "PEM CA certificate that tomod's certificate must chain to (TLS)")
      ->envname("TOMO_TLS_CA");
  app.add_option("--tls-cert", global.tls_cert,
                 "PEM client certificate for mutual TLS (with --tls-key)")
      ->envname("TOMO_TLS_CERT");
  app.add_option("--tls-key", global.tls_key, "PEM private key of --tls-cert")
      ->envname("TOMO_TLS_KEY");
  app.add_option("--token-file", global.token_file,
                 "file holding the bearer token tomod asks for (TOMO_TOKEN, the token itself, "
                 "wins over it)")
      ->envname("TOMO_TOKEN_FILE");

  std::vector<Command> commands;
  AddJobCommands(app, global, commands);
  AddLocalCommands(app, global, commands);
  AddSpecCommands(app, global, commands);
  AddCenterOfRotationCommands(app, commands);
  AddOutputCommands(app, global, commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string where = "usage";
    for (const CLI::App* sub : app.get_subcommands()) where = sub->get_name();
    if (where == "usage") {
      // CLI11 reports an unknown command as a missing one: name it.
      for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--server" || arg == "--tls-ca" || arg == "--tls-cert" ||
            arg == "--tls-key" || arg == "--token-file") {
          ++i;
          continue;
        }
        if (arg.empty() || arg[0] == '-') continue;
        bool known = false;
        for (const Command& command : commands) known |= command.app->get_name() == arg;
        if (!known) {
          return Fail("usage", absl::StrCat("unknown command \"", arg, "\" (see tomo --help)"),
                      kExitUsage);
        }
        break;
      }
    }
    std::string hint = where == "usage" ? "see tomo --help"
                                        : absl::StrCat("see tomo ", where, " --help");
    return Fail(where == "usage" ? "usage" : absl::StrCat(where, ": usage"),
                absl::StrCat(e.what(), " (", hint, ")"), kExitUsage);
  }
  // The address as the user may write it (a bare host, http://, grpc://) made a gRPC target.
  absl::StatusOr<std::string> target = client::ServerTarget(global.server);
  if (!target.ok()) return Fail("usage", target.status().message(), kExitUsage);
  global.server = *target;
  if (absl::Status connection = SetUpConnection(global); !connection.ok()) {
    return Fail("connection", connection);
  }
  for (const Command& command : commands) {
    if (!command.app->parsed()) continue;
    const int code = command.run();
    if (global.json && code == kExitOk && !Report().printed) {
      nlohmann::ordered_json out = nlohmann::ordered_json::object();
      if (!Report().files.empty()) out["files"] = Report().files;
      for (const auto& [key, value] : Report().fields.items()) out[key] = value;
      std::cout << out.dump(2) << std::endl;
    }
    std::cout.flush();
    return code;
  }
  return Fail("usage", "no command given (see tomo --help)", kExitUsage);
}

}  // namespace tomo::cli
