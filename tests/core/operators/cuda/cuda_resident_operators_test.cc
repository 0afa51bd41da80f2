// CudaResidentOperators (core/operators/cuda/cuda_resident_operators.h) against the host
// reference (HostResidentOperators over CpuBackend), and the iterative methods run on both,
// compared iteration by iteration. Label gpu: skips without a CUDA device.
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <vector>

#include "core/algorithms/block_iterative.h"
#include "core/algorithms/cgls.h"
#include "core/algorithms/sirt.h"
#include "core/geometry/geometry_builders.h"
#include "core/operators/host_resident_operators.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/algorithms/iterative_cases.h"
#include "tests/core/operators/cuda/cuda_vs_cpu_fixture.h"
#include "tests/core/random_arrays.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

// The projectors' texture samplers interpolate with 8-bit weights (cuda_vector_projector
// tests: 4e-3 of the maximum per projection).
constexpr double kProjectorTolerance = 4e-3;
// An iterate after k iterations of a contractive method differs by at most a few
// projections' worth.
constexpr double kIterateTolerance = 1e-2;

class CudaResidentOperatorsTest : public CudaVsCpuTest {
 protected:
  void SetUp() override {
    CudaVsCpuTest::SetUp();
    if (IsSkipped()) return;
    auto ops = cuda_->MakeResidentOperators();
    ASSERT_TRUE(ops.ok()) << ops.status();
    gpu_ = std::move(ops).value();
    host_ = std::make_unique<HostResidentOperators>(cpu_);
  }
  // The same random host array resident on both.
  struct Pair {
    Array3D host;
    std::unique_ptr<ResidentArray> gpu, cpu;
  };
  Pair Random(Dims3 dims, float low, float high) {
    Pair p;
    p.host = testing::RandomArray(dims, random_, low, high);
    p.gpu = gpu_->Allocate(dims).value();
    p.cpu = host_->Allocate(dims).value();
    EXPECT_TRUE(gpu_->Upload(p.host, *p.gpu).ok());
    EXPECT_TRUE(host_->Upload(p.host, *p.cpu).ok());
    return p;
  }
  Array3D Down(ResidentOperators& ops, const ResidentArray& a) {
    Array3D host(a.dims(), std::numeric_limits<float>::quiet_NaN());
    EXPECT_TRUE(ops.Download(a, host).ok());
    return host;
  }
  void ExpectSameBits(Pair& p) {
    const Array3D g = Down(*gpu_, *p.gpu);
    const Array3D c = Down(*host_, *p.cpu);
    int64_t mismatches = 0;
    for (int64_t i = 0; i < g.size(); ++i) mismatches += g.data()[i] != c.data()[i];
    EXPECT_EQ(mismatches, 0);
    EXPECT_TRUE(AllFinite(g));
  }

  std::unique_ptr<ResidentOperators> gpu_;
  std::unique_ptr<HostResidentOperators> host_;
};

TEST_F(CudaResidentOperatorsTest, ElementwiseOperationsGiveTheReferenceBits) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  const Dims3 dims{5, 123, 457};
  Pair x = Random(dims, -1, 1), y = Random(dims, -1, 1), w = Random(dims, 0, 2),
       d = Random(dims, -1, 1);
  for (ResidentOperators* ops : {gpu_.get(), static_cast<ResidentOperators*>(host_.get())}) {
    const bool g = ops == gpu_.get();
    ASSERT_TRUE(ops->Axpby(0.7f, g ? *x.gpu : *x.cpu, -1.3f, g ? *y.gpu : *y.cpu).ok());
    ASSERT_TRUE(ops->Multiply(g ? *w.gpu : *w.cpu, g ? *y.gpu : *y.cpu).ok());
    ASSERT_TRUE(ops->AddScaledQuotient(0.9f, g ? *y.gpu : *y.cpu, g ? *w.gpu : *w.cpu, 0.3f, -0.4f,
                                       0.6f, g ? *x.gpu : *x.cpu)
                    .ok());
    ASSERT_TRUE(ops->InvertGuarded(0.5f, g ? *w.gpu : *w.cpu).ok());
    ASSERT_TRUE(
        ops->Clamp(-0.2f, std::numeric_limits<float>::infinity(), g ? *d.gpu : *d.cpu).ok());
  }
  ExpectSameBits(x);
  ExpectSameBits(y);
  ExpectSameBits(w);
  ExpectSameBits(d);
  ASSERT_TRUE(gpu_->Fill(2.5f, *d.gpu).ok());
  ASSERT_TRUE(host_->Fill(2.5f, *d.cpu).ok());
  ExpectSameBits(d);
}

