// Tests of ZVoxelGroups (core/statistical/z_voxel_groups.cc): every group found has zero
// correlation in every view, checked by brute force on the voxels' full footprints
// (SeparableFootprintProjector::VoxelFootprint: sets of detector pixels intersected), not
// by the stride rule that finds them; the groups partition each column; the single-voxel
// mode gives groups of one.
#include "core/statistical/z_voxel_groups.h"

#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/geometry/geometry_builders.h"
#include "gtest/gtest.h"
#include "tests/core/random_arrays.h"
#include "tests/core/random_seed.h"

namespace tomo::core::statistical {
namespace {

struct Case {
  std::string name;
  VectorGeometry geometry;
  VolumeGeometry volume;
};

std::vector<Case> Cases(std::mt19937_64& random) {
  std::uniform_real_distribution<double> pixel(0.6, 1.4), voxel(0.3, 0.9);
  FanConeOptions cone;
  cone.detector = {31, 41, pixel(random), pixel(random), 0.7, -1.3};
  cone.source_origin_mm = 50;
  cone.origin_detector_mm = 40;
  cone.angles_rad = testing::RandomAngles(17, random);
  std::vector<Case> cases;
  cases.push_back({"circular cone", MakeCircularCone(cone).value(),
                   VolumeGeometry::Create({9, 11, 26}, {voxel(random), voxel(random), voxel(random)},
                                          {0.5, -0.4, 0.3})
                       .value()});
  HelicalOptions helical;
  helical.cone = cone;
  helical.cone.angles_rad = UniformAnglesRad(23, 0.3, 6 * M_PI);
  helical.pitch_mm_per_turn = 7;
  helical.z_start_mm = -8;
  cases.push_back({"helical cone", MakeHelicalCone(helical).value(),
                   VolumeGeometry::Create({10, 7, 30}, {voxel(random), voxel(random), voxel(random)},
                                          {-0.3, 0.2, 0.1})
                       .value()});
  return cases;
}

TEST(ZVoxelGroupsTest, EveryGroupHasZeroCorrelationInEveryView) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  for (const Case& c : Cases(random)) {
    SCOPED_TRACE(c.name);
    const auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume).value();
    const ZVoxelGroups groups = ZVoxelGroups::Find(sf, GroupingMode::kMultiVoxel);
    const Size3& n = c.volume.size();
    int64_t voxels_checked = 0;
    for (int64_t iy = 0; iy < n.y; ++iy) {
      for (int64_t ix = 0; ix < n.x; ++ix) {
        std::vector<int> seen(static_cast<size_t>(n.z), 0);
        for (int64_t g = 0; g < groups.GroupCount(ix, iy); ++g) {
          // Pixels (view, row, column) touched by the group's voxels so far.
          std::set<std::tuple<int64_t, int64_t, int64_t>> touched;
          for (int64_t iz : groups.Voxels(ix, iy, g)) {
            ++seen[static_cast<size_t>(iz)];
            ++voxels_checked;
            for (const FootprintEntry& e : sf.VoxelFootprint(ix, iy, iz)) {
              ASSERT_TRUE(touched.insert({e.view, e.row, e.column}).second)
                  << "column (" << ix << ", " << iy << ") group " << g << ": voxel " << iz
                  << " shares pixel (view " << e.view << ", row " << e.row << ", column "
                  << e.column << ") with another voxel of its group";
            }
          }
        }
        for (int64_t iz = 0; iz < n.z; ++iz) {
          ASSERT_EQ(seen[static_cast<size_t>(iz)], 1) << "slice " << iz << " of column ("
                                                       << ix << ", " << iy << ")";
        }
      }
    }
    EXPECT_EQ(voxels_checked, c.volume.voxel_count());
    std::printf("[ measure ] %s: %lld groups for %lld voxels, mean size %.2f, largest %lld\n",
                c.name.c_str(), static_cast<long long>(groups.total_groups()),
                static_cast<long long>(c.volume.voxel_count()), groups.mean_group_size(),
                static_cast<long long>(groups.max_group_size()));
    EXPECT_GT(groups.mean_group_size(), 2.0);
  }
}

// The brute-force check above can fail: voxels one slice apart always share rows, and the
// check sees it.
TEST(ZVoxelGroupsTest, TheBruteForceCheckSeesNeighbouringSlicesCorrelate) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const Case c = std::move(Cases(random)[0]);
  const auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume).value();
  std::set<std::tuple<int64_t, int64_t, int64_t>> touched;
  for (const FootprintEntry& e : sf.VoxelFootprint(4, 5, 10)) touched.insert({e.view, e.row, e.column});
  int shared = 0;
  for (const FootprintEntry& e : sf.VoxelFootprint(4, 5, 11)) {
    shared += touched.count({e.view, e.row, e.column}) > 0;
  }
  EXPECT_GT(shared, 0);
}

TEST(ZVoxelGroupsTest, SingleVoxelModeGivesGroupsOfOne) {
  const uint64_t seed = tomo::testing::TestSeed();
  SCOPED_TRACE(tomo::testing::SeedTrace(seed));
  std::mt19937_64 random(seed);
  const Case c = std::move(Cases(random)[1]);
  const auto sf = SeparableFootprintProjector::Create(c.geometry, c.volume).value();
  const ZVoxelGroups groups = ZVoxelGroups::Find(sf, GroupingMode::kSingleVoxel);
  EXPECT_EQ(groups.total_groups(), c.volume.voxel_count());
  EXPECT_EQ(groups.max_group_size(), 1);
  EXPECT_EQ(groups.Voxels(3, 2, 7), std::vector<int64_t>{7});
}

}  // namespace
}  // namespace tomo::core::statistical
