#include "runner/job_input.h"

#include <tiffio.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <variant>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/io/dicom_ct_pd_writer.h"
#include "tests/core/io/hdf5_test_files.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_seed.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
using ::testing::HasSubstr;

constexpr double kPi = 3.14159265358979323846;

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) /
          (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
           name))
      .string();
}

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The spool's input file: the uploaded files back to back, and the spec's file list.
struct Upload {
  std::vector<std::pair<std::string, std::string>> files;  // name, bytes
  std::vector<pb::InputRole> roles;
  void Add(const std::string& name, std::string bytes,
           pb::InputRole role = pb::INPUT_ROLE_PROJECTIONS) {
    files.emplace_back(name, std::move(bytes));
    roles.push_back(role);
  }
  void Describe(pb::ProjectionInput& input) const {
    uint64_t total = 0;
    for (size_t i = 0; i < files.size(); ++i) {
      pb::InputFile* file = input.add_files();
      file->set_name(files[i].first);
      file->set_size_bytes(files[i].second.size());
      file->set_role(roles[i]);
      total += files[i].second.size();
    }
    input.set_size_bytes(total);
  }
  std::string Spool(const std::string& path) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    for (const auto& file : files) out << file.second;
    return path;
  }
};

pb::JobSpec ConeSpec(int views, int rows, int columns) {
  pb::JobSpec spec;
  pb::ConeBeam* cone = spec.mutable_geometry()->mutable_cone();
  cone->mutable_detector()->set_rows(rows);
  cone->mutable_detector()->set_columns(columns);
  cone->mutable_detector()->set_row_spacing_mm(1);
  cone->mutable_detector()->set_column_spacing_mm(1);
  cone->set_source_origin_mm(200);
  cone->set_origin_detector_mm(100);
  cone->mutable_angles()->mutable_uniform()->set_count(views);
  cone->mutable_angles()->mutable_uniform()->set_span_deg(360);
  spec.mutable_volume()->mutable_size()->set_x(16);
  spec.mutable_volume()->mutable_size()->set_y(16);
  spec.mutable_volume()->mutable_size()->set_z(4);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_x(1);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_y(1);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_z(1);
  spec.mutable_algorithm()->mutable_fbp();
  return spec;
}

void PutUint16BigEndian(std::string& bytes, size_t index, uint16_t value) {
  bytes[2 * index] = static_cast<char>(value >> 8);
  bytes[2 * index + 1] = static_cast<char>(value & 0xff);
}

// Counts I = D + (F - D) exp(-p), stored uint16 big-endian row-view-column in two projection
// files, with a dark file (2 frames) before them and a flat file (1 frame) between them: the
// resolver must reassemble, correct and take the log.
TEST(JobInputTest, RawUint16WithDarkFlatAndLogGivesLineIntegrals) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const int views = 6, rows = 3, columns = 5, pixels = rows * columns;
  std::uniform_real_distribution<double> integral(0.0, 4.0);
  std::vector<double> truth(views * pixels);
  for (double& p : truth) p = integral(random);
  const double dark = 100, flat = 60000;
  std::string counts(static_cast<size_t>(2 * views * pixels), '\0');
  for (int v = 0; v < views; ++v) {
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < columns; ++c) {
        const double p = truth[(v * rows + r) * columns + c];
        const double reading = dark + (flat - dark) * std::exp(-p);
        PutUint16BigEndian(counts, (r * views + v) * columns + c,
                           static_cast<uint16_t>(std::lround(reading)));
      }
    }
  }
  std::string dark_bytes(static_cast<size_t>(2 * 2 * pixels), '\0');
  std::string flat_bytes(static_cast<size_t>(2 * pixels), '\0');
  for (int i = 0; i < pixels; ++i) {
    PutUint16BigEndian(dark_bytes, i, 90);  // frames 90 and 110 average to 100
    PutUint16BigEndian(dark_bytes, pixels + i, 110);
    PutUint16BigEndian(flat_bytes, i, 60000);
  }
  const size_t split = counts.size() / 3;
  Upload upload;
  upload.Add("dark.raw", dark_bytes, pb::INPUT_ROLE_DARK_FIELD);
  upload.Add("part1.raw", counts.substr(0, split));
  upload.Add("flat.raw", flat_bytes, pb::INPUT_ROLE_FLAT_FIELD);
  upload.Add("part2.raw", counts.substr(split));
  pb::JobSpec spec = ConeSpec(views, rows, columns);
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_UINT16_BE);
  spec.mutable_input()->set_order(pb::AXIS_ORDER_ROW_VIEW_COLUMN);
  spec.mutable_input()->mutable_preprocessing()->set_negative_log(true);
  upload.Describe(*spec.mutable_input());
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string spool = upload.Spool(TempPath("input.bin"));
  EXPECT_TRUE(CheckJobInputHeaders(*job, spool).ok());
  absl::StatusOr<JobInput> input = ResolveJobInput(*job, spool);
  ASSERT_TRUE(input.ok()) << input.status();
  ASSERT_EQ(input->projections.dims(), (core::Dims3{views, rows, columns}));
  EXPECT_FALSE(input->geometry.has_value());
  EXPECT_EQ(input->clamped_transmissions, 0);
  for (int i = 0; i < views * pixels; ++i) {
    // Rounding a reading to an integer: 0.5 / (F - D) exp(-p) relative, < 5e-4 at p = 4.
    ASSERT_NEAR(input->projections.data()[i], truth[i], 5e-4) << i;
  }
  // The spool file must be what the spec says.
  std::filesystem::resize_file(spool, std::filesystem::file_size(spool) - 1);
  EXPECT_EQ(ResolveJobInput(*job, spool).status().code(), absl::StatusCode::kDataLoss);
}

