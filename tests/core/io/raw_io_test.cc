#include "core/io/raw_io.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) /
          (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
           name))
      .string();
}

TEST(RawIoTest, RoundTripsEveryValue) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  Array3D array({3, 5, 7});
  for (int64_t i = 0; i < array.size(); ++i) array.data()[i] = normal(random);
  const std::string path = TempPath("volume.raw");
  ASSERT_TRUE(WriteRawFloat32(path, array).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(std::filesystem::file_size(path), 3u * 5 * 7 * 4);
  absl::StatusOr<Array3D> read = ReadRawFloat32(path, {3, 5, 7});
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->dims(), array.dims());
  for (int64_t i = 0; i < array.size(); ++i) EXPECT_EQ(read->data()[i], array.data()[i]) << i;

  // The same bytes through the in-memory path, as the server receives them.
  std::ifstream file(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  absl::StatusOr<Array3D> parsed = Float32FromBytes(bytes.data(), bytes.size(), {3, 5, 7});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  for (int64_t i = 0; i < array.size(); ++i) EXPECT_EQ(parsed->data()[i], array.data()[i]) << i;
  std::filesystem::remove(path);
}

// Files of several read blocks (64 MiB each) are read by several threads: every value
// must land in its place, the last partial block included.
TEST(RawIoTest, RoundTripsAFileOfSeveralReadBlocks) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const Dims3 dims{5, 1001, 7001};  // 140 MB: two full blocks and a partial one
  Array3D array(dims);
  std::uniform_int_distribution<int> value(-1000000, 1000000);
  for (int64_t i = 0; i < array.size(); ++i) array.data()[i] = static_cast<float>(value(random));
  const std::string path = TempPath("large.raw");
  ASSERT_TRUE(WriteRawFloat32(path, array).ok());
  absl::StatusOr<Array3D> read = ReadRawFloat32(path, dims);
  ASSERT_TRUE(read.ok()) << read.status();
  int64_t mismatches = 0;
  for (int64_t i = 0; i < array.size(); ++i) mismatches += read->data()[i] != array.data()[i];
  EXPECT_EQ(mismatches, 0);
  std::filesystem::remove(path);
}

TEST(RawIoTest, OverwritesAnExistingFile) {
  const std::string path = TempPath("twice.raw");
  ASSERT_TRUE(WriteRawFloat32(path, Array3D({1, 1, 8}, 1.0f)).ok());
  ASSERT_TRUE(WriteRawFloat32(path, Array3D({1, 1, 2}, 2.0f)).ok());
  absl::StatusOr<Array3D> read = ReadRawFloat32(path, {1, 1, 2});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->at(0, 0, 1), 2.0f);
  std::filesystem::remove(path);
}

TEST(RawIoTest, SizeMismatchNamesFileAndBothSizes) {
  const std::string path = TempPath("small.raw");
  ASSERT_TRUE(WriteRawFloat32(path, Array3D({2, 1, 10}, 0.5f)).ok());
  const absl::Status status = ReadRawFloat32(path, {2, 1, 11}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(path));
  EXPECT_THAT(status.message(), HasSubstr("file is 80 bytes, expected 88 bytes"));
  EXPECT_THAT(status.message(), HasSubstr("(2, 1, 11)"));

  const std::vector<float> values(5, 1.0f);
  const absl::Status bytes_status =
      Float32FromBytes(values.data(), values.size() * sizeof(float), {1, 2, 3}).status();
  EXPECT_EQ(bytes_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bytes_status.message(), HasSubstr("20 bytes, expected 24 bytes"));
  std::filesystem::remove(path);
}

TEST(RawIoTest, NonFiniteValuesAreReportedAtTheirFirstIndex) {
  std::vector<float> values(12, 1.0f);
  values[5] = std::numeric_limits<float>::quiet_NaN();
  values[9] = std::numeric_limits<float>::infinity();
  absl::Status status = Float32FromBytes(values.data(), 48, {1, 3, 4}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("value at index 5 is NaN"));

  values[5] = 2.0f;
  values[0] = -std::numeric_limits<float>::infinity();
  status = Float32FromBytes(values.data(), 48, {1, 3, 4}).status();
  EXPECT_THAT(status.message(), HasSubstr("value at index 0 is infinite"));
}

TEST(RawIoTest, MissingFileIsNotFound) {
  const std::string path = TempPath("does_not_exist.raw");
  const absl::Status status = ReadRawFloat32(path, {1, 1, 1}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(path));
}

TEST(RawIoTest, DirectoryIsNotARawFile) {
  const absl::Status status = ReadRawFloat32(::testing::TempDir(), {1, 1, 1}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("is not a regular file"));
}

TEST(RawIoTest, WriteIntoAMissingDirectoryFailsWithoutLeavingFiles) {
  const std::string path = TempPath("no_such_directory/volume.raw");
  const absl::Status status = WriteRawFloat32(path, Array3D({1, 1, 4}, 1.0f));
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("no_such_directory"));
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace tomo::core
