// The tiled layout of the symmetric format (tiled_runs.h): the tile partition is symmetric
// (every square map sends tiles onto tiles, checked pixel by pixel with MapPixel), every
// stored entry appears exactly once (its stored pixel recovered from the slot's place in
// T0 and the warp's map), each view's column bound is its largest column sum, and the layout's
// products on the CPU equal the expanded CSR matrix's for every view, on odd grids whose side is
// not a multiple of the tile's; the layout is the same byte for byte whatever the threads;
// each step's 32 lanes spread over the shared-memory banks.
//
// Tolerance: the products are float32 sums in another order (per lane and piece, then
// added); they agree with CSR's float sums to 2e-5 of the largest value.
#include "core/system_matrix/tiled_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "tests/core/random_seed.h"
#include "tests/core/system_matrix/fan_cases.h"

namespace tomo::core::system_matrix {
namespace {

std::vector<FanCase> Cases() {
  std::vector<FanCase> cases = SymmetricFanCases();
  cases.push_back(MakeFanCase("odd-97-grid-104-views-131-rays", OddFanCaseSpec()));
  return cases;
}

double MaxAbs(const std::vector<float>& v) {
  double m = 0;
  for (const float f : v) m = std::max(m, static_cast<double>(std::abs(f)));
  return m;
}

// Byte for byte: the arrays hold plain structs without padding, ints and floats.
template <typename Array>
bool SameBytes(const Array& x, const Array& y) {
  return x.size() == y.size() &&
         std::memcmp(x.data(), y.data(), x.size() * sizeof(typename Array::value_type)) == 0;
}

TEST(TiledRunsTest, PartitionIsSymmetricAndMapsSendTilesOntoTiles) {
  for (int32_t n = 1; n <= 140; ++n) {
    for (const int side : {4, 5, 16, 32}) {
      SCOPED_TRACE(std::to_string(n) + " pixels, side " + std::to_string(side));
      const std::vector<int32_t> b = TiledRuns::Partition(n, side);
      const int32_t m = static_cast<int32_t>(b.size()) - 1;
      ASSERT_GE(m, 1);
      ASSERT_EQ(b.front(), 0);
      ASSERT_EQ(b.back(), n);
      if (n % 2 == 1) {
        EXPECT_EQ(m % 2, 1);
      }
      std::vector<int32_t> tile_of(static_cast<size_t>(n));
      for (int32_t i = 0; i < m; ++i) {
        ASSERT_GE(b[static_cast<size_t>(i) + 1] - b[static_cast<size_t>(i)], 1);
        ASSERT_LE(b[static_cast<size_t>(i) + 1] - b[static_cast<size_t>(i)], side);
        for (int32_t p = b[static_cast<size_t>(i)]; p < b[static_cast<size_t>(i) + 1]; ++p)
          tile_of[static_cast<size_t>(p)] = i;
      }
      for (const SquareMap& map : kSquareMaps) {
        for (int32_t iy = 0; iy < n; ++iy) {
          for (int32_t ix = 0; ix < n; ++ix) {
            int32_t ox, oy, ti, tj;
            MapPixel(map, n, ix, iy, &ox, &oy);
            MapPixel(map, m, tile_of[static_cast<size_t>(ix)], tile_of[static_cast<size_t>(iy)],
                     &ti, &tj);
            ASSERT_EQ(tile_of[static_cast<size_t>(ox)], ti)
                << map.name << " at " << ix << ", " << iy;
            ASSERT_EQ(tile_of[static_cast<size_t>(oy)], tj)
                << map.name << " at " << ix << ", " << iy;
          }
        }
      }
    }
  }
}

TEST(TiledRunsTest, RejectsTileSidesOutOfRange) {
  const SymmetricSystemMatrix a =
      SymmetricSystemMatrix::Build(ScanOf(SymmetricFanCases().front())).value();
  for (const int side : {0, 3, 65}) {
    const absl::StatusOr<TiledRuns> t = TiledRuns::Build(a, side);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("tile_side: " + std::to_string(side)), std::string::npos)
        << t.status();
  }
}

TEST(TiledRunsTest, EveryStoredEntryOnceAndPaddingCounted) {
  for (const FanCase& c : Cases()) {
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(c)).value();
    const int32_t n = static_cast<int32_t>(a.scan().nx());
    const int64_t columns = a.scan().columns();
    // (stored view, column, pixel) -> weight, from the stored runs.
    std::map<std::tuple<int64_t, int64_t, int32_t>, float> stored;
    for (int64_t v = 0; v < a.num_blocks(); ++v) {
      for (int64_t col = 0; col < columns; ++col) {
        const size_t r = static_cast<size_t>(v * columns + col);
        for (int64_t run = a.row_run_begin()[r]; run < a.row_run_begin()[r + 1]; ++run) {
          const int32_t iy = a.row_iy_first()[r] + static_cast<int32_t>(run - a.row_run_begin()[r]);
          for (int32_t e = 0; e < a.run_length()[static_cast<size_t>(run)]; ++e) {
            const float w = a.values()[static_cast<size_t>(
                a.row_value_begin()[r] + a.run_offset()[static_cast<size_t>(run)] + e)];
            if (w != 0.0f)
              stored[{v, col, iy * n + a.run_ix_first()[static_cast<size_t>(run)] + e}] = w;
          }
        }
      }
    }
    for (const int side : {4, 7, 16, 32}) {
      SCOPED_TRACE(c.name + ", side " + std::to_string(side));
      const TiledRuns t = TiledRuns::Build(a, side).value();
      EXPECT_EQ(t.entries(), a.stored_nonzeros());
      EXPECT_EQ(t.orbit_warp_begin().size(),
                static_cast<size_t>(a.num_blocks() * t.orbits_per_view() + 1));
      // The warps tile the slots in order; a tile's planes hold T0's pixels.
      int64_t slots = 0;
      for (const TiledWarp& w : t.warps()) {
        ASSERT_EQ(w.slot_base, slots);
        slots += 32 * static_cast<int64_t>(w.steps);
      }
      ASSERT_EQ(slots, t.slots());
      EXPECT_GE(t.slots(), t.entries());
      EXPECT_EQ(t.bytes(), static_cast<uint64_t>(
                               6 * t.slots() + 6 * 32 * static_cast<int64_t>(t.warps().size()) +
                               16 * static_cast<int64_t>(t.warps().size()) +
                               8 * static_cast<int64_t>(t.orbit_warp_begin().size()) +
                               static_cast<int64_t>(sizeof(TileOrbit)) * t.orbits_per_view() +
                               4 * a.num_blocks() + 4 * a.stored_rows() +
                               4 * static_cast<int64_t>(t.tasks().tasks().size()) +
                               8 * static_cast<int64_t>(t.tasks().orbit_task_begin().size()) +
                               4 * static_cast<int64_t>(t.tasks().transpose_order().size())));
      std::map<std::tuple<int64_t, int64_t, int32_t>, float> found;
      int64_t lanes_without_ray_weighted = 0;
      for (int64_t v = 0; v < a.num_blocks(); ++v) {
        for (int64_t o = 0; o < t.orbits_per_view(); ++o) {
          const TileOrbit& orbit = t.orbits()[static_cast<size_t>(o)];
          const size_t at = static_cast<size_t>(v * t.orbits_per_view() + o);
          for (int64_t w = t.orbit_warp_begin()[at]; w < t.orbit_warp_begin()[at + 1]; ++w) {
            const TiledWarp& warp = t.warps()[static_cast<size_t>(w)];
            ASSERT_TRUE(orbit.distinct & (1 << warp.map));
            for (int l = 0; l < 32; ++l) {
              const uint32_t rays = t.lane_rays()[static_cast<size_t>(32 * w + l)];
              const int32_t change = t.lane_switch()[static_cast<size_t>(32 * w + l)];
              ASSERT_LE(change, warp.steps);
              for (int32_t s = 0; s < warp.steps; ++s) {
                const uint32_t col = s < change ? rays & 0xffffu : rays >> 16;
                const size_t slot = static_cast<size_t>(warp.slot_base + 32 * s + l);
                const float weight = t.weights()[slot];
                const int32_t lx0 = t.local()[slot] % t.stride(),
                              ly0 = t.local()[slot] / t.stride();
                ASSERT_LT(lx0, orbit.size_x);
                ASSERT_LT(ly0, orbit.size_y);
                if (weight == 0.0f) continue;
                if (col == kTiledNoRay) {
                  ++lanes_without_ray_weighted;
                  continue;
                }
                int32_t px, py;  // the stored pixel: M_g of the slot's pixel of T0
                MapPixel(kSquareMaps[static_cast<size_t>(warp.map)], n, orbit.corner_x[0] + lx0,
                         orbit.corner_y[0] + ly0, &px, &py);
                const auto key = std::make_tuple(v, static_cast<int64_t>(col), py * n + px);
                ASSERT_EQ(found.count(key), 0u) << "entry placed twice";
                found[key] = weight;
              }
            }
          }
        }
      }
      EXPECT_EQ(lanes_without_ray_weighted, 0);
      EXPECT_EQ(found, stored);
      // The column bound: the largest sum of |weight| over a view's rays at one pixel.
      ASSERT_EQ(t.column_bound().size(), static_cast<size_t>(a.num_blocks()));
      for (int64_t v = 0; v < a.num_blocks(); ++v) {
        std::map<int32_t, double> column;
        for (const auto& [key, weight] : stored) {
          if (std::get<0>(key) == v) column[std::get<2>(key)] += std::abs(weight);
        }
        double largest = 0;
        for (const auto& [pixel, sum] : column) largest = std::max(largest, sum);
        EXPECT_NEAR(t.column_bound()[static_cast<size_t>(v)], largest, 1e-5 * largest)
            << "view " << v;
      }
    }
  }
}

