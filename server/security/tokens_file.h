// TokensFile: tomod's --tokens_file, the TokenTable (token_table.h) read from a file and
// read again on demand (tomod: on SIGHUP), so that tokens are added and revoked without a
// restart.
//
// The file is read as a secret (secret_file.h): one that other users may read or write,
// or that its group may write, is refused (FAILED_PRECONDITION naming the path, its mode
// and the fix, chmod 600 or 640).
//
// Reload() reads the file again: when it cannot be read or parsed, or its mode is refused,
// the table in force stays (calls keep being answered as before) and the reason is logged
// and returned; no log line or error ever holds a token.
//
//   TOMO_ASSIGN_OR_RETURN(std::unique_ptr<TokensFile> tokens, TokensFile::Open(path));
//   std::optional<Principal> who = tokens->Find(token);
//   ... SIGHUP: tokens->Reload(); ...
//
// Errors name the path: NOT_FOUND / PERMISSION_DENIED / INTERNAL when it cannot be read,
// FAILED_PRECONDITION for its mode, INVALID_ARGUMENT from TokenTable::Parse. Thread-safe:
// Find may run while Reload replaces the table.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/security/principal.h"
#include "server/security/token_table.h"

namespace tomo::server {

// The file's table, after the checks above (no logging).
absl::StatusOr<TokenTable> ReadTokensFile(const std::string& path);

class TokensFile {
 public:
  static absl::StatusOr<std::unique_ptr<TokensFile>> Open(const std::string& path);

  // Reads the file again; keeps the table in force on any error (logged and returned).
  // Logs the new table's size on success.
  absl::Status Reload();
  std::optional<Principal> Find(absl::string_view token) const;
  const std::string& path() const { return path_; }
  // Tokens in the table in force.
  size_t size() const;

 private:
  TokensFile(std::string path, TokenTable table)
      : path_(std::move(path)), table_(std::make_shared<const TokenTable>(std::move(table))) {}

  const std::string path_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const TokenTable> table_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tomo::server
