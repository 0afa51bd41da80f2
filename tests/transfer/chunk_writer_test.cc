#include "transfer/chunk_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "transfer/crc32.h"
#include "tests/transfer/random_bytes.h"
#include "tests/transfer/thread_count.h"

namespace tomo::transfer {
namespace {

namespace fs = std::filesystem;

class ChunkWriterTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("chunk_writer_test_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  int OpenNew(const std::string& path) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    EXPECT_GE(fd, 0);
    return fd;
  }
  static std::string ReadAll(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream all;
    all << in.rdbuf();
    return all.str();
  }

  fs::path dir_;
};

TEST_F(ChunkWriterTest, WritesRandomChunksInOrderWithTheirChecksum) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(testing::Message() << "seed " << TestSeed());
  const std::string path = (dir_ / "out.bin").string();
  ChunkWriter::Options options;
  options.max_queued_bytes = 1 << 20;  // small: the producer must wait for room often
  std::atomic<int> rooms{0};
  options.on_room = [&rooms] { rooms.fetch_add(1); };
  auto writer = ChunkWriter::Create(OpenNew(path), path, options);
  // Made beforehand, so that appending outruns writing and the queue fills.
  std::vector<std::string> chunks;
  std::string expected;
  for (int i = 0; i < 200; ++i) {
    chunks.push_back(RandomBytes(rng, rng() % 200000));
    expected += chunks.back();
  }
  for (std::string& chunk : chunks) {
    absl::StatusOr<bool> room = writer->Append(std::move(chunk));
    ASSERT_TRUE(room.ok()) << room.status();
    if (!*room) writer->WaitForRoom();
  }
  absl::StatusOr<ChunkWriter::Summary> summary = writer->Finish(/*sync=*/true);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->bytes, expected.size());
  EXPECT_EQ(summary->crc32, Crc32Update(0, expected.data(), expected.size()));
  writer.reset();
  EXPECT_EQ(ReadAll(path), expected);
  EXPECT_GT(rooms.load(), 0) << "the queue never filled; the back-pressure path went untested";
}

// Chunks shared with another reader (tomod's follower) are written and checksummed like
// owned ones, and the writer lets go of its reference once it is done with each.
TEST_F(ChunkWriterTest, SharedChunksAreWrittenAndLetGo) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(testing::Message() << "seed " << TestSeed());
  const std::string path = (dir_ / "shared.bin").string();
  auto writer = ChunkWriter::Create(OpenNew(path), path, {});
  std::vector<std::shared_ptr<const std::string>> chunks;
  std::string expected;
  for (int i = 0; i < 20; ++i) {
    chunks.push_back(std::make_shared<const std::string>(RandomBytes(rng, 1 + rng() % 100000)));
    expected += *chunks.back();
    absl::StatusOr<bool> room = writer->Append(chunks.back());
    ASSERT_TRUE(room.ok()) << room.status();
  }
  absl::StatusOr<ChunkWriter::Summary> summary = writer->Finish(/*sync=*/false);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->crc32, Crc32Update(0, expected.data(), expected.size()));
  for (const auto& chunk : chunks) EXPECT_EQ(chunk.use_count(), 1);
  writer.reset();
  EXPECT_EQ(ReadAll(path), expected);
}

TEST_F(ChunkWriterTest, AppendsAfterExistingBytesOfAResumedFile) {
  const std::string path = (dir_ / "resumed.bin").string();
  { std::ofstream(path, std::ios::binary) << "head-"; }
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto writer = ChunkWriter::Create(fd, path, {});
  ASSERT_TRUE(writer->Append("tail").ok());
  absl::StatusOr<ChunkWriter::Summary> summary = writer->Finish(/*sync=*/false);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->bytes, 4u);
  EXPECT_EQ(summary->crc32, Crc32Update(0, "tail", 4));
  writer.reset();
  EXPECT_EQ(ReadAll(path), "head-tail");
}

TEST_F(ChunkWriterTest, FullDeviceIsResourceExhaustedNamingThePath) {
  int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (fd < 0) GTEST_SKIP() << "/dev/full is missing";
  auto writer = ChunkWriter::Create(fd, "/dev/full", {});
  ASSERT_TRUE(writer->Append(std::string(4096, 'x')).ok());
  absl::StatusOr<ChunkWriter::Summary> summary = writer->Finish(/*sync=*/false);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(summary.status().message().find("/dev/full"), std::string::npos);
  // Appends after the failure report it too.
  EXPECT_FALSE(writer->Append("more").ok());
}

