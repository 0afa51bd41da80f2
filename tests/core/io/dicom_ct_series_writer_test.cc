#include "core/io/dicom_ct_series_writer.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "core/io/raw_io.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "dcmtk/config/osconfig.h"
#include "dcmtk/dcmdata/dcdeftag.h"
#include "dcmtk/dcmdata/dcfilefo.h"
#include "dcmtk/dcmdata/dcuid.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/io/command_for_tests.h"
#include "tests/core/io/output_test_volumes.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;
using tomo::testing::RunCommand;
using tomo::testing::ShellQuote;
using tomo::testing::TestPath;

double ToHu(double mu, double mu_water) { return 1000.0 * (mu - mu_water) / mu_water; }

// A water cylinder (as a tall ellipsoid) with random inserts, rasterised: its voxel values
// are the analytic densities, the oracle for the HU read back.
Array3D WaterPhantomVolume(const VolumeGeometry& geometry, double mu_water,
                           std::mt19937_64& random) {
  const double rx = 0.45 * geometry.size().x * geometry.voxel_size_mm().x;
  const double ry = 0.45 * geometry.size().y * geometry.voxel_size_mm().y;
  const Vec3 c = geometry.center_mm();
  std::vector<Ellipsoid> parts = {{c, {rx, ry, 1e6}, 0.0, mu_water}};
  std::uniform_real_distribution<double> contrast(-0.9, 2.0), fraction(0.1, 0.3),
      offset(-0.3, 0.3), angle(0, 3.14);
  for (int i = 0; i < 3; ++i) {
    parts.push_back({{c.x + offset(random) * rx, c.y + offset(random) * ry, c.z},
                     {fraction(random) * rx, fraction(random) * ry, 1e6},
                     angle(random),
                     contrast(random) * mu_water});
  }
  return EllipsoidPhantom(parts).Rasterize(geometry, /*supersampling=*/1);
}

std::string GetString(DcmDataset& dataset, const DcmTagKey& key) {
  OFString value;
  dataset.findAndGetOFStringArray(key, value);
  return value.c_str();
}

std::vector<double> GetNumbers(DcmDataset& dataset, const DcmTagKey& key) {
  std::vector<double> numbers;
  Float64 value;
  for (unsigned long i = 0; dataset.findAndGetFloat64(key, value, i).good(); ++i) {
    numbers.push_back(value);
  }
  return numbers;
}

// dciodvfy (dicom3tools) checks the file against the CT Image IOD: no line may be an error.
void ExpectValidatorFindsNoErrors(const std::string& path) {
  const tomo::testing::CommandResult result =
      RunCommand(std::string(TOMO_TEST_DCIODVFY) + " " + ShellQuote(path));
  std::istringstream lines(result.output);
  std::string line;
  int errors = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("Error", 0) == 0) ++errors;
  }
  EXPECT_EQ(errors, 0) << path << ":\n" << result.output;
  // dciodvfy names the IOD it checked against.
  EXPECT_THAT(result.output, HasSubstr("CTImage")) << result.output;
}

// pydicom reads every file: prints, per file in InstanceNumber order, the largest HU
// difference from the expected HU volume (raw float32 z-y-x, y reversed into DICOM rows)
// and its Image Position (Patient).
constexpr char kPydicomCheck[] = R"(
import sys, glob, numpy as np, pydicom
directory, expected_path, nz, ny, nx = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
expected = np.fromfile(expected_path, dtype='<f4').reshape(nz, ny, nx)
files = [pydicom.dcmread(p) for p in sorted(glob.glob(directory + '/*.dcm'))]
files.sort(key=lambda d: int(d.InstanceNumber))
assert len(files) == nz, len(files)
for k, d in enumerate(files):
    assert d.SOPClassUID == '1.2.840.10008.5.1.4.1.1.2'
    assert d.file_meta.TransferSyntaxUID == '1.2.840.10008.1.2.1'
    hu = d.pixel_array.astype(np.float64) * float(d.RescaleSlope) + float(d.RescaleIntercept)
    error = np.abs(hu - expected[k][::-1, :]).max()
    print(k, repr(float(error)), *[repr(float(v)) for v in d.ImagePositionPatient])
)";

