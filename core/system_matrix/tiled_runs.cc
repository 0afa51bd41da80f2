#include "core/system_matrix/tiled_runs.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/system_matrix/square_symmetry.h"

namespace tomo::core::system_matrix {
namespace {

// One stored entry of one tile: its ray, its place in T0 (ly0 * stride + lx0), its weight.
struct TileEntry {
  int32_t column;
  uint16_t local;
  float weight;
};

// Entries a lane looks ahead to find one in a free bank.
constexpr size_t kScheduleWindow = 8;

// One stored view's part of the layout, before the views are joined.
struct ViewTiles {
  std::vector<int64_t> orbit_warp_count;  // per orbit
  std::vector<TiledWarp> warps;           // slot_base relative to the view's first slot
  std::vector<uint32_t> lane_rays;
  std::vector<uint16_t> lane_switch, local;
  std::vector<float> weights;
  int64_t entries = 0, ray_segments = 0, gather_wavefronts = 0, atomic_wavefronts = 0;
  float column_bound = 0;
};

// The most distinct addresses (gather) and lanes (atomic add) in one of 32 banks.
void CountWavefronts(const uint16_t* step, int64_t* gather, int64_t* atomic) {
  std::array<int, 32> lanes{};
  std::array<std::array<int, 32>, 32> seen{};
  std::array<int, 32> distinct{};
  for (int l = 0; l < 32; ++l) {
    const int bank = step[l] % 32;
    ++lanes[static_cast<size_t>(bank)];
    bool repeat = false;
    for (int e = 0; e < distinct[static_cast<size_t>(bank)]; ++e) {
      repeat = repeat || seen[static_cast<size_t>(bank)][static_cast<size_t>(e)] == step[l];
    }
    if (!repeat)
      seen[static_cast<size_t>(bank)][static_cast<size_t>(distinct[static_cast<size_t>(bank)]++)] =
          step[l];
  }
  *gather += *std::max_element(distinct.begin(), distinct.end());
  *atomic += *std::max_element(lanes.begin(), lanes.end());
}

// The lanes of one tile: its rays' entries (grouped by ray, rays ascending) cut into
// pieces of at most `length` entries and paired (the longest piece with the shortest that
// fits beside it), appended to `out` (warps' map = `map`) when they fit 32 x warps lanes;
// false when they do not.
struct Piece {
  int32_t column;
  int64_t begin, count;
};
struct Lane {
  Piece first, second;  // second.count 0: none
  int64_t count() const { return first.count + second.count; }
};

bool PairPieces(const std::vector<Piece>& rays, int64_t length, int64_t lanes,
                std::vector<Lane>* packed) {
  std::vector<Piece> pieces;
  for (const Piece& r : rays) {
    const int64_t parts = (r.count + length - 1) / length;
    for (int64_t j = 0; j < parts; ++j) {
      const int64_t b = r.count * j / parts, e = r.count * (j + 1) / parts;
      pieces.push_back({r.column, r.begin + b, e - b});
    }
  }
  std::stable_sort(pieces.begin(), pieces.end(),
                   [](const Piece& p, const Piece& q) { return p.count > q.count; });
  packed->clear();
  size_t i = 0, j = pieces.size();
  while (i < j) {
    Lane lane{pieces[i++], Piece{0, 0, 0}};
    if (i < j && lane.first.count + pieces[j - 1].count <= length) lane.second = pieces[--j];
    packed->push_back(lane);
    if (static_cast<int64_t>(packed->size()) > lanes) return false;
  }
  return true;
}

void PackTile(const std::vector<TileEntry>& entries, int map, const TileOrbit& orbit, int stride,
              ViewTiles& out) {
  if (entries.empty()) return;
  std::vector<Piece> rays;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (rays.empty() || rays.back().column != entries[i].column) {
      rays.push_back({entries[i].column, static_cast<int64_t>(i), 0});
    }
    ++rays.back().count;
  }
  const int64_t warps = (static_cast<int64_t>(rays.size()) + 31) / 32;
  const int64_t lanes = 32 * warps;
  const int64_t total = static_cast<int64_t>(entries.size());
  // The shortest lane length whose pieces, paired, fit the lanes.
  std::vector<Lane> packed;
  for (int64_t length = std::max<int64_t>(1, (total + lanes - 1) / lanes);; ++length) {
    if (PairPieces(rays, length, lanes, &packed)) break;
  }
  std::stable_sort(packed.begin(), packed.end(),
                   [](const Lane& p, const Lane& q) { return p.count() > q.count(); });
  // A pixel of T0 in each of the 32 banks (-1: none; small tiles miss some).
  std::array<int32_t, 32> bank_place;
  bank_place.fill(-1);
  for (int32_t ly = orbit.size_y - 1; ly >= 0; --ly) {
    for (int32_t lx = orbit.size_x - 1; lx >= 0; --lx)
      bank_place[static_cast<size_t>((ly * stride + lx) % 32)] = ly * stride + lx;
  }
  for (int64_t w = 0; w < warps; ++w) {
    const int64_t first = 32 * w;
    const int64_t steps = first < static_cast<int64_t>(packed.size())
                              ? packed[static_cast<size_t>(first)].count()
                              : 0;
    TiledWarp warp;
    warp.slot_base = static_cast<int64_t>(out.weights.size());
    warp.steps = static_cast<int32_t>(steps);
    warp.map = map;
    out.warps.push_back(warp);
    out.weights.resize(out.weights.size() + static_cast<size_t>(32 * steps), 0.0f);
    out.local.resize(out.local.size() + static_cast<size_t>(32 * steps), 0);
    // Each lane's entries, placed step by step: at each step a lane takes, of its next
    // kScheduleWindow entries of the same ray, the one in the least used bank at this step
    // (the first of them on a tie), so that the 32 lanes of a step spread over the banks
    // (the order of a lane's entries does not change its sum). A lane that has run out (or
    // has no ray) pads with weight 0 at a pixel of T0 in the least used bank.
    std::array<std::vector<TileEntry>, 32> remaining;
    for (int l = 0; l < 32; ++l) {
      const int64_t p = first + l;
      const bool has = p < static_cast<int64_t>(packed.size());
      const Lane lane = has ? packed[static_cast<size_t>(p)] : Lane{};
      out.lane_rays.push_back(
          has ? static_cast<uint32_t>(lane.first.column) |
                    (static_cast<uint32_t>(lane.second.count > 0 ? lane.second.column : kTiledNoRay)
                     << 16)
              : (uint32_t{kTiledNoRay} | (uint32_t{kTiledNoRay} << 16)));
      out.lane_switch.push_back(static_cast<uint16_t>(has ? lane.first.count : 0));
      if (!has) continue;
      out.ray_segments += lane.second.count > 0 ? 2 : 1;
      std::vector<TileEntry>& list = remaining[static_cast<size_t>(l)];
      list.assign(entries.begin() + lane.first.begin,
                  entries.begin() + lane.first.begin + lane.first.count);
      list.insert(list.end(), entries.begin() + lane.second.begin,
                  entries.begin() + lane.second.begin + lane.second.count);
    }
    for (int64_t s = 0; s < steps; ++s) {
      std::array<int, 32> used{};
      std::array<char, 32> placed{};
      const size_t step = static_cast<size_t>(warp.slot_base + 32 * s);
      for (int l = 0; l < 32; ++l) {
        std::vector<TileEntry>& lane = remaining[static_cast<size_t>(l)];
        if (lane.empty()) continue;
        size_t pick = 0;
        for (size_t j = 1; j < std::min<size_t>(lane.size(), kScheduleWindow); ++j) {
          if (lane[j].column != lane[0].column) break;
          if (used[lane[j].local % 32] < used[lane[pick].local % 32]) pick = j;
        }
        out.weights[step + static_cast<size_t>(l)] = lane[pick].weight;
        out.local[step + static_cast<size_t>(l)] = lane[pick].local;
        ++used[lane[pick].local % 32];
        lane.erase(lane.begin() + static_cast<int64_t>(pick));
        placed[static_cast<size_t>(l)] = 1;
      }
      for (int l = 0; l < 32; ++l) {
        if (placed[static_cast<size_t>(l)]) continue;
        int bank = 0;  // the least used bank that holds a pixel of T0
        for (int b = 0; b < 32; ++b) {
          if (bank_place[static_cast<size_t>(b)] >= 0 &&
              (bank_place[static_cast<size_t>(bank)] < 0 ||
               used[static_cast<size_t>(b)] < used[static_cast<size_t>(bank)])) {
            bank = b;
          }
        }
        out.local[step + static_cast<size_t>(l)] =
            static_cast<uint16_t>(bank_place[static_cast<size_t>(bank)]);
        ++used[static_cast<size_t>(bank)];
      }
      CountWavefronts(&out.local[step], &out.gather_wavefronts, &out.atomic_wavefronts);
    }
  }
  out.entries += total;
}

}  // namespace


