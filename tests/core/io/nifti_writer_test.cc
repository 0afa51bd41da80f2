#include "core/io/nifti_writer.h"

#include <filesystem>
#include <memory>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nifti1_io.h"
#include "tests/core/io/output_test_volumes.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;
using tomo::testing::RandomGrid;
using tomo::testing::RandomValues;
using tomo::testing::TestPath;

struct NiftiFree {
  void operator()(nifti_image* image) const { nifti_image_free(image); }
};

// Writes, reads back with niftilib and checks every value, the grid and both transforms
// (sform and qform) against the documented RAS mapping (-x, y, -z), computed here from
// VolumeGeometry's voxel-centre formula.
void CheckRoundTrip(const std::string& name) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const VolumeGeometry geometry = RandomGrid(random);
  const Array3D volume = RandomValues(geometry, random);
  const std::string path = TestPath(name);
  tomo::testing::Poison(path);
  ASSERT_TRUE(WriteNifti(path, volume, geometry).ok());

  std::unique_ptr<nifti_image, NiftiFree> image(nifti_image_read(path.c_str(), 1));
  ASSERT_NE(image, nullptr);
  EXPECT_EQ(image->ndim, 3);
  ASSERT_EQ(image->nx, geometry.size().x);
  ASSERT_EQ(image->ny, geometry.size().y);
  ASSERT_EQ(image->nz, geometry.size().z);
  ASSERT_EQ(image->datatype, NIFTI_TYPE_FLOAT32);
  EXPECT_EQ(image->xyz_units, NIFTI_UNITS_MM);
  EXPECT_FLOAT_EQ(image->dx, geometry.voxel_size_mm().x);
  EXPECT_FLOAT_EQ(image->dy, geometry.voxel_size_mm().y);
  EXPECT_FLOAT_EQ(image->dz, geometry.voxel_size_mm().z);
  const float* data = static_cast<const float*>(image->data);
  for (int64_t i = 0; i < volume.size(); ++i) ASSERT_EQ(data[i], volume.data()[i]) << i;

  EXPECT_EQ(image->sform_code, NIFTI_XFORM_SCANNER_ANAT);
  EXPECT_EQ(image->qform_code, NIFTI_XFORM_SCANNER_ANAT);
  EXPECT_FLOAT_EQ(image->qfac, 1.0f);
  // Random voxels: their RAS centre through sform and through qform.
  std::uniform_int_distribution<int64_t> ix(0, geometry.size().x - 1), iy(0, geometry.size().y - 1),
      iz(0, geometry.size().z - 1);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t i = ix(random), j = iy(random), k = iz(random);
    const double expected[3] = {-geometry.x_mm(i), geometry.y_mm(j), -geometry.z_mm(k)};
    for (const mat44* m : {&image->sto_xyz, &image->qto_xyz}) {
      for (int r = 0; r < 3; ++r) {
        const double ras = m->m[r][0] * i + m->m[r][1] * j + m->m[r][2] * k + m->m[r][3];
        EXPECT_NEAR(ras, expected[r], 1e-3) << "voxel " << i << "," << j << "," << k
                                            << " axis " << r
                                            << (m == &image->sto_xyz ? " sform" : " qform");
      }
    }
  }
  // Nothing else left next to it (the temporary file was renamed).
  int files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
    if (entry.path().filename().string().find(std::filesystem::path(path).filename().string()) !=
        std::string::npos) {
      ++files;
    }
  }
  EXPECT_EQ(files, 1);
  std::filesystem::remove(path);
}

TEST(NiftiWriterTest, NiiRoundTripsValuesAndAffine) { CheckRoundTrip("volume.nii"); }

TEST(NiftiWriterTest, NiiGzRoundTripsValuesAndAffine) {
  CheckRoundTrip("volume.nii.gz");
}

TEST(NiftiWriterTest, NiiGzIsCompressed) {
  const VolumeGeometry geometry = VolumeGeometry::Create({32, 32, 8}, {1, 1, 1}, {}).value();
  Array3D volume(geometry.dims(), 0.02f);  // constant: compresses well
  const std::string path = TestPath("volume.nii.gz");
  ASSERT_TRUE(WriteNifti(path, volume, geometry).ok());
  EXPECT_LT(std::filesystem::file_size(path), volume.size_bytes() / 10);
  std::filesystem::remove(path);
}

TEST(NiftiWriterTest, RefusesOtherExtensionsAndMismatchedDims) {
  const VolumeGeometry geometry = VolumeGeometry::Create({4, 5, 6}, {1, 1, 1}, {}).value();
  Array3D volume(geometry.dims());
  absl::Status status = WriteNifti(TestPath("volume.img"), volume, geometry);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(".nii or .nii.gz"));
  Array3D wrong({6, 5, 5});
  status = WriteNifti(TestPath("volume.nii"), wrong, geometry);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("(6, 5, 5)"));
  EXPECT_FALSE(std::filesystem::exists(TestPath("volume.nii")));
  // NIfTI-1 stores each dimension in 16 bits.
  const VolumeGeometry long_grid = VolumeGeometry::Create({32768, 1, 1}, {1, 1, 1}, {}).value();
  status = WriteNifti(TestPath("volume.nii"), Array3D(long_grid.dims()), long_grid);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("at most 32767"));
}

TEST(NiftiWriterTest, UnwritableDirectoryIsAnError) {
  const VolumeGeometry geometry = VolumeGeometry::Create({4, 5, 6}, {1, 1, 1}, {}).value();
  Array3D volume(geometry.dims());
  const absl::Status status =
      WriteNifti("/nonexistent-directory-for-tomo/volume.nii", volume, geometry);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("/nonexistent-directory-for-tomo/volume.nii"));
}

}  // namespace
}  // namespace tomo::core