TEST_F(CudaResidentOperatorsTest, DotAgreesWithTheReference) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  for (Dims3 dims : {Dims3{1, 1, 1}, Dims3{1, 1, 1000}, Dims3{64, 256, 257}}) {
    Pair a = Random(dims, -1, 1), b = Random(dims, -1, 1);
    auto g = gpu_->Dot(*a.gpu, *b.gpu);
    auto c = host_->Dot(*a.cpu, *b.cpu);
    ASSERT_TRUE(g.ok() && c.ok()) << g.status();
    EXPECT_NEAR(*g, *c, 1e-12 * dims.count() + 1e-12);
    // Deterministic.
    EXPECT_EQ(gpu_->Dot(*a.gpu, *b.gpu).value(), *g);
    // The running total: two products added, then reset by the take.
    ASSERT_TRUE(gpu_->AccumulateDot(*a.gpu, *b.gpu).ok());
    ASSERT_TRUE(gpu_->AccumulateDot(*a.gpu, *a.gpu).ok());
    const double aa = host_->Dot(*a.cpu, *a.cpu).value();
    EXPECT_NEAR(gpu_->TakeAccumulatedDot().value(), *c + aa, 1e-12 * dims.count() + 1e-12);
    EXPECT_EQ(gpu_->TakeAccumulatedDot().value(), 0.0);
  }
}

TEST_F(CudaResidentOperatorsTest, ProjectorsAgreeWithTheReference) {
  SCOPED_TRACE(testing::SeedTrace(seed_));
  FanConeOptions cone;
  cone.detector = {48, 56, 2.0, 2.0, 0, 0};
  cone.source_origin_mm = 120;
  cone.origin_detector_mm = 120;
  const VolumeGeometry volume = VolumeGeometry::Create({40, 36, 32}, {1, 1, 1}, {}).value();
  // 24 views: texture forward sampler; 3 views: exact float loads.
  for (int views : {24, 3}) {
    for (ProjectorModel model : {ProjectorModel::kJoseph, ProjectorModel::kVoxelDriven}) {
      SCOPED_TRACE(ProjectorModelName(model));
      cone.angles_rad = testing::RandomAngles(views, random_);
      const VectorGeometry geometry = MakeCircularCone(cone).value();
      Pair x = Random(volume.dims(), 0, 1);
      Pair p = Random(geometry.projection_dims(), 0, 1);
      auto gpu_projector = gpu_->MakeProjector(geometry, volume, model).value();
      auto cpu_projector = host_->MakeProjector(geometry, volume, model).value();
      auto g_ax = gpu_->Allocate(geometry.projection_dims()).value();
      auto c_ax = host_->Allocate(geometry.projection_dims()).value();
      auto g_bp = gpu_->Allocate(volume.dims()).value();
      auto c_bp = host_->Allocate(volume.dims()).value();
      ASSERT_TRUE(gpu_projector->Forward(*x.gpu, *g_ax).ok());
      ASSERT_TRUE(cpu_projector->Forward(*x.cpu, *c_ax).ok());
      ASSERT_TRUE(gpu_projector->Back(*p.gpu, *g_bp).ok());
      ASSERT_TRUE(cpu_projector->Back(*p.cpu, *c_bp).ok());
      const Array3D ga = Down(*gpu_, *g_ax), ca = Down(*host_, *c_ax);
      const Array3D gb = Down(*gpu_, *g_bp), cb = Down(*host_, *c_bp);
      EXPECT_TRUE(AllFinite(ga) && AllFinite(gb));
      EXPECT_LT(RelativeMaxDifference(ga, ca), kProjectorTolerance) << views << " views";
      EXPECT_LT(RelativeMaxDifference(gb, cb), kProjectorTolerance) << views << " views";
    }
  }
}

