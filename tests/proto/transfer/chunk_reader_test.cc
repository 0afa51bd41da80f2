#include "proto/transfer/chunk_reader.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "proto/transfer/crc32.h"
#include "tests/proto/transfer/random_bytes.h"

namespace tomo::transfer {
namespace {

namespace fs = std::filesystem;

class ChunkReaderTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("chunk_reader_test_" + std::to_string(::getpid()) + "_" +
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
  ChunkReader::Options options;
  options.chunk_bytes = 65536;
  options.chunks_ahead = 3;
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
    EXPECT_LE((*chunk)->bytes.size(), options.chunk_bytes);
    EXPECT_EQ((*chunk)->crc32, Crc32Update(0, (*chunk)->bytes.data(), (*chunk)->bytes.size()));
    got += (*chunk)->bytes;
  }
  EXPECT_EQ(got, expected);
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
    if (!*chunk) end = true; else got += (*chunk)->bytes;
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

TEST_F(ChunkReaderTest, FileThatShrinksWhileReadIsDataLoss) {
  const std::string path = Write("shrinks", std::string(1 << 20, 's'));
  ChunkReader::Options options;
  options.chunk_bytes = 4096;
  options.chunks_ahead = 1;
  auto reader = ChunkReader::Open({path}, 0, options);
  ASSERT_TRUE(reader.ok()) << reader.status();
  fs::resize_file(path, 100000);
  absl::Status status;
  for (;;) {
    absl::StatusOr<std::optional<ChunkReader::Chunk>> chunk = (*reader)->Next();
    if (!chunk.ok()) { status = chunk.status(); break; }
    if (!*chunk) break;
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("shrinks"), std::string::npos);
}

}  // namespace
}  // namespace tomo::transfer
