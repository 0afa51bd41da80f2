// ReadSecretFile: the text of a file that holds secrets (tomod's --tokens_file,
// --metrics_token_file), refused when other users may read or write it or its group may
// write it, as ssh refuses a private key that others can read. A group may read it so
// that a deployment can hand the file to tomod through a group (a Kubernetes secret with
// defaultMode 0440 and an fsGroup).
//
//   TOMO_ASSIGN_OR_RETURN(std::string text, ReadSecretFile("--tokens_file", path));
//
// Errors name the flag and the path, never the contents: NOT_FOUND / PERMISSION_DENIED /
// INTERNAL when it cannot be read, FAILED_PRECONDITION for its mode (naming it and the fix,
// chmod 600 or 640), for a file that is not a regular file or over 16 MiB. Thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tomo::server {

absl::StatusOr<std::string> ReadSecretFile(absl::string_view flag, const std::string& path);

}  // namespace tomo::server