TEST(TiledRunsTest, ProductsEqualTheCsrMatrixForEveryView) {
  std::mt19937_64 random(testing::TestSeed());
  std::uniform_real_distribution<float> value(-1.0f, 2.0f);
  for (const FanCase& c : Cases()) {
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(c)).value();
    const CsrSystemMatrix csr = a.ExpandToCsr();
    const int64_t columns = a.scan().columns();
    const int64_t pixels = a.scan().nx() * a.scan().ny();
    std::vector<float> x(static_cast<size_t>(pixels)), z(static_cast<size_t>(csr.rows()));
    for (float& f : x) f = value(random);
    for (float& f : z) f = value(random);
    std::vector<float> y_csr(static_cast<size_t>(csr.rows())),
        back_csr(static_cast<size_t>(pixels));
    csr.Multiply(x.data(), y_csr.data());
    csr.MultiplyTransposed(z.data(), back_csr.data());
    for (const int side : {5, 16, 32}) {
      SCOPED_TRACE(c.name + ", side " + std::to_string(side));
      const TiledRuns t = TiledRuns::Build(a, side).value();
      std::vector<float> y(static_cast<size_t>(csr.rows()));
      std::vector<float> back(static_cast<size_t>(pixels), 0.0f);
      std::vector<float> block(8 * static_cast<size_t>(columns));
      for (int64_t b = 0; b < a.num_blocks(); ++b) {
        const std::vector<int64_t>& views = a.BlockViews(b);
        t.ForwardBlock(a, b, x.data(), block.data());
        for (size_t k = 0; k < views.size(); ++k) {
          std::copy(block.begin() + static_cast<int64_t>(k) * columns,
                    block.begin() + static_cast<int64_t>(k + 1) * columns,
                    y.begin() + views[k] * columns);
        }
        for (size_t k = 0; k < views.size(); ++k) {
          std::copy(z.begin() + views[k] * columns, z.begin() + (views[k] + 1) * columns,
                    block.begin() + static_cast<int64_t>(k) * columns);
        }
        t.BackBlockAdd(a, b, block.data(), back.data());
      }
      const double y_scale = MaxAbs(y_csr), back_scale = MaxAbs(back_csr);
      ASSERT_GT(y_scale, 0);
      ASSERT_GT(back_scale, 0);
      for (int64_t i = 0; i < csr.rows(); ++i) {
        ASSERT_NEAR(y[static_cast<size_t>(i)], y_csr[static_cast<size_t>(i)], 2e-5 * y_scale)
            << "view " << i / columns << ", column " << i % columns;
      }
      for (int64_t p = 0; p < pixels; ++p) {
        ASSERT_NEAR(back[static_cast<size_t>(p)], back_csr[static_cast<size_t>(p)],
                    2e-5 * back_scale)
            << "pixel " << p % a.scan().nx() << ", " << p / a.scan().nx();
      }
    }
  }
}

