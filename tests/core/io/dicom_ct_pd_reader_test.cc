// Reads back what dicom_ct_pd_writer writes from the analytic phantom (the oracle is the
// phantom's exact line integrals, not the writer's bytes), and refuses broken files made by
// editing good ones with DCMTK.
#include "core/io/dicom_ct_pd_reader.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/algorithms/filtered_back_projection.h"
#include "core/io/dicom_ct_pd_writer.h"
#include "core/operators/cpu/cpu_backend.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "dcmtk/config/osconfig.h"
#include "dcmtk/dcmdata/dcdatset.h"
#include "dcmtk/dcmdata/dcdeftag.h"
#include "dcmtk/dcmdata/dcfilefo.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

constexpr double kPi = 3.14159265358979323846;

std::string TempDir(const std::string& name) {
  const std::string dir =
      (std::filesystem::path(::testing::TempDir()) /
       (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" + name))
          .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A small third-generation scanner: rho0 150 mm, d0 300 mm, 8 rows x 48 columns.
DicomCtPdScan SmallScan(std::mt19937_64& random, int views, bool helical, bool flying) {
  DicomCtPdScan scan;
  scan.detector.rows = 8;
  scan.detector.columns = 48;
  scan.detector.row_spacing_mm = 2.0;
  scan.detector.column_spacing_mm = 2.5;
  scan.detector.shape = DetectorShape::kCylindrical;
  scan.detector.focal_center_to_detector_mm = 300.0;
  scan.detector.central_column = 24.75;
  scan.detector.central_row = 4.5;
  std::uniform_real_distribution<double> start(0, 2 * kPi), unit(-1, 1);
  const double phi0 = start(random);
  for (int i = 0; i < views; ++i) {
    DicomCtPdView v;
    v.focal_center_angle_rad = phi0 + 2 * kPi * i / views;
    v.focal_center_z_mm = helical ? -6.0 + 12.0 * i / views : 0.0;
    v.focal_center_radius_mm = 150.0;
    if (flying) {
      v.source_angle_shift_rad = (i % 2 == 0 ? 1 : -1) * 0.002;
      v.source_z_shift_mm = (i % 4 < 2 ? 1 : -1) * 0.4;
      v.source_radius_shift_mm = 0.8 * unit(random);
    }
    scan.views.push_back(v);
  }
  scan.helical = helical;
  scan.flying_focal_spot_mode = flying ? "FFSXYZ" : "FFSNONE";
  scan.patient_study = {{0x0010, 0x0010, "Phantom^Shepp"}, {0x0010, 0x0020, "TOMO-42"},
                        {0x0020, 0x000D, "1.2.826.0.1.3680043.9.7133.1.42"},
                        {0x0008, 0x0020, "20261122"}};
  scan.water_attenuation_per_mm = 0.0193;
  return scan;
}

EllipsoidPhantom Phantom() { return EllipsoidPhantom::SheppLogan3D(40.0); }

// The same with water-like attenuation (0.02 per mm for the skull's density 1): line
// integrals up to ~3, as clinical data have them, so that intensities stay well above one
// uint16 step.
EllipsoidPhantom WaterPhantom() {
  std::vector<Ellipsoid> ellipsoids = Phantom().ellipsoids();
  for (Ellipsoid& e : ellipsoids) e.density *= 0.02;
  return EllipsoidPhantom(std::move(ellipsoids));
}

struct Written {
  std::vector<std::string> paths;
  Array3D truth;  // the phantom's line integrals through the scan's geometry
};

Written WriteScan(const std::string& dir, const DicomCtPdScan& scan,
                  const EllipsoidPhantom& phantom = Phantom()) {
  Written written;
  absl::StatusOr<std::vector<std::string>> paths =
      WriteDicomCtPdPhantomScan(dir, scan, phantom, 2);
  EXPECT_TRUE(paths.ok()) << paths.status();
  if (paths.ok()) written.paths = *paths;
  written.truth = phantom.Project(MakeDicomCtPdGeometry(scan.detector, scan.views).value(), 2);
  return written;
}

// Every view's quantisation step: the writer's slope is (max - min(0, min)) / 65535.
double ViewStep(const Array3D& truth, int64_t view) {
  const int64_t n = truth.dims().d1 * truth.dims().d2;
  double low = 0, high = 0;
  for (int64_t i = 0; i < n; ++i) {
    low = std::min(low, static_cast<double>(truth.data()[view * n + i]));
    high = std::max(high, static_cast<double>(truth.data()[view * n + i]));
  }
  return (high - low) / 65535.0;
}

void ExpectGeometryMatches(const VectorGeometry& read, const DicomCtPdScan& scan) {
  const VectorGeometry expected = MakeDicomCtPdGeometry(scan.detector, scan.views).value();
  ASSERT_EQ(read.num_views(), expected.num_views());
  EXPECT_EQ(read.detector(), expected.detector());
  for (int64_t i = 0; i < read.num_views(); ++i) {
    // Positions travel as float32 (FL): ~1e-7 relative, 1e-4 mm at 300 mm.
    for (double row : {0.0, 7.0}) {
      for (double column : {0.0, 23.0, 47.0}) {
        EXPECT_LT(Norm(read.PixelPosition(i, row, column) - expected.PixelPosition(i, row, column)),
                  1e-3);
      }
    }
    EXPECT_LT(Norm(read.views()[i].source - expected.views()[i].source), 1e-3);
  }
}

TEST(DicomCtPdReaderTest, RoundTripsAHelicalFlyingFocalSpotScan) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (bool implicit_vr : {false, true}) {
    SCOPED_TRACE(implicit_vr ? "implicit VR" : "explicit VR");
    DicomCtPdScan scan = SmallScan(random, 24, /*helical=*/true, /*flying=*/true);
    scan.incident_photons = 2.5e5;
    scan.implicit_vr = implicit_vr;
    const Written written = WriteScan(TempDir(implicit_vr ? "implicit" : "explicit"), scan);
    ASSERT_EQ(written.paths.size(), 24u);
    absl::StatusOr<DicomCtPdAcquisition> read = ReadDicomCtPdFiles(written.paths);
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_EQ(read->projections.dims(), (Dims3{24, 8, 48}));
    double worst_in_steps = 0;
    for (int64_t v = 0; v < 24; ++v) {
      const double step = ViewStep(written.truth, v);
      for (int64_t i = 0; i < 8 * 48; ++i) {
        const double error =
            std::fabs(read->projections.data()[v * 384 + i] - written.truth.data()[v * 384 + i]);
        worst_in_steps = std::max(worst_in_steps, error / step);
      }
    }
    std::printf("DICOM-CT-PD round trip: largest error %.3f quantisation steps\n", worst_in_steps);
    EXPECT_LT(worst_in_steps, 0.51);  // rounding to the nearest step, plus float32 slack
    ExpectGeometryMatches(read->geometry, scan);
    EXPECT_EQ(read->flying_focal_spot_mode, "FFSXYZ");
    ASSERT_EQ(read->photon_statistics.dims(), (Dims3{24, 1, 48}));
    for (int64_t i = 0; i < read->photon_statistics.size(); ++i) {
      ASSERT_EQ(read->photon_statistics.data()[i], 2.5e5f);
    }
    ASSERT_TRUE(read->metadata.water_attenuation_per_mm.has_value());
    EXPECT_DOUBLE_EQ(*read->metadata.water_attenuation_per_mm, 0.0193);
    ASSERT_EQ(read->metadata.patient_study.size(), 4u);
    EXPECT_EQ(read->metadata.patient_study[0].value, "Phantom^Shepp");
    EXPECT_EQ(read->metadata.patient_study[1].value, "TOMO-42");
    EXPECT_EQ(read->metadata.patient_study[2].group, 0x0020);
    EXPECT_EQ(read->metadata.patient_study[2].element, 0x000D);
    EXPECT_EQ(read->metadata.patient_study[2].value, "1.2.826.0.1.3680043.9.7133.1.42");
  }
}

// LogFlag NO: the files hold intensities I0 exp(-p) and the reader takes -ln(I / I0) with
// I0 from PhotonStatistics.
TEST(DicomCtPdReaderTest, TakesTheLogarithmWhenTheFlagSaysIntensities) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  DicomCtPdScan scan = SmallScan(random, 6, /*helical=*/false, /*flying=*/false);
  scan.incident_photons = 1e6;
  scan.write_intensities = true;
  const Written written = WriteScan(TempDir("intensities"), scan, WaterPhantom());
  absl::StatusOr<DicomCtPdAcquisition> read = ReadDicomCtPdFiles(written.paths);
  ASSERT_TRUE(read.ok()) << read.status();
  for (int64_t i = 0; i < read->projections.size(); ++i) {
    const double p = written.truth.data()[i];
    // One intensity step of I0 / 65535 at I = I0 exp(-p) is exp(p) / 65535 in p.
    const double tolerance = 0.51 * std::exp(p) / 65535.0 + 1e-5;
    ASSERT_NEAR(read->projections.data()[i], p, tolerance) << i;
  }
  // Without PhotonStatistics the intensities cannot be normalised.
  DicomCtPdScan no_photons = scan;
  std::vector<float> view(8 * 48, 0.5f);
  const std::string path = TempDir("no_photons") + "/p.dcm";
  no_photons.incident_photons = 1e6;
  ASSERT_TRUE(WriteDicomCtPdFile(path, no_photons, 0, view.data()).ok());
  DcmFileFormat file;
  ASSERT_TRUE(file.loadFile(path.c_str()).good());
  ASSERT_TRUE(file.getDataset()->findAndDeleteElement(DcmTagKey(0x7033, 0x1065)).good());
  ASSERT_TRUE(file.saveFile(path.c_str(), EXS_LittleEndianExplicit).good());
  absl::StatusOr<DicomCtPdAcquisition> refused = ReadDicomCtPdFiles({path});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("PhotonStatistics (7033,1065)"));
}

