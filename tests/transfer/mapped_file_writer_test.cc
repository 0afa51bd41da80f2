#include "transfer/mapped_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/file_size_limit.h"
#include "transfer/crc32.h"
#include "tests/transfer/random_bytes.h"
#include "tests/transfer/thread_count.h"

namespace tomo::transfer {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

// [offset, offset + bytes) of the file.
struct Piece {
  uint64_t offset = 0, bytes = 0;
};

// [begin, size) cut into pieces of 1 byte .. max_bytes, in random order.
std::vector<Piece> ShuffledPieces(uint64_t begin, uint64_t size, uint64_t max_bytes,
                                  std::mt19937_64& rng) {
  std::vector<Piece> pieces;
  for (uint64_t at = begin; at < size;) {
    const uint64_t bytes = std::min(size - at, 1 + rng() % max_bytes);
    pieces.push_back({at, bytes});
    at += bytes;
  }
  std::shuffle(pieces.begin(), pieces.end(), rng);
  return pieces;
}

// The writer is meant for tmpfs (/dev/shm on the machines we build on); it works anywhere.
class MappedFileWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path("/dev/shm") /
           ("mapped_file_writer_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "volume.raw.partial").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // path_ holding bytes.
  void WriteFile(const std::string& bytes) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out << bytes;
    ASSERT_TRUE(out.good());
  }
  std::string ReadFile() const {
    std::ifstream in(path_, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  int OpenReadWrite() {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    EXPECT_GE(fd, 0) << path_;
    return fd;
  }
  std::unique_ptr<MappedFileWriter> Create(uint64_t begin, uint64_t size,
                                           MappedFileWriter::Options options = {}) {
    absl::StatusOr<std::unique_ptr<MappedFileWriter>> writer =
        MappedFileWriter::Create(OpenReadWrite(), path_, begin, size, std::move(options));
    EXPECT_TRUE(writer.ok()) << writer.status();
    return writer.ok() ? std::move(*writer) : nullptr;
  }
  // Appends data's bytes of each piece (data holds the whole file).
  static void AppendPieces(MappedFileWriter& writer, const std::string& data,
                           const std::vector<Piece>& pieces) {
    for (const Piece& piece : pieces) {
      absl::StatusOr<bool> room =
          writer.Append(piece.offset, data.substr(piece.offset, piece.bytes));
      ASSERT_TRUE(room.ok()) << room.status();
      if (!*room) writer.WaitForRoom();
    }
  }

  fs::path dir_;
  std::string path_;
};

// Fresh random bytes in random-order chunks of random sizes from three producer threads,
// over a longer file of poison and through a small queue: the file is exactly the bytes,
// and the CRC-32 theirs.
TEST_F(MappedFileWriterTest, RandomOrderChunksFromThreeThreadsAreTheFile) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const uint64_t size = (uint64_t{9} << 20) + rng() % 100000;  // not page-aligned
  const std::string data = RandomBytes(rng, size);
  WriteFile(std::string(size + 12345, '\xa5'));
  MappedFileWriter::Options options;
  options.max_queued_bytes = 1 << 20;
  options.copy_threads = 4;
  std::unique_ptr<MappedFileWriter> writer = Create(0, size, options);
  ASSERT_NE(writer, nullptr);
  const std::vector<Piece> pieces = ShuffledPieces(0, size, 300 << 10, rng);
  std::vector<std::vector<Piece>> shares(3);
  for (size_t i = 0; i < pieces.size(); ++i) shares[i % 3].push_back(pieces[i]);
  std::vector<std::thread> producers;
  for (const std::vector<Piece>& share : shares) {
    producers.emplace_back([&writer, &data, &share] { AppendPieces(*writer, data, share); });
  }
  for (std::thread& producer : producers) producer.join();
  absl::StatusOr<MappedFileWriter::Summary> summary = writer->Finish();
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->bytes, size);
  EXPECT_EQ(summary->crc32, Crc32Update(0, data.data(), data.size()));
  EXPECT_EQ(writer->written_prefix(), size);
  writer.reset();
  const std::string file = ReadFile();
  EXPECT_EQ(file.size(), size);
  EXPECT_TRUE(file == data) << "the file's bytes differ";
}