// The plain case (float32 little-endian line integrals, no file list): values as they are,
// and the sizes the spec promised.
// A measured-looking upload with a dead pixel (flat = dark), zero readings and a mask
// file: the job is not refused; the readings are replaced, the counts are in the notes,
// and the values away from the bad readings are the line integrals. The same upload with
// a dead detector row beyond bad_pixels.max_bad_fraction is refused, saying why.
TEST(JobInputTest, BadPixelsAreReplacedAndNotedNotRefused) {
  const int views = 4, rows = 8, columns = 10, pixels = rows * columns;
  const double p = 1.5;  // every line integral, so replaced values are exact too
  auto little = [](std::string& bytes, size_t index, uint16_t value) {
    bytes[2 * index] = static_cast<char>(value & 0xff);
    bytes[2 * index + 1] = static_cast<char>(value >> 8);
  };
  std::string counts(static_cast<size_t>(2 * views * pixels), '\0');
  std::string dark_bytes(static_cast<size_t>(2 * pixels), '\0');
  std::string flat_bytes(static_cast<size_t>(2 * pixels), '\0');
  for (int i = 0; i < pixels; ++i) {
    little(dark_bytes, i, 100);
    little(flat_bytes, i, 40100);
    for (int v = 0; v < views; ++v) {
      little(counts, v * pixels + i, static_cast<uint16_t>(std::lround(100 + 40000 * std::exp(-p))));
    }
  }
  const int dead = 1 * columns + 2;
  little(flat_bytes, dead, 100);                      // flat = dark: dead
  for (int v = 0; v < views; ++v) little(counts, v * pixels + dead, 100);
  little(counts, 2 * pixels + 4, 0);                  // zero readings in views 2 and 3
  little(counts, 3 * pixels + 13, 0);
  std::string mask(static_cast<size_t>(pixels), '\0');
  mask[17] = 1;                                       // the mask file's pixel
  for (int v = 0; v < views; ++v) little(counts, v * pixels + 17, 65535);
  Upload upload;
  upload.Add("projections.raw", counts);
  upload.Add("dark.raw", dark_bytes, pb::INPUT_ROLE_DARK_FIELD);
  upload.Add("flat.raw", flat_bytes, pb::INPUT_ROLE_FLAT_FIELD);
  upload.Add("mask.raw", mask, pb::INPUT_ROLE_BAD_PIXEL_MASK);
  pb::JobSpec spec = ConeSpec(views, rows, columns);
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_UINT16_LE);
  spec.mutable_input()->mutable_preprocessing()->set_negative_log(true);
  upload.Describe(*spec.mutable_input());
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string spool = upload.Spool(TempPath("input.bin"));
  absl::StatusOr<JobInput> input = ResolveJobInput(*job, spool);
  ASSERT_TRUE(input.ok()) << input.status();
  for (int i = 0; i < views * pixels; ++i) {
    ASSERT_NEAR(input->projections.data()[i], p, 1e-3) << i;
  }
  ASSERT_EQ(input->notes.size(), 1u);
  EXPECT_THAT(input->notes[0], HasSubstr("2 bad detector pixels (1 flat not above dark, 0 gain "
                                         "outliers, 1 from the mask file)"));
  EXPECT_THAT(input->notes[0], HasSubstr("2 further unusable readings replaced"));
  EXPECT_THAT(input->notes[0], HasSubstr("floor 1.25e-05 (automatic"));

  // A whole dead row (10 of 80 pixels) is more than the default 10%: refused, saying so.
  for (int c = 0; c < columns; ++c) little(flat_bytes, columns + c, 100);
  Upload dead_row;
  dead_row.Add("projections.raw", counts);
  dead_row.Add("flat.raw", flat_bytes, pb::INPUT_ROLE_FLAT_FIELD);
  spec.mutable_input()->clear_files();
  dead_row.Describe(*spec.mutable_input());
  job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  input = ResolveJobInput(*job, dead_row.Spool(TempPath("dead_row.bin")));
  EXPECT_EQ(input.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(input.status().message(), HasSubstr("10 of the detector's 80 pixels are bad"));
  // Allowed by the spec: accepted.
  spec.mutable_input()->mutable_preprocessing()->mutable_bad_pixels()->set_max_bad_fraction(0.5);
  job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(ResolveJobInput(*job, TempPath("dead_row.bin")).ok());

  // Out-of-range options and a mask of the wrong size name their fields.
  spec.mutable_input()->mutable_preprocessing()->mutable_bad_pixels()->set_max_bad_fraction(0);
  EXPECT_THAT(ValidateJobSpec(spec, {}).status().message(),
              HasSubstr("input.preprocessing.bad_pixels.max_bad_fraction: 0 is out of range"));
  spec.mutable_input()->mutable_preprocessing()->clear_bad_pixels();
  spec.mutable_input()->mutable_preprocessing()->mutable_bad_pixels()->set_gain_outlier_ratio(1);
  EXPECT_THAT(ValidateJobSpec(spec, {}).status().message(),
              HasSubstr("gain_outlier_ratio: 1 is out of range (1, inf)"));
  spec.mutable_input()->mutable_preprocessing()->clear_bad_pixels();
  Upload short_mask;
  short_mask.Add("projections.raw", counts);
  short_mask.Add("mask.raw", mask.substr(1), pb::INPUT_ROLE_BAD_PIXEL_MASK);
  spec.mutable_input()->clear_files();
  short_mask.Describe(*spec.mutable_input());
  EXPECT_THAT(ValidateJobSpec(spec, {}).status().message(),
              HasSubstr("input.files[1].size_bytes: 79 (mask.raw) is not one byte per "
                        "detector pixel, 8 x 10 = 80"));
}