int TiledRuns::TileSideFor(int64_t n) { return n <= 1024 ? 16 : 32; }

std::vector<int32_t> TiledRuns::Partition(int32_t n, int tile_side) {
  int32_t m = std::max<int32_t>(1, (n + tile_side - 1) / tile_side);
  if (n % 2 == 1 && m % 2 == 0) ++m;
  for (;; m += n % 2 == 1 ? 2 : 1) {
    std::vector<int32_t> b(static_cast<size_t>(m) + 1);
    for (int32_t i = 0; i <= m; ++i) {
      if (2 * i < m)
        b[static_cast<size_t>(i)] = static_cast<int32_t>(static_cast<int64_t>(i) * n / m);
      if (2 * i == m) b[static_cast<size_t>(i)] = n / 2;
    }
    for (int32_t i = 0; i <= m; ++i) {
      if (2 * i > m) b[static_cast<size_t>(i)] = n - b[static_cast<size_t>(m - i)];
    }
    bool fits = true;
    for (int32_t i = 0; i < m; ++i) {
      const int32_t size = b[static_cast<size_t>(i) + 1] - b[static_cast<size_t>(i)];
      fits = fits && size >= 1 && size <= tile_side;
    }
    if (fits) return b;
  }
}

absl::StatusOr<TiledRuns> TiledRuns::Build(const SymmetricSystemMatrix& a, int tile_side,
                                           int threads) {
  if (tile_side < kMinTileSide || tile_side > kMaxTileSide) {
    return absl::InvalidArgumentError(absl::StrCat("tile_side: ", tile_side, " must be in [",
                                                   kMinTileSide, ", ", kMaxTileSide, "]"));
  }
  if (a.scan().columns() >= kTiledNoRay) {
    return absl::InvalidArgumentError(absl::StrCat(
        "columns: ", a.scan().columns(), " must be below ", kTiledNoRay, " for the tiled layout"));
  }
  TiledRuns t;
  t.tile_side_ = tile_side;
  t.n_ = static_cast<int32_t>(a.scan().nx());
  t.columns_ = static_cast<int32_t>(a.scan().columns());
  t.bounds_ = Partition(t.n_, tile_side);
  const int32_t n = t.n_, m = static_cast<int32_t>(t.bounds_.size()) - 1, stride = t.stride();
  std::vector<int32_t> tile_of(static_cast<size_t>(n));
  for (int32_t i = 0; i < m; ++i) {
    for (int32_t p = t.bounds_[static_cast<size_t>(i)]; p < t.bounds_[static_cast<size_t>(i) + 1];
         ++p) {
      tile_of[static_cast<size_t>(p)] = i;
    }
  }
  // Orbits of tiles; for every tile its orbit and the first map g with tile = M_g(T0).
  std::vector<int32_t> orbit_of(static_cast<size_t>(m) * m, -1),
      map_of(static_cast<size_t>(m) * m, -1);
  for (int32_t tj = 0; tj < m; ++tj) {
    for (int32_t ti = 0; ti < m; ++ti) {
      const int32_t ci = 2 * ti - (m - 1), cj = 2 * tj - (m - 1);
      if (!(cj >= 0 && ci >= cj)) continue;
      const int32_t o = static_cast<int32_t>(t.orbits_.size());
      TileOrbit orbit;
      orbit.size_x = t.bounds_[static_cast<size_t>(ti) + 1] - t.bounds_[static_cast<size_t>(ti)];
      orbit.size_y = t.bounds_[static_cast<size_t>(tj) + 1] - t.bounds_[static_cast<size_t>(tj)];
      for (int h = 0; h < 8; ++h) {
        int32_t ui, uj;
        MapPixel(kSquareMaps[static_cast<size_t>(h)], m, ti, tj, &ui, &uj);
        orbit.corner_x[h] = t.bounds_[static_cast<size_t>(ui)];
        orbit.corner_y[h] = t.bounds_[static_cast<size_t>(uj)];
        const size_t tile = static_cast<size_t>(uj) * m + ui;
        if (orbit_of[tile] < 0) {
          orbit_of[tile] = o;
          map_of[tile] = h;
          orbit.distinct |= 1 << h;
        }
      }
      t.orbits_.push_back(orbit);
    }
  }
  const int64_t views = a.num_blocks();
  const int64_t orbits = t.orbits_per_view();
  const StoredRows& s = a.rows();
  std::vector<ViewTiles> built(static_cast<size_t>(views));
  ParallelFor(
      views,
      [&](int64_t v0, int64_t v1) {
        std::vector<std::vector<TileEntry>> tiles(static_cast<size_t>(m) * m);
        std::vector<float> column_sum(static_cast<size_t>(n) * n);
        for (int64_t v = v0; v < v1; ++v) {
          for (auto& tile : tiles) tile.clear();
          std::fill(column_sum.begin(), column_sum.end(), 0.0f);
          for (int32_t c = 0; c < t.columns_; ++c) {
            const size_t r = static_cast<size_t>(v * t.columns_ + c);
            ForEachRowEntry(s, r, [&](int32_t ix, int32_t iy, float w) {
              const size_t tile = static_cast<size_t>(tile_of[static_cast<size_t>(iy)]) * m +
                                  tile_of[static_cast<size_t>(ix)];
              const int g = map_of[tile];
              const TileOrbit& orbit = t.orbits_[static_cast<size_t>(orbit_of[tile])];
              int32_t x0, y0;  // the stored pixel mapped back into T0
              MapPixel(kSquareMaps[static_cast<size_t>(InverseSquareMap(g))], n, ix, iy, &x0,
                       &y0);
              const int32_t lx0 = x0 - orbit.corner_x[0], ly0 = y0 - orbit.corner_y[0];
              tiles[tile].push_back({c, static_cast<uint16_t>(ly0 * stride + lx0), w});
              column_sum[static_cast<size_t>(iy) * n + ix] += std::abs(w);
            });
          }
          ViewTiles& out = built[static_cast<size_t>(v)];
          out.column_bound = *std::max_element(column_sum.begin(), column_sum.end());
          for (int64_t o = 0; o < orbits; ++o) {
            const TileOrbit& orbit = t.orbits_[static_cast<size_t>(o)];
            const size_t before = out.warps.size();
            for (int h = 0; h < 8; ++h) {
              if (!(orbit.distinct & (1 << h))) continue;
              const size_t tile =
                  static_cast<size_t>(tile_of[static_cast<size_t>(orbit.corner_y[h])]) * m +
                  tile_of[static_cast<size_t>(orbit.corner_x[h])];
              PackTile(tiles[tile], h, orbit, stride, out);
            }
            out.orbit_warp_count.push_back(static_cast<int64_t>(out.warps.size() - before));
          }
        }
      },
      threads);
  // Join the views.
  int64_t slots = 0, warps = 0;
  for (const ViewTiles& v : built) {
    slots += static_cast<int64_t>(v.weights.size());
    warps += static_cast<int64_t>(v.warps.size());
  }
  t.weights_.reserve(static_cast<size_t>(slots));
  t.local_.reserve(static_cast<size_t>(slots));
  t.warps_.reserve(static_cast<size_t>(warps));
  t.lane_rays_.reserve(static_cast<size_t>(32 * warps));
  t.lane_switch_.reserve(static_cast<size_t>(32 * warps));
  t.orbit_warp_begin_.push_back(0);
  for (ViewTiles& v : built) {
    const int64_t base = static_cast<int64_t>(t.weights_.size());
    for (TiledWarp w : v.warps) {
      w.slot_base += base;
      t.warps_.push_back(w);
    }
    for (const int64_t count : v.orbit_warp_count) {
      t.orbit_warp_begin_.push_back(t.orbit_warp_begin_.back() + count);
    }
    t.weights_.insert(t.weights_.end(), v.weights.begin(), v.weights.end());
    t.local_.insert(t.local_.end(), v.local.begin(), v.local.end());
    t.lane_rays_.insert(t.lane_rays_.end(), v.lane_rays.begin(), v.lane_rays.end());
    t.lane_switch_.insert(t.lane_switch_.end(), v.lane_switch.begin(), v.lane_switch.end());
    t.column_bound_.push_back(v.column_bound);
    t.entries_ += v.entries;
    t.ray_segments_ += v.ray_segments;
    t.gather_wavefronts_ += v.gather_wavefronts;
    t.atomic_wavefronts_ += v.atomic_wavefronts;
    v = ViewTiles{};
  }
  t.row_norm_bytes_ = a.stored_rows() * 4;
  return t;
}

