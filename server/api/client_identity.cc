#include "server/api/client_identity.h"

#include <grpcpp/security/auth_context.h>
#include <grpcpp/server_context.h>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace tomo::server {

std::string ClientFromPeer(absl::string_view peer) {
  absl::string_view rest = peer;
  if (absl::ConsumePrefix(&rest, "ipv4:")) {
    const size_t colon = rest.rfind(':');
    return std::string(colon == absl::string_view::npos ? rest : rest.substr(0, colon));
  }
  if (absl::ConsumePrefix(&rest, "ipv6:")) {
    // "[addr]:port"; the address may carry a zone ("%25eth0"), kept as part of the host.
    if (absl::ConsumePrefix(&rest, "[")) {
      const size_t close = rest.find(']');
      if (close != absl::string_view::npos) return std::string(rest.substr(0, close));
    }
    return std::string(rest);
  }
  if (absl::StartsWith(peer, "unix:") || absl::StartsWith(peer, "unix-abstract:")) {
    return "unix";
  }
  return std::string(peer);
}

std::string ClientIdentity(const grpc::CallbackServerContext& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    std::vector<std::string> names;
    for (const grpc::string_ref& name : auth->GetPeerIdentity()) {
      names.emplace_back(name.data(), name.size());
    }
    if (!names.empty()) return absl::StrJoin(names, ",");
  }
  return ClientFromPeer(context.peer());
}

std::string ClientIdentity(const grpc::CallbackServerContext& context, const Principal& caller) {
  return caller.tenant.empty() ? ClientIdentity(context) : caller.tenant;
}

}  // namespace tomo::server
