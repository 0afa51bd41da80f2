// geometry.radon_3d through ValidateJobSpec: the three ways to give the directions, the
// refusals naming the proto field, the input it takes and the projector it sets.
#include "runner/radon_job_spec.h"

#include <cmath>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runner/job_spec.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
using ::testing::HasSubstr;

constexpr double kPi = 3.14159265358979323846;

// 37 explicit directions, 41 samples of 0.45 mm, a 19 x 17 x 13 volume of 0.6 mm voxels.
pb::JobSpec RadonSpec() {
  pb::JobSpec spec;
  pb::Radon3D* radon = spec.mutable_geometry()->mutable_radon_3d();
  for (int i = 0; i < 37; ++i) {
    pb::RadonDirection* d = radon->add_directions();
    d->set_phi_rad(std::fmod(2.399963 * i, 2 * kPi) - 3.0);
    d->set_theta_rad(std::acos(1.0 - (i + 0.5) / 37.0));
    d->set_weight_sr(2 * kPi / 37);
  }
  radon->set_num_samples(41);
  radon->set_sample_spacing_mm(0.45);
  pb::Volume* v = spec.mutable_volume();
  v->mutable_size()->set_x(19);
  v->mutable_size()->set_y(17);
  v->mutable_size()->set_z(13);
  v->mutable_voxel_size_mm()->set_x(0.6);
  v->mutable_voxel_size_mm()->set_y(0.6);
  v->mutable_voxel_size_mm()->set_z(0.6);
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(37ull * 41 * 4);
  spec.mutable_algorithm()->mutable_fbp();
  return spec;
}

TEST(RadonJobSpecTest, ExplicitDirectionsMakeTheRadonGeometry) {
  auto job = ValidateJobSpec(RadonSpec(), {});
  ASSERT_TRUE(job.ok()) << job.status().message();
  const auto* radon = std::get_if<core::RadonGeometry>(&job->request.geometry);
  ASSERT_NE(radon, nullptr);
  EXPECT_EQ(radon->num_directions(), 37);
  EXPECT_EQ(radon->num_samples, 41);
  EXPECT_DOUBLE_EQ(radon->sample_spacing_mm, 0.45);
  EXPECT_DOUBLE_EQ(radon->directions[5].weight_sr, 2 * kPi / 37);
  EXPECT_EQ(job->request.volume.dims().d0, 13);  // 3D: size.z kept
  EXPECT_EQ(job->input_bytes, 37u * 41u * 4u);
}

TEST(RadonJobSpecTest, BuildersMakeTheirSchemes) {
  pb::JobSpec spec = RadonSpec();
  pb::Radon3D* radon = spec.mutable_geometry()->mutable_radon_3d();
  radon->clear_directions();
  radon->mutable_uniform_solid_angle()->set_count(53);
  spec.mutable_input()->set_size_bytes(53ull * 41 * 4);
  auto job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(std::get<core::RadonGeometry>(job->request.geometry).num_directions(), 53);

  radon->clear_uniform_solid_angle();
  radon->mutable_equal_linear_angle()->set_n_phi(7);
  radon->mutable_equal_linear_angle()->set_n_theta(5);
  spec.mutable_input()->set_size_bytes(35ull * 41 * 4);
  job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  const auto& ela = std::get<core::RadonGeometry>(job->request.geometry);
  ASSERT_EQ(ela.num_directions(), 35);
  double sum = 0;
  for (const auto& d : ela.directions) sum += d.weight_sr;
  EXPECT_NEAR(sum, 2 * kPi, 1e-9);
}

