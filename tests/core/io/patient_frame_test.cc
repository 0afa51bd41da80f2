// The orientation test of every output format (core/io/patient_frame.h): an asymmetric
// volume with two markers, written as NIfTI, MetaImage, raw + sidecar, DICOM series and PNG
// previews, and read back by independent readers (niftilib, the test's MHA reader, Python's
// json, DCMTK, pydicom, libpng). Each marker must be found in the same voxel in every format
// and at the same patient (LPS) position: (x, -y, -z) of VolumeGeometry's voxel centre, the
// mapping docs/outputs.md documents.
#include "core/io/patient_frame.h"

#include <png.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>

#include "core/io/dicom_ct_series_writer.h"
#include "core/io/metaimage_writer.h"
#include "core/io/nifti_writer.h"
#include "core/io/png_preview.h"
#include "core/io/raw_sidecar.h"
#include "dcmtk/config/osconfig.h"
#include "dcmtk/dcmdata/dcdeftag.h"
#include "dcmtk/dcmdata/dcfilefo.h"
#include "gtest/gtest.h"
#include "nifti1_io.h"
#include "tests/core/io/command_for_tests.h"
#include "tests/core/io/metaimage_reader_for_tests.h"
#include "tests/core/io/output_test_volumes.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using tomo::testing::RunCommand;
using tomo::testing::ShellQuote;
using tomo::testing::TestPath;

struct Marker {
  int64_t ix, iy, iz;
  float value;
};

struct Found {
  int64_t ix = -1, iy = -1, iz = -1;  // the voxel, in VolumeGeometry's indices
  std::array<double, 3> lps{};        // its centre in LPS, mm, as the format says
};

constexpr double kWater = 0.25;  // HU: background -1000, markers 3000 and 1000

void ExpectAt(const Found& found, const Marker& marker, const VolumeGeometry& geometry,
              const std::string& format) {
  EXPECT_EQ(found.ix, marker.ix) << format;
  EXPECT_EQ(found.iy, marker.iy) << format;
  EXPECT_EQ(found.iz, marker.iz) << format;
  // The documented mapping, written out here: LPS = (x, -y, -z).
  EXPECT_NEAR(found.lps[0], geometry.x_mm(marker.ix), 1e-3) << format << " L";
  EXPECT_NEAR(found.lps[1], -geometry.y_mm(marker.iy), 1e-3) << format << " P";
  EXPECT_NEAR(found.lps[2], -geometry.z_mm(marker.iz), 1e-3) << format << " S";
}

// pydicom: for each value in HU, the file, row and column holding it and the LPS position
// its IPP/IOP/PixelSpacing give. Prints "hu file_index row column L P S".
constexpr char kPydicomFind[] = R"(
import sys, glob, numpy as np, pydicom
files = sorted((pydicom.dcmread(p) for p in glob.glob(sys.argv[1] + '/*.dcm')),
               key=lambda d: int(d.InstanceNumber))
for target in map(float, sys.argv[2:]):
    for k, d in enumerate(files):
        hu = d.pixel_array * float(d.RescaleSlope) + float(d.RescaleIntercept)
        hits = np.argwhere(np.abs(hu - target) < 0.5)
        for r, c in hits:
            ipp = np.array(d.ImagePositionPatient, dtype=float)
            iop = np.array(d.ImageOrientationPatient, dtype=float)
            row_spacing, column_spacing = map(float, d.PixelSpacing)
            p = ipp + c * column_spacing * iop[:3] + r * row_spacing * iop[3:]
            print(int(target), k, int(r), int(c), *[repr(float(v)) for v in p])
)";

// Python's json: the LPS position the sidecar gives to voxel (i, j, k).
constexpr char kSidecarPosition[] = R"(
import json, sys
s = json.load(open(sys.argv[1]))
index = [float(v) for v in sys.argv[2:5]]
p = list(s['lps_origin_mm'])
for a in range(3):
    for d in range(3):
        p[d] += index[a] * s['voxel_size_mm'][a] * s['lps_direction'][a][d]
