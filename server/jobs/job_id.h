// Job ids: "YYYYMMDD-HHMMSS-uuuuuu-<12 hex>" — the creation time in UTC with microseconds,
// then 48 random bits from the OS. Ids sort in creation order (the clock part is made
// strictly increasing within a process), are safe as file names, and are hard to guess.
//
//   std::string id = NewJobId();        // "20240517-103045-123456-3f9a1c2b7d4e"
//   if (!IsValidJobId(request.job_id())) ...
//
// Thread-safe.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace tomo::server {

std::string NewJobId();
// True when id has the form NewJobId() produces (so it can be used as a path component).
bool IsValidJobId(absl::string_view id);
// id quoted and shortened for error messages, whatever the client sent.
std::string QuoteJobId(absl::string_view id);

}  // namespace tomo::server