// Chunks given as pieces of separate buffers (as a gRPC message's slices arrive): each
// chunk is its pieces laid end to end, the buffers are held until copied and let go after,
// and the file and CRC-32 are the bytes'.
TEST_F(MappedFileWriterTest, ChunksInPiecesAreTheirBytesEndToEnd) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const uint64_t size = (uint64_t{3} << 20) + rng() % 100000;
  const std::string data = RandomBytes(rng, size);
  WriteFile(std::string(size, '\xa5'));
  std::unique_ptr<MappedFileWriter> writer = Create(0, size);
  ASSERT_NE(writer, nullptr);
  std::vector<std::weak_ptr<const void>> buffers;
  for (const Piece& chunk : ShuffledPieces(0, size, 1 << 20, rng)) {
    // The chunk's bytes cut at random points into buffers of their own.
    auto held = std::make_shared<std::vector<std::string>>();
    for (uint64_t at = chunk.offset; at < chunk.offset + chunk.bytes;) {
      const uint64_t bytes = std::min(chunk.offset + chunk.bytes - at, 1 + rng() % 20000);
      held->push_back(data.substr(at, bytes));
      at += bytes;
    }
    std::vector<std::string_view> pieces(held->begin(), held->end());
    buffers.push_back(held);
    absl::StatusOr<bool> room = writer->Append(chunk.offset, std::move(pieces), std::move(held));
    ASSERT_TRUE(room.ok()) << room.status();
    if (!*room) writer->WaitForRoom();
  }
  absl::StatusOr<MappedFileWriter::Summary> summary = writer->Finish();
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->bytes, size);
  EXPECT_EQ(summary->crc32, Crc32Update(0, data.data(), data.size()));
  for (const std::weak_ptr<const void>& buffer : buffers) EXPECT_TRUE(buffer.expired());
  writer.reset();
  EXPECT_TRUE(ReadFile() == data) << "the file's bytes differ";
}

// on_written reports the run copied from begin as it grows: each report's last bytes are in
// the file already when it comes (read back through the descriptor, not the mapping), and
// the largest report is the file's end.
TEST_F(MappedFileWriterTest, OnWrittenReportsTheCopiedRunFromBegin) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const uint64_t begin = 5000, size = (uint64_t{3} << 20) + rng() % 10000;
  const std::string data = RandomBytes(rng, size);
  WriteFile(data.substr(0, begin));
  const int reader = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  std::mutex mu;
  uint64_t largest = 0;
  int reports = 0, wrong = 0;
  MappedFileWriter::Options options;
  options.copy_threads = 4;
  options.on_written = [&](uint64_t prefix) {
    const uint64_t tail = std::min<uint64_t>(prefix - begin, 4096);
    std::string got(tail, '\0');
    const bool read = ::pread(reader, got.data(), tail, static_cast<off_t>(prefix - tail)) ==
                      static_cast<ssize_t>(tail);
    std::lock_guard<std::mutex> lock(mu);
    ++reports;
    if (!read || got != data.substr(prefix - tail, tail) || prefix <= begin || prefix > size) {
      ++wrong;
    }
    largest = std::max(largest, prefix);
  };
  std::unique_ptr<MappedFileWriter> writer = Create(begin, size, options);
  ASSERT_NE(writer, nullptr);
  // Small pieces from two threads, in two rounds: the second starts once the first round's
  // run has been reported, so the run is reported at least twice however the copies race.
  std::vector<Piece> pieces;
  for (uint64_t at = begin; at < size; at += std::min<uint64_t>(64 << 10, size - at)) {
    pieces.push_back({at, std::min<uint64_t>(64 << 10, size - at)});
  }
  const size_t half = pieces.size() / 2;
  const uint64_t first_round_end = pieces[half - 1].offset + pieces[half - 1].bytes;
  for (const auto& [from, to] : {std::pair<size_t, size_t>{0, half}, {half, pieces.size()}}) {
    std::vector<std::vector<Piece>> shares(2);
    for (size_t i = from; i < to; ++i) shares[i % 2].push_back(pieces[i]);
    std::vector<std::thread> producers;
    for (const std::vector<Piece>& share : shares) {
      producers.emplace_back([&writer, &data, &share] { AppendPieces(*writer, data, share); });
    }
    for (std::thread& producer : producers) producer.join();
    if (to == half) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (std::chrono::steady_clock::now() < deadline) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (largest >= first_round_end) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
  ASSERT_TRUE(writer->Finish().ok());
  ::close(reader);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_GT(reports, 1);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(largest, size);
}

