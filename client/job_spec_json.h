// A JobSpec as a file: protobuf's JSON mapping of the wire message, with one change of
// shape: every algorithm's options sit directly under its name (client/algorithm_options_shape.h;
// SART's and OS-SART's older nested "iterative" form is still read).
//
// Writing: lowerCamelCase field names, enums by name, every primitive field printed (so a
// file shows what can be set), indented, ending in a newline. Reading accepts both
// lowerCamelCase and the proto's own names, `//` and `/* */` comments (`tomo spec` writes
// commented files), refuses unknown fields naming the nearest field, and unknown enum names
// listing the allowed ones (client/json_fields_check.h). It says nothing about whether the
// spec makes sense: tomod (and `tomo local`, `tomo validate`) validate it.
//
// Errors: INVALID_ARGUMENT naming the file (or the `source` given) and what was found, e.g.
//   "job.json: algorithm.sirt.iteratons: no field \"iteratons\" in
//    tomoserve.v1.IterativeOptions; did you mean \"iterations\"?"
//   "job.json: not valid JSON: parse error at line 3, column 1: ..."
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

// The same on one line, without the final newline (JSON Lines: `tomo watch --json`).
std::string MessageToJsonLine(const google::protobuf::Message& message);

// Parses JSON into message; `source` names where it came from in errors.
absl::Status MessageFromJson(absl::string_view json, absl::string_view source,
                             google::protobuf::Message* message);

// A JobSpec's file text (the shape above).
std::string JobSpecToJson(const tomoserve::v1::JobSpec& spec);

absl::StatusOr<tomoserve::v1::JobSpec> JobSpecFromJson(absl::string_view json,
                                                        absl::string_view source = "JSON");
absl::StatusOr<tomoserve::v1::JobSpec> ReadJobSpecFile(const std::string& path);
// Writes through a temporary file renamed into place.
absl::Status WriteJobSpecFile(const std::string& path, const tomoserve::v1::JobSpec& spec);

}  // namespace tomo::client
