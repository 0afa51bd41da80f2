// The tiled layout kept with a symmetric matrix (tiled_layout_cache.h,
// SymmetricSystemMatrix::TiledLayout): built once per tile side, the same object for every
// later call, for the matrix's copies and for callers on several threads at once; the same
// layout TiledRuns::Build gives; its bytes counted once built, in the matrix and in the
// StoredMatrix that holds it; forgotten layouts built again while holders keep theirs; a
// refused side refused again, nothing kept.
#include "core/system_matrix/tiled_layout_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "core/geometry/geometry_builders.h"
#include "core/system_matrix/stored_matrix.h"
#include "core/system_matrix/symmetric_system_matrix.h"
#include "core/system_matrix/tiled_runs.h"
#include "tests/core/system_matrix/fan_cases.h"

namespace tomo::core::system_matrix {
namespace {

SymmetricSystemMatrix OddMatrix() {
  return SymmetricSystemMatrix::Build(
             ScanOf(MakeFanCase("odd-97-grid-104-views-131-rays", OddFanCaseSpec())))
      .value();
}

TEST(TiledLayoutCacheTest, BuiltOnceAndSharedByLaterCallsAndCopies) {
  const SymmetricSystemMatrix a = OddMatrix();
  EXPECT_EQ(a.tiled_layout_bytes(), 0u);
  const std::shared_ptr<const TiledRuns> first = a.TiledLayout(16).value();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->tile_side(), 16);
  EXPECT_EQ(a.tiled_layout_bytes(), first->bytes());
  EXPECT_EQ(a.TiledLayout(16).value(), first);  // the same object, not built again
  EXPECT_EQ(a.tiled_layout_bytes(), first->bytes());

  // The layout TiledRuns::Build gives, byte for byte.
  const TiledRuns fresh = TiledRuns::Build(a, 16).value();
  ASSERT_EQ(first->weights().size(), fresh.weights().size());
  EXPECT_EQ(std::memcmp(first->weights().data(), fresh.weights().data(),
                        fresh.weights().size() * sizeof(float)),
            0);
  ASSERT_EQ(first->local().size(), fresh.local().size());
  EXPECT_EQ(std::memcmp(first->local().data(), fresh.local().data(),
                        fresh.local().size() * sizeof(uint16_t)),
            0);
  EXPECT_EQ(first->lane_rays(), fresh.lane_rays());
  EXPECT_EQ(first->orbit_warp_begin(), fresh.orbit_warp_begin());

  // Another side is another layout, counted on top.
  const std::shared_ptr<const TiledRuns> other = a.TiledLayout(7).value();
  EXPECT_NE(other, first);
  EXPECT_EQ(other->tile_side(), 7);
  EXPECT_EQ(a.tiled_layout_bytes(), first->bytes() + other->bytes());

  // A copy holds the same rows: it shares the layouts.
  const SymmetricSystemMatrix copy = a;
  EXPECT_EQ(copy.TiledLayout(16).value(), first);
  EXPECT_EQ(copy.tiled_layout_bytes(), a.tiled_layout_bytes());
}

TEST(TiledLayoutCacheTest, CallersOnSeveralThreadsShareOneBuild) {
  const SymmetricSystemMatrix a = OddMatrix();
  constexpr int kCallers = 6;
  std::vector<std::shared_ptr<const TiledRuns>> got(kCallers);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    // Half ask for side 16, half for 5, all at once.
    callers.emplace_back(
        [&a, &got, i] { got[static_cast<size_t>(i)] = a.TiledLayout(i % 2 ? 5 : 16).value(); });
  }
  for (std::thread& t : callers) t.join();
  for (int i = 2; i < kCallers; ++i)
    EXPECT_EQ(got[static_cast<size_t>(i)], got[static_cast<size_t>(i % 2)]);
  EXPECT_NE(got[0], got[1]);
  EXPECT_EQ(a.tiled_layout_bytes(), got[0]->bytes() + got[1]->bytes());
}

TEST(TiledLayoutCacheTest, ForgottenLayoutsAreBuiltAgainAndHoldersKeepTheirs) {
  const SymmetricSystemMatrix a = OddMatrix();
  const std::shared_ptr<const TiledRuns> held = a.TiledLayout(16).value();
  const uint64_t bytes = held->bytes();
  a.ForgetTiledLayouts();
  EXPECT_EQ(a.tiled_layout_bytes(), 0u);
  EXPECT_EQ(held->bytes(), bytes);  // the holder's layout is untouched
  const std::shared_ptr<const TiledRuns> rebuilt = a.TiledLayout(16).value();
  EXPECT_NE(rebuilt, held);
  EXPECT_EQ(rebuilt->weights().size(), held->weights().size());
  EXPECT_EQ(a.tiled_layout_bytes(), bytes);
}

TEST(TiledLayoutCacheTest, ARefusedSideIsRefusedAgainAndKeepsNothing) {
  const SymmetricSystemMatrix a = OddMatrix();
  for (int call = 0; call < 2; ++call) {
    const auto refused = a.TiledLayout(TiledRuns::kMaxTileSide + 1);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("tile_side"), std::string::npos) << refused.status();
  }
  EXPECT_EQ(a.tiled_layout_bytes(), 0u);
}

TEST(TiledLayoutCacheTest, AStoredMatrixHoldsItsLayoutsBytes) {
  const FanCase c = MakeFanCase("odd-97-grid-104-views-131-rays", OddFanCaseSpec());
  const StoredMatrix m =
      BuildStoredMatrix(c.geometry, c.volume, MatrixFormat::kSymmetric, /*budget_bytes=*/0).value();
  ASSERT_NE(m.symmetric(), nullptr);
  EXPECT_EQ(m.held_bytes(), m.bytes());
  const std::shared_ptr<const TiledRuns> layout = m.symmetric()->TiledLayout(16).value();
  EXPECT_EQ(m.held_bytes(), m.bytes() + layout->bytes());
  EXPECT_GT(layout->bytes(), 0u);
}

}  // namespace
}  // namespace tomo::core::system_matrix
