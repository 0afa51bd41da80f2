// absl::Status <-> grpc::Status, the one place where the two meet. The codes have the same
// numbers; messages pass unchanged.
//
//   reactor->Finish(ToGrpcStatus(manager.DeleteJob(id)));
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tomo::server {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace tomo::server
