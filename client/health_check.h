// The standard gRPC health check, grpc.health.v1.Health/Check, as tomod serves it: without
// a token, for the whole server (service "") and for the named parts, e.g.
// "tomoserve.v1.Reconstruction" and "tomoserve.v1.Reconstruction.admission" (NOT_SERVING
// while the spool is short of space). tomod turns "" NOT_SERVING when it starts to drain.
//
// Container health checks and probes run it as `tomo health`:
//   absl::StatusOr<ServingStatus> s = CheckHealth(MakeChannel(target, options), "",
//                                                 absl::Seconds(5));
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace tomo::client {

// grpc.health.v1.HealthCheckResponse.ServingStatus, same numbers.
enum class ServingStatus : int {
  kUnknown = 0,
  kServing = 1,
  kNotServing = 2,
  kServiceUnknown = 3,
};

// "SERVING", "NOT_SERVING", ... as the health protocol names them.
std::string ServingStatusName(ServingStatus status);

// One Check call with this deadline. The RPC's error when it fails (UNAVAILABLE: nothing
// answers, or TLS failed; NOT_FOUND: the server does not know `service`); otherwise the
// status the server reports.
absl::StatusOr<ServingStatus> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                          const std::string& service, absl::Duration timeout);

}  // namespace tomo::client