pb::JobSpec Parallel3DSpec(int views, int rows, int columns) {
  pb::JobSpec spec;
  pb::ParallelBeam3D* parallel = spec.mutable_geometry()->mutable_parallel_3d();
  parallel->mutable_detector()->set_rows(rows);
  parallel->mutable_detector()->set_columns(columns);
  parallel->mutable_detector()->set_row_spacing_mm(0.7);
  parallel->mutable_detector()->set_column_spacing_mm(0.7);
  parallel->mutable_angles()->mutable_uniform()->set_count(views);
  parallel->mutable_angles()->mutable_uniform()->set_span_deg(180);
  spec.mutable_volume()->mutable_size()->set_x(8);
  spec.mutable_volume()->mutable_size()->set_y(8);
  spec.mutable_volume()->mutable_size()->set_z(rows);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_x(0.7);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_y(0.7);
  spec.mutable_volume()->mutable_voxel_size_mm()->set_z(0.7);
  spec.mutable_algorithm()->mutable_fbp();
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_HDF5);
  spec.mutable_input()->mutable_preprocessing()->set_negative_log(true);
  return spec;
}

// HDF5 in both layouts, uploaded as the file itself (followed by a mask file): counts
// I = D + (F - D) exp(-p) with random line integrals become p; the file's angles replace
// the spec's; the header check compares the file's shape with the geometry.
TEST(JobInputTest, Hdf5ScansInBothLayoutsGiveLineIntegralsAndTheirAngles) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const int views = 9, rows = 3, columns = 10, pixels = rows * columns;
  std::uniform_real_distribution<float> integral(0.0f, 3.0f);
  core::Array3D truth({views, rows, columns}), counts({views, rows, columns});
  core::Array3D flats({2, rows, columns}, 50100.0f), darks({1, rows, columns}, 100.0f);
  for (int64_t i = 0; i < truth.size(); ++i) {
    truth.data()[i] = integral(random);
    counts.data()[i] = std::round(100.0f + 50000.0f * std::exp(-truth.data()[i]));
  }
  std::vector<double> angles;
  for (int v = 0; v < views; ++v) angles.push_back(7.0 + 20.0 * v);  // not the spec's
  for (int layout = 0; layout < 2; ++layout) {
    SCOPED_TRACE(layout == 0 ? "Data Exchange" : "NXtomo");
    const std::string file = TempPath(layout == 0 ? "scan.h5" : "scan.nx");
    if (layout == 0) {
      tomo::testing::WriteDataExchange(file, counts, flats, darks, angles);
    } else {
      // Flat, dark, the projections, flat: NXtomo's frames in acquisition order.
      core::Array3D frames({views + 3, rows, columns});
      std::vector<int32_t> keys = {1, 2};
      std::vector<double> frame_angles = {0, 0};
      std::memcpy(frames.data(), flats.data(), pixels * sizeof(float));
      std::memcpy(frames.data() + pixels, darks.data(), pixels * sizeof(float));
      std::memcpy(frames.data() + 2 * pixels, counts.data(), counts.size_bytes());
      std::memcpy(frames.data() + (views + 2) * pixels, flats.data(), pixels * sizeof(float));
      for (int v = 0; v < views; ++v) {
        keys.push_back(0);
        frame_angles.push_back(angles[v] * kPi / 180.0);
      }
      keys.push_back(1);
      frame_angles.push_back(180);
      tomo::testing::WriteNxTomo(file, "entry", frames, keys, frame_angles, "radians");
      frame_angles.back() = kPi;
    }
    Upload upload;
    upload.Add(layout == 0 ? "scan.h5" : "scan.nx", Contents(file));
    upload.Add("mask.raw", std::string(static_cast<size_t>(pixels), '\0'),
               pb::INPUT_ROLE_BAD_PIXEL_MASK);
    pb::JobSpec spec = Parallel3DSpec(views, rows, columns);
    spec.mutable_input()->mutable_hdf5()->set_angles_from_file(true);
    upload.Describe(*spec.mutable_input());
    absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
    ASSERT_TRUE(job.ok()) << job.status();
    const std::string spool = upload.Spool(TempPath("input.bin"));
    ASSERT_TRUE(CheckJobInputHeaders(*job, spool).ok()) << CheckJobInputHeaders(*job, spool);
    absl::StatusOr<JobInput> input = ResolveJobInput(*job, spool);
    ASSERT_TRUE(input.ok()) << input.status();
    ASSERT_EQ(input->projections.dims(), (core::Dims3{views, rows, columns}));
    for (int64_t i = 0; i < truth.size(); ++i) {
      ASSERT_NEAR(input->projections.data()[i], truth.data()[i], 5e-4) << i;
    }
    absl::StatusOr<core::ReconstructionRequest> request = RequestForInput(*job, *input);
    ASSERT_TRUE(request.ok()) << request.status();
    const auto& vectors = std::get<core::VectorGeometry>(request->geometry);
    for (int v = 0; v < views; ++v) {
      // Rays travel along (sin theta, -cos theta, 0).
      const double theta = angles[v] * kPi / 180.0;
      EXPECT_NEAR(vectors.views()[v].source.x, std::sin(theta), 1e-9);
      EXPECT_NEAR(vectors.views()[v].source.y, -std::cos(theta), 1e-9);
    }

    // A geometry of another shape is refused before the job is committed, naming both.
    pb::JobSpec wrong = Parallel3DSpec(views + 1, rows, columns);
    upload.Describe(*wrong.mutable_input());
    absl::StatusOr<ValidatedJob> wrong_job = ValidateJobSpec(wrong, {});
    ASSERT_TRUE(wrong_job.ok());
    const absl::Status header = CheckJobInputHeaders(*wrong_job, spool);
    EXPECT_EQ(header.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(header.message(), HasSubstr("holds 9 projections of 3 x 10"));
  }
  // Dark and flat files beside an HDF5 file are refused: they are in the file.
  pb::JobSpec spec = Parallel3DSpec(views, rows, columns);
  Upload upload;
  upload.Add("scan.h5", "x");
  upload.Add("flat.raw", "y", pb::INPUT_ROLE_FLAT_FIELD);
  upload.Describe(*spec.mutable_input());
  EXPECT_THAT(ValidateJobSpec(spec, {}).status().message(),
              HasSubstr("input.files[1].role: DATA_ENCODING_HDF5 takes one HDF5 file"));
}