TEST(DicomCtSeriesWriterTest, PhantomSeriesReadsBackInDcmtkPydicomAndPassesDciodvfy) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int64_t> side(8, 40);
  std::uniform_real_distribution<double> voxel(0.3, 1.5), centre(-30, 30), water(0.015, 0.025);
  const VolumeGeometry geometry =
      VolumeGeometry::Create({side(random), side(random), std::uniform_int_distribution<int64_t>(2, 6)(random)},
                             {voxel(random), voxel(random), voxel(random)},
                             {centre(random), centre(random), centre(random)})
          .value();
  const double mu_water = water(random);
  const Array3D volume = WaterPhantomVolume(geometry, mu_water, random);
  const std::string directory = TestPath("dicom");
  std::filesystem::remove_all(directory);
  std::filesystem::create_directories(directory);
  DicomCtSeriesOptions options;
  options.water_attenuation_per_mm = mu_water;
  absl::StatusOr<std::vector<std::string>> names =
      WriteDicomCtSeries(directory, volume, geometry, AcquisitionMetadata{}, options);
  ASSERT_TRUE(names.ok()) << names.status();
  const Size3& n = geometry.size();
  ASSERT_EQ(names->size(), static_cast<size_t>(n.z));

  std::set<std::string> instance_uids;
  std::string study_uid, series_uid, frame_uid;
  for (int64_t z = 0; z < n.z; ++z) {
    const std::string path = directory + "/" + (*names)[z];
    EXPECT_EQ((*names)[z], DicomSliceFileName(z));
    DcmFileFormat file;
    ASSERT_TRUE(file.loadFile(path.c_str()).good()) << path;
    DcmDataset& d = *file.getDataset();
    EXPECT_EQ(GetString(d, DCM_SOPClassUID), UID_CTImageStorage);
    EXPECT_EQ(GetString(d, DCM_Modality), "CT");
    EXPECT_EQ(file.getDataset()->getOriginalXfer(), EXS_LittleEndianExplicit);
    instance_uids.insert(GetString(d, DCM_SOPInstanceUID));
    if (z == 0) {
      study_uid = GetString(d, DCM_StudyInstanceUID);
      series_uid = GetString(d, DCM_SeriesInstanceUID);
      frame_uid = GetString(d, DCM_FrameOfReferenceUID);
      EXPECT_FALSE(study_uid.empty());
      EXPECT_NE(study_uid, series_uid);
      EXPECT_NE(series_uid, frame_uid);
    }
    EXPECT_EQ(GetString(d, DCM_StudyInstanceUID), study_uid);
    EXPECT_EQ(GetString(d, DCM_SeriesInstanceUID), series_uid);
    EXPECT_EQ(GetString(d, DCM_FrameOfReferenceUID), frame_uid);
    EXPECT_EQ(GetString(d, DCM_InstanceNumber), std::to_string(z + 1));
    EXPECT_EQ(GetString(d, DCM_PatientName), "Anonymous^Patient");

    // Geometry: IOP, IPP (LPS of voxel (0, ny - 1, z)), spacing, thickness.
    EXPECT_THAT(GetNumbers(d, DCM_ImageOrientationPatient),
                ::testing::ElementsAre(1, 0, 0, 0, 1, 0));
    const std::vector<double> ipp = GetNumbers(d, DCM_ImagePositionPatient);
    ASSERT_EQ(ipp.size(), 3u);
    EXPECT_NEAR(ipp[0], geometry.x_mm(0), 1e-9 + 1e-12 * std::abs(ipp[0]) + 1e-6);
    EXPECT_NEAR(ipp[1], -geometry.y_mm(n.y - 1), 1e-6);
    EXPECT_NEAR(ipp[2], -geometry.z_mm(z), 1e-6);
    const std::vector<double> spacing = GetNumbers(d, DCM_PixelSpacing);
    ASSERT_EQ(spacing.size(), 2u);
    EXPECT_NEAR(spacing[0], geometry.voxel_size_mm().y, 1e-9);
    EXPECT_NEAR(spacing[1], geometry.voxel_size_mm().x, 1e-9);
    EXPECT_NEAR(GetNumbers(d, DCM_SliceThickness).at(0), geometry.voxel_size_mm().z, 1e-9);

    // Pixels: HU within half a stored step of the phantom's.
    Uint16 rows = 0, columns = 0, representation = 0;
    d.findAndGetUint16(DCM_Rows, rows);
    d.findAndGetUint16(DCM_Columns, columns);
    d.findAndGetUint16(DCM_PixelRepresentation, representation);
    ASSERT_EQ(rows, n.y);
    ASSERT_EQ(columns, n.x);
    EXPECT_EQ(representation, 1);
    const double slope = GetNumbers(d, DCM_RescaleSlope).at(0);
    const double intercept = GetNumbers(d, DCM_RescaleIntercept).at(0);
    EXPECT_EQ(slope, 1.0);  // the phantom's HU fit in int16
    EXPECT_EQ(intercept, 0.0);
    const Uint16* raw = nullptr;
    unsigned long count = 0;
    ASSERT_TRUE(d.findAndGetUint16Array(DCM_PixelData, raw, &count).good());
    ASSERT_EQ(count, static_cast<unsigned long>(n.x * n.y));
    for (int64_t r = 0; r < n.y; ++r) {
      for (int64_t c = 0; c < n.x; ++c) {
        const double hu = static_cast<int16_t>(raw[r * n.x + c]) * slope + intercept;
        ASSERT_NEAR(hu, ToHu(volume.at(z, n.y - 1 - r, c), mu_water), 0.5 + 1e-3)
            << "slice " << z << " row " << r << " column " << c;
      }
    }
    ExpectValidatorFindsNoErrors(path);
  }
  EXPECT_EQ(instance_uids.size(), static_cast<size_t>(n.z));

  // pydicom, against the HU computed here from the phantom's values.
  Array3D expected_hu(volume.dims());
  for (int64_t i = 0; i < volume.size(); ++i) {
    expected_hu.data()[i] = static_cast<float>(ToHu(volume.data()[i], mu_water));
  }
  const std::string expected_path = TestPath("expected_hu.raw");
  ASSERT_TRUE(WriteRawFloat32(expected_path, expected_hu).ok());
  const tomo::testing::CommandResult py = RunCommand(
      std::string(TOMO_TEST_PYTHON3) + " -c " + ShellQuote(kPydicomCheck) + " " +
      ShellQuote(directory) + " " + ShellQuote(expected_path) + " " + std::to_string(n.z) + " " +
      std::to_string(n.y) + " " + std::to_string(n.x));
  ASSERT_EQ(py.exit_code, 0) << py.output;
  std::istringstream lines(py.output);
  for (int64_t z = 0; z < n.z; ++z) {
    int k = -1;
    double error = 1e9, px = 0, py_ = 0, pz = 0;
    ASSERT_TRUE(lines >> k >> error >> px >> py_ >> pz) << py.output;
    EXPECT_EQ(k, z);
    EXPECT_LE(error, 0.5 + 1e-3) << "slice " << z;  // float32 HU in the expected file
    EXPECT_NEAR(pz, -geometry.z_mm(z), 1e-6);
  }
  std::filesystem::remove(expected_path);
  std::filesystem::remove_all(directory);
}

