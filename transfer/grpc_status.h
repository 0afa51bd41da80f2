// absl::Status <-> grpc::Status, the one place where the two meet, for both ends of the
// wire (tomod's service and the client library; library tomogrpcstatus). The codes have the
// same numbers (both are the canonical google.rpc.Code); messages pass unchanged.
//
//   reactor->Finish(transfer::ToGrpcStatus(manager.DeleteJob(id)));          // tomod
//   return transfer::FromGrpcStatus(stub_->GetJob(&context, request, &job));  // client
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tomo::transfer {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace tomo::transfer
