// algorithm.icd through ValidateJobSpec: documented defaults, the options mapped, and the
// refusals naming the field.
#include "runner/icd_job_spec.h"

#include <functional>
#include <string>
#include <vector>

#include "core/statistical/qggmrf_prior.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runner/job_spec.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
using ::testing::HasSubstr;

// A circular cone of 36 views onto a 21 x 19 x 17 grid, ICD with 1e4 photons per pixel.
pb::JobSpec IcdSpec() {
  pb::JobSpec spec;
  pb::ConeBeam* cone = spec.mutable_geometry()->mutable_cone();
  cone->mutable_detector()->set_rows(30);
  cone->mutable_detector()->set_columns(40);
  cone->mutable_detector()->set_row_spacing_mm(0.8);
  cone->mutable_detector()->set_column_spacing_mm(0.7);
  cone->set_source_origin_mm(90);
  cone->set_origin_detector_mm(45);
  cone->mutable_angles()->mutable_uniform()->set_count(36);
  cone->mutable_angles()->mutable_uniform()->set_span_deg(360);
  pb::Volume* v = spec.mutable_volume();
  v->mutable_size()->set_x(21);
  v->mutable_size()->set_y(19);
  v->mutable_size()->set_z(17);
  v->mutable_voxel_size_mm()->set_x(0.5);
  v->mutable_voxel_size_mm()->set_y(0.5);
  v->mutable_voxel_size_mm()->set_z(0.6);
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(36ull * 30 * 40 * 4);
  spec.mutable_algorithm()->mutable_icd()->mutable_weights()->set_flat_field_photons(1e4);
  return spec;
}

TEST(IcdJobSpecTest, DocumentedDefaultsAndOptions) {
  auto job = ValidateJobSpec(IcdSpec(), {});
  ASSERT_TRUE(job.ok()) << job.status();
  const auto& icd = std::get<core::IcdAlgorithmOptions>(job->request.algorithm);
  EXPECT_EQ(icd.icd.iterations, 4);
  EXPECT_EQ(icd.icd.prior.p, 2.0);
  EXPECT_EQ(icd.icd.prior.q, 1.2);
  EXPECT_EQ(icd.icd.prior.c, 0.1);
  EXPECT_EQ(icd.icd.prior.sigma, 1e-3);
  EXPECT_EQ(icd.icd.prior.neighbour_weights,
            core::statistical::DefaultNeighbourWeights({0.5, 0.5, 0.6}));
  EXPECT_TRUE(icd.start_from_fdk);
  EXPECT_EQ(icd.flat_field_photons, 1e4);
  // The schedule is not a JobSpec field: the product runs the fastest measured one.
  EXPECT_EQ(icd.icd.columns_per_step, 3);

  pb::JobSpec spec = IcdSpec();
  pb::StatisticalIcdOptions* given = spec.mutable_algorithm()->mutable_icd();
  given->set_iterations(9);
  given->set_start(pb::ICD_START_ZERO);
  given->mutable_prior()->set_p(1.8);
  given->mutable_prior()->set_q(1.1);
  given->mutable_prior()->set_c(2.5);
  given->mutable_prior()->set_sigma_per_mm(0.004);
  for (int k = 0; k < 26; ++k) given->mutable_prior()->add_neighbour_weights(k == 12 || k == 13);
  job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  const auto& set = std::get<core::IcdAlgorithmOptions>(job->request.algorithm);
  EXPECT_EQ(set.icd.iterations, 9);
  EXPECT_FALSE(set.start_from_fdk);
  EXPECT_EQ(set.icd.prior.p, 1.8);
  EXPECT_EQ(set.icd.prior.q, 1.1);
  EXPECT_EQ(set.icd.prior.c, 2.5);
  EXPECT_EQ(set.icd.prior.sigma, 0.004);
  EXPECT_EQ(set.icd.prior.neighbour_weights[12], 1.0);
  EXPECT_EQ(set.icd.prior.neighbour_weights[0], 0.0);
}

