#include "client/health_check.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/tomo_client.h"
#include "google/protobuf/wrappers.pb.h"
#include "grpcpp/generic/generic_stub.h"

namespace tomo::client {
namespace {

// Debian's gRPC packages carry the health service's server side but not its .proto, so the
// call goes through the generic stub. HealthCheckRequest is {string service = 1} and
// HealthCheckResponse {ServingStatus status = 1}, an enum, encoded as a varint: on the wire
// they are google.protobuf.StringValue and Int32Value, which protobuf itself provides.
using HealthCheckRequest = google::protobuf::StringValue;
using HealthCheckResponse = google::protobuf::Int32Value;

constexpr char kCheckMethod[] = "/grpc.health.v1.Health/Check";

}  // namespace

std::string ServingStatusName(ServingStatus status) {
  switch (status) {
    case ServingStatus::kUnknown:
      return "UNKNOWN";
    case ServingStatus::kServing:
      return "SERVING";
    case ServingStatus::kNotServing:
      return "NOT_SERVING";
    case ServingStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
  }
  return absl::StrCat("status ", static_cast<int>(status));
}

absl::StatusOr<ServingStatus> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                          const std::string& service, absl::Duration timeout) {
  HealthCheckRequest request;
  request.set_value(service);
  grpc::ByteBuffer request_bytes;
  bool own_buffer = false;
  grpc::Status serialized = grpc::SerializationTraits<HealthCheckRequest>::Serialize(
      request, &request_bytes, &own_buffer);
  if (!serialized.ok()) return FromGrpcStatus(serialized);

  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  grpc::ByteBuffer response_bytes;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, kCheckMethod, grpc::StubOptions(), &request_bytes, &response_bytes,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return FromGrpcStatus(status);

  HealthCheckResponse response;
  grpc::Status parsed =
      grpc::SerializationTraits<HealthCheckResponse>::Deserialize(&response_bytes, &response);
  if (!parsed.ok()) {
    return absl::DataLossError(
        absl::StrCat(kCheckMethod, ": the reply does not parse: ", parsed.error_message()));
  }
  return static_cast<ServingStatus>(response.value());
}

}  // namespace tomo::client