uint64_t TiledRuns::bytes() const {
  return static_cast<uint64_t>(weights_.size()) * 4 + local_.size() * 2 + lane_rays_.size() * 4 +
         lane_switch_.size() * 2 + warps_.size() * sizeof(TiledWarp) +
         orbit_warp_begin_.size() * 8 + orbits_.size() * sizeof(TileOrbit) +
         column_bound_.size() * 4 + static_cast<uint64_t>(row_norm_bytes_);
}

void TiledRuns::ForwardBlock(const SymmetricSystemMatrix& a, int64_t block, const float* x,
                             float* y) const {
  const std::vector<int64_t>& views = a.BlockViews(block);
  const int count = static_cast<int>(views.size());
  std::fill(y, y + static_cast<int64_t>(count) * columns_, 0.0f);
  const int64_t plane = static_cast<int64_t>(tile_side_) * stride();
  std::vector<float> xs(static_cast<size_t>(8 * plane));
  for (int64_t o = 0; o < orbits_per_view(); ++o) {
    const TileOrbit& orbit = orbits_[static_cast<size_t>(o)];
    // x over the orbit's tiles, each in T0's frame (as the kernel's shared memory).
    for (int h = 0; h < 8; ++h) {
      const SquareMap& map = kSquareMaps[static_cast<size_t>(h)];
      const bool swaps = map.xx == 0;
      const int ux = swaps ? orbit.size_y : orbit.size_x, uy = swaps ? orbit.size_x : orbit.size_y;
      for (int ly = 0; ly < uy; ++ly) {
        for (int lx = 0; lx < ux; ++lx) {
          int lx0, ly0;
          TileLocalToRepresentative(map.xx, map.xy, map.yx, map.yy, orbit.size_x, orbit.size_y, lx,
                                    ly, &lx0, &ly0);
          xs[static_cast<size_t>(h * plane + ly0 * stride() + lx0)] =
              x[static_cast<int64_t>(orbit.corner_y[h] + ly) * n_ + orbit.corner_x[h] + lx];
        }
      }
    }
    const int64_t at = block * orbits_per_view() + o;
    for (int64_t w = orbit_warp_begin_[static_cast<size_t>(at)];
         w < orbit_warp_begin_[static_cast<size_t>(at) + 1]; ++w) {
      const TiledWarp& warp = warps_[static_cast<size_t>(w)];
      int64_t h_plane[8];
      for (int k = 0; k < count; ++k) {
        h_plane[k] =
            plane * ComposeSquareMaps(
                        a.symmetry().views[static_cast<size_t>(views[static_cast<size_t>(k)])].map,
                        warp.map);
      }
      for (int l = 0; l < 32; ++l) {
        const uint32_t rays = lane_rays_[static_cast<size_t>(32 * w + l)];
        const int32_t change = lane_switch_[static_cast<size_t>(32 * w + l)];
        float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        // Adds the lane's sums to its ray c and starts again (at the switch and the end).
        const auto flush = [&](uint32_t c) {
          for (int k = 0; k < count; ++k) {
            if (c != kTiledNoRay) {
              const bool reversed = a.symmetry()
                                        .views[static_cast<size_t>(views[static_cast<size_t>(k)])]
                                        .columns_reversed;
              y[static_cast<int64_t>(k) * columns_ + (reversed ? columns_ - 1 - c : c)] += sums[k];
            }
            sums[k] = 0;
          }
        };
        for (int32_t step = 0; step < warp.steps; ++step) {
          if (step == change) flush(rays & 0xffffu);
          const size_t slot = static_cast<size_t>(warp.slot_base + 32 * step + l);
          for (int k = 0; k < count; ++k)
            sums[k] += weights_[slot] * xs[static_cast<size_t>(h_plane[k] + local_[slot])];
        }
        flush(change < warp.steps ? rays >> 16 : rays & 0xffffu);
      }
    }
  }
}

