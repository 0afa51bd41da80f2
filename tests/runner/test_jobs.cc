#include "tests/runner/test_jobs.h"

#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/geometry/parallel_geometry_2d.h"
#include "core/phantom/ellipse_phantom.h"
#include "core/phantom/ellipsoid_phantom.h"
#include "runner/job_spec.h"
#include "gtest/gtest.h"

namespace tomo::server::testing {

tomoserve::v1::JobSpec SmallSpec(uint32_t detectors, uint32_t views, uint32_t n) {
  tomoserve::v1::JobSpec spec;
  spec.set_name("small phantom");
  auto* geometry = spec.mutable_geometry()->mutable_parallel_2d();
  geometry->set_num_detectors(detectors);
  geometry->set_detector_spacing_mm(1.0);
  auto* angles = geometry->mutable_angles()->mutable_uniform();
  angles->set_count(views);
  angles->set_start_deg(0);
  angles->set_span_deg(180);
  auto* volume = spec.mutable_volume();
  volume->mutable_size()->set_x(n);
  volume->mutable_size()->set_y(n);
  volume->mutable_size()->set_z(1);
  volume->mutable_voxel_size_mm()->set_x(1.0);
  volume->mutable_voxel_size_mm()->set_y(1.0);
  volume->mutable_voxel_size_mm()->set_z(1.0);
  spec.mutable_input()->set_encoding(tomoserve::v1::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(uint64_t{views} * detectors * 4);
  spec.mutable_algorithm()->mutable_fbp()->set_window(tomoserve::v1::FILTER_WINDOW_SHEPP_LOGAN);
  return spec;
}

std::string PhantomSinogramBytes(const tomoserve::v1::JobSpec& spec) {
  const auto& p = spec.geometry().parallel_2d();
  const auto& u = p.angles().uniform();
  constexpr double kPi = 3.14159265358979323846;
  auto geometry = core::ParallelGeometry2D::Create(
      p.num_detectors(), p.detector_spacing_mm(), p.detector_offset_mm(),
      core::ParallelGeometry2D::UniformAngles(u.count(), u.start_deg() * kPi / 180,
                                              u.span_deg() * kPi / 180));
  EXPECT_TRUE(geometry.ok()) << geometry.status();
  const double radius = 0.45 * p.num_detectors() * p.detector_spacing_mm();
  core::Array3D sinogram =
      core::EllipsePhantom::ModifiedSheppLogan(radius).ParallelProjections(*geometry, 2);
  return std::string(reinterpret_cast<const char*>(sinogram.data()), sinogram.size_bytes());
}

tomoserve::v1::JobSpec SmallFanArtSpec() {
  tomoserve::v1::JobSpec spec;
  tomoserve::v1::FanBeam2D* fan = spec.mutable_geometry()->mutable_fan_2d();
  fan->set_num_detectors(95);
  fan->set_detector_spacing_mm(0.7);
  fan->set_source_origin_mm(80);
  fan->set_origin_detector_mm(40);
  fan->mutable_angles()->mutable_uniform()->set_count(72);
  fan->mutable_angles()->mutable_uniform()->set_span_deg(360);
  tomoserve::v1::Volume* v = spec.mutable_volume();
  v->mutable_size()->set_x(61);
  v->mutable_size()->set_y(61);
  v->mutable_voxel_size_mm()->set_x(0.45);
  v->mutable_voxel_size_mm()->set_y(0.45);
  spec.mutable_input()->set_encoding(tomoserve::v1::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(72ull * 95 * 4);
  spec.mutable_algorithm()->mutable_art()->set_iterations(7);
  return spec;
}

tomoserve::v1::JobSpec SmallConeSpec(uint32_t views, uint32_t rows, uint32_t columns,
                                     uint32_t n) {
  tomoserve::v1::JobSpec spec;
  spec.set_name("small cone phantom");
  tomoserve::v1::ConeBeam* cone = spec.mutable_geometry()->mutable_cone();
  cone->mutable_detector()->set_rows(rows);
  cone->mutable_detector()->set_columns(columns);
  cone->mutable_detector()->set_row_spacing_mm(1);
  cone->mutable_detector()->set_column_spacing_mm(1);
  cone->set_source_origin_mm(200);
  cone->set_origin_detector_mm(100);
  cone->mutable_angles()->mutable_uniform()->set_count(views);
  cone->mutable_angles()->mutable_uniform()->set_span_deg(360);
  auto* volume = spec.mutable_volume();
  volume->mutable_size()->set_x(n);
  volume->mutable_size()->set_y(n);
  volume->mutable_size()->set_z(n);
  volume->mutable_voxel_size_mm()->set_x(1);
  volume->mutable_voxel_size_mm()->set_y(1);
  volume->mutable_voxel_size_mm()->set_z(1);
  spec.mutable_input()->set_encoding(tomoserve::v1::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(uint64_t{views} * rows * columns * 4);
  spec.mutable_algorithm()->mutable_fbp();
  return spec;
}

std::string PhantomConeProjectionBytes(const tomoserve::v1::JobSpec& spec) {
  absl::StatusOr<ValidatedJob> job = ValidateJobSpec(spec, {});
  EXPECT_TRUE(job.ok()) << job.status();
  if (!job.ok()) return "";
  const auto& geometry = std::get<core::VectorGeometry>(job->request.geometry);
  const double radius = 0.4 * spec.volume().size().x() * spec.volume().voxel_size_mm().x();
  core::Array3D projections =
      core::EllipsoidPhantom::SheppLogan3D(radius).Project(geometry, /*supersampling=*/2);
  return std::string(reinterpret_cast<const char*>(projections.data()),
                     projections.size_bytes());
}

uint32_t Crc32(const std::string& bytes) {
  return static_cast<uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

std::string NewTempDir(const std::string& name) {
  static std::atomic<int> counter{0};
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                              absl::StrCat("tomo_server_", name, "_", ::getpid(), "_", counter++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  out.close();
  EXPECT_TRUE(out.good()) << "cannot write " << path;
}

std::vector<float> RandomValues(uint64_t seed, size_t count) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) value = uniform(random);
  return values;
}

absl::StatusOr<core::Array3D> RandomVolumeAlgorithm::Run(const core::ReconstructionRequest& request,
                                                         const core::Array3D&, core::Backend&,
                                                         const core::RunContext&) const {
  if (probe_) probe_();
  core::Array3D volume(request.volume.dims(), std::nanf(""));  // every voxel overwritten
  const std::vector<float> values = RandomValues(seed_, static_cast<size_t>(volume.size()));
  std::copy(values.begin(), values.end(), volume.data());
  return volume;
}

absl::StatusOr<core::Array3D> BlockingAlgorithm::Run(const core::ReconstructionRequest&,
                                                     const core::Array3D&, core::Backend&,
                                                     const core::RunContext& context) const {
  context.Report({0.5, "blocking", 1, 2});
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    absl::Status status = context.CheckCancelled("blocking");
    if (!status.ok()) return status;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return absl::DeadlineExceededError("never cancelled");
}

}  // namespace tomo::server::testing
