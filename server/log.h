// tomod's log: one line per call on stderr, "2024-05-17T10:30:45.123Z tomod: <message>".
// Messages about a job start with "job <id>". Thread-safe; lines never interleave.
//
//   Log(absl::StrCat("job ", id, " queued (", bytes, " bytes)"));
#pragma once

#include "absl/strings/string_view.h"

namespace tomo::server {

void Log(absl::string_view message);

}  // namespace tomo::server
