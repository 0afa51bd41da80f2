// FetchResult's messages in their wire form, with the result's bytes referenced rather
// than copied: the message is a grpc::ByteBuffer of two slices, the encoded fields and then
// the bytes themselves, where they already lie (a result file's read-only mapping, the
// volume in memory of a result being written). Serialising a FetchResultResponse with its
// data field set would copy every byte twice before the socket's own copy (into the
// message's std::string, then into gRPC's slices); this leaves only the socket's.
//
//   pb::FetchResultResponse fields;  // offset, last, ... but not data
//   fields.set_offset(offset);
//   grpc::ByteBuffer message = FetchMessage(fields, chunk.view(), chunk.mapping);
//   StartWrite(&message);  // owner is released when gRPC has sent the bytes
//
// Field order on the wire does not matter to a protobuf parser: any client, in any
// language, reads these as ordinary FetchResultResponse messages.
#pragma once

#include <grpcpp/support/byte_buffer.h>

#include <memory>
#include <string_view>

#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

// fields (its data field empty) followed by data as the data field; owner keeps data's
// memory alive until gRPC lets go of the last slice that refers to it.
grpc::ByteBuffer FetchMessage(const tomoserve::v1::FetchResultResponse& fields,
                              std::string_view data, std::shared_ptr<const void> owner);

}  // namespace tomo::server
