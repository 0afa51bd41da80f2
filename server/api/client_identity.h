// Who a call comes from, as tomod's per-client limit (--max_jobs_per_client) and
// Job.client see it: the caller's tenant when the call was authenticated (a bearer token
// or a client certificate: security/authenticator.h), so that changing address does not
// escape the limit; else the authenticated peer identity when the connection has one,
// else the host part of the peer address, so that the many connections and ports of one
// machine count as one client.
//
//   ClientFromPeer("ipv4:127.0.0.1:53912")   == "127.0.0.1"
//   ClientFromPeer("ipv6:[::1]:53912")       == "::1"
//   ClientFromPeer("unix:/run/tomod.sock")   == "unix"   (no peer address to tell apart)
//
// Pure functions; thread-safe.
#pragma once

#include <grpcpp/support/server_callback.h>

#include <string>

#include "absl/strings/string_view.h"
#include "server/security/principal.h"

namespace tomo::server {

// The host of a gRPC peer string (grpc::ServerContextBase::peer()); the whole string when
// its form is unknown.
std::string ClientFromPeer(absl::string_view peer);

// The authenticated identity of the call's peer, else ClientFromPeer(context.peer()).
std::string ClientIdentity(const grpc::CallbackServerContext& context);

// caller's tenant when it has one (the call was authenticated), else ClientIdentity(context).
std::string ClientIdentity(const grpc::CallbackServerContext& context, const Principal& caller);

}  // namespace tomo::server
