#include "client/job_spec_json.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

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

absl::StatusOr<tomoserve::v1::JobSpec> JobSpecFromJson(absl::string_view json,
                                                        absl::string_view source) {
  tomoserve::v1::JobSpec spec;
  absl::Status status = MessageFromJson(json, source, &spec);
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
    out << MessageToJson(spec);
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