void TiledRuns::BackBlockAdd(const SymmetricSystemMatrix& a, int64_t block, const float* z,
                             float* x) const {
  const std::vector<int64_t>& views = a.BlockViews(block);
  const int count = static_cast<int>(views.size());
  const int64_t plane = static_cast<int64_t>(tile_side_) * stride();
  std::vector<float> acc(static_cast<size_t>(8 * plane));
  for (int64_t o = 0; o < orbits_per_view(); ++o) {
    const TileOrbit& orbit = orbits_[static_cast<size_t>(o)];
    std::fill(acc.begin(), acc.end(), 0.0f);
    const int64_t at = block * orbits_per_view() + o;
    for (int64_t w = orbit_warp_begin_[static_cast<size_t>(at)];
         w < orbit_warp_begin_[static_cast<size_t>(at) + 1]; ++w) {
      const TiledWarp& warp = warps_[static_cast<size_t>(w)];
      for (int l = 0; l < 32; ++l) {
        const uint32_t rays = lane_rays_[static_cast<size_t>(32 * w + l)];
        const int32_t change = lane_switch_[static_cast<size_t>(32 * w + l)];
        for (int k = 0; k < count; ++k) {
          const ViewSymmetry& sym =
              a.symmetry().views[static_cast<size_t>(views[static_cast<size_t>(k)])];
          const int64_t h_plane = plane * ComposeSquareMaps(sym.map, warp.map);
          for (int32_t step = 0; step < warp.steps; ++step) {
            const uint32_t c = step < change ? rays & 0xffffu : rays >> 16;
            const float zk = c == kTiledNoRay ? 0.0f
                                              : z[static_cast<int64_t>(k) * columns_ +
                                                  (sym.columns_reversed ? columns_ - 1 - c : c)];
            const size_t slot = static_cast<size_t>(warp.slot_base + 32 * step + l);
            acc[static_cast<size_t>(h_plane + local_[slot])] += weights_[slot] * zk;
          }
        }
      }
    }
    // Each distinct tile of the orbit once: the sum of the planes whose tile it is.
    for (int h = 0; h < 8; ++h) {
      if (!(orbit.distinct & (1 << h))) continue;
      const SquareMap& map = kSquareMaps[static_cast<size_t>(h)];
      const bool swaps = map.xx == 0;
      const int ux = swaps ? orbit.size_y : orbit.size_x, uy = swaps ? orbit.size_x : orbit.size_y;
      for (int ly = 0; ly < uy; ++ly) {
        for (int lx = 0; lx < ux; ++lx) {
          float total = 0;
          for (int e = 0; e < 8; ++e) {
            if (orbit.corner_x[e] != orbit.corner_x[h] || orbit.corner_y[e] != orbit.corner_y[h])
              continue;
            const SquareMap& me = kSquareMaps[static_cast<size_t>(e)];
            int lx0, ly0;
            TileLocalToRepresentative(me.xx, me.xy, me.yx, me.yy, orbit.size_x, orbit.size_y, lx,
                                      ly, &lx0, &ly0);
            total += acc[static_cast<size_t>(e * plane + ly0 * stride() + lx0)];
          }
          x[static_cast<int64_t>(orbit.corner_y[h] + ly) * n_ + orbit.corner_x[h] + lx] += total;
        }
      }
    }
  }
}

}  // namespace tomo::core::system_matrix
