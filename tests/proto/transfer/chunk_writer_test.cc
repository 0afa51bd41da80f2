#include "proto/transfer/chunk_writer.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "proto/transfer/crc32.h"
#include "tests/proto/transfer/random_bytes.h"

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

// The parallel mode: the file mapped and written by several threads at once.

ChunkWriter::Options ParallelOptions(uint64_t expected_bytes, int write_threads,
                                     int checksum_threads) {
  ChunkWriter::Options options;
  options.expected_bytes = expected_bytes;
  options.write_threads = write_threads;
  options.checksum_threads = checksum_threads;
  options.parallel_on_disk = true;  // the test's directory may be on a disk
  return options;
}

std::string Poison(size_t size) { return std::string(size, static_cast<char>(0xa5)); }

struct ParallelCase {
  int write_threads;
  int checksum_threads;  // 0: on the writer threads
};

class ParallelChunkWriterTest : public ChunkWriterTest,
                                public testing::WithParamInterface<ParallelCase> {};

TEST_P(ParallelChunkWriterTest, WritesRandomChunksInOrderWithTheirChecksum) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(testing::Message() << "seed " << TestSeed());
  const std::string path = (dir_ / "out.bin").string();
  // Made beforehand, so that appending outruns writing and the queue fills; sizes of every
  // kind, empty and odd ones included, so that chunks share pages.
  std::vector<std::string> chunks;
  std::string expected;
  for (int i = 0; i < 300; ++i) {
    const size_t size = i % 17 == 0 ? 0 : i % 5 == 0 ? rng() % 10 : rng() % 200000;
    chunks.push_back(RandomBytes(rng, size));
    expected += chunks.back();
  }
  // The file holds poison of the same length, so that every byte must be written.
  { std::ofstream(path, std::ios::binary) << Poison(expected.size()); }
  ChunkWriter::Options options =
      ParallelOptions(expected.size(), GetParam().write_threads, GetParam().checksum_threads);
  options.max_queued_bytes = 1 << 20;  // small: the producer must wait for room often
  options.writeback_bytes = 256 << 10;  // the write-back of copied prefixes runs too
  std::atomic<int> rooms{0};
  options.on_room = [&rooms] { rooms.fetch_add(1); };
  auto writer = ChunkWriter::Create(::open(path.c_str(), O_WRONLY | O_CLOEXEC), path, options);
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
  EXPECT_EQ(fs::file_size(path), expected.size());
  EXPECT_TRUE(ReadAll(path) == expected) << "the file differs from the chunks appended";
  EXPECT_GT(rooms.load(), 0) << "the queue never filled; the back-pressure path went untested";
}

INSTANTIATE_TEST_SUITE_P(Threads, ParallelChunkWriterTest,
                         testing::Values(ParallelCase{2, 0}, ParallelCase{2, 2},
                                         ParallelCase{4, 0}, ParallelCase{4, 1}),
                         [](const testing::TestParamInfo<ParallelCase>& info) {
                           return "Write" + std::to_string(info.param.write_threads) +
                                  "Checksum" + std::to_string(info.param.checksum_threads);
                         });

TEST_F(ChunkWriterTest, ParallelFileEndsWhereTheLastChunkEnds) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(testing::Message() << "seed " << TestSeed());
  const std::string path = (dir_ / "short.bin").string();
  // Fewer bytes than expected, over a longer poisoned file: the rest is cut off.
  { std::ofstream(path, std::ios::binary) << Poison(3 << 20); }
  auto writer = ChunkWriter::Create(::open(path.c_str(), O_WRONLY | O_CLOEXEC), path,
                                    ParallelOptions(2 << 20, 3, 0));
  const std::string first = RandomBytes(rng, 700001);
  const std::string second = RandomBytes(rng, 300000);
  ASSERT_TRUE(writer->Append(first).ok());
  ASSERT_TRUE(writer->Append(second).ok());
  absl::StatusOr<ChunkWriter::Summary> summary = writer->Finish(/*sync=*/false);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->bytes, first.size() + second.size());
  writer.reset();
  EXPECT_EQ(fs::file_size(path), first.size() + second.size());
  EXPECT_TRUE(ReadAll(path) == first + second);
}