// Flats before and after a scan whose beam decays by 20%: with
// FLAT_INTERPOLATION_LINEAR_IN_VIEWS each view gets its own flat and the line integrals come
// back; with the default mean of all flats they are off at both ends.
TEST(JobInputTest, FlatsBeforeAndAfterFollowADecayingBeam) {
  const int views = 10, rows = 2, columns = 12, pixels = rows * columns;
  const float p = 1.2f, gain = 30000.0f;
  auto floats = [](const std::vector<float>& values) {
    return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  };
  std::vector<float> counts(static_cast<size_t>(views * pixels));
  for (int v = 0; v < views; ++v) {
    const float beam = 1.0f - 0.2f * (v + 0.5f) / views;
    for (int i = 0; i < pixels; ++i) counts[v * pixels + i] = gain * beam * std::exp(-p);
  }
  Upload upload;
  upload.Add("flat_before.raw", floats(std::vector<float>(pixels, gain)), pb::INPUT_ROLE_FLAT_FIELD);
  upload.Add("projections.raw", floats(counts));
  upload.Add("flat_after.raw", floats(std::vector<float>(pixels, 0.8f * gain)),
             pb::INPUT_ROLE_FLAT_FIELD);
  pb::JobSpec spec = ConeSpec(views, rows, columns);
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->mutable_preprocessing()->set_negative_log(true);
  upload.Describe(*spec.mutable_input());
  const std::string spool = upload.Spool(TempPath("input.bin"));
  for (bool interpolate : {true, false}) {
    SCOPED_TRACE(interpolate ? "interpolated" : "mean");
    spec.mutable_input()->mutable_preprocessing()->set_flat_interpolation(
        interpolate ? pb::FLAT_INTERPOLATION_LINEAR_IN_VIEWS : pb::FLAT_INTERPOLATION_MEAN);
    absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
    ASSERT_TRUE(job.ok()) << job.status();
    absl::StatusOr<JobInput> input = ResolveJobInput(*job, spool);
    ASSERT_TRUE(input.ok()) << input.status();
    double worst = 0;
    for (int64_t i = 0; i < input->projections.size(); ++i) {
      worst = std::max(worst, std::abs(double{input->projections.data()[i]} - p));
    }
    if (interpolate) {
      EXPECT_LT(worst, 1e-4);
    } else {
      EXPECT_GT(worst, 0.09);
    }
  }
  // The ring filter's window is checked against the detector.
  spec.mutable_input()->mutable_preprocessing()->mutable_ring_filter()->set_enabled(true);
  spec.mutable_input()->mutable_preprocessing()->mutable_ring_filter()->set_window(13);
  EXPECT_THAT(ValidateJobSpec(spec, {}).status().message(),
              HasSubstr("input.preprocessing.ring_filter.window: 13 is out of range; an odd "
                        "number in [3, 12]"));
  spec.mutable_input()->mutable_preprocessing()->mutable_ring_filter()->set_window(0);
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<JobInput> input = ResolveJobInput(*job, spool);
  ASSERT_TRUE(input.ok()) << input.status();
  EXPECT_THAT(input->notes[0], HasSubstr("ring filter (sorted columns, median of 5)"));
}

