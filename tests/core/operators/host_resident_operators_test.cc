#include "core/operators/host_resident_operators.h"

#include <cmath>
#include <random>

#include "core/geometry/geometry_builders.h"
#include "core/operators/cpu/cpu_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/random_arrays.h"
#include "tests/core/random_seed.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

class HostResidentOperatorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = tomo::testing::TestSeed();
    random_.seed(seed_);
  }
  // A resident copy of a fresh random host array of dims.
  std::unique_ptr<ResidentArray> Random(Dims3 dims, Array3D& host, float low = -1,
                                        float high = 1) {
    host = tomo::testing::RandomArray(dims, random_, low, high);
    auto array = ops_.Allocate(dims).value();
    EXPECT_TRUE(ops_.Upload(host, *array).ok());
    return array;
  }
  Array3D Down(const ResidentArray& array) {
    Array3D host(array.dims(), std::nanf(""));
    EXPECT_TRUE(ops_.Download(array, host).ok());
    return host;
  }

  CpuBackend backend_{3};
  HostResidentOperators ops_{backend_, 3};
  uint64_t seed_ = 0;
  std::mt19937_64 random_;
};

TEST_F(HostResidentOperatorsTest, ElementwiseOperationsComputeWhatTheySay) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  const Dims3 dims{3, 70, 1001};  // not a multiple of the chunk size
  Array3D x, y, w, d;
  auto rx = Random(dims, x);
  auto ry = Random(dims, y);
  auto rw = Random(dims, w, 0.0f, 2.0f);
  auto rd = Random(dims, d);

  ASSERT_TRUE(ops_.Axpby(0.5f, *rx, -2.0f, *ry).ok());
  Array3D got = Down(*ry);
  for (int64_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got.data()[i], 0.5f * x.data()[i] + -2.0f * y.data()[i]) << i;
  }
  ASSERT_TRUE(ops_.Multiply(*rw, *ry).ok());
  Array3D multiplied = Down(*ry);
  for (int64_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(multiplied.data()[i], w.data()[i] * got.data()[i]) << i;
  }
  ASSERT_TRUE(ops_.AddScaledQuotient(0.25f, *rd, *rw, 0.5f, -0.1f, 0.2f, *rx).ok());
  Array3D updated = Down(*rx);
  int64_t clamped_low = 0, clamped_high = 0, unweighted = 0;
  for (int64_t i = 0; i < got.size(); ++i) {
    const float step = w.data()[i] > 0.5f ? 0.25f * d.data()[i] / w.data()[i] : 0.0f;
    const float expected = std::min(std::max(x.data()[i] + step, -0.1f), 0.2f);
    ASSERT_EQ(updated.data()[i], expected) << i;
    clamped_low += expected == -0.1f;
    clamped_high += expected == 0.2f;
    unweighted += w.data()[i] <= 0.5f;
  }
  EXPECT_GT(clamped_low, 0);  // every branch taken
  EXPECT_GT(clamped_high, 0);
  EXPECT_GT(unweighted, 0);
  ASSERT_TRUE(ops_.Clamp(-0.05f, 0.1f, *rx).ok());
  Array3D clamped = Down(*rx);
  for (int64_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(clamped.data()[i], std::min(std::max(updated.data()[i], -0.05f), 0.1f)) << i;
  }
  ASSERT_TRUE(ops_.InvertGuarded(0.5f, *rw).ok());
  Array3D inverted = Down(*rw);
  for (int64_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(inverted.data()[i], w.data()[i] > 0.5f ? 1.0f / w.data()[i] : 0.0f) << i;
  }
  ASSERT_TRUE(ops_.Fill(3.5f, *rd).ok());
  Array3D filled = Down(*rd);
  for (int64_t i = 0; i < got.size(); ++i) ASSERT_EQ(filled.data()[i], 3.5f);
}

TEST_F(HostResidentOperatorsTest, DotSumsInDoubleIndependentlyOfThreads) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  const Dims3 dims{2, 300, 517};
  Array3D a, b;
  auto ra = Random(dims, a);
  auto rb = Random(dims, b);
  double expected = 0;
  for (int64_t i = 0; i < a.size(); ++i) expected += static_cast<double>(a.data()[i]) * b.data()[i];
  auto dot = ops_.Dot(*ra, *rb);
  ASSERT_TRUE(dot.ok());
  EXPECT_NEAR(*dot, expected, 1e-9 * a.size());
  // One thread: bitwise the same sum.
  CpuBackend one_thread(1);
  HostResidentOperators serial(one_thread, 1);
  auto sa = serial.Allocate(dims).value();
  auto sb = serial.Allocate(dims).value();
  ASSERT_TRUE(serial.Upload(a, *sa).ok() && serial.Upload(b, *sb).ok());
  EXPECT_EQ(serial.Dot(*sa, *sb).value(), *dot);
}

TEST_F(HostResidentOperatorsTest, ProjectorsAreTheBackendsOperators) {
  SCOPED_TRACE(tomo::testing::SeedTrace(seed_));
  FanConeOptions cone;
  cone.detector = {12, 20, 2.0, 2.0, 0, 0};
  cone.source_origin_mm = 60;
  cone.origin_detector_mm = 60;
  cone.angles_rad = UniformAnglesRad(7, 0.3, 6.0);
  const VectorGeometry geometry = MakeCircularCone(cone).value();
  const VolumeGeometry volume = VolumeGeometry::Create({16, 14, 10}, {1, 1, 1}, {}).value();
  Array3D x, p;
  auto rx = Random(volume.dims(), x, 0, 1);
  auto rp = Random(geometry.projection_dims(), p, 0, 1);
  auto projector = ops_.MakeProjector(geometry, volume, ProjectorModel::kVoxelDriven).value();
  auto rax = ops_.Allocate(geometry.projection_dims()).value();
  auto rbp = ops_.Allocate(volume.dims()).value();
  ASSERT_TRUE(projector->Forward(*rx, *rax).ok());
  ASSERT_TRUE(projector->Back(*rp, *rbp).ok());
  Array3D ax(geometry.projection_dims(), std::nanf(""));
  Array3D bp(volume.dims(), std::nanf(""));
  ASSERT_TRUE(backend_.ForwardProject(geometry, volume, x, ax).ok());
  ASSERT_TRUE(backend_.BackProject(geometry, volume, p, BackProjectionWeighting::kNone, bp).ok());
  const Array3D got_ax = Down(*rax);
  const Array3D got_bp = Down(*rbp);
  for (int64_t i = 0; i < ax.size(); ++i) ASSERT_EQ(got_ax.data()[i], ax.data()[i]);
  for (int64_t i = 0; i < bp.size(); ++i) ASSERT_EQ(got_bp.data()[i], bp.data()[i]);
}

TEST_F(HostResidentOperatorsTest, RefusesMismatchedAndForeignArrays) {
  auto a = ops_.Allocate({1, 4, 5}).value();
  auto b = ops_.Allocate({1, 4, 6}).value();
  EXPECT_THAT(ops_.Axpby(1, *a, 1, *b).message(), HasSubstr("Axpby: arrays of 20 and 24"));
  CpuBackend other_backend(1);
  HostResidentOperators other(other_backend);
  auto foreign = other.Allocate({1, 4, 5}).value();
  EXPECT_THAT(ops_.Multiply(*foreign, *a).message(),
              HasSubstr("Multiply: an array was allocated by another ResidentOperators"));
  Array3D wrong({1, 5, 4});
  EXPECT_EQ(ops_.Upload(wrong, *a).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ops_.Clamp(1, 0, *a).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tomo::core
