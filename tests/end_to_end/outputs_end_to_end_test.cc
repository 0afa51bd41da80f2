// Output formats through the real tomod and tomo (issue 5, data out): a cone-beam phantom job
// asking for every format, its results fetched as a user would (`tomo submit --wait`,
// `tomo fetch --format dicom|nifti`, `tomo preview`), the DICOM slices checked by dciodvfy,
// and `tomo local --format` writing the same files without a daemon.
//
// Not registered with ctest until runner/job_execution.cc calls WriteJobOutputs
// (runner/job_outputs.h): until then tomod refuses every format but RAW_FLOAT32.
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "client/job_spec_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/end_to_end/daemon_fixture.h"

namespace tomo::testing {
namespace {

namespace fs = std::filesystem;
namespace v1 = ::tomoserve::v1;
using ::testing::HasSubstr;

constexpr int kSize = 32;
// As cli_end_to_end_test's cone case (32^3, 180 views): FDK against the rasterised phantom.
constexpr double kConeRmseBound = 0.056;

// The phantom's spec asking for every output format, written next to it as job-all.json.
std::string SpecWithEveryFormat(const std::string& phantom) {
  absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(phantom + "/job.json");
  EXPECT_TRUE(spec.ok()) << spec.status();
  spec->clear_outputs();
  for (v1::OutputFormat format :
       {v1::OUTPUT_FORMAT_RAW_FLOAT32, v1::OUTPUT_FORMAT_NIFTI, v1::OUTPUT_FORMAT_NIFTI_GZ,
        v1::OUTPUT_FORMAT_METAIMAGE, v1::OUTPUT_FORMAT_DICOM_CT_SERIES,
        v1::OUTPUT_FORMAT_PNG_PREVIEW}) {
    spec->add_outputs(format);
  }
  // The Shepp-Logan's "water" (its brain, 0.2 in the modified contrasts) is 0 HU.
  spec->mutable_output_options()->set_water_attenuation_per_mm(0.2);
  const std::string path = phantom + "/job-all.json";
  EXPECT_TRUE(client::WriteJobSpecFile(path, *spec).ok());
  return path;
}

int DciodvfyErrors(const std::string& path, const std::string& scratch_dir, std::string* output) {
  ProcessResult r = RunProcess({TOMO_TEST_DCIODVFY, path}, scratch_dir, absl::Seconds(60));
  *output = r.out + r.err;
  int errors = 0;
  for (const std::string& line : SplitLines(*output)) {
    if (absl::StartsWith(line, "Error")) ++errors;
  }
  return errors;
}

class OutputsEndToEndTest : public DaemonTest {};

TEST_F(OutputsEndToEndTest, EveryFormatThroughTomodAndTheCli) {
  const std::string phantom = MakePhantom("cone", kSize, 180, {"--geometry", "cone"});
  const std::string spec = SpecWithEveryFormat(phantom);
  const std::string out = dir() + "/result";
  ProcessResult submitted = Tomo({"submit", "--spec", spec, "--data", phantom + "/sinogram.raw",
                                  "--wait", "--out", out});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.Describe();
  const std::string id = submitted.OutLines().at(0);
  for (const char* name : {"volume.raw", "volume.json", "volume.nii", "volume.nii.gz",
                           "volume.mha", "preview_axial.png", "preview_coronal.png",
                           "preview_sagittal.png"}) {
    EXPECT_TRUE(fs::is_regular_file(out + "/" + name)) << name << "\n" << submitted.Describe();
  }
  // The DICOM series unpacked, as fetch --format dicom does: one .dcm per slice, no tar.
  EXPECT_FALSE(fs::exists(out + "/volume_dicom.tar")) << submitted.Describe();
  ASSERT_TRUE(fs::is_directory(out + "/volume_dicom")) << submitted.Describe();
  EXPECT_EQ(std::distance(fs::directory_iterator(out + "/volume_dicom"), fs::directory_iterator{}),
            kSize);
  // The reconstruction itself, within the core issue's bound.
  ProcessResult compared = TomoRaw({"compare", "--reference", phantom + "/truth.raw", "--image",
                                    out + "/volume.raw", "--dims", "32,32,32",
                                    "--max-rmse", std::to_string(kConeRmseBound)});
  EXPECT_EQ(compared.exit_code, 0) << compared.Describe();

  // fetch --format dicom: a folder of one valid .dcm per slice.
  ProcessResult dicom = Tomo({"fetch", id, "--format", "dicom", "--out", dir() + "/dicom"});
  ASSERT_EQ(dicom.exit_code, 0) << dicom.Describe();
  ASSERT_EQ(dicom.OutLines().size(), 1u) << dicom.Describe();
  const std::string folder = dicom.OutLines()[0];
  EXPECT_EQ(folder, dir() + "/dicom/volume_dicom");
  EXPECT_FALSE(fs::exists(dir() + "/dicom/volume_dicom.tar"));
  int slices = 0;
  for (const auto& entry : fs::directory_iterator(folder)) {
    ++slices;
    std::string report;
    EXPECT_EQ(DciodvfyErrors(entry.path().string(), dir(), &report), 0) << report;
  }
  EXPECT_EQ(slices, kSize);

  ProcessResult nifti = Tomo({"fetch", id, "--format", "nifti", "--out", dir() + "/nifti"});
  ASSERT_EQ(nifti.exit_code, 0) << nifti.Describe();
  EXPECT_THAT(nifti.OutLines(), ::testing::ElementsAre(dir() + "/nifti/volume.nii"));

  ProcessResult missing = Tomo({"fetch", id, "--format", "bogus"});
  EXPECT_EQ(missing.exit_code, 2) << missing.Describe();
  EXPECT_TRUE(OneErrorLine(missing)) << missing.Describe();

  ProcessResult preview = Tomo({"preview", id, "--out", dir() + "/preview"});
  ASSERT_EQ(preview.exit_code, 0) << preview.Describe();
  EXPECT_EQ(preview.OutLines().size(), 3u) << preview.Describe();

  // The same job without a daemon.
  ProcessResult local = TomoRaw({"local", "-q", "--spec", phantom + "/job.json", "--data",
                                 phantom + "/sinogram.raw", "--out", dir() + "/local",
                                 "--format", "nifti-gz,mha,png"});
  ASSERT_EQ(local.exit_code, 0) << local.Describe();
  EXPECT_THAT(local.OutLines(),
              ::testing::ElementsAre(dir() + "/local/volume.nii.gz", dir() + "/local/volume.mha",
                                     dir() + "/local/preview_axial.png",
                                     dir() + "/local/preview_coronal.png",
                                     dir() + "/local/preview_sagittal.png"));
}

// A DICOM series from raw input without a water attenuation is refused at submit: no job.
TEST_F(OutputsEndToEndTest, DicomWithoutWaterAttenuationIsRefusedAtSubmit) {
  const std::string phantom = MakePhantom("cone", 16, 30, {"--geometry", "cone"});
  absl::StatusOr<v1::JobSpec> spec = client::ReadJobSpecFile(phantom + "/job.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->add_outputs(v1::OUTPUT_FORMAT_DICOM_CT_SERIES);
  ASSERT_TRUE(client::WriteJobSpecFile(phantom + "/job-dicom.json", *spec).ok());
  ProcessResult r = Tomo({"submit", "--spec", phantom + "/job-dicom.json", "--data",
                          phantom + "/sinogram.raw"});
  EXPECT_EQ(r.exit_code, 5) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("output_options.water_attenuation_per_mm"));
  EXPECT_TRUE(JobDirs(spool_dir()).empty());
}

}  // namespace
}  // namespace tomo::testing