// FLAT_INTERPOLATION_LINEAR_IN_VIEWS with the flats all taken at one time has nothing to
// interpolate: refused when the spec is validated (raw and TIFF file lists, a Data Exchange
// layout) or when the file's header is checked (NXtomo image keys), both before the job is
// committed, naming the field and why; never only when the job runs.
TEST(JobInputTest, LinearInViewsWithFlatsAtOneTimeIsRefusedBeforeTheJobRuns) {
  const int views = 6, rows = 2, columns = 5, pixels = rows * columns;
  const std::string frame(static_cast<size_t>(pixels) * 4, '\0');
  const auto raw_spec = [&](const std::vector<std::pair<int, pb::InputRole>>& files) {
    Upload upload;
    int index = 0;
    for (const auto& [frames, role] : files) {
      std::string bytes;
      for (int f = 0; f < frames; ++f) bytes += frame;
      upload.Add(absl::StrCat("part", index++, ".raw"), bytes, role);
    }
    pb::JobSpec spec = ConeSpec(views, rows, columns);
    spec.mutable_input()->set_encoding(pb::DATA_ENCODING_FLOAT32_LE);
    spec.mutable_input()->mutable_preprocessing()->set_negative_log(true);
    spec.mutable_input()->mutable_preprocessing()->set_flat_interpolation(
        pb::FLAT_INTERPOLATION_LINEAR_IN_VIEWS);
    upload.Describe(*spec.mutable_input());
    return spec;
  };
  const pb::InputRole P = pb::INPUT_ROLE_PROJECTIONS, F = pb::INPUT_ROLE_FLAT_FIELD;
  // Two flat files, both before the projections: one group.
  absl::Status s = ValidateJobSpec(raw_spec({{1, F}, {1, F}, {6, P}}), {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input.preprocessing.flat_interpolation: "
                                     "FLAT_INTERPOLATION_LINEAR_IN_VIEWS needs flat fields taken "
                                     "at two times at least"));
  EXPECT_THAT(s.message(), HasSubstr("2 flat files, all in one place (after 0 views)"));
  // One flat file after all the projections (in two files).
  s = ValidateJobSpec(raw_spec({{4, P}, {2, P}, {1, F}}), {}).status();
  EXPECT_THAT(s.message(), HasSubstr("1 flat file, all in one place (after 6 views)"));
  // None at all.
  s = ValidateJobSpec(raw_spec({{6, P}}), {}).status();
  EXPECT_THAT(s.message(), HasSubstr("lists no INPUT_ROLE_FLAT_FIELD file"));
  // Before and between, or before and after: accepted.
  EXPECT_TRUE(ValidateJobSpec(raw_spec({{1, F}, {3, P}, {1, F}, {3, P}}), {}).ok());
  EXPECT_TRUE(ValidateJobSpec(raw_spec({{1, F}, {6, P}, {1, F}}), {}).ok());

  // HDF5, Data Exchange named in the spec: its flats have no times.
  core::Array3D counts({views, rows, columns}, 20000.0f), flats({2, rows, columns}, 50000.0f);
  const std::string exchange = TempPath("flats.h5");
  tomo::testing::WriteDataExchange(exchange, counts, flats, core::Array3D(), {});
  Upload dx;
  dx.Add("flats.h5", Contents(exchange));
  pb::JobSpec dx_spec = Parallel3DSpec(views, rows, columns);
  dx_spec.mutable_input()->mutable_preprocessing()->set_flat_interpolation(
      pb::FLAT_INTERPOLATION_LINEAR_IN_VIEWS);
  dx.Describe(*dx_spec.mutable_input());
  dx_spec.mutable_input()->mutable_hdf5()->set_layout(pb::HDF5_LAYOUT_DATA_EXCHANGE);
  s = ValidateJobSpec(dx_spec, {}).status();
  EXPECT_THAT(s.message(), HasSubstr("input.preprocessing.flat_interpolation: "
                                     "FLAT_INTERPOLATION_LINEAR_IN_VIEWS needs to know when each "
                                     "flat was taken; a Data Exchange file does not say"));
  // The same file under the automatic layout: refused by the header check.
  dx_spec.mutable_input()->mutable_hdf5()->set_layout(pb::HDF5_LAYOUT_UNSPECIFIED);
  absl::StatusOr<ValidatedJob> dx_job = ValidateJobSpec(dx_spec, {});
  ASSERT_TRUE(dx_job.ok()) << dx_job.status();
  const std::string dx_spool = dx.Spool(TempPath("dx.bin"));
  s = CheckJobInputHeaders(*dx_job, dx_spool);
  EXPECT_THAT(s.message(), HasSubstr("flats.h5 holds 2 flat frames taken at 1 time (a Data "
                                     "Exchange file does not say"));

  // NXtomo: two flats, then the projections: one time. Flats on both sides: two.
  for (const bool after : {false, true}) {
    SCOPED_TRACE(after ? "flats before and after" : "flats before only");
    core::Array3D frames({views + 2, rows, columns}, 20000.0f);
    // Before only: 1 1 0 0 0 0 0 0; before and after: 1 0 0 0 0 0 0 1.
    std::vector<int32_t> keys = {1};
    if (!after) keys.push_back(1);
    for (int v = 0; v < views; ++v) keys.push_back(0);
    if (after) keys.push_back(1);
    const std::string nx = TempPath("flats.nx");
    tomo::testing::WriteNxTomo(nx, "entry", frames, keys, {}, nullptr);
    Upload upload;
    upload.Add("flats.nx", Contents(nx));
    pb::JobSpec spec = Parallel3DSpec(views, rows, columns);
    spec.mutable_input()->mutable_preprocessing()->set_flat_interpolation(
        pb::FLAT_INTERPOLATION_LINEAR_IN_VIEWS);
    upload.Describe(*spec.mutable_input());
    absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
    ASSERT_TRUE(job.ok()) << job.status();
    const std::string spool = upload.Spool(TempPath("nx.bin"));
    s = CheckJobInputHeaders(*job, spool);
    if (after) {
      EXPECT_TRUE(s.ok()) << s;
    } else {
      EXPECT_THAT(s.message(), HasSubstr("flats.nx holds 2 flat frames taken at 1 time (NXtomo"));
    }
  }
}