TEST_F(ChunkWriterTest, ParallelAppendsAfterExistingBytesOfAResumedFile) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(testing::Message() << "seed " << TestSeed());
  // A head longer than a page and not a multiple of one: the mapping starts at the head's
  // last page, and the chunks go after the head, which stays as it was.
  for (int flags : {O_WRONLY | O_APPEND, O_RDWR}) {
    SCOPED_TRACE(flags == O_RDWR ? "O_RDWR at the end" : "O_WRONLY | O_APPEND");
    const std::string path = (dir_ / "resumed.bin").string();
    const std::string head = RandomBytes(rng, 5000);
    { std::ofstream(path, std::ios::binary) << head; }
    int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    if ((flags & O_APPEND) == 0) {
      ASSERT_EQ(::lseek(fd, 0, SEEK_END), 5000);
    }
    std::string tail;
    auto writer = ChunkWriter::Create(fd, path, ParallelOptions(1 << 20, 2, 2));
    for (int i = 0; i < 7; ++i) {
      std::string chunk = RandomBytes(rng, 3000 + rng() % 100000);
      tail += chunk;
      ASSERT_TRUE(writer->Append(std::move(chunk)).ok());
    }
    absl::StatusOr<ChunkWriter::Summary> summary = writer->Finish(/*sync=*/true);
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_EQ(summary->bytes, tail.size());
    EXPECT_EQ(summary->crc32, Crc32Update(0, tail.data(), tail.size()));
    writer.reset();
    EXPECT_TRUE(ReadAll(path) == head + tail);
    fs::remove(path);
  }
}

TEST_F(ChunkWriterTest, ParallelRefusesMoreBytesThanExpectedNamingThePath) {
  const std::string path = (dir_ / "over.bin").string();
  auto writer = ChunkWriter::Create(OpenNew(path), path, ParallelOptions(10, 2, 2));
  ASSERT_TRUE(writer->Append("0123456").ok());
  absl::StatusOr<bool> over = writer->Append("789a");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find(path), std::string::npos) << over.status();
  EXPECT_NE(over.status().message().find("11 bytes"), std::string::npos) << over.status();
  EXPECT_NE(over.status().message().find("expected_bytes 10"), std::string::npos);
  absl::StatusOr<ChunkWriter::Summary> summary = writer->Finish(/*sync=*/false);
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ChunkWriterTest, ParallelWithoutRoomIsResourceExhaustedAtOnce) {
  const std::string path = (dir_ / "huge.bin").string();
  const uint64_t exabyte = uint64_t{1} << 60;  // more than any filesystem here has free
  auto writer = ChunkWriter::Create(OpenNew(path), path, ParallelOptions(exabyte, 4, 0));
  absl::StatusOr<bool> room = writer->Append(std::string(4096, 'x'));
  ASSERT_FALSE(room.ok());
  EXPECT_EQ(room.status().code(), absl::StatusCode::kResourceExhausted) << room.status();
  EXPECT_NE(room.status().message().find(path), std::string::npos) << room.status();
  EXPECT_NE(room.status().message().find(std::to_string(exabyte)), std::string::npos);
  absl::StatusOr<ChunkWriter::Summary> summary = writer->Finish(/*sync=*/true);
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kResourceExhausted);
  writer.reset();
  EXPECT_EQ(fs::file_size(path), 0u);
}

TEST_F(ChunkWriterTest, ParallelOnADeviceIsACleanErrorNamingThePath) {
  int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << "/dev/full: " << std::strerror(errno);
  auto writer = ChunkWriter::Create(fd, "/dev/full", ParallelOptions(1 << 20, 4, 2));
  absl::StatusOr<bool> room = writer->Append(std::string(4096, 'x'));
  ASSERT_FALSE(room.ok());
  EXPECT_EQ(room.status().code(), absl::StatusCode::kInvalidArgument) << room.status();
  EXPECT_NE(room.status().message().find("/dev/full"), std::string::npos) << room.status();
  EXPECT_NE(room.status().message().find("regular file"), std::string::npos);
  EXPECT_FALSE(writer->Finish(/*sync=*/false).ok());
}

