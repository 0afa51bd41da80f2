// One shape for every algorithm's options in JobSpec files: the options sit directly under
// the algorithm's name,
//   "algorithm": {"sirt":    {"iterations": 50, "nonNegative": true}}
//   "algorithm": {"sart":    {"iterations": 10, "relaxation": 0.5, "order": "..."}}
//   "algorithm": {"os_sart": {"iterations": 10, "blocks": 8}}
// as fbp, sirt, cgls, art and icd take them. The wire message (tomoserve.v1.SartOptions,
// OsSartOptions) nests the options SART and OS-SART share with SIRT under `iterative`; that
// older form of the files is still read as it is.
//
// NestIterativeOptions turns a file's flat sart/os_sart options into the proto's nested
// form before protobuf parses it: INVALID_ARGUMENT naming algorithm.sart (or os_sart) when
// a file gives both forms. FlattenIterativeOptions does the reverse for writing files.
//
//   nlohmann::ordered_json spec = nlohmann::ordered_json::parse(text);
//   TOMO_RETURN_IF_ERROR(NestIterativeOptions(&spec));
#pragma once

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace tomo::client {

absl::Status NestIterativeOptions(nlohmann::ordered_json* spec);
void FlattenIterativeOptions(nlohmann::ordered_json* spec);

}  // namespace tomo::client