TEST(JobInputTest, PlainFloat32IsReadAsItIs) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::normal_distribution<float> normal(1.0f, 0.5f);
  std::vector<float> values(4 * 3 * 5);
  for (float& v : values) v = normal(random);
  pb::JobSpec spec = ConeSpec(4, 3, 5);
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(values.size() * 4);
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(InputIsPlainProjections(*job));
  const std::string spool = TempPath("input.bin");
  std::ofstream(spool, std::ios::binary)
      .write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
  EXPECT_TRUE(CheckJobInputHeaders(*job, spool).ok());
  absl::StatusOr<JobInput> input = ResolveJobInput(*job, spool);
  ASSERT_TRUE(input.ok()) << input.status();
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(input->projections.data()[i], values[i]);
  absl::StatusOr<core::ReconstructionRequest> request = RequestForInput(*job, *input);
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(core::ProjectionDims(request->geometry), (core::Dims3{4, 3, 5}));
  std::filesystem::resize_file(spool, 7);
  EXPECT_EQ(ResolveJobInput(*job, spool).status().code(), absl::StatusCode::kInvalidArgument);
}

// Plain float32 in row-view-column order (a sinogram per row) is not the plain case: it is
// reordered to (views, rows, columns). (It once went through the plain read untouched.)
TEST(JobInputTest, Float32SinogramsPerRowAreReordered) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  std::normal_distribution<float> normal(1.0f, 0.5f);
  constexpr int kViews = 4, kRows = 3, kColumns = 5;
  std::vector<float> sinograms(kViews * kRows * kColumns);  // (row, view, column)
  for (float& v : sinograms) v = normal(random);
  pb::JobSpec spec = ConeSpec(kViews, kRows, kColumns);
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_order(pb::AXIS_ORDER_ROW_VIEW_COLUMN);
  spec.mutable_input()->set_size_bytes(sinograms.size() * 4);
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(InputIsPlainProjections(*job));
  const std::string spool = TempPath("input.bin");
  std::ofstream(spool, std::ios::binary)
      .write(reinterpret_cast<const char*>(sinograms.data()),
             static_cast<std::streamsize>(sinograms.size() * 4));
  absl::StatusOr<JobInput> input = ResolveJobInput(*job, spool);
  ASSERT_TRUE(input.ok()) << input.status();
  for (int view = 0; view < kViews; ++view) {
    for (int row = 0; row < kRows; ++row) {
      for (int column = 0; column < kColumns; ++column) {
        ASSERT_EQ(input->projections.at(view, row, column),
                  sinograms[(row * kViews + view) * kColumns + column])
            << view << " " << row << " " << column;
      }
    }
  }
}

