// EPR's 3D Radon transform as a product job: `tomo phantom --geometry radon-3d` writes the
// Shepp-Logan head's exact plane integrals and their JobSpec (geometry.radon_3d), and
// `tomo local` and a real tomod reconstruct them (Radon FBP, CGLS on the plane-integral
// projector) within a stated RMSE of the rasterised phantom, in every output format.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/job_spec_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/end_to_end/daemon_fixture.h"

namespace tomo::testing {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::tomoserve::v1;
using ::testing::HasSubstr;

// A 24^3 grid of 0.7 mm voxels. Measured on the CPU backend: Radon FBP from 500 uniform
// directions RMSE 0.0584 (120 directions: 0.0777); CGLS, 15 iterations from 120 directions,
// 0.0697. The phantom's own RMS (a zero volume's RMSE) is about 0.4. Bounds 15% above.
constexpr double kFbpRmseBound = 0.067;
constexpr double kCglsRmseBound = 0.080;

class RadonEndToEndTest : public DaemonTest {
 protected:
  double Rmse(const std::string& phantom, const std::string& volume) {
    ProcessResult compared = TomoRaw({"compare", "--reference", phantom + "/truth.raw",
                                      "--image", volume, "--dims", "24,24,24"});
    EXPECT_EQ(compared.exit_code, 0) << compared.Describe();
    return ParseRmse(compared.out);
  }
};

TEST_F(RadonEndToEndTest, PhantomThenLocalFbpReconstructsTheHead) {
  const std::string phantom =
      MakePhantom("radon", 24, 500, {"--geometry", "radon-3d", "--voxel-size", "0.7"});
  auto spec = client::ReadJobSpecFile(phantom + "/job.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->geometry().has_radon_3d());
  EXPECT_EQ(spec->geometry().radon_3d().uniform_solid_angle().count(), 500u);
  const v1::Radon3D& radon = spec->geometry().radon_3d();
  EXPECT_EQ(fs::file_size(phantom + "/sinogram.raw"), 500u * radon.num_samples() * 4u);

  const std::string out = dir() + "/local";
  ProcessResult local = TomoRaw({"local", "--spec", phantom + "/job.json", "--data",
                                 phantom + "/sinogram.raw", "--out", out});
  ASSERT_EQ(local.exit_code, 0) << local.Describe();
  const double rmse = Rmse(phantom, out + "/volume.raw");
  std::cout << "RMSE of tomo local's Radon FBP, 24^3, 500 directions: " << rmse << "\n";
  EXPECT_LT(rmse, kFbpRmseBound);
}

TEST_F(RadonEndToEndTest, DaemonCglsFromFewDirectionsInEveryFormat) {
  const std::string phantom =
      MakePhantom("radon", 24, 120,
                  {"--geometry", "radon-3d", "--voxel-size", "0.7", "--algorithm", "cgls",
                   "--iterations", "15"});
  auto spec = client::ReadJobSpecFile(phantom + "/job.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->clear_outputs();
  for (v1::OutputFormat format :
       {v1::OUTPUT_FORMAT_RAW_FLOAT32, v1::OUTPUT_FORMAT_NIFTI, v1::OUTPUT_FORMAT_NIFTI_GZ,
        v1::OUTPUT_FORMAT_METAIMAGE, v1::OUTPUT_FORMAT_DICOM_CT_SERIES,
        v1::OUTPUT_FORMAT_PNG_PREVIEW}) {
    spec->add_outputs(format);
  }
  // The head's brain (0.2 per mm in the phantom's units) as "water" for the HU scale.
  spec->mutable_output_options()->set_water_attenuation_per_mm(0.2);
  const std::string spec_path = dir() + "/cgls.json";
  ASSERT_TRUE(client::WriteJobSpecFile(spec_path, *spec).ok());

  const std::string out = dir() + "/daemon";
  ProcessResult r = Tomo({"submit", "--spec", spec_path, "--data", phantom + "/sinogram.raw",
                          "--wait", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  for (const char* name : {"volume.raw", "volume.json", "volume.nii", "volume.nii.gz",
                           "volume.mha", "preview_axial.png", "preview_coronal.png",
                           "preview_sagittal.png"}) {
    EXPECT_TRUE(fs::exists(out + "/" + name)) << name << "\n" << r.Describe();
  }
  EXPECT_EQ(fs::file_size(out + "/volume.raw"), 24u * 24u * 24u * 4u);
  const double rmse = Rmse(phantom, out + "/volume.raw");
  std::cout << "RMSE of tomod's CGLS (15 iterations), 24^3, 120 directions: " << rmse << "\n";
  EXPECT_LT(rmse, kCglsRmseBound);

  ProcessResult status = Tomo({"status", r.OutLines()[0]});
  EXPECT_THAT(status.out, HasSubstr("3D Radon, 120 directions (uniform solid angle)"))
      << status.Describe();
}

TEST_F(RadonEndToEndTest, ABadDirectionIsRefusedNamingItsField) {
  const std::string phantom =
      MakePhantom("radon", 24, 40, {"--geometry", "radon-3d", "--voxel-size", "0.7"});
  auto spec = client::ReadJobSpecFile(phantom + "/job.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  // The same count as an explicit list whose second direction points below the sphere.
  v1::Radon3D* radon = spec->mutable_geometry()->mutable_radon_3d();
  radon->clear_uniform_solid_angle();
  for (int i = 0; i < 40; ++i) {
    v1::RadonDirection* d = radon->add_directions();
    d->set_phi_rad(0.3 * i);
    d->set_theta_rad(i == 1 ? 3.5 : 0.02 + 0.035 * i);
    d->set_weight_sr(6.283185307179586 / 40);
  }
  const std::string spec_path = dir() + "/bad.json";
  ASSERT_TRUE(client::WriteJobSpecFile(spec_path, *spec).ok());
  ExpectRefusedLocallyAndByTheDaemon(spec_path, phantom + "/sinogram.raw",
                                     "geometry.radon_3d.directions[1].theta_rad: 3.5");
}

}  // namespace
}  // namespace tomo::testing
