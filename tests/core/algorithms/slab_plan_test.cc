#include "core/algorithms/slab_plan.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/geometry/geometry_builders.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tomo::core {
namespace {

using ::testing::HasSubstr;

constexpr double kPi = 3.14159265358979323846;

// 64 x 48 x 40 voxels; 90 views of 30 rows x 50 columns.
VolumeGeometry Volume() {
  return VolumeGeometry::Create({64, 48, 40}, {1, 1, 0.5}, {1, 2, 3}).value();
}

VectorGeometry Geometry() {
  FanConeOptions cone;
  cone.detector = {30, 50, 2.0, 2.0, 0, 0};
  cone.source_origin_mm = 150;
  cone.origin_detector_mm = 150;
  cone.angles_rad = UniformAnglesRad(90, 0, 2 * kPi);
  return MakeCircularCone(cone).value();
}

constexpr uint64_t kSlice = 64 * 48 * 4;  // bytes of one float32 slice
constexpr uint64_t kView4 = 30 * 50 * 4;  // bytes of one float32 view
constexpr uint64_t kView2 = 30 * 50 * 2;  // float16

// The slabs cover [0, nz) and the chunks [0, views), in order, without overlap or gaps.
void ExpectCovering(const SlabPlan& plan, int64_t nz, int64_t views) {
  int64_t next = 0;
  for (const Slab& slab : plan.slabs) {
    EXPECT_EQ(slab.first_slice, next);
    EXPECT_GE(slab.slices, 1);
    next = slab.first_slice + slab.slices;
  }
  EXPECT_EQ(next, nz);
  next = 0;
  for (const ViewChunk& chunk : plan.view_chunks) {
    EXPECT_EQ(chunk.first_view, next);
    EXPECT_GE(chunk.views, 1);
    next = chunk.first_view + chunk.views;
  }
  EXPECT_EQ(next, views);
}

// Every (slab, chunk) pair fits the budget.
void ExpectWithinBudget(const SlabPlan& plan, int bytes, uint64_t budget) {
  for (const Slab& slab : plan.slabs) {
    for (const ViewChunk& chunk : plan.view_chunks) {
      EXPECT_LE(SlabBytes(Geometry(), Volume(), bytes, slab.slices, chunk.views), budget);
    }
  }
  EXPECT_LE(plan.peak_bytes, budget);
}

TEST(SlabPlanTest, NoBudgetIsOneSlabAndOneChunk) {
  const SlabPlan plan = PlanSlabs(Geometry(), Volume(), 4, 0).value();
  ASSERT_EQ(plan.slabs.size(), 1u);
  ASSERT_EQ(plan.view_chunks.size(), 1u);
  EXPECT_EQ(plan.slabs[0].slices, 40);
  EXPECT_EQ(plan.view_chunks[0].views, 90);
  EXPECT_EQ(plan.peak_bytes, 40 * kSlice + 90 * kView4);
}

TEST(SlabPlanTest, SingleSlabWhenItFitsExactly) {
  const uint64_t budget = 40 * kSlice + 90 * kView4;
  const SlabPlan plan = PlanSlabs(Geometry(), Volume(), 4, budget).value();
  EXPECT_EQ(plan.slabs.size(), 1u);
  EXPECT_EQ(plan.view_chunks.size(), 1u);
  // One byte less: two slabs.
  const SlabPlan split = PlanSlabs(Geometry(), Volume(), 4, budget - 1).value();
  EXPECT_EQ(split.slabs.size(), 2u);
  EXPECT_EQ(split.view_chunks.size(), 1u);
  ExpectCovering(split, 40, 90);
  ExpectWithinBudget(split, 4, budget - 1);
}

TEST(SlabPlanTest, SlabsCoverWithoutOverlapAndRespectTheBudget) {
  for (int bytes : {2, 4}) {
    const uint64_t view = bytes == 2 ? kView2 : kView4;
    for (uint64_t slices : {1, 2, 3, 7, 13, 39}) {
      const uint64_t budget = 90 * view + slices * kSlice + 17;
      const SlabPlan plan = PlanSlabs(Geometry(), Volume(), bytes, budget).value();
      SCOPED_TRACE(::testing::Message() << "bytes " << bytes << " slices " << slices);
      EXPECT_EQ(plan.view_chunks.size(), 1u);  // all projections fit beside a slice
      EXPECT_EQ(static_cast<uint64_t>(plan.slabs.size()), (40 + slices - 1) / slices);
      ExpectCovering(plan, 40, 90);
      ExpectWithinBudget(plan, bytes, budget);
    }
  }
}

TEST(SlabPlanTest, ChunksViewsWhenProjectionsAloneDoNotFit) {
  for (uint64_t budget : {kSlice + kView4, 2 * kSlice + 5 * kView4, 30 * kView4 + 3,
                          89 * kView4 + kSlice}) {
    SCOPED_TRACE(budget);
    const SlabPlan plan = PlanSlabs(Geometry(), Volume(), 4, budget).value();
    EXPECT_GT(plan.view_chunks.size(), 1u);
    ExpectCovering(plan, 40, 90);
    ExpectWithinBudget(plan, 4, budget);
  }
  // The smallest budget: one slice and one view per call.
  const SlabPlan smallest = PlanSlabs(Geometry(), Volume(), 4, kSlice + kView4).value();
  EXPECT_EQ(smallest.slabs.size(), 40u);
  EXPECT_EQ(smallest.view_chunks.size(), 90u);
}

TEST(SlabPlanTest, MinSlabsSharesTheVolume) {
  const SlabPlan plan = PlanSlabs(Geometry(), Volume(), 4, 0, 3).value();
  ASSERT_EQ(plan.slabs.size(), 3u);
  ExpectCovering(plan, 40, 90);
  for (const Slab& slab : plan.slabs) EXPECT_NEAR(slab.slices, 40.0 / 3, 1.0);
  // Never more slabs than slices.
  EXPECT_EQ(PlanSlabs(Geometry(), Volume(), 4, 0, 100).value().slabs.size(), 40u);
}

TEST(SlabPlanTest, RefusesABudgetBelowOneSliceAndOneView) {
  auto refused = PlanSlabs(Geometry(), Volume(), 4, kSlice + kView4 - 1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr(absl::StrCat(kSlice + kView4 - 1)));
  EXPECT_THAT(refused.status().message(), HasSubstr(absl::StrCat("minimum of ", kSlice + kView4)));
  EXPECT_EQ(PlanSlabs(Geometry(), Volume(), 3, 0).status().code(),
            absl::StatusCode::kOk);
  EXPECT_EQ(PlanSlabs(Geometry(), Volume(), 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanSlabs(Geometry(), Volume(), 4, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SlabPlanTest, SlabVolumeKeepsVoxelPositions) {
  const VolumeGeometry volume = Volume();
  for (Slab slab : {Slab{0, 40}, Slab{0, 1}, Slab{7, 4}, Slab{13, 5}, Slab{39, 1}}) {
    const VolumeGeometry part = SlabVolume(volume, slab).value();
    EXPECT_EQ(part.size().x, 64);
    EXPECT_EQ(part.size().y, 48);
    EXPECT_EQ(part.size().z, slab.slices);
    EXPECT_DOUBLE_EQ(part.center_mm().x, 1);
    EXPECT_DOUBLE_EQ(part.center_mm().y, 2);
    EXPECT_DOUBLE_EQ(part.voxel_size_mm().z, 0.5);
    for (int64_t k = 0; k < slab.slices; ++k) {
      EXPECT_NEAR(part.z_mm(static_cast<double>(k)),
                  volume.z_mm(static_cast<double>(slab.first_slice + k)), 1e-12);
    }
  }
  EXPECT_EQ(SlabVolume(volume, {38, 3}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SlabVolume(volume, {-1, 2}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SlabVolume(volume, {0, 0}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tomo::core