std::string TiffBytes(const std::string& path, int pages, int rows, int columns, float base) {
  TIFF* tiff = TIFFOpen(path.c_str(), "w");
  EXPECT_NE(tiff, nullptr);
  for (int p = 0; p < pages; ++p) {
    TIFFSetField(tiff, TIFFTAG_IMAGEWIDTH, static_cast<uint32_t>(columns));
    TIFFSetField(tiff, TIFFTAG_IMAGELENGTH, static_cast<uint32_t>(rows));
    TIFFSetField(tiff, TIFFTAG_BITSPERSAMPLE, static_cast<uint16_t>(32));
    TIFFSetField(tiff, TIFFTAG_SAMPLESPERPIXEL, static_cast<uint16_t>(1));
    TIFFSetField(tiff, TIFFTAG_SAMPLEFORMAT, static_cast<uint16_t>(SAMPLEFORMAT_IEEEFP));
    TIFFSetField(tiff, TIFFTAG_PHOTOMETRIC, static_cast<uint16_t>(PHOTOMETRIC_MINISBLACK));
    std::vector<float> line(static_cast<size_t>(columns));
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < columns; ++c) line[c] = base + p * 100 + r * 10 + c;
      TIFFWriteScanline(tiff, line.data(), static_cast<uint32_t>(r), 0);
    }
    TIFFWriteDirectory(tiff);
  }
  TIFFClose(tiff);
  return Contents(path);
}

TEST(JobInputTest, TiffStackOfTwoFilesAndPageCountChecks) {
  Upload upload;
  upload.Add("a.tif", TiffBytes(TempPath("a.tif"), 2, 3, 4, 0.0f));
  upload.Add("b.tif", TiffBytes(TempPath("b.tif"), 1, 3, 4, 1000.0f));
  pb::JobSpec spec = ConeSpec(3, 3, 4);
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_TIFF);
  upload.Describe(*spec.mutable_input());
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string spool = upload.Spool(TempPath("input.bin"));
  ASSERT_TRUE(CheckJobInputHeaders(*job, spool).ok());
  absl::StatusOr<JobInput> input = ResolveJobInput(*job, spool);
  ASSERT_TRUE(input.ok()) << input.status();
  EXPECT_EQ(input->projections.at(1, 2, 3), 100 + 20 + 3);
  EXPECT_EQ(input->projections.at(2, 1, 0), 1000 + 10);

  // One view more in the spec than pages uploaded: refused at Submit and at run time.
  pb::JobSpec more = ConeSpec(4, 3, 4);
  more.mutable_input()->set_encoding(pb::DATA_ENCODING_TIFF);
  upload.Describe(*more.mutable_input());
  absl::StatusOr<ValidatedJob> more_job = ValidateJobSpec(more, {});
  ASSERT_TRUE(more_job.ok()) << more_job.status();
  absl::Status s = CheckJobInputHeaders(*more_job, spool);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("3 TIFF projection pages, the geometry has 4 views"));
  s = ResolveJobInput(*more_job, spool).status();
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("3 TIFF projection pages, the geometry has 4 views"));
}

// A single-page TIFF sinogram (views x columns) of a one-row detector, and a two-page one
// of a two-row detector: page r is row r, its line v is view v.
TEST(JobInputTest, TiffSinogramsArePagesOfRows) {
  Upload upload;
  upload.Add("sinograms.tif", TiffBytes(TempPath("sinograms.tif"), 2, 5, 4, 0.0f));
  pb::JobSpec spec = ConeSpec(5, 2, 4);
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_TIFF);
  spec.mutable_input()->set_tiff_layout(pb::TIFF_LAYOUT_SINOGRAMS);
  upload.Describe(*spec.mutable_input());
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string spool = upload.Spool(TempPath("input.bin"));
  ASSERT_TRUE(CheckJobInputHeaders(*job, spool).ok()) << CheckJobInputHeaders(*job, spool);
  absl::StatusOr<JobInput> input = ResolveJobInput(*job, spool);
  ASSERT_TRUE(input.ok()) << input.status();
  ASSERT_EQ(input->projections.dims(), (core::Dims3{5, 2, 4}));
  // Value base + page * 100 + line * 10 + column: view 3, row 1, column 2.
  EXPECT_EQ(input->projections.at(3, 1, 2), 100 + 30 + 2);
  EXPECT_EQ(input->projections.at(4, 0, 3), 40 + 3);

  // As projections the pages would be 5 x 4 frames of a 2 x 4 detector: refused at Submit.
  spec.mutable_input()->set_tiff_layout(pb::TIFF_LAYOUT_PROJECTIONS);
  job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok());
  EXPECT_THAT(CheckJobInputHeaders(*job, spool).message(),
              HasSubstr("pages are 5 x 4 (rows x columns), the geometry's detector 2 x 4"));
  // Sinograms of the wrong view count.
  pb::JobSpec fewer = ConeSpec(4, 2, 4);
  fewer.mutable_input()->set_encoding(pb::DATA_ENCODING_TIFF);
  fewer.mutable_input()->set_tiff_layout(pb::TIFF_LAYOUT_SINOGRAMS);
  upload.Describe(*fewer.mutable_input());
  job = ValidateJobSpec(fewer, {});
  ASSERT_TRUE(job.ok());
  EXPECT_THAT(CheckJobInputHeaders(*job, spool).message(),
              HasSubstr("pages are 5 x 4 (views x columns: sinograms), the geometry's 4 x 4"));
}