TEST(DicomCtSeriesWriterTest, CopiesPatientAndStudyAttributesOnly) {
  const VolumeGeometry geometry = VolumeGeometry::Create({8, 6, 2}, {1, 1, 2}, {}).value();
  Array3D volume(geometry.dims(), 0.02f);
  AcquisitionMetadata metadata;
  metadata.patient_study = {{0x0010, 0x0010, "Doe^Jane"},
                            {0x0010, 0x0020, "PID-0042"},
                            {0x0010, 0x0040, "F"},
                            {0x0020, 0x000D, "1.2.826.0.1.3680043.2.1125.42"},
                            {0x0008, 0x0020, "20240131"},
                            {0x0008, 0x0050, "ACC7"},
                            {0x0020, 0x000E, "9.9.9"},  // SeriesInstanceUID: not copied
                            {0x0028, 0x0010, "3"}};     // Rows: not copied
  const std::string directory = TestPath("dicom");
  std::filesystem::remove_all(directory);
  std::filesystem::create_directories(directory);
  DicomCtSeriesOptions options;
  options.water_attenuation_per_mm = 0.02;
  absl::StatusOr<std::vector<std::string>> names =
      WriteDicomCtSeries(directory, volume, geometry, metadata, options);
  ASSERT_TRUE(names.ok()) << names.status();
  for (const std::string& name : *names) {
    const std::string path = directory + "/" + name;
    DcmFileFormat file;
    ASSERT_TRUE(file.loadFile(path.c_str()).good());
    DcmDataset& d = *file.getDataset();
    EXPECT_EQ(GetString(d, DCM_PatientName), "Doe^Jane");
    EXPECT_EQ(GetString(d, DCM_PatientID), "PID-0042");
    EXPECT_EQ(GetString(d, DCM_PatientSex), "F");
    EXPECT_EQ(GetString(d, DCM_StudyInstanceUID), "1.2.826.0.1.3680043.2.1125.42");
    EXPECT_EQ(GetString(d, DCM_StudyDate), "20240131");
    EXPECT_EQ(GetString(d, DCM_AccessionNumber), "ACC7");
    EXPECT_NE(GetString(d, DCM_SeriesInstanceUID), "9.9.9");
    Uint16 rows = 0;
    d.findAndGetUint16(DCM_Rows, rows);
    EXPECT_EQ(rows, 6);
    ExpectValidatorFindsNoErrors(path);
  }
  std::filesystem::remove_all(directory);
}

