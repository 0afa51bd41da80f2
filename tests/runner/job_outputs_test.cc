#include "runner/job_outputs.h"

#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include "core/io/raw_io.h"
#include "core/io/tar_archive.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "dcmtk/config/osconfig.h"
#include "dcmtk/dcmdata/dcdeftag.h"
#include "dcmtk/dcmdata/dcfilefo.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runner/checksum.h"
#include "tests/core/random_seed.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<pb::OutputFormat> kAllFormats = {
    pb::OUTPUT_FORMAT_RAW_FLOAT32,     pb::OUTPUT_FORMAT_NIFTI,
    pb::OUTPUT_FORMAT_NIFTI_GZ,        pb::OUTPUT_FORMAT_METAIMAGE,
    pb::OUTPUT_FORMAT_DICOM_CT_SERIES, pb::OUTPUT_FORMAT_PNG_PREVIEW};

std::string FreshDirectory(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::path(::testing::TempDir()) /
                       (std::string(info->test_suite_name()) + "_" + info->name() + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// The HU of the slice's pixel (row, column) as DICOM says it.
double DicomHu(const std::string& path, int64_t row, int64_t column) {
  DcmFileFormat file;
  EXPECT_TRUE(file.loadFile(path.c_str()).good()) << path;
  DcmDataset& d = *file.getDataset();
  Float64 slope = 0, intercept = 0;
  Uint16 columns = 0;
  d.findAndGetFloat64(DCM_RescaleSlope, slope);
  d.findAndGetFloat64(DCM_RescaleIntercept, intercept);
  d.findAndGetUint16(DCM_Columns, columns);
  const Uint16* pixels = nullptr;
  EXPECT_TRUE(d.findAndGetUint16Array(DCM_PixelData, pixels).good());
  return static_cast<int16_t>(pixels[row * columns + column]) * slope + intercept;
}

// Every format of a phantom volume: the results describe exactly the files in the
// directory (names, formats, sizes, CRC-32 read back), nothing else is left there, the raw
// volume is the volume, and the DICOM tar unpacks into one valid slice per z.
TEST(JobOutputsTest, WritesEveryFormatAndDescribesEachFile) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int64_t> side(6, 24);
  const core::VolumeGeometry geometry =
      core::VolumeGeometry::Create({side(random), side(random), side(random)}, {0.8, 0.9, 1.1},
                                   {1, -2, 3})
          .value();
  const core::Array3D volume =
      core::EllipsoidPhantom::SheppLogan3D(0.4 * geometry.size().x).Rasterize(geometry, 1);
  const std::string dir = FreshDirectory("results");
  OutputSettings settings;
  settings.water_attenuation_per_mm = 0.2;
  absl::StatusOr<std::vector<pb::ResultFile>> results =
      WriteJobOutputs(volume, geometry, kAllFormats, settings, core::AcquisitionMetadata{}, dir);
  ASSERT_TRUE(results.ok()) << results.status();

  std::vector<std::string> names;
  std::set<std::string> expected_files;
  for (pb::OutputFormat format : kAllFormats) {
    for (const std::string& name : OutputFileNames(format)) expected_files.insert(name);
  }
  std::set<std::string> listed;
  for (const pb::ResultFile& result : *results) {
    listed.insert(result.name());
    const fs::path path = fs::path(dir) / result.name();
    absl::StatusOr<FileChecksum> sum = Crc32OfFile(path.string());
    ASSERT_TRUE(sum.ok()) << sum.status();
    EXPECT_EQ(result.size_bytes(), sum->size_bytes) << result.name();
    EXPECT_EQ(result.crc32(), sum->crc32) << result.name();
    const std::vector<std::string> of_format = OutputFileNames(result.format());
    EXPECT_NE(std::find(of_format.begin(), of_format.end(), result.name()), of_format.end())
        << result.name();
  }
  EXPECT_EQ(listed, expected_files);
  EXPECT_EQ(results->size(), expected_files.size());
  std::set<std::string> present;
  for (const auto& entry : fs::directory_iterator(dir)) present.insert(entry.path().filename());
  EXPECT_EQ(present, expected_files);  // no temporary file, no scratch folder

  absl::StatusOr<core::Array3D> raw =
      core::ReadRawFloat32((fs::path(dir) / "volume.raw").string(), geometry.dims());
  ASSERT_TRUE(raw.ok()) << raw.status();
  for (int64_t i = 0; i < volume.size(); ++i) ASSERT_EQ(raw->data()[i], volume.data()[i]);

  const std::string unpacked = FreshDirectory("unpacked");
  absl::StatusOr<std::vector<std::string>> slices =
      core::ExtractTar((fs::path(dir) / "volume_dicom.tar").string(), unpacked);
  ASSERT_TRUE(slices.ok()) << slices.status();
  ASSERT_EQ(slices->size(), static_cast<size_t>(geometry.size().z));
  EXPECT_EQ((*slices)[0], (fs::path(unpacked) / "volume_dicom" / "CT00001.dcm").string());
  const int64_t z = geometry.size().z / 2, y = geometry.size().y / 2, x = geometry.size().x / 3;
  EXPECT_NEAR(DicomHu((*slices)[z], geometry.size().y - 1 - y, x),
              1000.0 * (volume.at(z, y, x) - 0.2) / 0.2, 0.5 + 1e-3);
  fs::remove_all(dir);
  fs::remove_all(unpacked);
}

// The JobSpec's water attenuation wins over the input's; the input's serves when the spec
// gives none; neither is an error naming the option.
TEST(JobOutputsTest, WaterAttenuationFromSpecThenInput) {
  const core::VolumeGeometry geometry =
      core::VolumeGeometry::Create({4, 4, 2}, {1, 1, 1}, {}).value();
  const core::Array3D volume(geometry.dims(), 0.02f);
  core::AcquisitionMetadata metadata;
  metadata.water_attenuation_per_mm = 0.01;  // 0.02 is then 1000 HU
  const std::vector<pb::OutputFormat> dicom = {pb::OUTPUT_FORMAT_DICOM_CT_SERIES};
  for (const bool from_spec : {true, false}) {
    const std::string dir = FreshDirectory(from_spec ? "spec" : "input");
    OutputSettings settings;
    if (from_spec) settings.water_attenuation_per_mm = 0.02;  // 0 HU
    ASSERT_TRUE(WriteJobOutputs(volume, geometry, dicom, settings, metadata, dir).ok());
    const std::string unpacked = FreshDirectory(from_spec ? "spec_unpacked" : "input_unpacked");
    absl::StatusOr<std::vector<std::string>> slices =
        core::ExtractTar(dir + "/volume_dicom.tar", unpacked);
    ASSERT_TRUE(slices.ok()) << slices.status();
    EXPECT_NEAR(DicomHu((*slices)[1], 2, 3), from_spec ? 0.0 : 1000.0, 0.5 + 1e-3);
    fs::remove_all(dir);
    fs::remove_all(unpacked);
  }
  const std::string dir = FreshDirectory("none");
  const absl::StatusOr<std::vector<pb::ResultFile>> none =
      WriteJobOutputs(volume, geometry, dicom, OutputSettings{}, core::AcquisitionMetadata{}, dir);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("output_options.water_attenuation_per_mm"));
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

TEST(JobOutputsTest, RefusesAnUnknownFormat) {
  const core::VolumeGeometry geometry =
      core::VolumeGeometry::Create({4, 4, 2}, {1, 1, 1}, {}).value();
  const core::Array3D volume(geometry.dims(), 0.02f);
  const std::string dir = FreshDirectory("results");
  const absl::StatusOr<std::vector<pb::ResultFile>> results =
      WriteJobOutputs(volume, geometry, {static_cast<pb::OutputFormat>(99)}, OutputSettings{},
                      core::AcquisitionMetadata{}, dir);
  EXPECT_EQ(results.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(results.status().message(), HasSubstr("cannot be written by this server"));
  fs::remove_all(dir);
}

TEST(JobOutputsTest, FileNamesOfEachFormat) {
  EXPECT_THAT(OutputFileNames(pb::OUTPUT_FORMAT_RAW_FLOAT32), ElementsAre("volume.raw", "volume.json"));
  EXPECT_THAT(OutputFileNames(pb::OUTPUT_FORMAT_DICOM_CT_SERIES), ElementsAre("volume_dicom.tar"));
  EXPECT_THAT(OutputFileNames(pb::OUTPUT_FORMAT_PNG_PREVIEW),
              ElementsAre("preview_axial.png", "preview_coronal.png", "preview_sagittal.png"));
}

}  // namespace
}  // namespace tomo::server