core::DicomCtPdScan SmallDicomScan() {
  core::DicomCtPdScan scan;
  scan.detector.rows = 8;
  scan.detector.columns = 40;
  scan.detector.row_spacing_mm = 2.0;
  scan.detector.column_spacing_mm = 2.0;
  scan.detector.focal_center_to_detector_mm = 300;
  scan.detector.central_column = 20.5;
  scan.detector.central_row = 4.5;
  for (int i = 0; i < 12; ++i) {
    core::DicomCtPdView v;
    v.focal_center_angle_rad = 2 * kPi * i / 12;
    v.focal_center_radius_mm = 150;
    scan.views.push_back(v);
  }
  scan.water_attenuation_per_mm = 0.019;
  scan.incident_photons = 1e5;
  scan.patient_study = {{0x0010, 0x0020, "P-7"}};
  return scan;
}

TEST(JobInputTest, DicomCtPdFilesGiveGeometryValuesAndMetadata) {
  const core::DicomCtPdScan scan = SmallDicomScan();
  const core::EllipsoidPhantom phantom = core::EllipsoidPhantom::SheppLogan3D(30);
  const std::string dir = TempPath("scan");
  std::filesystem::remove_all(dir);
  absl::StatusOr<std::vector<std::string>> paths =
      core::WriteDicomCtPdPhantomScan(dir, scan, phantom, 1);
  ASSERT_TRUE(paths.ok()) << paths.status();
  Upload upload;
  for (const std::string& path : *paths) {
    upload.Add(std::filesystem::path(path).filename().string(), Contents(path));
  }
  pb::JobSpec spec = ConeSpec(1, 1, 1);
  spec.mutable_geometry()->mutable_from_input_files();
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_DICOM_CT_PD);
  upload.Describe(*spec.mutable_input());
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string spool = upload.Spool(TempPath("input.bin"));
  ASSERT_TRUE(CheckJobInputHeaders(*job, spool).ok());
  absl::StatusOr<JobInput> input = ResolveJobInput(*job, spool);
  ASSERT_TRUE(input.ok()) << input.status();
  ASSERT_TRUE(input->geometry.has_value());
  EXPECT_EQ(input->geometry->num_views(), 12);
  EXPECT_EQ(input->geometry->detector(), core::DetectorShape::kCylindrical);
  ASSERT_EQ(input->projections.dims(), (core::Dims3{12, 8, 40}));
  const core::Array3D truth =
      phantom.Project(core::MakeDicomCtPdGeometry(scan.detector, scan.views).value(), 1);
  for (int64_t i = 0; i < truth.size(); ++i) {
    ASSERT_NEAR(input->projections.data()[i], truth.data()[i], 1e-3) << i;
  }
  EXPECT_EQ(input->photon_statistics.dims(), (core::Dims3{12, 1, 40}));
  ASSERT_TRUE(input->metadata.water_attenuation_per_mm.has_value());
  EXPECT_DOUBLE_EQ(*input->metadata.water_attenuation_per_mm, 0.019);
  ASSERT_EQ(input->metadata.patient_study.size(), 1u);
  EXPECT_EQ(input->metadata.patient_study[0].value, "P-7");
  absl::StatusOr<core::ReconstructionRequest> request = RequestForInput(*job, *input);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(core::ProjectionDims(request->geometry), (core::Dims3{12, 8, 40}));

  // A volume that reaches the source is refused once the geometry is known.
  ValidatedJob huge = *std::move(job);
  huge.request.volume = core::VolumeGeometry::Create({400, 400, 4}, {1, 1, 1}, {}).value();
  EXPECT_THAT(RequestForInput(huge, *input).status().message(),
              HasSubstr("geometry (from the input files)"));

  // A file broken in the middle of the upload: the Submit-time check names it.
  Upload broken = upload;
  std::string& victim = broken.files[5].second;
  victim.resize(200);  // the header cut short
  pb::JobSpec broken_spec = spec;
  broken_spec.mutable_input()->clear_files();
  broken.Describe(*broken_spec.mutable_input());
  absl::StatusOr<ValidatedJob> broken_job = ValidateJobSpec(broken_spec, {});
  ASSERT_TRUE(broken_job.ok()) << broken_job.status();
  const std::string broken_spool = broken.Spool(TempPath("broken.bin"));
  absl::Status s = CheckJobInputHeaders(*broken_job, broken_spool);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("proj_000005.dcm"));
}

}  // namespace
}  // namespace tomo::server