// A file size limit stands in for a full filesystem (a tiny tmpfs needs mount rights): the
// chunk that crosses it must fail cleanly. Were its pages touched unreserved, the process
// would die of SIGBUS; so the writer runs in a child, whose exit says what happened.
TEST_F(ChunkWriterTest, ParallelPastAFileSizeLimitIsResourceExhaustedNotSigbus) {
  const std::string path = (dir_ / "limited.bin").string();
  constexpr uint64_t kLimit = (uint64_t{3} << 20) + 12345;
  constexpr int kChunks = 8;
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // the limit then reads as EFBIG, not a signal
    rlimit limit{kLimit, kLimit};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(10);
    std::mt19937_64 rng(seed);
    auto writer = ChunkWriter::Create(
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), path,
        ParallelOptions(uint64_t{kChunks} << 20, 4, 0));
    std::string expected;
    bool refused = false;
    for (int i = 0; i < kChunks && !refused; ++i) {
      std::string chunk = RandomBytes(rng, 1 << 20);
      if (i < 3) expected += chunk;
      absl::StatusOr<bool> room = writer->Append(std::move(chunk));
      if (!room.ok()) {
        refused = true;
        if (room.status().code() != absl::StatusCode::kResourceExhausted) ::_exit(11);
      } else if (!*room) {
        writer->WaitForRoom();
      }
    }
    absl::StatusOr<ChunkWriter::Summary> summary = writer->Finish(/*sync=*/true);
    writer.reset();
    if (summary.ok()) ::_exit(12);
    if (summary.status().code() != absl::StatusCode::kResourceExhausted) ::_exit(13);
    if (summary.status().message().find(path) == std::string::npos) ::_exit(14);
    if (summary.status().message().find("offset") == std::string::npos) ::_exit(15);
    // The chunks below the limit were written as they were.
    if (ReadAll(path).compare(0, expected.size(), expected) != 0) ::_exit(16);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_FALSE(WIFSIGNALED(status)) << "the writer died of signal " << WTERMSIG(status) << " ("
                                    << strsignal(WTERMSIG(status)) << ")";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: setrlimit failed; 11: Append's error was not RESOURCE_EXHAUSTED; 12: Finish "
         "succeeded; 13: not RESOURCE_EXHAUSTED; 14: no path; 15: no offset; 16: the chunks "
         "below the limit differ";
  EXPECT_LE(fs::file_size(path), kLimit);
}

TEST_F(ChunkWriterTest, ParallelModeOnTmpfsOnlyUnlessAskedFor) {
  const auto on_tmpfs = [](const std::string& dir) {
    struct statfs fs;
    return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
  };
  ASSERT_TRUE(on_tmpfs("/dev/shm")) << "/dev/shm is not a tmpfs here";
  const std::string shm_path =
      "/dev/shm/chunk_writer_test_" + std::to_string(::getpid()) + ".bin";
  const std::string disk_path = (dir_ / "mode.bin").string();
  for (bool on_disk : {false, true}) {
    ChunkWriter::Options options = ParallelOptions(1 << 20, 4, 2);
    options.parallel_on_disk = on_disk;
    auto shm = ChunkWriter::Create(OpenNew(shm_path), shm_path, options);
    EXPECT_TRUE(shm->parallel());
    auto disk = ChunkWriter::Create(OpenNew(disk_path), disk_path, options);
    EXPECT_EQ(disk->parallel(), on_disk || on_tmpfs(dir_.string())) << dir_;
    options.write_threads = 1;
    EXPECT_FALSE(ChunkWriter::Create(OpenNew(shm_path), shm_path, options)->parallel());
    options.write_threads = 4;
    options.expected_bytes = 0;
    EXPECT_FALSE(ChunkWriter::Create(OpenNew(shm_path), shm_path, options)->parallel());
  }
  fs::remove(shm_path);
}

TEST_F(ChunkWriterTest, ParallelFinishCallbackMayDestroyTheWriter) {
  for (int checksum_threads : {0, 2}) {
    SCOPED_TRACE(testing::Message() << "checksum_threads " << checksum_threads);
    const std::string path = (dir_ / "self.bin").string();
    ChunkWriter* raw =
        ChunkWriter::Create(OpenNew(path), path, ParallelOptions(100, 4, checksum_threads))
            .release();
    ASSERT_TRUE(raw->Append("abc").ok());
    ASSERT_TRUE(raw->Append("defg").ok());
    absl::Notification done;
    uint32_t crc = 0;
    raw->FinishAsync(true, [&](absl::StatusOr<ChunkWriter::Summary> summary) {
      crc = summary.ok() ? summary->crc32 : 0;
      delete raw;  // as a gRPC reactor's OnDone may, on a writer thread
      done.Notify();
    });
    done.WaitForNotification();
    EXPECT_EQ(crc, Crc32Update(0, "abcdefg", 7));
    EXPECT_EQ(ReadAll(path), "abcdefg");
    fs::remove(path);
  }
}

TEST_F(ChunkWriterTest, ParallelDestroyedWithoutFinishDropsTheQueueAndReturns) {
  const std::string path = (dir_ / "dropped.bin").string();
  auto writer = ChunkWriter::Create(OpenNew(path), path, ParallelOptions(size_t{50} << 20, 4, 2));
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(writer->Append(std::string(1 << 20, 'z')).ok());
  writer.reset();  // must not hang
  EXPECT_LE(fs::file_size(path), size_t{50} << 20);
}

}  // namespace
}  // namespace tomo::transfer
