// A FetchResult call read as raw messages: each FetchResultResponse's small fields are
// parsed, and its data field is left where gRPC received it, as pieces of gRPC's slices.
// The download then copies the bytes once, from those pieces into the file (a tmpfs
// file's mapping, transfer::MappedFileWriter), instead of twice: protobuf's parse of a
// 1 MiB data field into a std::string was 6% of a download's CPU (bench/NOTES.md v0.13).
//
//   FetchResponseReader reader(*channel, &context, request);
//   FetchedResponse response;
//   while (reader.Read(&response)) {
//     Write(response.fields.offset(), response.data);  // data: pieces, keep holds them
//   }
//   grpc::Status status = reader.Finish();  // DATA_LOSS for a message that did not parse
//
// The generated stub offers no raw client call, so the reader is made the way the
// generated code makes its own (grpc::internal::ClientReaderFactory), with a ByteBuffer as
// the message type: the bytes on the wire are FetchResult's, unchanged.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/sync_stream.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::client {

struct FetchedResponse {
  tomoserve::v1::FetchResultResponse fields;  // every field but data
  std::vector<std::string_view> data;         // the data field's bytes, in order
  uint64_t data_bytes = 0;
  std::shared_ptr<const void> keep;  // the slices data points into

  // The data as one string (a copy), for writers that take contiguous bytes.
  std::string JoinedData() const;
  // CRC-32 of the data (transfer::Crc32Update from 0).
  uint32_t DataCrc32() const;
};

// message's fields, and its data field as pieces of message's slices. DATA_LOSS when the
// bytes are not a FetchResultResponse.
absl::StatusOr<FetchedResponse> ParseFetchResponse(const grpc::ByteBuffer& message);

class FetchResponseReader {
 public:
  // Starts the call on channel (which must outlive the reader) with context.
  FetchResponseReader(grpc::Channel& channel, grpc::ClientContext* context,
                      const tomoserve::v1::FetchResultRequest& request);

  // The next message into *response: true; false at the end of the stream or at a
  // message that does not parse (then Finish says which).
  bool Read(FetchedResponse* response);
  // How the call ended: the server's status, or DATA_LOSS naming the message that did not
  // parse (the call is then cancelled).
  grpc::Status Finish();

 private:
  grpc::ClientContext* const context_;
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader_;
  absl::Status parse_error_;
};

}  // namespace tomo::client
