#include "transfer/chunk_reader.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "transfer/crc32.h"
#include "tests/transfer/random_bytes.h"

namespace tomo::transfer {
namespace {

namespace fs = std::filesystem;

class ChunkReaderTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("chunk_reader_test_" + std::to_string(::getpid()) + "_" +
                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  fs::path dir_;
};

TEST_F(ChunkReaderTest, ReadsFilesInOrderFromAnOffsetWithChecksums) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(testing::Message() << "seed " << TestSeed());
  const std::string a = RandomBytes(rng, 300001), b = RandomBytes(rng, 0),
                    c = RandomBytes(rng, 77777);
  const std::vector<std::string> paths = {Write("a", a), Write("b", b), Write("c", c)};
  for (const bool map_files : {false, true}) {
    SCOPED_TRACE(testing::Message() << "map_files " << map_files);
    ChunkReader::Options options;
    options.chunk_bytes = 65536;
    options.chunks_ahead = 3;
    options.map_files = map_files;
    const uint64_t offset = 12345;
    auto reader = ChunkReader::Open(paths, offset, options);
    ASSERT_TRUE(reader.ok()) << reader.status();
    const std::string expected = a.substr(offset) + b + c;
    EXPECT_EQ((*reader)->total_bytes(), expected.size());
    std::string got;
    for (;;) {
      absl::StatusOr<std::optional<ChunkReader::Chunk>> chunk = (*reader)->Next();
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      if (!*chunk) break;
      const std::string_view bytes = (*chunk)->view();
      EXPECT_LE(bytes.size(), options.chunk_bytes);
      // A mapped chunk is a view, not a copy.
      EXPECT_EQ((*chunk)->bytes.empty(), map_files);
      EXPECT_EQ((*chunk)->mapping != nullptr, map_files);
      EXPECT_EQ((*chunk)->crc32, Crc32Update(0, bytes.data(), bytes.size()));
      got += bytes;
    }
    EXPECT_EQ(got, expected);
  }
}

// A mapped chunk stays readable after its reader is gone: the chunk holds the mapping.
TEST_F(ChunkReaderTest, MappedChunkOutlivesItsReader) {
  std::mt19937_64 rng(TestSeed() + 3);
  const std::string bytes = RandomBytes(rng, 3 * 4096 + 17);
  ChunkReader::Options options;
  options.chunk_bytes = 4096;
  options.map_files = true;
  std::vector<ChunkReader::Chunk> chunks;
  {
    auto reader = ChunkReader::Open({Write("kept", bytes)}, 5, options);
    ASSERT_TRUE(reader.ok()) << reader.status();
    for (;;) {
      absl::StatusOr<std::optional<ChunkReader::Chunk>> chunk = (*reader)->Next();
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      if (!*chunk) break;
      chunks.push_back(std::move(**chunk));
    }
  }
  fs::remove(dir_ / "kept");  // an unlinked file's mapping stays valid too
  std::string got;
  for (const ChunkReader::Chunk& chunk : chunks) got += chunk.view();
  EXPECT_EQ(got, bytes.substr(5));
}

TEST_F(ChunkReaderTest, TryNextCallsBackWhenTheChunkIsReady) {
  std::mt19937_64 rng(TestSeed() + 1);
  const std::string bytes = RandomBytes(rng, 1 << 20);
  ChunkReader::Options options;
  options.chunk_bytes = 4096;
  auto reader = ChunkReader::Open({Write("x", bytes)}, 0, options);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::string got;
  for (bool end = false; !end;) {
    absl::StatusOr<std::optional<ChunkReader::Chunk>> chunk;
    absl::Notification ready;
    if (!(*reader)->TryNext(&chunk, [&ready] { ready.Notify(); })) {
      ready.WaitForNotification();
      ASSERT_TRUE((*reader)->TryNext(&chunk, [] {}));
    }
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    if (!*chunk)
      end = true;
    else
      got += (*chunk)->bytes;
  }
  EXPECT_EQ(got, bytes);
}

TEST_F(ChunkReaderTest, MissingFileIsNotFoundAndOffsetBeyondTheEndIsOutOfRange) {
  auto missing = ChunkReader::Open({(dir_ / "nope").string()}, 0, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  auto beyond = ChunkReader::Open({Write("short", "abc")}, 4, {});
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kOutOfRange);
}

// Mapped, the chunks beyond the new end are refused before their pages are touched (a
// touch would be SIGBUS); the chunks taken are not read here.
TEST_F(ChunkReaderTest, FileThatShrinksWhileReadIsDataLoss) {
  for (const bool map_files : {false, true}) {
    SCOPED_TRACE(testing::Message() << "map_files " << map_files);
    const std::string path = Write("shrinks", std::string(1 << 20, 's'));
    ChunkReader::Options options;
    options.chunk_bytes = 4096;
    options.chunks_ahead = 1;
    options.map_files = map_files;
    auto reader = ChunkReader::Open({path}, 0, options);
    ASSERT_TRUE(reader.ok()) << reader.status();
    fs::resize_file(path, 100000);
    absl::Status status;
    for (;;) {
      absl::StatusOr<std::optional<ChunkReader::Chunk>> chunk = (*reader)->Next();
      if (!chunk.ok()) {
        status = chunk.status();
        break;
      }
      if (!*chunk) break;
    }
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(status.message().find("shrinks"), std::string::npos);
  }
}

// Every stripe of three files (one empty) read from an offset: each byte of the stream
// comes exactly once, from the stripe that owns its unit, in chunks within one unit and one
// file; put back together the stripes are the stream.
TEST_F(ChunkReaderTest, StripesTogetherHoldEveryByteOnce) {
  std::mt19937_64 rng(TestSeed() + 2);
  SCOPED_TRACE(testing::Message() << "seed " << TestSeed());
  const std::string a = RandomBytes(rng, 123457), b = RandomBytes(rng, 0),
                    c = RandomBytes(rng, 54321);
  const std::vector<std::string> paths = {Write("a", a), Write("b", b), Write("c", c)};
  const uint64_t offset = 777;
  const std::string stream = a.substr(offset) + b + c;
  const size_t file_start[] = {0, a.size() - offset, a.size() - offset};  // in the stream
  const uint64_t unit = 10000;  // not a divisor of anything here
  const uint32_t stripes = 3;
  for (const bool map_files : {false, true}) {
    SCOPED_TRACE(testing::Message() << "map_files " << map_files);
    std::string assembled(stream.size(), '\x5a');  // poison: what no stripe sends stays
    std::vector<int> times(stream.size(), 0);
    uint64_t bytes_in_all = 0;
    for (uint32_t index = 0; index < stripes; ++index) {
      ChunkReader::Options options;
      options.map_files = map_files;
      options.chunk_bytes = 4096;
      options.stripe_count = stripes;
      options.stripe_index = index;
      options.stripe_bytes = unit;
      auto reader = ChunkReader::Open(paths, offset, options);
      ASSERT_TRUE(reader.ok()) << reader.status();
      bytes_in_all += (*reader)->total_bytes();
      uint64_t got = 0;
      for (;;) {
        absl::StatusOr<std::optional<ChunkReader::Chunk>> chunk = (*reader)->Next();
        ASSERT_TRUE(chunk.ok()) << chunk.status();
        if (!*chunk) break;
        const ChunkReader::Chunk& piece = **chunk;
        const std::string_view bytes = piece.view();
        ASSERT_LT(piece.file, paths.size());
        ASSERT_GT(bytes.size(), 0u);
        EXPECT_LE(bytes.size(), options.chunk_bytes);
        EXPECT_EQ(piece.crc32, Crc32Update(0, bytes.data(), bytes.size()));
        const uint64_t at = file_start[piece.file] + piece.offset - (piece.file == 0 ? offset : 0);
        ASSERT_LE(at + bytes.size(), stream.size());
        const uint64_t first_unit = at / unit, last_unit = (at + bytes.size() - 1) / unit;
        EXPECT_EQ(first_unit, last_unit) << "a chunk across units at " << at;
        EXPECT_EQ(first_unit % stripes, index) << "unit " << first_unit << " in stripe " << index;
        for (size_t i = 0; i < bytes.size(); ++i) {
          assembled[at + i] = bytes[i];
          ++times[at + i];
        }
        got += bytes.size();
      }
      EXPECT_EQ(got, (*reader)->total_bytes());
    }
    EXPECT_EQ(bytes_in_all, stream.size());
    for (size_t i = 0; i < times.size(); ++i) ASSERT_EQ(times[i], 1) << "byte " << i;
    EXPECT_TRUE(assembled == stream);
  }
}

// More stripes than units: the stripes past the last unit hold nothing and end at once.
TEST_F(ChunkReaderTest, StripesBeyondTheLastUnitAreEmpty) {
  std::mt19937_64 rng(TestSeed() + 3);
  const std::string bytes = RandomBytes(rng, 5000);
  const std::string path = Write("small", bytes);
  for (uint32_t index = 0; index < 4; ++index) {
    ChunkReader::Options options;
    options.stripe_count = 4;
    options.stripe_index = index;
    options.stripe_bytes = 4096;
    auto reader = ChunkReader::Open({path}, 0, options);
    ASSERT_TRUE(reader.ok()) << reader.status();
    std::string got;
    for (;;) {
      absl::StatusOr<std::optional<ChunkReader::Chunk>> chunk = (*reader)->Next();
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      if (!*chunk) break;
      got += (*chunk)->bytes;
    }
    const std::string expected = index == 0   ? bytes.substr(0, 4096)
                                 : index == 1 ? bytes.substr(4096)
                                              : std::string();
    EXPECT_TRUE(got == expected) << "stripe " << index << ": " << got.size() << " bytes";
    EXPECT_EQ((*reader)->total_bytes(), expected.size());
  }
}

TEST_F(ChunkReaderTest, BadStripeOptionsAreInvalidArgumentNamingTheField) {
  const std::string path = Write("x", "abcdef");
  ChunkReader::Options options;
  options.stripe_count = 3;
  options.stripe_index = 3;
  auto reader = ChunkReader::Open({path}, 0, options);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(reader.status().message().find("stripe_index: 3"), std::string::npos)
      << reader.status();
  options.stripe_index = 0;
  options.stripe_bytes = 0;
  reader = ChunkReader::Open({path}, 0, options);
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().message().find("stripe_bytes"), std::string::npos) << reader.status();
}

