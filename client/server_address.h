// The address of tomod as a user writes it, made into a gRPC target.
//
//   "host:port"          as is
//   "host", "[::1]"      the default port added: "host:50051", "[::1]:50051"
//   "http://host:port"   the scheme dropped ("grpc://" too); a trailing "/" dropped
//   "unix:/path", "dns:///host:port", "ipv4:..."   gRPC's own target forms, as is
//
// INVALID_ARGUMENT (naming the address) for an empty one, a port that is not a number in
// [1, 65535], a path after the host, or "https://" (TLS is asked for with the client's TLS
// options, not by the scheme).
//
//   absl::StatusOr<std::string> target = ServerTarget("localhost");  // "localhost:50051"
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tomo::client {

inline constexpr int kDefaultTomodPort = 50051;

absl::StatusOr<std::string> ServerTarget(absl::string_view address);

}  // namespace tomo::client
