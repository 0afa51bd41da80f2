// runner/job_spec.cc's iterative part: tomoserve.v1 IterativeOptions, SartOptions and
// OsSartOptions to the core's options, and the refusals naming the field.
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runner/job_spec.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
using ::testing::HasSubstr;

// 2D parallel beam: 90 views of 64 detectors, a 48 x 40 volume; the algorithm left to the test.
pb::JobSpec Spec() {
  pb::JobSpec spec;
  auto* g = spec.mutable_geometry()->mutable_parallel_2d();
  g->set_num_detectors(64);
  g->set_detector_spacing_mm(1);
  g->mutable_angles()->mutable_uniform()->set_count(90);
  g->mutable_angles()->mutable_uniform()->set_span_deg(180);
  auto* v = spec.mutable_volume();
  v->mutable_size()->set_x(48);
  v->mutable_size()->set_y(40);
  v->mutable_voxel_size_mm()->set_x(1);
  v->mutable_voxel_size_mm()->set_y(1);
  spec.mutable_input()->set_encoding(pb::DATA_ENCODING_FLOAT32_LE);
  spec.mutable_input()->set_size_bytes(90ull * 64 * 4);
  return spec;
}

absl::Status Validate(const pb::JobSpec& spec, const ServerLimits& limits = {}) {
  return ValidateJobSpec(spec, limits).status();
}

TEST(JobSpecIterativeTest, SirtOptionsAreMappedOneToOne) {
  pb::JobSpec spec = Spec();
  pb::IterativeOptions* sirt = spec.mutable_algorithm()->mutable_sirt();
  sirt->set_iterations(40);
  sirt->set_relaxation(1.5);
  sirt->set_non_negative(true);
  sirt->set_upper_bound(2.5);
  sirt->set_stop_relative_residual(0.01);
  auto job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  const auto& options = std::get<core::SirtOptions>(job->request.algorithm).iterative;
  EXPECT_EQ(options.iterations, 40);
  EXPECT_EQ(options.relaxation, 1.5);
  EXPECT_EQ(options.lower_bound, 0.0);
  EXPECT_EQ(options.upper_bound, 2.5);
  EXPECT_EQ(options.stop_relative_residual, 0.01);
  EXPECT_EQ(options.initial_volume, nullptr);
  EXPECT_FALSE(options.initial_from_fbp);
}

