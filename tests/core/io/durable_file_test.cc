#include "core/io/durable_file.h"

#include <sys/statfs.h>
#include <linux/magic.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/file_size_limit.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The parallel path is taken only on tmpfs; /dev/shm is tmpfs on every Linux machine we
// build on (Debian mounts it so), and the test says so plainly when it is not.
fs::path TmpfsDirectory() {
  struct statfs info;
  EXPECT_EQ(::statfs("/dev/shm", &info), 0) << "no /dev/shm";
  EXPECT_EQ(info.f_type, TMPFS_MAGIC) << "/dev/shm is not tmpfs: the mapped path is untested";
  const fs::path dir = fs::path("/dev/shm") /
                       ("durable_file_test-" + std::to_string(::getpid()) + "-" +
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string RandomBytes(size_t size, std::mt19937_64& random) {
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int FilesIn(const fs::path& dir) {
  return static_cast<int>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

TEST(DurableFileTest, ParallelWriteOnTmpfsHoldsExactlyTheBytes) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const fs::path dir = TmpfsDirectory();
  const fs::path path = dir / "volume.raw";
  // A longer file there first: the new one must replace it, not be written into it.
  { std::ofstream(path, std::ios::binary) << RandomBytes(9 << 20, random); }
  for (int threads : {2, 3, 8}) {
    // Not a multiple of the page size, nor of the threads' share.
    const std::string bytes = RandomBytes((size_t{5} << 20) + 4096 * threads + 123, random);
    ParallelWrite parallel;
    parallel.min_bytes = 1;
    parallel.threads = threads;
    ASSERT_TRUE(WriteFileDurably(path.string(), bytes, parallel).ok()) << threads;
    EXPECT_TRUE(ReadAll(path) == bytes) << threads << " threads: the bytes differ";
    EXPECT_EQ(FilesIn(dir), 1) << "a temporary file was left";
  }
  fs::remove_all(dir);
}

TEST(DurableFileTest, FileTooLargeForItsLimitIsAnErrorNotASignal) {
  const fs::path dir = TmpfsDirectory();
  const fs::path path = dir / "volume.raw";
  // The file-size limit makes the space reservation (the file's size set before it is
  // mapped) fail the way a full tmpfs does; without it the copy into the mapping would die
  // of SIGBUS.
  ParallelWrite parallel;
  parallel.min_bytes = 1;
  absl::Status written;
  {
    tomo::testing::ScopedFileSizeLimit limit(1 << 20);
    ASSERT_TRUE(limit.ok());
    written = WriteFileDurably(path.string(), std::string(4 << 20, 'x'), parallel);
  }
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.code(), absl::StatusCode::kResourceExhausted) << written;
  EXPECT_THAT(written.message(), HasSubstr("cannot reserve space for"));
  EXPECT_THAT(written.message(), HasSubstr(dir.string()));
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(FilesIn(dir), 0) << "the temporary file was left";
  fs::remove_all(dir);
}

TEST(DurableFileTest, SmallFilesAndTwoPiecesAreWrittenWhole) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (const fs::path& dir : {TmpfsDirectory(), fs::path(::testing::TempDir()) / "durable_two"}) {
    fs::create_directories(dir);
    const std::string head = RandomBytes(1000, random), tail = RandomBytes(70000, random);
    ASSERT_TRUE(WriteFileDurably((dir / "two.mha").string(), head, tail).ok());
    EXPECT_TRUE(ReadAll(dir / "two.mha") == head + tail) << dir;
    ASSERT_TRUE(WriteFileDurably((dir / "one.raw").string(), tail).ok());
    EXPECT_TRUE(ReadAll(dir / "one.raw") == tail) << dir;
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace tomo::core