TEST_F(ChunkWriterTest, FinishCallbackMayDestroyTheWriter) {
  const std::string path = (dir_ / "self.bin").string();
  ChunkWriter* raw = ChunkWriter::Create(OpenNew(path), path, {}).release();
  ASSERT_TRUE(raw->Append("abc").ok());
  absl::Notification done;
  uint32_t crc = 0;
  raw->FinishAsync(true, [&](absl::StatusOr<ChunkWriter::Summary> summary) {
    crc = summary.ok() ? summary->crc32 : 0;
    delete raw;  // as a gRPC reactor's OnDone may, on the writer's thread
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_EQ(crc, Crc32Update(0, "abc", 3));
  EXPECT_EQ(ReadAll(path), "abc");
}

TEST_F(ChunkWriterTest, DestroyedWithoutFinishDropsTheQueueAndReturns) {
  const std::string path = (dir_ / "dropped.bin").string();
  auto writer = ChunkWriter::Create(OpenNew(path), path, {});
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(writer->Append(std::string(1 << 20, 'z')).ok());
  writer.reset();  // must not hang
  EXPECT_LE(fs::file_size(path), size_t{50} << 20);
}

// on_written follows the file as it grows: increasing totals, each at most what is in the
// file when it is reported, the last one all of it.
TEST_F(ChunkWriterTest, ReportsTheBytesInTheFileAsTheyAreWritten) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(testing::Message() << "seed " << TestSeed());
  const std::string path = (dir_ / "followed.bin").string();
  std::vector<uint64_t> reported;
  std::vector<uint64_t> in_file;
  ChunkWriter::Options options;
  options.on_written = [&](uint64_t bytes) {
    reported.push_back(bytes);
    in_file.push_back(fs::file_size(path));
  };
  auto writer = ChunkWriter::Create(OpenNew(path), path, options);
  uint64_t total = 0;
  for (int i = 0; i < 40; ++i) {
    std::string chunk = RandomBytes(rng, 1 + rng() % 100000);
    total += chunk.size();
    ASSERT_TRUE(writer->Append(std::move(chunk)).ok());
  }
  ASSERT_TRUE(writer->Finish(/*sync=*/false).ok());
  writer.reset();
  ASSERT_EQ(reported.size(), 40u);
  for (size_t i = 0; i < reported.size(); ++i) {
    if (i > 0) EXPECT_GT(reported[i], reported[i - 1]) << i;
    EXPECT_LE(reported[i], in_file[i]) << i;
  }
  EXPECT_EQ(reported.back(), total);
}

TEST_F(ChunkWriterTest, ReportsNothingWrittenAfterAWriteError) {
  int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (fd < 0) GTEST_SKIP() << "/dev/full is missing";
  std::atomic<int> reports{0};
  ChunkWriter::Options options;
  options.on_written = [&](uint64_t) { reports.fetch_add(1); };
  auto writer = ChunkWriter::Create(fd, "/dev/full", options);
  ASSERT_TRUE(writer->Append(std::string(4096, 'x')).ok());
  EXPECT_FALSE(writer->Finish(/*sync=*/false).ok());
  EXPECT_EQ(reports.load(), 0);
}

// Writers whose producer stalls hold no thread: 40 of them, each with one chunk queued,
// fall back to the threads there were before once idle_time has passed; then more chunks
// start their threads again, and each file holds its chunks in order with their CRC-32.
TEST_F(ChunkWriterTest, IdleWritersHoldNoThreadAndStartAgainWhenChunksCome) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(testing::Message() << "seed " << TestSeed());
  constexpr int kWriters = 40;
  const int before = ThreadsOfThisProcess();
  ChunkWriter::Options options;
  options.idle_time = absl::Milliseconds(50);
  std::vector<std::unique_ptr<ChunkWriter>> writers;
  std::vector<std::string> paths, contents(kWriters);
  for (int i = 0; i < kWriters; ++i) {
    paths.push_back((dir_ / ("idle" + std::to_string(i) + ".bin")).string());
    writers.push_back(ChunkWriter::Create(OpenNew(paths[i]), paths[i], options));
    std::string chunk = RandomBytes(rng, 1 + rng() % 70000);
    contents[i] += chunk;
    ASSERT_TRUE(writers[i]->Append(std::move(chunk)).ok());
  }
  // Each writer started its writer and checksum threads for its chunk (3 x 40 threads
  // before this change, for as long as the writer lived).
  EXPECT_LE(WaitForThreadsAtMost(before, std::chrono::seconds(10)), before);
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kWriters; ++i) {
      std::string chunk = RandomBytes(rng, 1 + rng() % 70000);
      contents[i] += chunk;
      ASSERT_TRUE(writers[i]->Append(std::move(chunk)).ok());
    }
    absl::SleepFor(absl::Milliseconds(120));  // some threads end between the rounds
  }
  for (int i = 0; i < kWriters; ++i) {
    absl::StatusOr<ChunkWriter::Summary> summary = writers[i]->Finish(/*sync=*/i % 2 == 0);
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_EQ(summary->bytes, contents[i].size()) << i;
    EXPECT_EQ(summary->crc32, Crc32Update(0, contents[i].data(), contents[i].size())) << i;
    EXPECT_EQ(ReadAll(paths[i]), contents[i]) << i;
  }
  writers.clear();
  EXPECT_LE(WaitForThreadsAtMost(before, std::chrono::seconds(10)), before);
}

// A writer that never got a chunk, or got its last one longer than idle_time ago, still
// finishes (the writer thread starts for the report).
TEST_F(ChunkWriterTest, FinishesAfterItsThreadsHaveEnded) {
  const std::string empty_path = (dir_ / "empty.bin").string();
  auto empty = ChunkWriter::Create(OpenNew(empty_path), empty_path, {});
  absl::StatusOr<ChunkWriter::Summary> nothing = empty->Finish(/*sync=*/true);
  ASSERT_TRUE(nothing.ok()) << nothing.status();
  EXPECT_EQ(nothing->bytes, 0u);

  const std::string path = (dir_ / "late.bin").string();
  ChunkWriter::Options options;
  options.idle_time = absl::Milliseconds(10);
  auto writer = ChunkWriter::Create(OpenNew(path), path, options);
  ASSERT_TRUE(writer->Append("tomo").ok());
  absl::SleepFor(absl::Milliseconds(100));
  absl::StatusOr<ChunkWriter::Summary> summary = writer->Finish(/*sync=*/true);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->crc32, Crc32Update(0, "tomo", 4));
  EXPECT_EQ(ReadAll(path), "tomo");
}

}  // namespace
}  // namespace tomo::transfer