// The build splits the stored views among threads and writes each view's part in place; the
// layout must not depend on how they were split (nor on the order the threads finish).
TEST(TiledRunsTest, TheLayoutIsTheSameOnAnyNumberOfThreads) {
  for (const FanCase& c : Cases()) {
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(ScanOf(c)).value();
    for (const int side : {4, 7, 16}) {
      const TiledRuns serial = TiledRuns::Build(a, side, /*threads=*/1).value();
      for (const int threads : {2, 3, 7}) {
        SCOPED_TRACE(c.name + ", side " + std::to_string(side) + ", " + std::to_string(threads) +
                     " threads");
        const TiledRuns t = TiledRuns::Build(a, side, threads).value();
        EXPECT_TRUE(SameBytes(t.bounds(), serial.bounds()));
        EXPECT_TRUE(SameBytes(t.orbits(), serial.orbits()));
        EXPECT_TRUE(SameBytes(t.orbit_warp_begin(), serial.orbit_warp_begin()));
        EXPECT_TRUE(SameBytes(t.warps(), serial.warps()));
        EXPECT_TRUE(SameBytes(t.lane_rays(), serial.lane_rays()));
        EXPECT_TRUE(SameBytes(t.lane_switch(), serial.lane_switch()));
        EXPECT_TRUE(SameBytes(t.local(), serial.local()));
        EXPECT_TRUE(SameBytes(t.weights(), serial.weights()));
        EXPECT_TRUE(SameBytes(t.column_bound(), serial.column_bound()));
        EXPECT_EQ(t.entries(), serial.entries());
        EXPECT_EQ(t.ray_segments(), serial.ray_segments());
        EXPECT_EQ(t.gather_wavefronts(), serial.gather_wavefronts());
        EXPECT_EQ(t.atomic_wavefronts(), serial.atomic_wavefronts());
        EXPECT_EQ(t.bytes(), serial.bytes());
      }
    }
  }
}