// HU beyond int16 (an uncalibrated volume): one slope and intercept for the series, no
// value clipped, each within half a step.
TEST(DicomCtSeriesWriterTest, WideRangeGetsASeriesRescaleWithoutClipping) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const VolumeGeometry geometry = VolumeGeometry::Create({9, 7, 3}, {1, 1, 1}, {}).value();
  Array3D volume(geometry.dims());
  std::uniform_real_distribution<float> value(-2.0f, 5.0f);  // HU up to ~ 250000 at mu 0.02
  for (int64_t i = 0; i < volume.size(); ++i) volume.data()[i] = value(random);
  const std::string directory = TestPath("dicom");
  std::filesystem::remove_all(directory);
  std::filesystem::create_directories(directory);
  DicomCtSeriesOptions options;
  options.water_attenuation_per_mm = 0.02;
  absl::StatusOr<std::vector<std::string>> names =
      WriteDicomCtSeries(directory, volume, geometry, AcquisitionMetadata{}, options);
  ASSERT_TRUE(names.ok()) << names.status();
  double first_slope = 0;
  for (int64_t z = 0; z < 3; ++z) {
    DcmFileFormat file;
    ASSERT_TRUE(file.loadFile((directory + "/" + (*names)[z]).c_str()).good());
    DcmDataset& d = *file.getDataset();
    const double slope = GetNumbers(d, DCM_RescaleSlope).at(0);
    const double intercept = GetNumbers(d, DCM_RescaleIntercept).at(0);
    EXPECT_GT(slope, 1.0);
    if (z == 0) first_slope = slope;
    EXPECT_EQ(slope, first_slope);
    const Uint16* raw = nullptr;
    ASSERT_TRUE(d.findAndGetUint16Array(DCM_PixelData, raw).good());
    for (int64_t r = 0; r < 7; ++r) {
      for (int64_t c = 0; c < 9; ++c) {
        const double hu = static_cast<int16_t>(raw[r * 9 + c]) * slope + intercept;
        // Slope and intercept are stored as 16-character decimals: allow their rounding.
        ASSERT_NEAR(hu, ToHu(volume.at(z, 6 - r, c), 0.02), 0.5 * slope + 1e-6 * std::abs(hu) + 1e-3);
      }
    }
  }
  std::filesystem::remove_all(directory);
}

TEST(DicomCtSeriesWriterTest, RefusesBadWaterAttenuationAndNonFiniteValues) {
  const VolumeGeometry geometry = VolumeGeometry::Create({4, 4, 2}, {1, 1, 1}, {}).value();
  Array3D volume(geometry.dims(), 0.02f);
  DicomCtSeriesOptions options;
  const std::string directory = TestPath("dicom");
  std::filesystem::create_directories(directory);
  absl::StatusOr<std::vector<std::string>> names =
      WriteDicomCtSeries(directory, volume, geometry, AcquisitionMetadata{}, options);
  EXPECT_EQ(names.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(names.status().message(), HasSubstr("water attenuation"));
  options.water_attenuation_per_mm = 0.02;
  volume.at(1, 2, 3) = std::nanf("");
  names = WriteDicomCtSeries(directory, volume, geometry, AcquisitionMetadata{}, options);
  EXPECT_EQ(names.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(names.status().message(), HasSubstr("index 27"));
  EXPECT_TRUE(std::filesystem::is_empty(directory));
  std::filesystem::remove_all(directory);
}

TEST(DicomCtSeriesWriterTest, RescaleKeepsUnitStepsWhenHuFit) {
  const HounsfieldRescale usual = ChooseHounsfieldRescale(-1000, 3000);
  EXPECT_EQ(usual.slope, 1.0);
  EXPECT_EQ(usual.intercept, 0.0);
  const HounsfieldRescale wide = ChooseHounsfieldRescale(-1000, 100000);
  EXPECT_NEAR(wide.intercept + 32767 * wide.slope, 100000, 1e-6);
  EXPECT_NEAR(wide.intercept - 32767 * wide.slope, -1000, 1e-6);
}

}  // namespace
}  // namespace tomo::core
