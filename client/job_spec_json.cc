#include "client/job_spec_json.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/algorithm_options_shape.h"
#include "client/json_fields_check.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace tomo::client {
namespace {

absl::Status FileError(const std::string& what, const std::string& path, int error) {
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(error));
  if (error == ENOENT) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

}  // namespace

std::string MessageToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = false;
  std::string json;
  // Printing a valid message cannot fail (no Any fields with unknown types here).
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  if (json.empty() || json.back() != '\n') json += '\n';
  return json;
}

std::string MessageToJsonLine(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  options.always_print_primitive_fields = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  while (!json.empty() && (json.back() == '\n' || json.back() == ' ')) json.pop_back();
  return json;
}

absl::Status MessageFromJson(absl::string_view json, absl::string_view source,
                             google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  message->Clear();
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), message, options);
  if (!status.ok()) {
    std::string detail(status.message().data(), status.message().size());
    for (char& c : detail) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": not a valid ", message->GetDescriptor()->full_name(), ": ", detail));
  }
  return absl::OkStatus();
}

std::string JobSpecToJson(const tomoserve::v1::JobSpec& spec) {
  nlohmann::ordered_json document = nlohmann::ordered_json::parse(MessageToJson(spec));
  FlattenIterativeOptions(&document);
  return document.dump(2) + "\n";
}

absl::StatusOr<tomoserve::v1::JobSpec> JobSpecFromJson(absl::string_view json,
                                                        absl::string_view source) {
  nlohmann::ordered_json document;
  try {
    document = nlohmann::ordered_json::parse(json.begin(), json.end(), /*cb=*/nullptr,
                                             /*allow_exceptions=*/true,
                                             /*ignore_comments=*/true);
  } catch (const nlohmann::json::parse_error& error) {
    // "[json.exception.parse_error.101] parse error at line 3, ...": the library's tag off.
    std::string what = error.what();
    if (absl::StartsWith(what, "[json.exception.")) what = what.substr(what.find(']') + 2);
    for (char& c : what) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON: ", what));
  }
  for (absl::Status step : {NestIterativeOptions(&document),
                            CheckJsonFields(document, tomoserve::v1::JobSpec::descriptor())}) {
    if (!step.ok()) return absl::InvalidArgumentError(absl::StrCat(source, ": ", step.message()));
  }
  tomoserve::v1::JobSpec spec;
  absl::Status status = MessageFromJson(document.dump(), source, &spec);
  if (!status.ok()) return status;
  return spec;
}

absl::StatusOr<tomoserve::v1::JobSpec> ReadJobSpecFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return FileError("cannot open", path, errno);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return FileError("cannot read", path, errno);
  return JobSpecFromJson(text.str(), path);
}

absl::Status WriteJobSpecFile(const std::string& path, const tomoserve::v1::JobSpec& spec) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return FileError("cannot create", temp, errno);
    out << JobSpecToJson(spec);
    out.flush();
    if (!out) return FileError("cannot write", temp, errno);
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    int error = errno;
    std::remove(temp.c_str());
    return FileError(absl::StrCat("cannot rename ", temp, " to"), path, error);
  }
  return absl::OkStatus();
}

}  // namespace tomo::client
