// TokenTable: bearer token -> Principal, parsed from the text of tomod's --tokens_file.
//
// The text has one entry a line, three fields separated by spaces or tabs:
//
//   # token                             tenant    role
//   3f9c1e0a7b2d4c68a1e5f0b9d7c3a2e1    lab-a     user
//   9a8b7c6d5e4f30211f2e3d4c5b6a7988    ops       admin
//
// '#' starts a comment (whole lines only: a token may contain '#', but not begin with it,
// since its line would be a comment); blank lines are skipped. A token is 16 to 512 printable ASCII characters without spaces; a tenant 1 to
// 64 characters of [A-Za-z0-9._-] (tenants appear in logs, metrics and job listings); the
// role is user or admin. A token may appear once; a tenant may have several tokens (one per
// pipeline, say, each revocable alone).
//
// Secrets: the table keeps only the SHA-256 digest of each token, and no error names a
// token: they name the source and the line number and what is wrong with the field.
//
//   TOMO_ASSIGN_OR_RETURN(TokenTable table, TokenTable::Parse(text, "/etc/tomod/tokens"));
//   std::optional<Principal> who = table.Find(token_from_the_call);
//
// Parse: INVALID_ARGUMENT naming the source and line. Const methods are thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/security/principal.h"

namespace tomo::server {

inline constexpr size_t kMinTokenBytes = 16;
inline constexpr size_t kMaxTokenBytes = 512;
inline constexpr size_t kMaxTenantBytes = 64;

// INVALID_ARGUMENT naming what is wrong unless tenant is 1 to kMaxTenantBytes characters of
// [A-Za-z0-9._-] (also for tenants taken from client certificates).
absl::Status CheckTenantName(absl::string_view tenant);

class TokenTable {
 public:
  // An empty table (finds nothing).
  TokenTable() = default;
  // source names the text in errors (the file's path).
  static absl::StatusOr<TokenTable> Parse(absl::string_view text, absl::string_view source);

  // The principal of token; nullopt for a token the table does not hold.
  std::optional<Principal> Find(absl::string_view token) const;
  size_t size() const { return by_digest_.size(); }
  // Tenants with at least one token, each once.
  size_t tenant_count() const;

 private:
  // SHA-256 of the token (32 bytes) -> principal.
  std::map<std::string, Principal, std::less<>> by_digest_;
};

}  // namespace tomo::server