TEST(IcdJobSpecTest, RefusalsNameTheField) {
  struct Case {
    std::string expected;
    std::function<void(pb::JobSpec&)> change;
  };
  const auto icd = [](pb::JobSpec& s) { return s.mutable_algorithm()->mutable_icd(); };
  const std::vector<Case> cases = {
      {"algorithm.icd.prior.p: 2.5", [&](pb::JobSpec& s) { icd(s)->mutable_prior()->set_p(2.5); }},
      {"algorithm.icd.prior.q: 1.9", [&](pb::JobSpec& s) {
         icd(s)->mutable_prior()->set_p(1.5);
         icd(s)->mutable_prior()->set_q(1.9);
       }},
      {"algorithm.icd.prior.c: -1", [&](pb::JobSpec& s) { icd(s)->mutable_prior()->set_c(-1); }},
      {"algorithm.icd.prior.sigma_per_mm: 0",
       [&](pb::JobSpec& s) { icd(s)->mutable_prior()->set_sigma_per_mm(0); }},
      {"algorithm.icd.prior.neighbour_weights: 3 values; expected 26", [&](pb::JobSpec& s) {
         for (int k = 0; k < 3; ++k) icd(s)->mutable_prior()->add_neighbour_weights(1);
       }},
      {"algorithm.icd.prior.neighbour_weights", [&](pb::JobSpec& s) {  // asymmetric
         for (int k = 0; k < 26; ++k) icd(s)->mutable_prior()->add_neighbour_weights(k == 0);
       }},
      {"algorithm.icd.weights.flat_field_photons: -5",
       [&](pb::JobSpec& s) { icd(s)->mutable_weights()->set_flat_field_photons(-5); }},
      {"algorithm.icd.weights.flat_field_photons: is unset",
       [&](pb::JobSpec& s) { icd(s)->clear_weights(); }},
      {"algorithm.icd.iterations: 2000 iterations exceed the server's limit of 1000",
       [&](pb::JobSpec& s) { icd(s)->set_iterations(2000); }},
      {"algorithm.icd.start: 7 is out of range",
       [&](pb::JobSpec& s) { icd(s)->set_start(static_cast<pb::IcdStart>(7)); }},
      {"algorithm.icd.start: ICD_START_FDK (the default) needs a circular orbit",
       [&](pb::JobSpec& s) {
         pb::ConeBeam cone = s.geometry().cone();
         pb::HelicalConeBeam* helical = s.mutable_geometry()->mutable_helical();
         *helical->mutable_cone() = cone;
         helical->set_pitch_mm_per_turn(5);
       }},
      {"algorithm.icd: ICD's separable-footprint projector takes flat-detector cone beams",
       [&](pb::JobSpec& s) {
         s.mutable_geometry()->mutable_cone()->mutable_detector()->set_shape(
             pb::DETECTOR_SHAPE_CYLINDRICAL);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    pb::JobSpec spec = IcdSpec();
    c.change(spec);
    const absl::Status status = ValidateJobSpec(spec, {}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr(c.expected));
  }
}

TEST(IcdJobSpecTest, DicomPhotonStatisticsBecomeTheWeightsWhenNoCountIsGiven) {
  core::AlgorithmOptions algorithm = core::IcdAlgorithmOptions{};
  core::Array3D stats({5, 1, 7}, 3e4f);
  UsePhotonStatistics(stats, algorithm);
  const auto& icd = std::get<core::IcdAlgorithmOptions>(algorithm);
  ASSERT_NE(icd.photon_statistics, nullptr);
  EXPECT_EQ(icd.photon_statistics->at(4, 0, 6), 3e4f);
  core::AlgorithmOptions given = core::IcdAlgorithmOptions{};
  std::get<core::IcdAlgorithmOptions>(given).flat_field_photons = 10;
  UsePhotonStatistics(stats, given);  // the JobSpec's count wins
  EXPECT_EQ(std::get<core::IcdAlgorithmOptions>(given).photon_statistics, nullptr);
}

}  // namespace
}  // namespace tomo::server