// The 32 lanes of a step spread over the banks: the layout's steps, counted here from its
// places (bank = place mod 32), take on average at most 1.3 wavefronts at tile side 16 and
// 1.85 at sides 8 and 32 for the gathers (distinct places in the busiest bank) and the
// atomic adds (lanes in the busiest bank); they took 1.21-1.25 and 1.57-1.80 when this test
// was written. Choosing each lane's entry by itself (the least used bank among its next
// eight, before the steps were matched to banks) took 1.72-1.80 at side 16 and 1.92-2.16 at
// the others. The layout's own counts are these.
TEST(TiledRunsTest, StepsSpreadTheirLanesOverTheBanks) {
  // Rays denser than the pixels, as in a scanner's scan (about 1.2 columns per pixel).
  FanCaseSpec dense;
  dense.views = 64;
  dense.first_angle_rad = M_PI / 64;
  dense.n = 128;
  dense.pixel_mm = 0.35;
  dense.columns = 256;
  dense.column_spacing_mm = 0.45;
  const SymmetricSystemMatrix a =
      SymmetricSystemMatrix::Build(ScanOf(MakeFanCase("dense-128", dense))).value();
  for (const int side : {8, 16, 32}) {
    SCOPED_TRACE("side " + std::to_string(side));
    const TiledRuns t = TiledRuns::Build(a, side).value();
    int64_t steps = 0, gather = 0, atomic = 0;
    for (const TiledWarp& w : t.warps()) {
      for (int32_t s = 0; s < w.steps; ++s) {
        std::map<int, std::set<int>> places_in_bank;
        std::map<int, int> lanes_in_bank;
        for (int l = 0; l < 32; ++l) {
          const int place = t.local()[static_cast<size_t>(w.slot_base + 32 * s + l)];
          places_in_bank[place % 32].insert(place);
          ++lanes_in_bank[place % 32];
        }
        size_t most_places = 0;
        int most_lanes = 0;
        for (const auto& [bank, places] : places_in_bank) {
          most_places = std::max(most_places, places.size());
        }
        for (const auto& [bank, lanes] : lanes_in_bank) most_lanes = std::max(most_lanes, lanes);
        ++steps;
        gather += static_cast<int64_t>(most_places);
        atomic += most_lanes;
      }
    }
    EXPECT_EQ(gather, t.gather_wavefronts());
    EXPECT_EQ(atomic, t.atomic_wavefronts());
    ASSERT_GT(steps, 0);
    const double most = side == 16 ? 1.3 : 1.85;
    EXPECT_LE(static_cast<double>(gather) / static_cast<double>(steps), most);
    EXPECT_LE(static_cast<double>(atomic) / static_cast<double>(steps), most);
  }
}

// The count a job's admission uses equals the built layout's bytes, for odd and even grids,
// pixel sizes off 1 mm, and tile sides that do and do not divide the grid; and it refuses
// what Build refuses.
TEST(TiledRunsTest, CountedBytesEqualTheBuiltLayouts) {
  for (const FanCase& c : Cases()) {
    const FanScan scan = ScanOf(c);
    const SymmetricSystemMatrix a = SymmetricSystemMatrix::Build(scan).value();
    for (const int side : {4, 5, 7, 16, 32}) {
      SCOPED_TRACE(c.name + ", side " + std::to_string(side));
      const absl::StatusOr<uint64_t> counted = TiledRuns::CountBytes(scan, side, /*threads=*/3);
      ASSERT_TRUE(counted.ok()) << counted.status();
      EXPECT_EQ(*counted, TiledRuns::Build(a, side).value().bytes());
    }
    // Side 0: the side a job's layout takes.
    EXPECT_EQ(TiledRuns::CountBytes(scan, 0).value(),
              a.TiledLayout().value()->bytes());
  }
  const absl::StatusOr<uint64_t> bad_side =
      TiledRuns::CountBytes(ScanOf(SymmetricFanCases().front()), 65);
  EXPECT_EQ(bad_side.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_side.status().message().find("tile_side: 65"), std::string::npos);
  const absl::StatusOr<uint64_t> asymmetric =
      TiledRuns::CountBytes(ScanOf(AsymmetricFanCases().front()), 16);
  EXPECT_EQ(asymmetric.status().code(), absl::StatusCode::kFailedPrecondition)
      << asymmetric.status();
}

}  // namespace
}  // namespace tomo::core::system_matrix