print(*[repr(float(v)) for v in p])
)";

TEST(PatientFrameTest, MarkersLandInTheSameVoxelAndPositionInEveryFormat) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int64_t> side(5, 20);
  std::uniform_real_distribution<double> voxel(0.4, 1.6), centre(-40, 40);
  const VolumeGeometry geometry =
      VolumeGeometry::Create({side(random), side(random), side(random)},
                             {voxel(random), voxel(random), voxel(random)},
                             {centre(random), centre(random), centre(random)})
          .value();
  const Size3& n = geometry.size();
  // Marker 1 anywhere but not at a symmetric place (a flip of any axis moves it); marker 2
  // in the central axial slice, for the preview.
  auto asymmetric = [&](int64_t count) {
    int64_t i;
    do {
      i = std::uniform_int_distribution<int64_t>(0, count - 1)(random);
    } while (2 * i == count - 1);
    return i;
  };
  Marker m1{asymmetric(n.x), asymmetric(n.y), asymmetric(n.z), 1.0f};
  Marker m2{asymmetric(n.x), asymmetric(n.y), n.z / 2, 0.5f};
  if (m2.ix == m1.ix && m2.iy == m1.iy && m2.iz == m1.iz) m2.ix = (m2.ix + 1) % n.x;
  if (2 * m2.ix == n.x - 1) m2.ix = (m2.ix + 1) % n.x;
  Array3D volume(geometry.dims(), 0.0f);
  volume.at(m1.iz, m1.iy, m1.ix) = m1.value;
  volume.at(m2.iz, m2.iy, m2.ix) = m2.value;
  const std::vector<Marker> markers = {m1, m2};
  const std::string directory = TestPath("formats");
  std::filesystem::remove_all(directory);
  std::filesystem::create_directories(directory + "/dicom");

  // NIfTI through niftilib: index of the value, RAS through sform -> LPS.
  for (const char* name : {"volume.nii", "volume.nii.gz"}) {
    const std::string path = directory + "/" + name;
    ASSERT_TRUE(WriteNifti(path, volume, geometry).ok());
    std::unique_ptr<nifti_image, void (*)(nifti_image*)> image(nifti_image_read(path.c_str(), 1),
                                                               nifti_image_free);
    ASSERT_NE(image, nullptr);
    const float* data = static_cast<const float*>(image->data);
    for (const Marker& m : markers) {
      Found found;
      for (int64_t i = 0; i < volume.size(); ++i) {
        if (data[i] != m.value) continue;
        found.ix = i % image->nx;
        found.iy = (i / image->nx) % image->ny;
        found.iz = i / (static_cast<int64_t>(image->nx) * image->ny);
      }
      const mat44& s = image->sto_xyz;
      double ras[3];
      for (int r = 0; r < 3; ++r) {
        ras[r] = s.m[r][0] * found.ix + s.m[r][1] * found.iy + s.m[r][2] * found.iz + s.m[r][3];
      }
      found.lps = {-ras[0], -ras[1], ras[2]};
      ExpectAt(found, m, geometry, name);
    }
  }

  // MetaImage through the test's reader.
  {
    const std::string path = directory + "/volume.mha";
    ASSERT_TRUE(WriteMetaImage(path, volume, geometry).ok());
    std::optional<tomo::testing::MetaImageForTests> image = tomo::testing::ReadMetaImageForTests(path);
    ASSERT_TRUE(image.has_value());
    for (const Marker& m : markers) {
      Found found;
      for (size_t i = 0; i < image->data.size(); ++i) {
        if (image->data[i] != m.value) continue;
        found.ix = static_cast<int64_t>(i) % image->dim_size[0];
        found.iy = (static_cast<int64_t>(i) / image->dim_size[0]) % image->dim_size[1];
        found.iz = static_cast<int64_t>(i) / (image->dim_size[0] * image->dim_size[1]);
      }
      found.lps = image->Position(found.ix, found.iy, found.iz);
      ExpectAt(found, m, geometry, "mha");
    }
  }

  // Raw + sidecar: index from the raw bytes, position from Python's reading of the JSON.
  {
    const std::string raw = directory + "/volume.raw", sidecar = directory + "/volume.json";
    ASSERT_TRUE(WriteRawWithSidecar(raw, sidecar, volume, geometry).ok());
    std::ifstream file(raw, std::ios::binary);
    std::vector<float> data(static_cast<size_t>(volume.size()));
    file.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(volume.size_bytes()));
    for (const Marker& m : markers) {
      Found found;
      for (size_t i = 0; i < data.size(); ++i) {
        if (data[i] != m.value) continue;
        found.ix = static_cast<int64_t>(i) % n.x;
        found.iy = (static_cast<int64_t>(i) / n.x) % n.y;
        found.iz = static_cast<int64_t>(i) / (n.x * n.y);
      }
      const tomo::testing::CommandResult py = RunCommand(
          std::string(TOMO_TEST_PYTHON3) + " -c " + ShellQuote(kSidecarPosition) + " " +
          ShellQuote(sidecar) + " " + std::to_string(found.ix) + " " + std::to_string(found.iy) +
          " " + std::to_string(found.iz));
      ASSERT_EQ(py.exit_code, 0) << py.output;
      std::istringstream(py.output) >> found.lps[0] >> found.lps[1] >> found.lps[2];
      ExpectAt(found, m, geometry, "raw + sidecar");
    }
  }

  // DICOM: DCMTK reads the files (index from InstanceNumber, row and column), then pydicom.
  DicomCtSeriesOptions options;
  options.water_attenuation_per_mm = kWater;
  absl::StatusOr<std::vector<std::string>> names = WriteDicomCtSeries(
      directory + "/dicom", volume, geometry, AcquisitionMetadata{}, options);
  ASSERT_TRUE(names.ok()) << names.status();
  for (const Marker& m : markers) {
    const double target_hu = 1000.0 * (m.value - kWater) / kWater;
    Found found;
    for (const std::string& name : *names) {
      DcmFileFormat file;
      ASSERT_TRUE(file.loadFile((directory + "/dicom/" + name).c_str()).good());
      DcmDataset& d = *file.getDataset();
      Float64 slope = 1, intercept = 0, ipp[3], iop[6], spacing[2];
      Sint32 instance = 0;
      d.findAndGetFloat64(DCM_RescaleSlope, slope);
      d.findAndGetFloat64(DCM_RescaleIntercept, intercept);
      d.findAndGetSint32(DCM_InstanceNumber, instance);
      for (unsigned long i = 0; i < 3; ++i) d.findAndGetFloat64(DCM_ImagePositionPatient, ipp[i], i);
      for (unsigned long i = 0; i < 6; ++i) d.findAndGetFloat64(DCM_ImageOrientationPatient, iop[i], i);
      for (unsigned long i = 0; i < 2; ++i) d.findAndGetFloat64(DCM_PixelSpacing, spacing[i], i);
      const Uint16* raw = nullptr;
      ASSERT_TRUE(d.findAndGetUint16Array(DCM_PixelData, raw).good());
      for (int64_t r = 0; r < n.y; ++r) {
        for (int64_t c = 0; c < n.x; ++c) {
          const double hu = static_cast<int16_t>(raw[r * n.x + c]) * slope + intercept;
          if (std::abs(hu - target_hu) > 0.5) continue;
          // DICOM's own description of the pixel: IPP + c x column spacing x row cosine +
          // r x row spacing x column cosine; and the voxel the writer's layout says it is.
          found.ix = c;
          found.iy = n.y - 1 - r;
          found.iz = instance - 1;
          for (int a = 0; a < 3; ++a) {
            found.lps[a] = ipp[a] + c * spacing[1] * iop[a] + r * spacing[0] * iop[3 + a];
          }
        }
      }
    }
    ExpectAt(found, m, geometry, "DICOM (DCMTK)");
  }
  const tomo::testing::CommandResult py =
      RunCommand(std::string(TOMO_TEST_PYTHON3) + " -c " + ShellQuote(kPydicomFind) + " " +
                 ShellQuote(directory + "/dicom") + " 3000 1000");
  ASSERT_EQ(py.exit_code, 0) << py.output;
  std::istringstream lines(py.output);
  for (const Marker& m : markers) {
    int hu = 0;
    Found found;
    int64_t k, r, c;
    ASSERT_TRUE(lines >> hu >> k >> r >> c >> found.lps[0] >> found.lps[1] >> found.lps[2])
        << py.output;
    EXPECT_EQ(hu, m.value == 1.0f ? 3000 : 1000);
    found.ix = c;
    found.iy = n.y - 1 - r;
    found.iz = k;
    ExpectAt(found, m, geometry, "DICOM (pydicom)");
  }

  // PNG: marker 2 is in the central axial slice, at row ny - 1 - iy, column ix (the
  // window 0..1 makes it mid-grey); the axial preview's top is anterior (+y).
  {
    absl::StatusOr<std::vector<std::string>> previews =
        WritePngPreviews(directory, volume, geometry, DisplayWindow{0, 1});
    ASSERT_TRUE(previews.ok()) << previews.status();
    png_image image;
    std::memset(&image, 0, sizeof(image));
    image.version = PNG_IMAGE_VERSION;
    const std::string path = directory + "/preview_axial.png";
    ASSERT_TRUE(png_image_begin_read_from_file(&image, path.c_str()));
    image.format = PNG_FORMAT_GRAY;
    std::vector<uint8_t> grey(PNG_IMAGE_SIZE(image));
    ASSERT_TRUE(png_image_finish_read(&image, nullptr, grey.data(), 0, nullptr));
    ASSERT_EQ(image.width, static_cast<png_uint_32>(std::llround(n.x * geometry.voxel_size_mm().x /
                                                                 std::min(geometry.voxel_size_mm().x,
                                                                          geometry.voxel_size_mm().y))));
    // Find the mid-grey pixels and map them back to a voxel (square pixels span the slice).
    int found = 0;
    for (png_uint_32 r = 0; r < image.height; ++r) {
      for (png_uint_32 c = 0; c < image.width; ++c) {
        if (grey[r * image.width + c] != 128) continue;
        ++found;
        const int64_t ix = static_cast<int64_t>((c + 0.5) * n.x / image.width);
        const int64_t row = static_cast<int64_t>((r + 0.5) * n.y / image.height);
        EXPECT_EQ(ix, m2.ix);
        EXPECT_EQ(n.y - 1 - row, m2.iy);
      }
    }
    EXPECT_GE(found, 1);
  }
  std::filesystem::remove_all(directory);
}

TEST(PatientFrameTest, MappingIsAProperRotation) {
  const Vec3 x = ObjectToLps({1, 0, 0}), y = ObjectToLps({0, 1, 0}), z = ObjectToLps({0, 0, 1});
  const Vec3 cross = Cross(x, y);
  EXPECT_DOUBLE_EQ(cross.x, z.x);
  EXPECT_DOUBLE_EQ(cross.y, z.y);
  EXPECT_DOUBLE_EQ(cross.z, z.z);
  const Vec3 ras = ObjectToRas({1, 2, 3}), lps = ObjectToLps({1, 2, 3});
  EXPECT_EQ(ras.x, -lps.x);
  EXPECT_EQ(ras.y, -lps.y);
  EXPECT_EQ(ras.z, lps.z);
}

}  // namespace
}  // namespace tomo::core
