#include "server/security/authenticator.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/telemetry/log.h"

namespace tomo::server {
namespace {

std::string ToString(const grpc::string_ref& ref) { return std::string(ref.data(), ref.size()); }

// The first value of an auth context property, or empty.
std::string FirstProperty(const grpc::AuthContext& auth, const char* name) {
  std::vector<grpc::string_ref> values = auth.FindPropertyValues(name);
  return values.empty() ? std::string() : ToString(values.front());
}

}  // namespace

absl::StatusOr<Principal> Authenticator::Authenticate(
    const grpc::ServerContextBase& context) const {
  absl::StatusOr<Principal> who = Identify(context);
  if (!who.ok()) {
    if (metrics_ != nullptr) metrics_->Unauthenticated();
    uint64_t suppressed = 0;
    if (refusal_log_->Admit(&suppressed)) {
      LogFields fields = {{"peer", context.peer()},
                          {"reason", std::string(who.status().message())}};
      if (suppressed > 0) fields.emplace_back("suppressed", suppressed);
      LogEvent(LogLevel::kWarning, "unauthenticated", "", fields);
    }
  }
  return who;
}

absl::StatusOr<Principal> Authenticator::Identify(const grpc::ServerContextBase& context) const {
  if (tokens_ != nullptr) {
    const auto& metadata = context.client_metadata();
    const auto range = metadata.equal_range(kAuthorizationMetadataKey);
    int count = 0;
    std::string value;
    for (auto it = range.first; it != range.second; ++it) {
      ++count;
      value = ToString(it->second);
    }
    if (count > 1) {
      return absl::UnauthenticatedError(
          absl::StrCat(count, " authorization metadata values; send one: authorization: Bearer "
                              "<token>"));
    }
    if (count == 1) {
      absl::string_view token = value;
      if (!absl::StartsWithIgnoreCase(token, kBearerScheme)) {
        return absl::UnauthenticatedError(
            "authorization metadata: not of the form \"Bearer <token>\"");
      }
      token.remove_prefix(sizeof(kBearerScheme) - 1);
      token = absl::StripAsciiWhitespace(token);
      std::optional<Principal> principal = tokens_->Find(token);
      if (!principal) {
        return absl::UnauthenticatedError(
            "authorization metadata: the bearer token is not valid (unknown or revoked)");
      }
      return *principal;
    }
  }
  if (certificate_identity_) {
    std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
    if (auth != nullptr && auth->IsPeerAuthenticated()) {
      std::string name = FirstProperty(*auth, GRPC_X509_CN_PROPERTY_NAME);
      if (name.empty()) name = FirstProperty(*auth, GRPC_X509_SAN_PROPERTY_NAME);
      if (name.empty()) {
        return absl::UnauthenticatedError(
            "the client certificate has neither a subject CN nor a subject alternative name "
            "to name the tenant");
      }
      if (absl::Status valid = CheckTenantName(name); !valid.ok()) {
        return absl::UnauthenticatedError(
            absl::StrCat("the client certificate's name cannot be a tenant: ", valid.message()));
      }
      return Principal{name, Role::kUser};
    }
  }
  if (tokens_ != nullptr) {
    return absl::UnauthenticatedError(
        "missing authorization metadata: tomod requires \"authorization: Bearer <token>\" "
        "(tomo: TOMO_TOKEN, TOMO_TOKEN_FILE or --token-file)");
  }
  if (certificate_identity_) {
    return absl::UnauthenticatedError("no verified client certificate");
  }
  return Principal{"", Role::kAdmin};
}

}  // namespace tomo::server