TEST(RadonJobSpecTest, RefusalsNameTheField) {
  struct Case {
    std::string expected;
    std::function<void(pb::JobSpec&)> change;
  };
  const std::vector<Case> cases = {
      {"geometry.radon_3d: none of directions", [](pb::JobSpec& s) {
         s.mutable_geometry()->mutable_radon_3d()->clear_directions();
       }},
      {"geometry.radon_3d: more than one of", [](pb::JobSpec& s) {
         s.mutable_geometry()->mutable_radon_3d()->mutable_uniform_solid_angle()->set_count(3);
       }},
      {"geometry.radon_3d.directions[4].theta_rad: 3.3", [](pb::JobSpec& s) {
         s.mutable_geometry()->mutable_radon_3d()->mutable_directions(4)->set_theta_rad(3.3);
       }},
      {"geometry.radon_3d.directions[9].weight_sr", [](pb::JobSpec& s) {
         s.mutable_geometry()->mutable_radon_3d()->mutable_directions(9)->set_weight_sr(0);
       }},
      {"geometry.radon_3d.directions[6]", [](pb::JobSpec& s) {  // repeats direction 2
         pb::Radon3D* r = s.mutable_geometry()->mutable_radon_3d();
         *r->mutable_directions(6) = r->directions(2);
       }},
      {"geometry.radon_3d.num_samples: 1", [](pb::JobSpec& s) {
         s.mutable_geometry()->mutable_radon_3d()->set_num_samples(1);
       }},
      {"geometry.radon_3d.sample_spacing_mm", [](pb::JobSpec& s) {
         s.mutable_geometry()->mutable_radon_3d()->set_sample_spacing_mm(-0.5);
       }},
      {"geometry.radon_3d.uniform_solid_angle.count: 0 directions", [](pb::JobSpec& s) {
         pb::Radon3D* r = s.mutable_geometry()->mutable_radon_3d();
         r->clear_directions();
         r->mutable_uniform_solid_angle();
       }},
      {"geometry.radon_3d.equal_linear_angle: 70000 directions", [](pb::JobSpec& s) {
         pb::Radon3D* r = s.mutable_geometry()->mutable_radon_3d();
         r->clear_directions();
         r->mutable_equal_linear_angle()->set_n_phi(700);
         r->mutable_equal_linear_angle()->set_n_theta(100);
       }},
      {"geometry.radon_3d.equal_linear_angle.n_theta", [](pb::JobSpec& s) {
         pb::Radon3D* r = s.mutable_geometry()->mutable_radon_3d();
         r->clear_directions();
         r->mutable_equal_linear_angle()->set_n_phi(7);
       }},
      {"input.encoding: DATA_ENCODING_UINT16_LE", [](pb::JobSpec& s) {
         s.mutable_input()->set_encoding(pb::DATA_ENCODING_UINT16_LE);
       }},
      {"input.preprocessing.negative_log", [](pb::JobSpec& s) {
         s.mutable_input()->mutable_preprocessing()->set_negative_log(true);
       }},
      {"input.size_bytes: 100 does not match the geometry: 37 views x 1 row x 41", [](pb::JobSpec& s) {
         s.mutable_input()->set_size_bytes(100);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    pb::JobSpec spec = RadonSpec();
    c.change(spec);
    const absl::Status status = ValidateJobSpec(spec, {}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr(c.expected));
  }
}

TEST(RadonJobSpecTest, TheViewLimitCountsDirections) {
  ServerLimits limits;
  limits.max_views = 30;
  const absl::Status status = ValidateJobSpec(RadonSpec(), limits).status();
  EXPECT_THAT(status.message(), HasSubstr("geometry.radon_3d.directions: 37 directions is out "
                                          "of range [1, 30] (the server's limit, --max_views)"));
}

TEST(RadonJobSpecTest, IterativeMethodsGetThePlaneIntegralProjector) {
  pb::JobSpec spec = RadonSpec();
  spec.mutable_algorithm()->mutable_os_sart()->mutable_iterative()->set_iterations(3);
  spec.mutable_algorithm()->mutable_os_sart()->set_blocks(37);
  auto job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(std::get<core::OsSartOptions>(job->request.algorithm).iterative.projector,
            core::ProjectorModel::kRadonPlaneIntegral);
  spec.mutable_algorithm()->mutable_os_sart()->set_blocks(38);  // blocks count directions
  EXPECT_THAT(ValidateJobSpec(spec, {}).status().message(),
              HasSubstr("algorithm.os_sart.blocks: 38 is out of range [1, 37]"));
}

}  // namespace
}  // namespace tomo::server
