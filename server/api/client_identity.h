// Who a call comes from, as tomod's per-client limit (--max_jobs_per_client) and
// Job.client see it: the authenticated peer identity when the connection has one (mutual
// TLS: the certificate's identity), else the host part of the peer address, so that the
// many connections and ports of one machine count as one client.
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

namespace tomo::server {

// The host of a gRPC peer string (grpc::ServerContextBase::peer()); the whole string when
// its form is unknown.
std::string ClientFromPeer(absl::string_view peer);

// The authenticated identity of the call's peer, else ClientFromPeer(context.peer()).
std::string ClientIdentity(const grpc::CallbackServerContext& context);

}  // namespace tomo::server
