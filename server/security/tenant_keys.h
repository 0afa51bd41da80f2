// ScopedIdempotencyKey: a JobSpec.idempotency_key within its tenant, so that one tenant's
// key never finds another tenant's job (a retry is a retry of one's own Submit).
//
// The scoped key is what the job table and the job store index: for the default tenant
// (empty name, no authentication) the key itself, so that records written before tenants
// existed keep their keys; for a named tenant U+001F, the tenant, U+001F, the key. The
// encoding is one-to-one (tenant names have no U+001F; a default-tenant key that starts
// with U+001F gets a second one), so two (tenant, key) pairs never share a scoped key.
//
//   ScopedIdempotencyKey("", "scan-42")      == "scan-42"
//   ScopedIdempotencyKey("lab-a", "scan-42") == "\x1flab-a\x1fscan-42"
//
// Pure; thread-safe. An empty key stays empty (no key).
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tomo::server {

inline std::string ScopedIdempotencyKey(absl::string_view tenant, absl::string_view key) {
  constexpr char kSeparator = '\x1f';
  if (key.empty()) return std::string();
  if (!tenant.empty()) return absl::StrCat(std::string(1, kSeparator), tenant,
                                           std::string(1, kSeparator), key);
  if (key.front() == kSeparator) return absl::StrCat(std::string(1, kSeparator), key);
  return std::string(key);
}

}  // namespace tomo::server
