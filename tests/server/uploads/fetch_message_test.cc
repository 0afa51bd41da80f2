// Tests of server/uploads/fetch_message.cc: a message built around referenced bytes parses as the
// ordinary FetchResultResponse it stands for, the bytes are referenced (not copied), and
// their owner is let go with the last slice.
#include "server/uploads/fetch_message.h"

#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/impl/codegen/proto_utils.h>

#include "gtest/gtest.h"

namespace tomo::server {
namespace {

namespace pb = tomoserve::v1;

std::string WireBytes(const grpc::ByteBuffer& message) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(message.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

TEST(FetchMessageTest, ParsesAsTheFieldsWithTheData) {
  std::mt19937_64 random(std::random_device{}());
  auto data = std::make_shared<std::string>(300000 + random() % 1000, '\0');
  for (char& c : *data) c = static_cast<char>(random());
  pb::FetchResultResponse fields;
  fields.set_offset(random() >> 8);
  fields.set_file_bytes(random() >> 8);
  fields.set_last(true);
  fields.set_total_bytes(random() >> 8);
  fields.set_crc32(static_cast<uint32_t>(random()));
  const grpc::ByteBuffer message = FetchMessage(fields, *data, data);

  pb::FetchResultResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(WireBytes(message)));
  pb::FetchResultResponse expected = fields;
  expected.set_data(*data);
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
  EXPECT_EQ(message.Length(), expected.ByteSizeLong());

  // gRPC's own reader, the way a client deserialises it.
  grpc::ByteBuffer copy(message);
  pb::FetchResultResponse via_grpc;
  ASSERT_TRUE(
      grpc::SerializationTraits<pb::FetchResultResponse>::Deserialize(&copy, &via_grpc).ok());
  EXPECT_EQ(via_grpc.data(), *data);
  EXPECT_EQ(via_grpc.offset(), fields.offset());
}

TEST(FetchMessageTest, DataIsReferencedAndItsOwnerReleasedWithTheMessage) {
  auto data = std::make_shared<std::string>(1 << 20, 'x');
  std::weak_ptr<std::string> watch = data;
  pb::FetchResultResponse fields;
  fields.set_offset(42);
  {
    const std::string_view view = *data;
    grpc::ByteBuffer message = FetchMessage(fields, view, std::move(data));
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(message.Dump(&slices).ok());
    ASSERT_EQ(slices.size(), 2u);
    EXPECT_EQ(reinterpret_cast<const char*>(slices[1].begin()), view.data());  // not a copy
    slices.clear();
    EXPECT_FALSE(watch.expired());  // the message still refers to it
  }
  EXPECT_TRUE(watch.expired());
}

TEST(FetchMessageTest, EmptyDataIsNoDataField) {
  pb::FetchResultResponse fields;
  fields.set_offset(7);
  fields.set_last(true);
  const grpc::ByteBuffer message = FetchMessage(fields, {}, nullptr);
  EXPECT_EQ(WireBytes(message), fields.SerializeAsString());
}

}  // namespace
}  // namespace tomo::server
