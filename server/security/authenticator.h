// Authenticator: the Principal (principal.h) of a gRPC call to tomod, from its bearer token
// or its client certificate, or UNAUTHENTICATED.
//
// In this order:
//   1. A call with `authorization: Bearer <token>` metadata, when tomod has a tokens file:
//      the token's principal; a token the file does not hold (unknown, revoked, or a
//      malformed header) is UNAUTHENTICATED. Without a tokens file the header is ignored.
//   2. Else, with mutual TLS (certificate_identity): the client certificate's subject
//      common name (CN) as the tenant, role user; a certificate without a CN gives its first
//      subject alternative name (DNS, URI or e-mail). The name must be a valid tenant
//      (token_table.h), else UNAUTHENTICATED naming the name. An admin needs a token.
//   3. Else, with a tokens file: UNAUTHENTICATED (the token is missing).
//   4. Else (no authentication configured): the default tenant as admin, today's behaviour
//      of a tomod that knows no tenants.
// The messages never hold the token sent. Every refusal is counted
// (tomod_calls_unauthenticated_total) and logged (event "unauthenticated", with the peer and
// the reason, never the token), at most kRefusalLogLines lines per kRefusalLogInterval: a
// client repeating a refused call cannot flood the log; the next line written carries the
// count of those left out ("suppressed", server/telemetry/log_rate_limit.h).
//
//   Authenticator authenticator(tokens.get(), /*certificate_identity=*/true);
//   absl::StatusOr<Principal> who = authenticator.Authenticate(*context);
//   if (!who.ok()) { reactor->Finish(ToGrpcStatus(who.status())); ... }
//
// Thread-safe (the tokens file may be reloaded meanwhile).
#pragma once

#include <grpcpp/server_context.h>

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/security/principal.h"
#include "server/security/tokens_file.h"
#include "server/telemetry/log_rate_limit.h"
#include "server/telemetry/tomod_metrics.h"

namespace tomo::server {

// The metadata key and scheme of a bearer token.
inline constexpr char kAuthorizationMetadataKey[] = "authorization";
inline constexpr char kBearerScheme[] = "Bearer ";
// Refusals logged, at most, per interval (the rest counted in the next line).
inline constexpr int kRefusalLogLines = 20;
inline constexpr absl::Duration kRefusalLogInterval = absl::Seconds(10);

class Authenticator {
 public:
  // No authentication: every call is the default tenant, as admin.
  Authenticator() = default;
  // tokens: null for none; must outlive the authenticator. certificate_identity: mutual
  // TLS is on, so a verified client certificate names the tenant.
  // metrics: where refusals are counted (tomod_calls_unauthenticated_total); may be null.
  Authenticator(const TokensFile* tokens, bool certificate_identity,
                TomodMetrics* metrics = nullptr)
      : tokens_(tokens), certificate_identity_(certificate_identity), metrics_(metrics) {}

  absl::StatusOr<Principal> Authenticate(const grpc::ServerContextBase& context) const;
  // Whether calls carry an identity (tokens or client certificates).
  bool enabled() const { return tokens_ != nullptr || certificate_identity_; }

 private:
  absl::StatusOr<Principal> Identify(const grpc::ServerContextBase& context) const;

  const TokensFile* tokens_ = nullptr;
  bool certificate_identity_ = false;
  TomodMetrics* metrics_ = nullptr;
  // Shared by the copies of this authenticator (the services take it by value).
  std::shared_ptr<LogRateLimit> refusal_log_ =
      std::make_shared<LogRateLimit>(kRefusalLogLines, kRefusalLogInterval);
};

}  // namespace tomo::server
