#include "server/security/token_table.h"

#include <openssl/evp.h>

#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tomo::server {
namespace {

std::string Sha256(absl::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

bool IsTenantChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
         c == '-';
}

}  // namespace

absl::string_view RoleName(Role role) { return role == Role::kAdmin ? "admin" : "user"; }

absl::Status CheckTenantName(absl::string_view tenant) {
  if (tenant.empty() || tenant.size() > kMaxTenantBytes) {
    return absl::InvalidArgumentError(absl::StrCat("tenant: length ", tenant.size(),
                                                   " is out of range [1, ", kMaxTenantBytes,
                                                   "]"));
  }
  for (char c : tenant) {
    if (!IsTenantChar(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tenant: \"", absl::CEscape(tenant),
                       "\" has a character outside [A-Za-z0-9._-]"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text, absl::string_view source) {
  TokenTable table;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const std::string where = absl::StrCat(source, ":", line_number, ": ");
    absl::string_view stripped = absl::StripAsciiWhitespace(line);
    if (stripped.empty() || stripped.front() == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(stripped, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, fields.size(), " fields; expected 3: TOKEN TENANT ROLE (role user or admin)"));
    }
    const absl::string_view token = fields[0];
    if (token.size() < kMinTokenBytes || token.size() > kMaxTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat(where, "token: length ", token.size(),
                                                     " is out of range [", kMinTokenBytes, ", ",
                                                     kMaxTokenBytes, "]"));
    }
    for (char c : token) {
      if (c < '!' || c > '~') {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "token: has a character that is not printable ASCII"));
      }
    }
    if (absl::Status tenant = CheckTenantName(fields[1]); !tenant.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, tenant.message()));
    }
    Principal principal;
    principal.tenant = std::string(fields[1]);
    if (fields[2] == "admin") {
      principal.role = Role::kAdmin;
    } else if (fields[2] == "user") {
      principal.role = Role::kUser;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "role: \"", absl::CEscape(fields[2]), "\" is not one of user, admin"));
    }
    if (!table.by_digest_.emplace(Sha256(token), std::move(principal)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "token: the same token is on an earlier line; each token names "
                              "one tenant"));
    }
  }
  return table;
}

std::optional<Principal> TokenTable::Find(absl::string_view token) const {
  auto it = by_digest_.find(Sha256(token));
  if (it == by_digest_.end()) return std::nullopt;
  return it->second;
}

size_t TokenTable::tenant_count() const {
  std::set<absl::string_view> tenants;
  for (const auto& [digest, principal] : by_digest_) tenants.insert(principal.tenant);
  return tenants.size();
}

}  // namespace tomo::server
