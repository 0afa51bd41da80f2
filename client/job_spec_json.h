// A JobSpec as a file: its canonical protobuf JSON mapping, the same schema as the wire.
//
// Writing: lowerCamelCase field names, enums by name, every primitive field printed (so a
// file shows what can be set), indented, ending in a newline. Reading accepts both
// lowerCamelCase and the proto's own names (protobuf's JSON parser does), refuses unknown
// fields, and says nothing about whether the spec makes sense: tomod (and `tomo local`)
// validate it.
//
// Errors: INVALID_ARGUMENT naming the file (or the `source` given) and what the JSON
// parser found, e.g.
//   "job.json: not a valid tomoserve.v1.JobSpec: INVALID_ARGUMENT:Cannot find field."
// NOT_FOUND / INTERNAL naming the path when it cannot be read or written.
//
//   absl::StatusOr<tomoserve::v1::JobSpec> spec = ReadJobSpecFile("job.json");
//   spec->set_priority(10);
//   absl::Status written = WriteJobSpecFile("job2.json", *spec);
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::client {

// Canonical JSON of any message (JobSpec, Job, ServerInfo, ...), as described above.
std::string MessageToJson(const google::protobuf::Message& message);

// Parses JSON into message; `source` names where it came from in errors.
absl::Status MessageFromJson(absl::string_view json, absl::string_view source,
                             google::protobuf::Message* message);

absl::StatusOr<tomoserve::v1::JobSpec> JobSpecFromJson(absl::string_view json,
                                                        absl::string_view source = "JSON");
absl::StatusOr<tomoserve::v1::JobSpec> ReadJobSpecFile(const std::string& path);
// Writes through a temporary file renamed into place.
absl::Status WriteJobSpecFile(const std::string& path, const tomoserve::v1::JobSpec& spec);

}  // namespace tomo::client