// The whole path: DICOM-CT-PD files -> reader -> FDK reconstructs the phantom within the
// bound of tests/core/algorithms/filtered_back_projection_test.cc (ConeFullScanReconstructsSheppLogan3D).
TEST(DicomCtPdReaderTest, FdkReconstructsThePhantomFromTheFiles) {
  constexpr double kRadiusMm = 28.0;
  DicomCtPdScan scan;
  scan.detector.rows = 64;
  scan.detector.columns = 64;
  scan.detector.row_spacing_mm = 2.0;
  scan.detector.column_spacing_mm = 2.0;
  scan.detector.shape = DetectorShape::kCylindrical;
  scan.detector.focal_center_to_detector_mm = 300.0;
  scan.detector.central_column = 32.5;
  scan.detector.central_row = 32.5;
  for (int i = 0; i < 240; ++i) {
    DicomCtPdView v;
    v.focal_center_angle_rad = 2 * kPi * i / 240;
    v.focal_center_radius_mm = 150.0;
    scan.views.push_back(v);
  }
  const EllipsoidPhantom phantom = EllipsoidPhantom::SheppLogan3D(kRadiusMm);
  absl::StatusOr<std::vector<std::string>> paths =
      WriteDicomCtPdPhantomScan(TempDir("fdk"), scan, phantom, 2);
  ASSERT_TRUE(paths.ok()) << paths.status();
  absl::StatusOr<DicomCtPdAcquisition> read = ReadDicomCtPdFiles(*paths);
  ASSERT_TRUE(read.ok()) << read.status();
  const VolumeGeometry volume = VolumeGeometry::Create({64, 64, 64}, {1, 1, 1}, {}).value();
  CpuBackend backend;
  absl::StatusOr<Array3D> image = Fdk(read->geometry, volume, read->projections, {}, backend, {});
  ASSERT_TRUE(image.ok()) << image.status();
  const Array3D truth = phantom.Rasterize(volume, 2);
  // filtered_back_projection_test's CentralRmse3D: |z| <= 8 slices, inside the brain's outline.
  double sum = 0;
  int64_t count = 0;
  for (int64_t z = 24; z < 40; ++z) {
    for (int64_t y = 0; y < 64; ++y) {
      for (int64_t x = 0; x < 64; ++x) {
        const double px = (x - 31.5) / (0.62 * kRadiusMm), py = (y - 31.5) / (0.82 * kRadiusMm);
        if (px * px + py * py > 1.0) continue;
        const double e = image->at(z, y, x) - truth.at(z, y, x);
        sum += e * e;
        ++count;
      }
    }
  }
  const double rmse = std::sqrt(sum / static_cast<double>(count));
  std::printf("DICOM-CT-PD -> FDK: central RMSE %.4f\n", rmse);
  EXPECT_LT(rmse, 0.012);
}

