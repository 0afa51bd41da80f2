// algorithm.art through ValidateJobSpec: defaults, the options mapped one to one, and the
// refusals naming the field.
#include "runner/art_job_spec.h"

#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runner/job_spec.h"
#include "tests/runner/test_jobs.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
namespace sm = ::tomo::core::system_matrix;
using ::testing::HasSubstr;

pb::JobSpec ArtSpec() { return testing::SmallFanArtSpec(); }

TEST(ArtJobSpecTest, DefaultsAndOptions) {
  auto job = ValidateJobSpec(ArtSpec(), {});
  ASSERT_TRUE(job.ok()) << job.status();
  const auto& art = std::get<core::StoredArtOptions>(job->request.algorithm);
  EXPECT_EQ(art.art.iterations, 7);
  EXPECT_EQ(art.art.relaxation, 1.0);
  EXPECT_TRUE(art.art.nonnegative);
  EXPECT_EQ(art.art.views_per_block, 0);
  EXPECT_EQ(art.format, sm::MatrixFormat::kAutomatic);
  EXPECT_EQ(art.kernels, core::StoredArtKernels::kOrbit);
  EXPECT_EQ(core::AlgorithmName(job->request.algorithm), "art");

  pb::JobSpec spec = ArtSpec();
  pb::StoredMatrixArtOptions* given = spec.mutable_algorithm()->mutable_art();
  given->set_relaxation(0.35);
  given->set_nonnegative(false);
  given->set_stop_relative_residual(0.02);
  given->set_matrix_format(pb::MATRIX_FORMAT_CSR);
  given->set_views_per_block(9);
  job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  const auto& csr = std::get<core::StoredArtOptions>(job->request.algorithm);
  EXPECT_EQ(csr.art.relaxation, 0.35);
  EXPECT_FALSE(csr.art.nonnegative);
  EXPECT_EQ(csr.art.stop_relative_residual, 0.02);
  EXPECT_EQ(csr.art.views_per_block, 9);
  EXPECT_EQ(csr.format, sm::MatrixFormat::kCsr);
  EXPECT_EQ(csr.kernels, core::StoredArtKernels::kOrbit);

  // The tiled kernels, with the symmetric format asked for or chosen automatically.
  for (pb::MatrixFormat format : {pb::MATRIX_FORMAT_SYMMETRIC, pb::MATRIX_FORMAT_UNSPECIFIED}) {
    spec = ArtSpec();
    spec.mutable_algorithm()->mutable_art()->set_matrix_format(format);
    spec.mutable_algorithm()->mutable_art()->set_kernels(pb::ART_KERNELS_TILED);
    job = ValidateJobSpec(spec, {});
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(std::get<core::StoredArtOptions>(job->request.algorithm).kernels,
              core::StoredArtKernels::kTiled);
  }
  spec.mutable_algorithm()->mutable_art()->set_kernels(pb::ART_KERNELS_ORBIT);
  job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(std::get<core::StoredArtOptions>(job->request.algorithm).kernels,
            core::StoredArtKernels::kOrbit);
}

TEST(ArtJobSpecTest, RefusalsNameTheField) {
  struct Case {
    std::string expected;
    std::function<void(pb::JobSpec&)> change;
  };
  const std::vector<Case> cases = {
      {"algorithm.art.iterations: 0", [](pb::JobSpec& s) {
         s.mutable_algorithm()->mutable_art()->set_iterations(0);
       }},
      {"algorithm.art.iterations: 5000 iterations exceed the server's limit of 1000 "
       "(--max_iterations)",
       [](pb::JobSpec& s) { s.mutable_algorithm()->mutable_art()->set_iterations(5000); }},
      {"algorithm.art.relaxation: 2.5 is out of range (0, 2)", [](pb::JobSpec& s) {
         s.mutable_algorithm()->mutable_art()->set_relaxation(2.5);
       }},
      {"algorithm.art.stop_relative_residual: 1.5 is out of range [0, 1)", [](pb::JobSpec& s) {
         s.mutable_algorithm()->mutable_art()->set_stop_relative_residual(1.5);
       }},
      {"algorithm.art.views_per_block: 4 needs matrix_format MATRIX_FORMAT_CSR",
       [](pb::JobSpec& s) { s.mutable_algorithm()->mutable_art()->set_views_per_block(4); }},
      {"algorithm.art.views_per_block: 73 is out of range [0, 72]", [](pb::JobSpec& s) {
         s.mutable_algorithm()->mutable_art()->set_matrix_format(pb::MATRIX_FORMAT_CSR);
         s.mutable_algorithm()->mutable_art()->set_views_per_block(73);
       }},
      {"algorithm.art.kernels: ART_KERNELS_TILED needs the symmetric format", [](pb::JobSpec& s) {
         s.mutable_algorithm()->mutable_art()->set_matrix_format(pb::MATRIX_FORMAT_CSR);
         s.mutable_algorithm()->mutable_art()->set_kernels(pb::ART_KERNELS_TILED);
       }},
      {"algorithm.art.kernels: 7 is out of range [0, 2]", [](pb::JobSpec& s) {
         s.mutable_algorithm()->mutable_art()->set_kernels(static_cast<pb::ArtKernels>(7));
       }},
      {"algorithm.art.matrix_format: 9 is out of range", [](pb::JobSpec& s) {
         s.mutable_algorithm()->mutable_art()->set_matrix_format(
             static_cast<pb::MatrixFormat>(9));
       }},
      {"algorithm.art: ART on a stored system matrix takes geometry.fan_2d only",
       [](pb::JobSpec& s) {
         auto* c = s.mutable_geometry()->mutable_cone();
         c->mutable_detector()->set_rows(1);
         c->mutable_detector()->set_columns(95);
         c->mutable_detector()->set_row_spacing_mm(0.7);
         c->mutable_detector()->set_column_spacing_mm(0.7);
         c->set_source_origin_mm(80);
         c->set_origin_detector_mm(40);
         c->mutable_angles()->mutable_uniform()->set_count(72);
         c->mutable_angles()->mutable_uniform()->set_span_deg(360);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    pb::JobSpec spec = ArtSpec();
    c.change(spec);
    const absl::Status status = ValidateJobSpec(spec, {}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr(c.expected));
  }
}

}  // namespace
}  // namespace tomo::server
