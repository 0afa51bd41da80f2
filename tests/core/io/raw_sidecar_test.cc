#include "core/io/raw_sidecar.h"

#include <filesystem>
#include <random>
#include <sstream>

#include "core/io/raw_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/io/command_for_tests.h"
#include "tests/core/io/output_test_volumes.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using tomo::testing::RandomGrid;
using tomo::testing::RandomValues;
using tomo::testing::RunCommand;
using tomo::testing::ShellQuote;
using tomo::testing::TestPath;

// Python's json module parses the sidecar (an independent JSON reader), then prints the
// data file name and the numbers the test checks, one per line.
constexpr char kPrintSidecar[] = R"(
import json, sys
s = json.load(open(sys.argv[1]))
assert s['element_type'] == 'float32' and s['byte_order'] == 'little_endian', s
assert s['layout'] == 'z-y-x, x fastest', s
print(s['data_file'])
for v in s['size'] + s['voxel_size_mm'] + s['center_mm'] + s['lps_origin_mm']:
    print(repr(float(v)))
for row in s['lps_direction']:
    for v in row:
        print(repr(float(v)))
)";

TEST(RawSidecarTest, RawAndSidecarRoundTrip) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const VolumeGeometry geometry = RandomGrid(random);
  const Array3D volume = RandomValues(geometry, random);
  const std::string raw = TestPath("volume.raw"), sidecar = TestPath("volume.json");
  tomo::testing::Poison(raw);
  tomo::testing::Poison(sidecar);
  ASSERT_TRUE(WriteRawWithSidecar(raw, sidecar, volume, geometry).ok());

  absl::StatusOr<Array3D> read = ReadRawFloat32(raw, geometry.dims());
  ASSERT_TRUE(read.ok()) << read.status();
  for (int64_t i = 0; i < volume.size(); ++i) ASSERT_EQ(read->data()[i], volume.data()[i]) << i;

  const tomo::testing::CommandResult printed = RunCommand(
      std::string(TOMO_TEST_PYTHON3) + " -c " + ShellQuote(kPrintSidecar) + " " + ShellQuote(sidecar));
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  std::istringstream lines(printed.output);
  std::string data_file;
  std::getline(lines, data_file);
  EXPECT_EQ(data_file, std::filesystem::path(raw).filename().string());
  std::vector<double> v;
  double value;
  while (lines >> value) v.push_back(value);
  ASSERT_EQ(v.size(), 12u + 9u) << printed.output;
  const Vec3& voxel = geometry.voxel_size_mm();
  const Vec3& centre = geometry.center_mm();
  const double expected[] = {
      static_cast<double>(geometry.size().x), static_cast<double>(geometry.size().y),
      static_cast<double>(geometry.size().z), voxel.x, voxel.y, voxel.z, centre.x, centre.y,
      centre.z, geometry.x_mm(0), -geometry.y_mm(0), -geometry.z_mm(0),
      1, 0, 0, 0, -1, 0, 0, 0, -1};
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], expected[i]) << "number " << i;
  std::filesystem::remove(raw);
  std::filesystem::remove(sidecar);
}

TEST(RawSidecarTest, FileNamesAreEscapedInJson) {
  const VolumeGeometry geometry = VolumeGeometry::Create({2, 2, 2}, {1, 1, 1}, {}).value();
  const std::string json = RawSidecarJson(geometry, "a \"quoted\"\\name.raw");
  EXPECT_NE(json.find(R"("data_file": "a \"quoted\"\\name.raw")"), std::string::npos) << json;
}

}  // namespace
}  // namespace tomo::core
