// Tests of client/fetch_response_reader.cc's parse: a FetchResultResponse cut into slices at
// random points (inside the data's length, inside the data, between fields) parses to its
// fields and its data as pieces of those slices; unknown fields are skipped; bytes that are
// not a message are DATA_LOSS. The reader itself runs in every fetch of tomo_client_test
// and the end-to-end tests.
#include "client/fetch_response_reader.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "transfer/crc32.h"

namespace tomo::client {
namespace {

namespace v1 = tomoserve::v1;

// bytes as a ByteBuffer of slices cut at the given points.
grpc::ByteBuffer Sliced(const std::string& bytes, std::vector<size_t> cuts) {
  std::sort(cuts.begin(), cuts.end());
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  for (size_t cut : cuts) {
    if (cut <= at || cut >= bytes.size()) continue;
    slices.emplace_back(bytes.data() + at, cut - at);
    at = cut;
  }
  slices.emplace_back(bytes.data() + at, bytes.size() - at);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST(ParseFetchResponseTest, SlicedAnywhereIsTheFieldsAndTheData) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937_64 random(seed);
  for (int round = 0; round < 50; ++round) {
    v1::FetchResultResponse message;
    message.set_offset(random() >> (random() % 64));
    std::string data(random() % 300000, '\0');
    for (char& c : data) c = static_cast<char>(random());
    message.set_data(data);
    if (random() % 2) message.set_file_bytes(random() >> 3);
    if (random() % 2) {
      message.set_last(true);
      message.set_total_bytes(random() >> 3);
      message.set_crc32(static_cast<uint32_t>(random()));
    }
    const std::string wire = message.SerializeAsString();
    std::vector<size_t> cuts;
    for (int c = random() % 6; c > 0; --c) cuts.push_back(random() % (wire.size() + 1));
    cuts.push_back(1 + random() % 4);  // often inside a tag or the data's length
    absl::StatusOr<FetchedResponse> parsed = ParseFetchResponse(Sliced(wire, cuts));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->data_bytes, data.size());
    EXPECT_TRUE(parsed->JoinedData() == data);
    EXPECT_EQ(parsed->DataCrc32(), transfer::Crc32Update(0, data.data(), data.size()));
    EXPECT_TRUE(parsed->fields.data().empty());
    v1::FetchResultResponse without_data = message;
    without_data.clear_data();
    EXPECT_EQ(parsed->fields.SerializeAsString(), without_data.SerializeAsString());
  }
}

TEST(ParseFetchResponseTest, UnknownFieldsAreSkipped) {
  v1::FetchResultResponse message;
  message.set_offset(4096);
  message.set_data("abcdef");
  // Field 99 (a string) and field 98 (a varint), as a newer tomod might send.
  std::string wire = message.SerializeAsString() + std::string("\x9a\x06\x03xyz", 6) +
                     std::string("\x90\x06\x07", 3);
  absl::StatusOr<FetchedResponse> parsed = ParseFetchResponse(Sliced(wire, {3, 9}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->fields.offset(), 4096u);
  EXPECT_EQ(parsed->JoinedData(), "abcdef");
}

TEST(ParseFetchResponseTest, CutOrBadBytesAreDataLoss) {
  v1::FetchResultResponse message;
  message.set_offset(1);
  message.set_data(std::string(1000, 'd'));
  const std::string wire = message.SerializeAsString();
  for (const std::string& bad :
       {wire.substr(0, wire.size() - 10), std::string("\xff\xff", 2), std::string("\x12\x80", 2)}) {
    absl::StatusOr<FetchedResponse> parsed = ParseFetchResponse(Sliced(bad, {}));
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << parsed.status();
  }
}

}  // namespace
}  // namespace tomo::client
