// The iterative methods run on several backends (AlgorithmRegistry::RunOnBackends, whose
// entries for sirt, sart, os_sart and cgls build SeveralDevicesResidentOperators) against
// the same request on one backend, from the analytic phantom's exact projections on a cone
// of 49 views (several_backends.h). Kinds "cpu" (CI) and "cuda" (label gpu; skips without
// a CUDA device).
//
// Tolerance: the several-devices run differs from one device's by the order in which the
// back projection adds the views (per device, then the devices' sums) and the dots add
// their terms; those float32 roundings (about 1e-7 of a voxel's value per back projection)
// pass through the iterations. The images must agree to Tolerance() of the image's maximum,
// far below what an iteration changes (the first iterations move the image by tens of
// percent, a broken reduction by as much).
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "core/algorithms/reconstruction.h"
#include "gtest/gtest.h"
#include "tests/core/algorithms/iterative_cases.h"
#include "tests/core/operators/several_backends.h"

namespace tomo::core {
namespace {

// CPU devices differ from one by float rounding alone; CUDA ones may also sample a part
// of the views with another kernel than all of them (cuda_resident_operators.h). The FBP
// start on several CUDA devices is FDK cut into z-slabs, whose back projection computes
// voxel positions in float32 from each slab's own geometry (filtered_back_projection.h:
// up to about 1e-3 of the peak against the unsplit run): the start itself differs by that
// much, and the few iterations after it keep most of it.
double Tolerance(const std::string& kind, const AlgorithmOptions& options) {
  if (kind == "cpu") return 1e-5;
  const auto* sirt = std::get_if<SirtOptions>(&options);
  if (sirt != nullptr && sirt->iterative.initial_from_fbp) return 1e-3;
  return 1e-4;
}

// max |a - b| / max |b|.
double RelativeMax(const Array3D& a, const Array3D& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a.data()[i]) - b.data()[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.data()[i])));
  }
  return diff / scale;
}

struct Method {
  std::string name;
  AlgorithmOptions options;
};

std::vector<Method> Methods() {
  SirtOptions sirt;
  sirt.iterative.iterations = 12;
  sirt.iterative.lower_bound = 0;
  OsSartOptions os_sart;
  os_sart.iterative.iterations = 4;
  os_sart.blocks = 5;  // 10 or 9 views a block: 5 or 4 per part on 2 devices, 3 or 4 on 3
  os_sart.order = ViewOrder::kInterleaved;
  os_sart.iterative.lower_bound = 0;
  SartOptions sart;  // one view per block: device 0 projects, the others get the broadcast
  sart.iterative.iterations = 2;
  sart.iterative.relaxation = 0.5;
  CglsOptions cgls;
  cgls.iterative.iterations = 8;
  SirtOptions sirt_from_fbp;  // the FDK start on several backends too
  sirt_from_fbp.iterative.iterations = 3;
  sirt_from_fbp.iterative.initial_from_fbp = true;
  return {{"sirt", sirt}, {"os_sart", os_sart}, {"sart", sart}, {"cgls", cgls},
          {"sirt_from_fbp", sirt_from_fbp}};
}

// (kind, devices, method index)
class SeveralDevicesIterativeTest
    : public ::testing::TestWithParam<std::tuple<std::string, int, int>> {};

TEST_P(SeveralDevicesIterativeTest, MatchesOneDevice) {
  const auto& [kind, count, method_index] = GetParam();
  auto backends = testing::MakeSeveralBackends(kind, count);
  ASSERT_TRUE(backends.ok()) << backends.status();
  if (backends->empty()) GTEST_SKIP() << "no CUDA device";
  const Method method = Methods()[static_cast<size_t>(method_index)];
  const testing::SeveralDevicesProblem problem = testing::MakeSeveralDevicesProblem();
  const ReconstructionRequest request{problem.geometry, problem.volume, method.options};
  const AlgorithmRegistry registry = AlgorithmRegistry::WithBuiltins();

  auto one = registry.Run(request, problem.projections, *backends->front(), RunContext{});
  ASSERT_TRUE(one.ok()) << one.status();
  auto several = registry.RunOnBackends(request, problem.projections,
                                        testing::Pointers(*backends), RunContext{});
  ASSERT_TRUE(several.ok()) << several.status();

  const double difference = RelativeMax(*several, *one);
  const double error_one = testing::RelativeError(*one, problem.truth);
  const double error_several = testing::RelativeError(*several, problem.truth);
  std::printf("%s on %d %s devices: max difference from one device %.3g of the maximum; "
              "relative error against the phantom %.4f (one device %.4f)\n",
              method.name.c_str(), count, kind.c_str(), difference, error_several, error_one);
  EXPECT_LE(difference, Tolerance(kind, method.options));
  // And a reconstruction, not a copy of a failure: closer to the phantom than zero.
  EXPECT_LT(error_several, 0.9);
}

INSTANTIATE_TEST_SUITE_P(
    Devices, SeveralDevicesIterativeTest,
    ::testing::Combine(::testing::Values("cpu", "cuda"), ::testing::Values(2, 3),
                       ::testing::Range(0, 5)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "_" +
             Methods()[static_cast<size_t>(std::get<2>(info.param))].name;
    });

}  // namespace
}  // namespace tomo::core
