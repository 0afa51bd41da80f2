#include "server/uploads/fetch_message.h"

#include <string>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/slice.h>

namespace tomo::server {

namespace pb = tomoserve::v1;
using google::protobuf::internal::WireFormatLite;

grpc::ByteBuffer FetchMessage(const pb::FetchResultResponse& fields, std::string_view data,
                              std::shared_ptr<const void> owner) {
  std::string head = fields.SerializeAsString();
  if (data.empty()) {
    grpc::Slice slice(head);
    return grpc::ByteBuffer(&slice, 1);
  }
  {
    google::protobuf::io::StringOutputStream stream(&head);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.WriteTag(WireFormatLite::MakeTag(pb::FetchResultResponse::kDataFieldNumber,
                                           WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
    coded.WriteVarint64(data.size());
  }  // the coded stream trims head to what it wrote
  // The slice's destroy callback gets the heap-held owner and drops it.
  auto* held = new std::shared_ptr<const void>(std::move(owner));
  const grpc::Slice slices[2] = {
      grpc::Slice(head),
      grpc::Slice(
          const_cast<char*>(data.data()), data.size(),
          [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); }, held)};
  return grpc::ByteBuffer(slices, 2);
}

}  // namespace tomo::server
