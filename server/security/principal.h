// Principal: who a call comes from once tomod has authenticated it, a tenant and a role.
//
// A tenant owns the jobs its calls submit and sees only those; an admin sees and manages
// every tenant's jobs. Without authentication configured (no --tokens_file, no client
// certificates), every call is the default tenant, whose name is empty, as an admin: the
// behaviour of a tomod that knows no tenants.
//
//   Principal user{"lab-a", Role::kUser};
//   if (user.SeesTenant(job.tenant())) ...
//
// Plain values; thread-compatible.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace tomo::server {

enum class Role { kUser, kAdmin };

// "user", "admin".
absl::string_view RoleName(Role role);

struct Principal {
  // Names the tenant; empty: the default tenant (no authentication configured).
  std::string tenant;
  Role role = Role::kUser;

  // Whether this principal may see and manage a job of that tenant: its own, or any for
  // an admin.
  bool SeesTenant(absl::string_view job_tenant) const {
    return role == Role::kAdmin || job_tenant == tenant;
  }
};

}  // namespace tomo::server
