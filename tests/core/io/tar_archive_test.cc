#include "core/io/tar_archive.h"

#include <filesystem>
#include <fstream>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/io/command_for_tests.h"
#include "tests/core/io/output_test_volumes.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using tomo::testing::RunCommand;
using tomo::testing::ShellQuote;
using tomo::testing::TestPath;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Random files (sizes around the 512-byte block, empty included) through our writer, then
// unpacked by GNU tar and by ExtractTar: both give back every byte.
TEST(TarArchiveTest, GnuTarAndExtractTarGiveBackEveryFile) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::vector<std::pair<std::string, std::string>> files;
  for (size_t size : {size_t{0}, size_t{1}, size_t{511}, size_t{512}, size_t{513}, size_t{70000}}) {
    std::string bytes(size, '\0');
    for (char& c : bytes) c = static_cast<char>(random());
    files.emplace_back("series/F" + std::to_string(size) + ".dcm", bytes);
  }
  const std::string tar_path = TestPath("a.tar");
  tomo::testing::Poison(tar_path);
  {
    TarWriter tar;
    ASSERT_TRUE(tar.Open(tar_path).ok());
    for (const auto& [name, bytes] : files) ASSERT_TRUE(tar.AddFile(name, bytes).ok());
    ASSERT_TRUE(tar.Finish().ok());
  }
  const std::string by_gnu = TestPath("gnu"), by_us = TestPath("ours");
  fs::remove_all(by_gnu);
  fs::remove_all(by_us);
  fs::create_directories(by_gnu);
  const tomo::testing::CommandResult gnu =
      RunCommand("tar -xf " + ShellQuote(tar_path) + " -C " + ShellQuote(by_gnu));
  ASSERT_EQ(gnu.exit_code, 0) << gnu.output;
  absl::StatusOr<std::vector<std::string>> paths = ExtractTar(tar_path, by_us);
  ASSERT_TRUE(paths.ok()) << paths.status();
  ASSERT_EQ(paths->size(), files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ((*paths)[i], (fs::path(by_us) / files[i].first).string());
    EXPECT_EQ(ReadFile((*paths)[i]), files[i].second) << files[i].first;
    EXPECT_EQ(ReadFile((fs::path(by_gnu) / files[i].first).string()), files[i].second)
        << files[i].first;
  }
  fs::remove_all(by_gnu);
  fs::remove_all(by_us);
  fs::remove(tar_path);
}

TEST(TarArchiveTest, RefusesEscapingNames) {
  const std::string tar_path = TestPath("a.tar");
  TarWriter tar;
  ASSERT_TRUE(tar.Open(tar_path).ok());
  for (const char* name : {"../x", "/etc/x", "a//b", "", "a/./b"}) {
    const absl::Status status = tar.AddFile(name, "bytes");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
  }
  EXPECT_EQ(tar.AddFile(std::string(101, 'a'), "x").code(), absl::StatusCode::kInvalidArgument);
}

// An archive with a damaged header or a cut-off end: INVALID_ARGUMENT naming the archive.
TEST(TarArchiveTest, RefusesDamagedArchives) {
  const std::string tar_path = TestPath("a.tar");
  {
    TarWriter tar;
    ASSERT_TRUE(tar.Open(tar_path).ok());
    ASSERT_TRUE(tar.AddFile("a/b.dcm", std::string(1000, 'x')).ok());
    ASSERT_TRUE(tar.Finish().ok());
  }
  const std::string good = ReadFile(tar_path);
  std::string damaged = good;
  damaged[3] = 'Z';  // in the name: the header checksum no longer matches
  std::ofstream(tar_path, std::ios::binary | std::ios::trunc) << damaged;
  absl::StatusOr<std::vector<std::string>> paths = ExtractTar(tar_path, TestPath("out"));
  EXPECT_EQ(paths.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(paths.status().message(), HasSubstr("fails its checksum"));
  std::ofstream(tar_path, std::ios::binary | std::ios::trunc) << good.substr(0, 900);
  paths = ExtractTar(tar_path, TestPath("out"));
  EXPECT_EQ(paths.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(paths.status().message(), HasSubstr(tar_path));
  fs::remove_all(TestPath("out"));
  fs::remove(tar_path);
}

}  // namespace
}  // namespace tomo::core