// begin > 0: the first begin bytes (not page-aligned) are left as they are.
TEST_F(MappedFileWriterTest, ResumeKeepsThePrefix) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const uint64_t size = (uint64_t{3} << 20) + 777, begin = 1000000 + rng() % 4096;
  const std::string data = RandomBytes(rng, size);
  WriteFile(data.substr(0, begin) + std::string(50000, '\xa5'));
  std::unique_ptr<MappedFileWriter> writer = Create(begin, size);
  ASSERT_NE(writer, nullptr);
  AppendPieces(*writer, data, ShuffledPieces(begin, size, 200 << 10, rng));
  absl::StatusOr<MappedFileWriter::Summary> summary = writer->Finish();
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->bytes, size - begin);
  EXPECT_EQ(summary->crc32, Crc32Update(0, data.data() + begin, size - begin));
  writer.reset();
  EXPECT_TRUE(ReadFile() == data) << "the file's bytes differ";
}

// A missing range is DATA_LOSS naming it; the file can then be cut to the bytes before it.
TEST_F(MappedFileWriterTest, GapIsDataLossAndTheWrittenPrefixIsKept) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const uint64_t size = uint64_t{2} << 20, begin = 4321;
  const uint64_t gap_begin = begin + 100000 + rng() % 500000, gap_end = gap_begin + 65536;
  const std::string data = RandomBytes(rng, size);
  WriteFile(data.substr(0, begin));
  std::unique_ptr<MappedFileWriter> writer = Create(begin, size);
  ASSERT_NE(writer, nullptr);
  std::vector<Piece> pieces = ShuffledPieces(begin, gap_begin, 70000, rng);
  for (const Piece& piece : ShuffledPieces(gap_end, size, 70000, rng)) pieces.push_back(piece);
  AppendPieces(*writer, data, pieces);
  absl::StatusOr<MappedFileWriter::Summary> summary = writer->Finish();
  ASSERT_EQ(summary.status().code(), absl::StatusCode::kDataLoss) << summary.status();
  EXPECT_THAT(summary.status().message(),
              AllOf(HasSubstr(path_), HasSubstr(absl::StrCat("[", gap_begin, ", ", gap_end))));
  EXPECT_EQ(writer->written_prefix(), gap_begin);
  ASSERT_TRUE(writer->CutToWrittenPrefix().ok());
  writer.reset();
  EXPECT_TRUE(ReadFile() == data.substr(0, gap_begin)) << "not the prefix";
}

// Bytes that come twice are DATA_LOSS naming them; a chunk outside [begin, size) is refused.
TEST_F(MappedFileWriterTest, OverlapIsDataLoss) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const uint64_t size = 1 << 20, begin = 100;
  const std::string data = RandomBytes(rng, size);
  std::unique_ptr<MappedFileWriter> writer = Create(begin, size);
  ASSERT_NE(writer, nullptr);
  AppendPieces(*writer, data, ShuffledPieces(begin, size, 50000, rng));
  const uint64_t again = begin + 1000 + rng() % 100000;
  AppendPieces(*writer, data, {{again, 10}});
  EXPECT_EQ(writer->Append(begin - 1, std::string(1, 'x')).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(writer->Append(size - 5, std::string(6, 'x')).status().code(),
            absl::StatusCode::kDataLoss);
  absl::StatusOr<MappedFileWriter::Summary> summary = writer->Finish();
  ASSERT_EQ(summary.status().code(), absl::StatusCode::kDataLoss) << summary.status();
  EXPECT_THAT(summary.status().message(), AllOf(HasSubstr(path_), HasSubstr("more than once")));
  EXPECT_THAT(summary.status().message(), HasSubstr(absl::StrCat(", ", again + 10, ")")));
}

