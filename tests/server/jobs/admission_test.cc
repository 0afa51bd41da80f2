// Admission's device memory check (admission.h) device by device: art with the tiled kernels
// needs its tiled layout on a CUDA device and the runs format elsewhere, both counted before
// anything is built; the orbit kernels need the runs format everywhere. The devices here are
// descriptions only: nothing runs on them.
#include "server/jobs/admission.h"

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/algorithms/reconstruction.h"
#include "core/system_matrix/fan_scan.h"
#include "core/system_matrix/symmetric_system_matrix.h"
#include "core/system_matrix/tiled_runs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runner/job_spec.h"
#include "tests/runner/test_jobs.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;
namespace sm = ::tomo::core::system_matrix;
using ::testing::HasSubstr;

// The small fan-beam art job (eight-fold symmetric) with the given kernels.
pb::JobSpec TiledArtSpec(pb::ArtKernels kernels) {
  pb::JobSpec spec = testing::SmallFanArtSpec();
  spec.mutable_algorithm()->mutable_art()->set_kernels(kernels);
  return spec;
}

core::DeviceInfo Device(core::DeviceKind kind, const std::string& id, uint64_t memory) {
  core::DeviceInfo device;
  device.kind = kind;
  device.id = id;
  device.memory_total_bytes = memory;
  return device;
}

absl::Status Check(const pb::JobSpec& spec, std::vector<core::DeviceInfo> devices) {
  const core::AlgorithmRegistry registry = core::AlgorithmRegistry::WithBuiltins();
  absl::Mutex mu;
  AdmissionLimits limits;
  limits.devices = std::move(devices);
  Admission admission(limits, registry, mu);
  return admission.CheckSpec(spec).status();
}

TEST(AdmissionTest, TiledArtIsAdmittedByItsLayoutsBytesOnCudaAndTheRunsElsewhere) {
  const core::AlgorithmRegistry registry = core::AlgorithmRegistry::WithBuiltins();
  const auto tiled = ValidateJobSpec(TiledArtSpec(pb::ART_KERNELS_TILED), {});
  ASSERT_TRUE(tiled.ok()) << tiled.status();
  const uint64_t runs = registry.MinimumDeviceBytesOn(tiled->request, core::DeviceKind::kCpu);
  const uint64_t layout = registry.MinimumDeviceBytesOn(tiled->request, core::DeviceKind::kCuda);
  // The counts are the built matrix's and the built layout's.
  const sm::FanScan scan =
      sm::FanScan::Create(std::get<core::VectorGeometry>(tiled->request.geometry),
                          tiled->request.volume)
          .value();
  const sm::SymmetricSystemMatrix matrix = sm::SymmetricSystemMatrix::Build(scan).value();
  EXPECT_EQ(runs, matrix.bytes());
  EXPECT_EQ(layout, matrix.TiledLayout().value()->bytes());
  ASSERT_GT(layout, runs) << "the case must tell the two apart";
  const auto orbit = ValidateJobSpec(TiledArtSpec(pb::ART_KERNELS_ORBIT), {});
  ASSERT_TRUE(orbit.ok()) << orbit.status();
  EXPECT_EQ(registry.MinimumDeviceBytesOn(orbit->request, core::DeviceKind::kCuda), runs);

  // A GPU with room for the runs but not the layout: tiled refused at submission, naming
  // the layout's bytes; orbit admitted.
  const std::vector<core::DeviceInfo> small_gpu = {
      Device(core::DeviceKind::kCuda, "cuda:0", layout - 1)};
  const absl::Status refused = Check(TiledArtSpec(pb::ART_KERNELS_TILED), small_gpu);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("needs at least " + std::to_string(layout)));
  EXPECT_THAT(refused.message(), HasSubstr("cuda:0 " + std::to_string(layout - 1)));
  EXPECT_TRUE(Check(TiledArtSpec(pb::ART_KERNELS_ORBIT), small_gpu).ok());
  // Exactly the layout's bytes fit.
  EXPECT_TRUE(Check(TiledArtSpec(pb::ART_KERNELS_TILED),
                    {Device(core::DeviceKind::kCuda, "cuda:0", layout)})
                  .ok());
  // A CPU beside the small GPU runs the runs format (no limit here): admitted.
  EXPECT_TRUE(Check(TiledArtSpec(pb::ART_KERNELS_TILED),
                    {Device(core::DeviceKind::kCuda, "cuda:0", layout - 1),
                     Device(core::DeviceKind::kCpu, "cpu", 0)})
                  .ok());
}

TEST(AdmissionTest, EachDeviceNamesWhatItWouldNeedWhenTheNeedsDiffer) {
  const core::AlgorithmRegistry registry = core::AlgorithmRegistry::WithBuiltins();
  const auto tiled = ValidateJobSpec(TiledArtSpec(pb::ART_KERNELS_TILED), {});
  ASSERT_TRUE(tiled.ok()) << tiled.status();
  const uint64_t runs = registry.MinimumDeviceBytesOn(tiled->request, core::DeviceKind::kCpu);
  const uint64_t layout = registry.MinimumDeviceBytesOn(tiled->request, core::DeviceKind::kCuda);
  const pb::JobSpec spec = TiledArtSpec(pb::ART_KERNELS_TILED);
  // The daemon's budget below both: the least need is the runs', the GPU's own is named.
  absl::Mutex mu;
  AdmissionLimits limits;
  limits.devices = {Device(core::DeviceKind::kCpu, "cpu", 0),
                    Device(core::DeviceKind::kCuda, "cuda:0", uint64_t{1} << 40)};
  limits.memory_budget_bytes = runs - 1;
  Admission admission(limits, registry, mu);
  const absl::Status refused = admission.CheckSpec(spec).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("needs at least " + std::to_string(runs)));
  EXPECT_THAT(refused.message(), HasSubstr("cpu " + std::to_string(runs - 1) + ", cuda:0 " +
                                           std::to_string(runs - 1) + " (it needs " +
                                           std::to_string(layout) + " there)"));
}

}  // namespace
}  // namespace tomo::server
