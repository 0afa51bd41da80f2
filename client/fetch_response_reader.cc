#include "client/fetch_response_reader.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transfer/crc32.h"
#include "tomoserve/v1/tomoserve.grpc.pb.h"

namespace tomo::client {
namespace {

namespace v1 = tomoserve::v1;
using google::protobuf::internal::WireFormatLite;

absl::Status NotAResponse(const std::string& why) {
  return absl::DataLossError(
      absl::StrCat("tomod sent a FetchResult message that does not parse: ", why));
}

// The pieces of the bytes [begin, begin + size) of slices laid end to end.
std::vector<std::string_view> PiecesOf(const std::vector<grpc::Slice>& slices, uint64_t begin,
                                       uint64_t size) {
  std::vector<std::string_view> pieces;
  uint64_t at = 0;  // where the current slice starts
  for (const grpc::Slice& slice : slices) {
    const uint64_t end = at + slice.size();
    if (end > begin && at < begin + size) {
      const uint64_t from = std::max(at, begin), to = std::min(end, begin + size);
      pieces.emplace_back(reinterpret_cast<const char*>(slice.begin()) + (from - at), to - from);
    }
    at = end;
  }
  return pieces;
}

}  // namespace

std::string FetchedResponse::JoinedData() const {
  std::string joined;
  joined.reserve(data_bytes);
  for (std::string_view piece : data) joined.append(piece);
  return joined;
}

uint32_t FetchedResponse::DataCrc32() const {
  uint32_t crc = 0;
  for (std::string_view piece : data) crc = transfer::Crc32Update(crc, piece.data(), piece.size());
  return crc;
}

absl::StatusOr<FetchedResponse> ParseFetchResponse(const grpc::ByteBuffer& message) {
  auto slices = std::make_shared<std::vector<grpc::Slice>>();
  if (!message.Dump(slices.get()).ok()) return NotAResponse("its buffer cannot be read");
  grpc::ByteBuffer copy(message);  // the reader below takes a mutable buffer (slices shared)
  grpc::ProtoBufferReader stream(&copy);
  google::protobuf::io::CodedInputStream coded(&stream);
  FetchedResponse response;
  uint64_t data_begin = 0;
  bool has_data = false;
  for (uint32_t tag; (tag = coded.ReadTag()) != 0;) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const WireFormatLite::WireType type = WireFormatLite::GetTagWireType(tag);
    if (field == v1::FetchResultResponse::kDataFieldNumber &&
        type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t length;
      if (!coded.ReadVarint32(&length)) return NotAResponse("a cut data length");
      data_begin = static_cast<uint64_t>(coded.CurrentPosition());
      if (!coded.Skip(static_cast<int>(length))) return NotAResponse("cut data");
      // A repeated singular field: the last one counts, as protobuf's own parser has it.
      has_data = true;
      response.data_bytes = length;
      continue;
    }
    // The small fields (and any this client does not know) go through protobuf's parser.
    std::string field_bytes;
    google::protobuf::io::StringOutputStream out(&field_bytes);
    google::protobuf::io::CodedOutputStream coded_out(&out);
    if (!WireFormatLite::SkipField(&coded, tag, &coded_out)) {  // copies the tag too
      return NotAResponse(absl::StrCat("a bad field ", field));
    }
    coded_out.Trim();
    if (!response.fields.MergeFromString(field_bytes)) {
      return NotAResponse(absl::StrCat("a bad field ", field));
    }
  }
  if (!coded.ConsumedEntireMessage()) return NotAResponse("a bad tag");
  if (has_data) response.data = PiecesOf(*slices, data_begin, response.data_bytes);
  response.keep = std::move(slices);
  return response;
}

FetchResponseReader::FetchResponseReader(grpc::Channel& channel, grpc::ClientContext* context,
                                         const v1::FetchResultRequest& request)
    : context_(context) {
  static const std::string* const kMethod =
      new std::string(absl::StrCat("/", v1::Reconstruction::service_full_name(), "/FetchResult"));
  const grpc::internal::RpcMethod method(kMethod->c_str(),
                                         grpc::internal::RpcMethod::SERVER_STREAMING);
  reader_.reset(grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(&channel, method,
                                                                              context, request));
}

bool FetchResponseReader::Read(FetchedResponse* response) {
  grpc::ByteBuffer message;
  if (!parse_error_.ok() || !reader_->Read(&message)) return false;
  absl::StatusOr<FetchedResponse> parsed = ParseFetchResponse(message);
  if (!parsed.ok()) {
    parse_error_ = parsed.status();
    return false;
  }
  *response = std::move(*parsed);
  return true;
}

grpc::Status FetchResponseReader::Finish() {
  if (parse_error_.ok()) return reader_->Finish();
  context_->TryCancel();
  reader_->Finish();  // cancelled: its status says only that
  return grpc::Status(grpc::StatusCode::DATA_LOSS, std::string(parse_error_.message()));
}

}  // namespace tomo::client