// A file over the process's size limit fails the way a full tmpfs does: RESOURCE_EXHAUSTED
// naming the file, and no signal.
TEST_F(MappedFileWriterTest, FileOverItsSizeLimitIsResourceExhaustedNotASignal) {
  absl::StatusOr<std::unique_ptr<MappedFileWriter>> writer;
  {
    tomo::testing::ScopedFileSizeLimit limit(1 << 20);
    ASSERT_TRUE(limit.ok());
    writer = MappedFileWriter::Create(OpenReadWrite(), path_, 0, 4 << 20, {});
  }
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kResourceExhausted) << writer.status();
  EXPECT_THAT(writer.status().message(), HasSubstr(path_));
}

// Nothing to write (a resume from the file's end): Finish is the empty file's CRC, 0.
TEST_F(MappedFileWriterTest, NothingToWriteFinishesEmpty) {
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  const std::string data = RandomBytes(rng, 5000);
  WriteFile(data);
  std::unique_ptr<MappedFileWriter> writer = Create(data.size(), data.size());
  ASSERT_NE(writer, nullptr);
  absl::StatusOr<MappedFileWriter::Summary> summary = writer->Finish();
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->bytes, 0u);
  EXPECT_EQ(summary->crc32, 0u);
  writer.reset();
  EXPECT_TRUE(ReadFile() == data);
}

// Writers whose producers stall hold no thread: 20 writers of 8 copy threads, each given
// its file's middle chunk, fall back to the threads there were before once idle_time has
// passed; the rest of each file then starts the threads again and the files are exact.
TEST_F(MappedFileWriterTest, IdleWritersHoldNoThreadAndStartAgainWhenChunksCome) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  constexpr int kWriters = 20;
  const int before = ThreadsOfThisProcess();
  MappedFileWriter::Options options;
  options.copy_threads = 8;
  options.idle_time = absl::Milliseconds(50);
  std::vector<std::unique_ptr<MappedFileWriter>> writers;
  std::vector<std::string> paths, data;
  std::vector<uint64_t> cut_a, cut_b;
  for (int i = 0; i < kWriters; ++i) {
    paths.push_back((dir_ / absl::StrCat("idle", i, ".raw")).string());
    data.push_back(RandomBytes(rng, 3 + rng() % 300000));
    cut_a.push_back(1 + rng() % (data[i].size() - 2));
    cut_b.push_back(cut_a[i] + 1 + rng() % (data[i].size() - cut_a[i] - 1));
    const int fd = ::open(paths[i].c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << paths[i];
    absl::StatusOr<std::unique_ptr<MappedFileWriter>> writer =
        MappedFileWriter::Create(fd, paths[i], 0, data[i].size(), options);
    ASSERT_TRUE(writer.ok()) << writer.status();
    writers.push_back(std::move(*writer));
    ASSERT_TRUE(
        writers[i]->Append(cut_a[i], data[i].substr(cut_a[i], cut_b[i] - cut_a[i])).ok());
  }
  // 8 x 20 copy threads before this change, for as long as the writers lived.
  EXPECT_LE(WaitForThreadsAtMost(before, std::chrono::seconds(10)), before);
  for (int i = 0; i < kWriters; ++i) {
    ASSERT_TRUE(writers[i]->Append(0, data[i].substr(0, cut_a[i])).ok());
  }
  absl::SleepFor(absl::Milliseconds(120));  // some threads end in between
  for (int i = 0; i < kWriters; ++i) {
    ASSERT_TRUE(writers[i]->Append(cut_b[i], data[i].substr(cut_b[i])).ok());
    absl::StatusOr<MappedFileWriter::Summary> summary = writers[i]->Finish();
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_EQ(summary->bytes, data[i].size());
    EXPECT_EQ(summary->crc32, Crc32Update(0, data[i].data(), data[i].size())) << i;
  }
  writers.clear();
  for (int i = 0; i < kWriters; ++i) {
    std::ifstream in(paths[i], std::ios::binary);
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(file == data[i]) << "file " << i << " differs";
  }
  EXPECT_LE(WaitForThreadsAtMost(before, std::chrono::seconds(10)), before);
}

}  // namespace
}  // namespace tomo::transfer
