// Requests and replies of tomoserve.v1.Reconstruction in their wire form. Every method of
// the service is raw (grpc::ByteBuffer in and out), so that a request whose bytes do not
// parse is answered by tomod itself: INVALID_ARGUMENT naming the message type, e.g.
//   "GetJobRequest: not a valid message: ..."
// (gRPC's generated handlers would answer such a call UNIMPLEMENTED with no message, and a
// streaming call would see the bad message as the end of the stream).
//
// Header-only; thread-compatible (no state).
//
//   absl::StatusOr<pb::GetJobRequest> request = ParseMessage<pb::GetJobRequest>(*raw);
//   if (!request.ok()) return reactor->Finish(transfer::ToGrpcStatus(request.status()));
//   TOMO_RETURN_IF_ERROR(SerializeMessage(job, raw_response));
#pragma once

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace tomo::server {

// INVALID_ARGUMENT "<Message's type>: not a valid message: <gRPC's reason>" when buffer's
// bytes are not a Message (bad wire format, a string that is not UTF-8, ...).
template <typename Message>
absl::StatusOr<Message> ParseMessage(const grpc::ByteBuffer& buffer) {
  Message message;
  grpc::ByteBuffer copy(buffer);  // Deserialize consumes its buffer (the slices are shared)
  grpc::Status parsed = grpc::SerializationTraits<Message>::Deserialize(&copy, &message);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(Message::descriptor()->name(),
                                                   ": not a valid message: ",
                                                   parsed.error_message()));
  }
  return message;
}

// message's bytes into *buffer (replacing what it held). INTERNAL when it cannot be
// serialised (larger than 2 GiB).
template <typename Message>
absl::Status SerializeMessage(const Message& message, grpc::ByteBuffer* buffer) {
  bool own_buffer = false;
  buffer->Clear();  // gRPC serialises into an empty buffer only
  grpc::Status written =
      grpc::SerializationTraits<Message>::Serialize(message, buffer, &own_buffer);
  if (!written.ok()) {
    return absl::InternalError(absl::StrCat(Message::descriptor()->name(),
                                            ": cannot be serialised: ", written.error_message()));
  }
  return absl::OkStatus();
}

}  // namespace tomo::server