// StripeLayout's sums against counting byte by byte, on random layouts.
TEST(StripeLayoutTest, StripeBytesAndNextRangeAgreeWithACount) {
  std::mt19937_64 rng(TestSeed() + 4);
  SCOPED_TRACE(testing::Message() << "seed " << TestSeed());
  for (int trial = 0; trial < 300; ++trial) {
    StripeLayout layout;
    layout.offset = rng() % 50;
    layout.size = layout.offset + rng() % 400;
    layout.count = 1 + rng() % 6;
    layout.index = rng() % layout.count;
    layout.unit_bytes = 1 + rng() % 40;
    SCOPED_TRACE(testing::Message()
                 << "offset " << layout.offset << " size " << layout.size << " count "
                 << layout.count << " index " << layout.index << " unit " << layout.unit_bytes);
    std::vector<bool> mine(layout.size, false);
    uint64_t expected = 0;
    for (uint64_t at = layout.offset; at < layout.size; ++at) {
      mine[at] = layout.count <= 1 ||
                 ((at - layout.offset) / layout.unit_bytes) % layout.count == layout.index;
      expected += mine[at] ? 1 : 0;
    }
    EXPECT_EQ(layout.StripeBytes(), expected);
    const uint64_t max_bytes = 1 + rng() % 30;
    std::vector<bool> seen(layout.size, false);
    for (auto [begin, end] = layout.NextRange(0, max_bytes); begin < end;
         std::tie(begin, end) = layout.NextRange(end, max_bytes)) {
      ASSERT_LE(end, layout.size);
      ASSERT_LE(end - begin, max_bytes);
      for (uint64_t at = begin; at < end; ++at) {
        ASSERT_TRUE(mine[at]) << "byte " << at << " is not this stripe's";
        ASSERT_FALSE(seen[at]) << "byte " << at << " twice";
        seen[at] = true;
      }
    }
    EXPECT_EQ(seen, mine);
  }
}

}  // namespace
}  // namespace tomo::transfer