TEST_F(CudaResidentOperatorsTest, RefusesForeignAndMismatchedArrays) {
  auto a = gpu_->Allocate({1, 4, 5}).value();
  auto foreign = host_->Allocate({1, 4, 5}).value();
  EXPECT_THAT(gpu_->Axpby(1, *foreign, 1, *a).message(),
              HasSubstr("Axpby: an array was allocated by another ResidentOperators"));
  auto b = gpu_->Allocate({1, 4, 6}).value();
  EXPECT_THAT(gpu_->Dot(*a, *b).status().message(), HasSubstr("Dot: arrays of 20 and 24"));
}

// Each method on both backends, the iterate compared after every iteration.
class IterativeCudaVsCpuTest : public CudaVsCpuTest {
 protected:
  template <typename Run>
  void CompareIterations(const char* what, int64_t iterations, const Run& run) {
    std::vector<Array3D> gpu_iterates, cpu_iterates;
    auto options_for = [&](std::vector<Array3D>& iterates) {
      IterativeOptions options;
      options.iterations = iterations;
      options.observe_volume = true;
      options.on_iteration = [&iterates](const IterationReport& report) {
        iterates.push_back(report.volume->Clone());
        return absl::OkStatus();
      };
      return options;
    };
    auto g = run(options_for(gpu_iterates), *cuda_);
    auto c = run(options_for(cpu_iterates), cpu_);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ(gpu_iterates.size(), static_cast<size_t>(iterations));
    ASSERT_EQ(cpu_iterates.size(), static_cast<size_t>(iterations));
    for (int64_t k = 0; k < iterations; ++k) {
      const double diff = RelativeMaxDifference(gpu_iterates[k], cpu_iterates[k]);
      std::printf("%s iteration %lld: CUDA vs CPU relative max difference %.2e\n", what,
                  static_cast<long long>(k + 1), diff);
      EXPECT_TRUE(AllFinite(gpu_iterates[k]));
      EXPECT_LT(diff, kIterateTolerance) << what << " iteration " << k + 1;
      EXPECT_NEAR(g->relative_residuals[k], c->relative_residuals[k],
                  1e-2 * c->relative_residuals[k])
          << what << " iteration " << k + 1;
    }
  }
};

TEST_F(IterativeCudaVsCpuTest, SirtCone3D) {
  const auto problem = testing::MakeCone3D();
  CompareIterations("sirt cone", 5, [&](IterativeOptions options, Backend& backend) {
    options.lower_bound = 0;
    return Sirt(problem.geometry, problem.volume, problem.projections, options, backend, {});
  });
}

TEST_F(IterativeCudaVsCpuTest, SartAndOsSartCone3D) {
  const auto problem = testing::MakeCone3D();
  CompareIterations("sart cone", 3, [&](IterativeOptions options, Backend& backend) {
    return BlockIterative(problem.geometry, problem.volume, problem.projections, options,
                          problem.geometry.num_views(), ViewOrder::kInterleaved, backend, {});
  });
  CompareIterations("os-sart 4 blocks cone", 3, [&](IterativeOptions options, Backend& backend) {
    options.relaxation = 1.2;
    return BlockIterative(problem.geometry, problem.volume, problem.projections, options, 4,
                          ViewOrder::kSequential, backend, {});
  });
}

TEST_F(IterativeCudaVsCpuTest, CglsCone3DAndSirt2D) {
  const auto problem = testing::MakeCone3D();
  CompareIterations("cgls cone", 5, [&](IterativeOptions options, Backend& backend) {
    return Cgls(problem.geometry, problem.volume, problem.projections, options, backend, {});
  });
  const auto flat = testing::MakeProblem2D();
  CompareIterations("sirt 2d", 5, [&](IterativeOptions options, Backend& backend) {
    return Sirt(flat.vector_geometry, flat.volume, flat.projections, options, backend, {});
  });
}

TEST_F(IterativeCudaVsCpuTest, MemoryBudgetIsRefusedBeforeStarting) {
  const auto problem = testing::MakeCone3D();
  RunContext context;
  context.memory_budget_bytes = 100000;
  IterativeOptions options;
  options.iterations = 2;
  auto result =
      Sirt(problem.geometry, problem.volume, problem.projections, options, *cuda_, context);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(result.status().message(), HasSubstr("cuda:0"));
}

}  // namespace
}  // namespace tomo::core