TEST(JobSpecIterativeTest, DefaultsAreUnconstrainedLambdaOneZeroStart) {
  pb::JobSpec spec = Spec();
  spec.mutable_algorithm()->mutable_cgls()->set_iterations(7);
  auto job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  const auto& options = std::get<core::CglsOptions>(job->request.algorithm).iterative;
  EXPECT_EQ(options.relaxation, 1.0);
  EXPECT_EQ(options.lower_bound, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(options.upper_bound, std::numeric_limits<double>::infinity());
}

TEST(JobSpecIterativeTest, BlocksAndOrder) {
  pb::JobSpec spec = Spec();
  auto* os = spec.mutable_algorithm()->mutable_os_sart();
  os->mutable_iterative()->set_iterations(3);
  os->set_blocks(90);
  os->set_order(pb::VIEW_ORDER_INTERLEAVED);
  auto job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  const auto& options = std::get<core::OsSartOptions>(job->request.algorithm);
  EXPECT_EQ(options.blocks, 90);
  EXPECT_EQ(options.order, core::ViewOrder::kInterleaved);

  os->set_blocks(91);
  EXPECT_EQ(Validate(spec).message(),
            "algorithm.os_sart.blocks: 91 is out of range [1, 90] (1 block is SIRT; one per "
            "view, the number of views, is SART)");
  os->set_blocks(0);
  EXPECT_THAT(Validate(spec).message(), HasSubstr("algorithm.os_sart.blocks: 0 is out of range"));
  os->set_blocks(4);
  os->set_order(static_cast<pb::ViewOrder>(7));
  EXPECT_THAT(Validate(spec).message(), HasSubstr("algorithm.os_sart.order: 7 is out of range"));

  pb::JobSpec sart = Spec();
  sart.mutable_algorithm()->mutable_sart()->mutable_iterative()->set_iterations(2);
  auto sart_job = ValidateJobSpec(sart, {});
  ASSERT_TRUE(sart_job.ok());
  // SART's default order is the golden ratio (measured: docs/iterative.md), OS-SART's
  // sequential; the core's option structs default to the same.
  EXPECT_EQ(std::get<core::SartOptions>(sart_job->request.algorithm).order,
            core::ViewOrder::kGoldenRatio);
  EXPECT_EQ(core::SartOptions{}.order, core::ViewOrder::kGoldenRatio);
  pb::JobSpec os_default = Spec();
  os_default.mutable_algorithm()->mutable_os_sart()->mutable_iterative()->set_iterations(2);
  os_default.mutable_algorithm()->mutable_os_sart()->set_blocks(6);
  auto os_job = ValidateJobSpec(os_default, {});
  ASSERT_TRUE(os_job.ok()) << os_job.status();
  EXPECT_EQ(std::get<core::OsSartOptions>(os_job->request.algorithm).order,
            core::ViewOrder::kSequential);
  EXPECT_EQ(core::OsSartOptions{}.order, core::ViewOrder::kSequential);
  // Every order on the wire reaches the core.
  for (const auto& [wire, core_order] :
       {std::pair{pb::VIEW_ORDER_SEQUENTIAL, core::ViewOrder::kSequential},
        std::pair{pb::VIEW_ORDER_INTERLEAVED, core::ViewOrder::kInterleaved},
        std::pair{pb::VIEW_ORDER_GOLDEN_RATIO, core::ViewOrder::kGoldenRatio},
        std::pair{pb::VIEW_ORDER_RANDOM, core::ViewOrder::kRandom}}) {
    sart.mutable_algorithm()->mutable_sart()->set_order(wire);
    auto chosen = ValidateJobSpec(sart, {});
    ASSERT_TRUE(chosen.ok()) << chosen.status();
    EXPECT_EQ(std::get<core::SartOptions>(chosen->request.algorithm).order, core_order);
  }
}

TEST(JobSpecIterativeTest, BadValuesAreRefusedNamingTheField) {
  pb::JobSpec spec = Spec();
  pb::IterativeOptions* sirt = spec.mutable_algorithm()->mutable_sirt();
  sirt->set_iterations(0);
  absl::Status status = Validate(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("algorithm.sirt.iterations: 0 is out of range"));

  sirt->set_iterations(5);
  for (double lambda : {0.0, 2.0, -0.5, 7.0}) {
    sirt->set_relaxation(lambda);
    status = Validate(spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("algorithm.sirt.relaxation: "));
    EXPECT_THAT(status.message(), HasSubstr("is out of range (0, 2)"));
  }
  sirt->set_relaxation(1);
  sirt->set_lower_bound(3);
  sirt->set_upper_bound(1);
  EXPECT_THAT(Validate(spec).message(), HasSubstr("algorithm.sirt.lower_bound: 3"));
  sirt->clear_lower_bound();
  sirt->clear_upper_bound();
  sirt->set_stop_relative_residual(-0.1);
  EXPECT_THAT(Validate(spec).message(),
              HasSubstr("algorithm.sirt.stop_relative_residual: -0.1 is out of range [0, 1)"));
  sirt->set_stop_relative_residual(0);

  pb::JobSpec cgls = Spec();
  cgls.mutable_algorithm()->mutable_cgls()->set_iterations(5);
  cgls.mutable_algorithm()->mutable_cgls()->set_non_negative(true);
  EXPECT_THAT(Validate(cgls).message(),
              HasSubstr("algorithm.cgls.non_negative: true is not supported by CGLS"));
  cgls.mutable_algorithm()->mutable_cgls()->set_non_negative(false);
  cgls.mutable_algorithm()->mutable_cgls()->set_relaxation(0.5);
  EXPECT_THAT(Validate(cgls).message(), HasSubstr("algorithm.cgls.relaxation: 0.5"));
}

TEST(JobSpecIterativeTest, IterationsAboveTheServerLimitNameTheFlag) {
  pb::JobSpec spec = Spec();
  spec.mutable_algorithm()->mutable_sart()->mutable_iterative()->set_iterations(501);
  ServerLimits limits;
  limits.max_iterations = 500;
  const absl::Status status = Validate(spec, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("algorithm.sart.iterative.iterations: 501"));
  EXPECT_THAT(status.message(), HasSubstr("--max_iterations"));
  spec.mutable_algorithm()->mutable_sart()->mutable_iterative()->set_iterations(500);
  EXPECT_TRUE(Validate(spec, limits).ok());
}

TEST(JobSpecIterativeTest, InitialVolumeMustMatchTheVolume) {
  pb::JobSpec spec = Spec();
  pb::IterativeOptions* sirt = spec.mutable_algorithm()->mutable_sirt();
  sirt->set_iterations(2);
  sirt->set_initial(pb::INITIAL_VOLUME_GIVEN);
  sirt->set_initial_volume_float32(std::string(48 * 40 * 4 - 4, '\0'));
  absl::Status status = Validate(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "algorithm.sirt.initial_volume_float32: 7676 bytes do not match the volume: 48 x 40 "
            "x 1 voxels x 4 bytes = 7680");
  std::string bytes(48 * 40 * 4, '\0');
  const float value = 0.75f;
  std::memcpy(&bytes[4 * 17], &value, 4);  // little-endian hosts only, as the wire format
  sirt->set_initial_volume_float32(bytes);
  auto job = ValidateJobSpec(spec, {});
  ASSERT_TRUE(job.ok()) << job.status();
  const auto& initial = std::get<core::SirtOptions>(job->request.algorithm).iterative.initial_volume;
  ASSERT_NE(initial, nullptr);
  EXPECT_EQ(initial->dims(), (core::Dims3{1, 40, 48}));
  EXPECT_EQ(initial->data()[17], 0.75f);
  EXPECT_EQ(initial->data()[16], 0.0f);

  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&bytes[4 * 3], &nan, 4);
  sirt->set_initial_volume_float32(bytes);
  EXPECT_THAT(Validate(spec).message(),
              HasSubstr("algorithm.sirt.initial_volume_float32: value 3 is not a finite number"));

  sirt->set_initial(pb::INITIAL_VOLUME_FBP);
  EXPECT_THAT(Validate(spec).message(),
              HasSubstr("initial_volume_float32: is set but initial is not INITIAL_VOLUME_GIVEN"));
  sirt->clear_initial_volume_float32();
  auto fbp_start = ValidateJobSpec(spec, {});
  ASSERT_TRUE(fbp_start.ok()) << fbp_start.status();
  EXPECT_TRUE(std::get<core::SirtOptions>(fbp_start->request.algorithm).iterative.initial_from_fbp);
}

}  // namespace
}  // namespace tomo::server