// Helpers that break a good file with DCMTK.
std::string GoodFile(const std::string& dir, std::mt19937_64& random, const std::string& name) {
  DicomCtPdScan scan = SmallScan(random, 1, false, false);
  std::vector<float> view(8 * 48, 1.5f);
  const std::string path = dir + "/" + name;
  EXPECT_TRUE(WriteDicomCtPdFile(path, scan, 0, view.data()).ok());
  return path;
}

template <typename Edit>
void EditFile(const std::string& path, Edit edit, E_TransferSyntax xfer = EXS_LittleEndianExplicit) {
  DcmFileFormat file;
  ASSERT_TRUE(file.loadFile(path.c_str()).good());
  edit(*file.getDataset());
  ASSERT_TRUE(file.saveFile(path.c_str(), xfer).good());
}

absl::Status ReadStatus(const std::vector<std::string>& paths) {
  return ReadDicomCtPdFiles(paths).status();
}

TEST(DicomCtPdReaderTest, RefusesBrokenFilesNamingFileAndTag) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const std::string dir = TempDir("bad");

  // A required private tag missing.
  const std::string missing = GoodFile(dir, random, "missing.dcm");
  EditFile(missing, [](DcmDataset& d) { d.findAndDeleteElement(DcmTagKey(0x7031, 0x1001)); });
  absl::Status s = ReadStatus({missing});
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("missing.dcm: DetectorFocalCenterAngularPosition (7031,1001) missing"));
  // The Submit-time check sees it too, from the header alone.
  std::ifstream in(missing, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  s = ParseDicomCtPdHeader(bytes.data(), bytes.size(), "missing.dcm").status();
  EXPECT_THAT(s.message(), HasSubstr("(7031,1001) missing"));

  // Truncated: cut inside the pixel data, and inside the header.
  const std::string good = GoodFile(dir, random, "good.dcm");
  std::ifstream good_in(good, std::ios::binary);
  const std::string good_bytes((std::istreambuf_iterator<char>(good_in)),
                               std::istreambuf_iterator<char>());
  ASSERT_TRUE(ParseDicomCtPdHeader(good_bytes.data(), good_bytes.size(), "good.dcm").ok());
  for (size_t cut : {good_bytes.size() - 100, size_t{300}, size_t{10}}) {
    absl::StatusOr<DicomCtPdAcquisition> truncated =
        DecodeDicomCtPd({DicomBytes{"cut.dcm", good_bytes.data(), cut}});
    ASSERT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument) << cut;
    EXPECT_THAT(truncated.status().message(), HasSubstr("cut.dcm")) << cut;
  }

  // Unsupported transfer syntax: big endian.
  const std::string big = GoodFile(dir, random, "big.dcm");
  EditFile(big, [](DcmDataset&) {}, EXS_BigEndianExplicit);
  s = ReadStatus({big});
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("big.dcm: TransferSyntaxUID (0002,0010) 1.2.840.10008.1.2.2"));

  // Image size that disagrees with the detector.
  const std::string wrong_image = GoodFile(dir, random, "image.dcm");
  EditFile(wrong_image, [](DcmDataset& d) { d.putAndInsertUint16(DCM_Rows, 47); });
  s = ReadStatus({wrong_image});
  EXPECT_THAT(s.message(), HasSubstr("image.dcm: Rows (0028,0010) x Columns (0028,0011) is 47 x 8"));

  // Inconsistent dimensions across files: the second has other detector rows.
  const std::string first = GoodFile(dir, random, "a.dcm");
  const std::string second = GoodFile(dir, random, "b.dcm");
  EditFile(second, [](DcmDataset& d) {
    d.putAndInsertFloat32(DcmTag(0x7029, 0x1006, EVR_FL), 1.5f);
  });
  s = ReadStatus({first, second});
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("b.dcm: DetectorElementAxialSpacing (7029,1006) 1.5 differs from 2 in"));

  // A spherical detector, and an unknown LogFlag.
  const std::string sphere = GoodFile(dir, random, "sphere.dcm");
  EditFile(sphere, [](DcmDataset& d) {
    d.putAndInsertString(DcmTag(0x7029, 0x100B, EVR_CS), "SPHERICAL");
  });
  EXPECT_THAT(ReadStatus({sphere}).message(), HasSubstr("DetectorShape (7029,100B) \"SPHERICAL\""));
  const std::string flag = GoodFile(dir, random, "flag.dcm");
  EditFile(flag, [](DcmDataset& d) { d.putAndInsertString(DcmTag(0x7039, 0x1009, EVR_CS), "MAYBE"); });
  EXPECT_THAT(ReadStatus({flag}).message(), HasSubstr("LogFlag (7039,1009) \"MAYBE\""));

  // Not DICOM at all, and no files.
  const std::string text = "plain text, not DICOM";
  s = DecodeDicomCtPd({DicomBytes{"notes.txt", text.data(), text.size()}}).status();
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("notes.txt"));
  EXPECT_EQ(DecodeDicomCtPd({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadStatus({dir + "/nope.dcm"}).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tomo::core
