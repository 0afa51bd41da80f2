#include "core/system_matrix/tiled_runs.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/system_matrix/square_symmetry.h"
#include "core/system_matrix/strip_geometry.h"
#include "core/system_matrix/strip_weights.h"

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

// One step of a warp: which of its next entries each lane takes. Each lane's candidates are
// the first of its next kScheduleWindow entries in each bank (of its current ray: a lane's
// first ray's entries come before its second's); the lanes are matched to distinct banks,
// as many as a matching reaches (augmenting paths, Kuhn's method), so that the step's
// gathers and atomic adds take one wavefront where every lane is matched. Choosing lane by
// lane (the least used bank among a lane's candidates) left about 1.7-1.9 wavefronts per
// step on the 720 x 1024 scans of 512^2 to 2048^2; matching, 1.1-1.3.
class StepBanks {
 public:
  // Lane l's candidates among its `left` next entries.
  void SetCandidates(int l, const TileEntry* next, size_t left) {
    Candidates& c = lanes_[static_cast<size_t>(l)];
    c.banks = 0;
    c.count = 0;
    for (size_t j = 0; j < std::min(left, kScheduleWindow); ++j) {
      if (next[j].column != next[0].column) break;
      const int bank = next[j].local % 32;
      if ((c.banks >> bank) & 1) continue;
      c.banks |= uint32_t{1} << bank;
      c.bank[static_cast<size_t>(c.count)] = static_cast<uint8_t>(bank);
      c.entry[static_cast<size_t>(c.count)] = static_cast<uint8_t>(j);
      ++c.count;
    }
  }
  // Matches the lanes with candidates to distinct banks, as many as can be.
  void Match() {
    taken_ = 0;
    choice_.fill(-1);
    for (int l = 0; l < 32; ++l) {
      if (lanes_[static_cast<size_t>(l)].count == 0) continue;
      visited_ = 0;
      Augment(l);
    }
  }
  // After Match: the entry lane l takes (counted from its next), or -1 where none is matched.
  int choice(int l) const { return choice_[static_cast<size_t>(l)]; }
  // After Match: bit b set when a lane is matched to bank b.
  uint32_t taken() const { return taken_; }
  // For a lane with candidates: the entry (counted from its next) in the least used of their
  // banks, the earliest on a tie.
  int LeastUsed(int l, const std::array<int, 32>& used) const {
    const Candidates& c = lanes_[static_cast<size_t>(l)];
    int pick = 0;
    for (int k = 1; k < c.count; ++k) {
      if (used[c.bank[static_cast<size_t>(k)]] < used[c.bank[static_cast<size_t>(pick)]]) pick = k;
    }
    return c.entry[static_cast<size_t>(pick)];
  }

 private:
  struct Candidates {  // in the lane's order, one per bank
    int count = 0;
    uint32_t banks = 0;  // bit b: one of them is in bank b
    std::array<uint8_t, kScheduleWindow> bank{}, entry{};
  };
  void Take(int l, int k) {
    const Candidates& c = lanes_[static_cast<size_t>(l)];
    const int b = c.bank[static_cast<size_t>(k)];
    lane_of_bank_[static_cast<size_t>(b)] = l;
    taken_ |= uint32_t{1} << b;
    choice_[static_cast<size_t>(l)] = c.entry[static_cast<size_t>(k)];
  }
  // Whether lane l gets a bank, moving the lanes that hold its candidates' banks to others.
  bool Augment(int l) {
    const Candidates& c = lanes_[static_cast<size_t>(l)];
    // A free bank first (most lanes find one; the earliest entry in one keeps the lane's
    // order most): the search below is for the others.
    if ((c.banks & ~taken_) != 0) {
      for (int k = 0; k < c.count; ++k) {
        if (!((taken_ >> c.bank[static_cast<size_t>(k)]) & 1)) {
          Take(l, k);
          return true;
        }
      }
    }
    for (int k = 0; k < c.count; ++k) {
      const int b = c.bank[static_cast<size_t>(k)];
      if ((visited_ >> b) & 1) continue;
      visited_ |= uint32_t{1} << b;
      if (Augment(lane_of_bank_[static_cast<size_t>(b)])) {
        Take(l, k);
        return true;
      }
    }
    return false;
  }

  std::array<Candidates, 32> lanes_;
  std::array<int, 32> lane_of_bank_{};
  std::array<int, 32> choice_{};
  uint32_t taken_ = 0, visited_ = 0;  // banks
};

// A ray's entries in a tile (from `begin` in the tile's list of entries, grouped by ray, rays
// ascending), or a piece of them; a lane holds one or two pieces.
struct Piece {
  int32_t column;
  int64_t begin, count;
};
struct Lane {
  Piece first, second;  // second.count 0: none
  int64_t count() const { return first.count + second.count; }
};

// Buffers one thread reuses from tile to tile: packing allocates only while they grow.
struct PackScratch {
  std::vector<Piece> rays, pieces;
  std::vector<int64_t> piece_lengths;
  std::vector<Lane> lanes;
  // One warp's entries, lane after lane: lane l's not yet placed at [lane_next[l], lane_end[l]).
  std::vector<TileEntry> lane_entries;
  std::array<size_t, 32> lane_next{}, lane_end{};
  StepBanks banks;
};

// The layout's arrays, sized before they are filled, and where the next warp and slot go.
struct LayoutCursor {
  TiledWarp* warps;
  uint32_t* lane_rays;
  uint16_t* lane_switch;
  float* weights;
  uint16_t* local;
  int64_t warp = 0, slot = 0;
};

// What packing counted, per stored view (summed after the views are built).
struct PackCounts {
  int64_t entries = 0, ray_segments = 0, gather_wavefronts = 0, atomic_wavefronts = 0;
};

int64_t WarpsFor(size_t rays) { return (static_cast<int64_t>(rays) + 31) / 32; }

// The most distinct addresses (gather) and lanes (atomic add) in one of 32 banks.
void CountWavefronts(const uint16_t* step, int64_t* gather, int64_t* atomic) {
  std::array<int, 32> lanes{};
  // seen[bank][e] is read only for e < distinct[bank], after it is written: left
  // uninitialized, as clearing 4 KB per step was a tenth of the layout's build.
  std::array<std::array<int, 32>, 32> seen;
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

// The rays' entries cut into pieces of at most `length` entries and paired (the longest
// piece with the shortest that fits beside it) into scratch.lanes; false when they take
// more than `lanes` lanes.
bool PairPieces(const std::vector<Piece>& rays, int64_t length, int64_t lanes,
                PackScratch& scratch) {
  std::vector<Piece>& pieces = scratch.pieces;
  pieces.clear();
  for (const Piece& r : rays) {
    const int64_t parts = (r.count + length - 1) / length;
    for (int64_t j = 0; j < parts; ++j) {
      const int64_t b = r.count * j / parts, e = r.count * (j + 1) / parts;
      pieces.push_back({r.column, r.begin + b, e - b});
    }
  }
  std::stable_sort(pieces.begin(), pieces.end(),
                   [](const Piece& p, const Piece& q) { return p.count > q.count; });
  std::vector<Lane>& packed = scratch.lanes;
  packed.clear();
  size_t i = 0, j = pieces.size();
  while (i < j) {
    Lane lane{pieces[i++], Piece{0, 0, 0}};
    if (i < j && lane.first.count + pieces[j - 1].count <= length) lane.second = pieces[--j];
    packed.push_back(lane);
    if (static_cast<int64_t>(packed.size()) > lanes) return false;
  }
  return true;
}

// How many lanes PairPieces(rays, length) takes, without forming them: its greedy pairing
// depends only on the pieces' lengths, counted here by length (pieces.size() entries of
// scratch.piece_lengths, indexed by length).
int64_t LanesTaken(const std::vector<Piece>& rays, int64_t length, PackScratch& scratch) {
  std::vector<int64_t>& count = scratch.piece_lengths;
  count.assign(static_cast<size_t>(length) + 1, 0);
  int64_t pieces = 0;
  for (const Piece& r : rays) {
    const int64_t parts = (r.count + length - 1) / length;
    for (int64_t j = 0; j < parts; ++j) {
      ++count[static_cast<size_t>(r.count * (j + 1) / parts - r.count * j / parts)];
    }
    pieces += parts;
  }
  // The longest piece left, with the shortest left when both fit in `length`.
  int64_t lanes = 0, longest = length, shortest = 1;
  while (pieces > 0) {
    while (count[static_cast<size_t>(longest)] == 0) --longest;
    --count[static_cast<size_t>(longest)];
    --pieces;
    ++lanes;
    if (pieces == 0) break;
    while (count[static_cast<size_t>(shortest)] == 0) ++shortest;
    if (longest + shortest <= length) {
      --count[static_cast<size_t>(shortest)];
      --pieces;
    }
  }
  return lanes;
}

// The lanes of one tile whose rays are `rays` (`total` entries), longest first, into
// scratch.lanes: the pieces of the shortest lane length for which they fit the
// 32 x WarpsFor(rays) lanes.
void PackLanes(const std::vector<Piece>& rays, int64_t total, PackScratch& scratch) {
  const int64_t lanes = 32 * WarpsFor(rays.size());
  int64_t length = std::max<int64_t>(1, (total + lanes - 1) / lanes);
  while (LanesTaken(rays, length, scratch) > lanes) ++length;
  PairPieces(rays, length, lanes, scratch);
  std::stable_sort(scratch.lanes.begin(), scratch.lanes.end(),
                   [](const Lane& p, const Lane& q) { return p.count() > q.count(); });
}

// The slots of packed lanes (longest first): per warp, 32 times its longest lane.
int64_t PackedSlots(const std::vector<Lane>& lanes) {
  int64_t slots = 0;
  for (size_t first = 0; first < lanes.size(); first += 32) slots += 32 * lanes[first].count();
  return slots;
}

// The tasks of packed lanes (longest first): per warp, its longest lane in kTiledTaskSteps.
int64_t PackedTasks(const std::vector<Lane>& lanes) {
  int64_t tasks = 0;
  for (size_t first = 0; first < lanes.size(); first += 32) {
    tasks += (lanes[first].count() + kTiledTaskSteps - 1) / kTiledTaskSteps;
  }
  return tasks;
}

// Per pixel column (or row), the partition's interval that holds it.
std::vector<int32_t> TileOfPixel(const std::vector<int32_t>& bounds) {
  std::vector<int32_t> tile_of(static_cast<size_t>(bounds.back()));
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    for (int32_t p = bounds[i]; p < bounds[i + 1]; ++p) tile_of[static_cast<size_t>(p)] = static_cast<int32_t>(i);
  }
  return tile_of;
}

// The tiles' orbits and, per tile (row-major over the partition's m x m tiles), its orbit and
// the first map g with tile = M_g(T0). The representative T0 of an orbit is the tile with
// centred coordinates ci >= cj >= 0.
struct TileOrbits {
  std::vector<TileOrbit> orbits;
  std::vector<int32_t> orbit_of, map_of;
  // Per orbit, (h, tile) for the h of its `distinct`.
  std::vector<std::vector<std::pair<int, size_t>>> tiles;
};
TileOrbits FindTileOrbits(const std::vector<int32_t>& bounds) {
  const int32_t m = static_cast<int32_t>(bounds.size()) - 1;
  TileOrbits t;
  t.orbit_of.assign(static_cast<size_t>(m) * m, -1);
  t.map_of.assign(static_cast<size_t>(m) * m, -1);
  for (int32_t tj = 0; tj < m; ++tj) {
    for (int32_t ti = 0; ti < m; ++ti) {
      const int32_t ci = 2 * ti - (m - 1), cj = 2 * tj - (m - 1);
      if (!(cj >= 0 && ci >= cj)) continue;
      const int32_t o = static_cast<int32_t>(t.orbits.size());
      TileOrbit orbit;
      orbit.size_x = bounds[static_cast<size_t>(ti) + 1] - bounds[static_cast<size_t>(ti)];
      orbit.size_y = bounds[static_cast<size_t>(tj) + 1] - bounds[static_cast<size_t>(tj)];
      std::vector<std::pair<int, size_t>> distinct_tiles;
      for (int h = 0; h < 8; ++h) {
        int32_t ui, uj;
        MapPixel(kSquareMaps[static_cast<size_t>(h)], m, ti, tj, &ui, &uj);
        orbit.corner_x[h] = bounds[static_cast<size_t>(ui)];
        orbit.corner_y[h] = bounds[static_cast<size_t>(uj)];
        const size_t tile = static_cast<size_t>(uj) * m + ui;
        if (t.orbit_of[tile] < 0) {
          t.orbit_of[tile] = o;
          t.map_of[tile] = h;
          orbit.distinct |= 1 << h;
          distinct_tiles.push_back({h, tile});
        }
      }
      t.orbits.push_back(orbit);
      t.tiles.push_back(std::move(distinct_tiles));
    }
  }
  return t;
}

// What the layout's first pass counts of one stored view whose tiles' rays are tile_rays
// (per tile, its rays' pieces in column order): the view's warps per orbit (added into
// orbit_warps[0 .. orbits)), slots and tasks (tasks may be nullptr: Build counts them later
// from the warps).
void CountViewTiles(const std::vector<std::vector<Piece>>& tile_rays, const TileOrbits& orbits,
                    PackScratch& scratch, int64_t* orbit_warps, int64_t* slots, int64_t* tasks) {
  for (size_t o = 0; o < orbits.tiles.size(); ++o) {
    for (const auto& [h, tile] : orbits.tiles[o]) {
      const std::vector<Piece>& rays = tile_rays[tile];
      if (rays.empty()) continue;
      PackLanes(rays, rays.back().begin + rays.back().count, scratch);
      orbit_warps[o] += WarpsFor(rays.size());
      *slots += PackedSlots(scratch.lanes);
      if (tasks != nullptr) *tasks += PackedTasks(scratch.lanes);
    }
  }
}

// Adds `count` entries of ray c to a tile's pieces (a new piece when the last is another ray's).
void AddRayEntries(std::vector<Piece>& rays, int32_t c, int64_t count) {
  if (rays.empty() || rays.back().column != c) {
    rays.push_back({c, rays.empty() ? 0 : rays.back().begin + rays.back().count, 0});
  }
  rays.back().count += count;
}

// Stored view `view`'s rays into their tiles' pieces (tile_rays, row-major over the tiles of
// the partition `bounds`), from each ray's extent in every pixel row: what Build's first pass
// finds in the stored rows, since every pixel of a row's extent is stored (strip_weights.h).
void AddViewExtents(const StripWeights& weights, int64_t view, int64_t columns,
                    const std::vector<int32_t>& bounds, const std::vector<int32_t>& tile_of,
                    std::vector<std::vector<Piece>>& tile_rays) {
  const size_t m = bounds.size() - 1;
  const strip_geometry::GridFrame frame = weights.Frame();
  for (int64_t c = 0; c < columns; ++c) {
    strip_geometry::Polygon inside;
    int64_t iy0, iy1;
    if (!strip_geometry::WedgeInGrid(weights.Wedge(view, c), frame, &inside, &iy0, &iy1)) continue;
    for (int64_t iy = iy0; iy < iy1; ++iy) {
      int64_t ix0, ix1;
      strip_geometry::BandExtent(inside, iy, frame, &ix0, &ix1);
      if (ix1 <= ix0) continue;
      const size_t row = static_cast<size_t>(tile_of[static_cast<size_t>(iy)]) * m;
      for (int32_t ti = tile_of[static_cast<size_t>(ix0)]; ti <= tile_of[static_cast<size_t>(ix1 - 1)];
           ++ti) {
        const int64_t count = std::min<int64_t>(ix1, bounds[static_cast<size_t>(ti) + 1]) -
                              std::max<int64_t>(ix0, bounds[static_cast<size_t>(ti)]);
        AddRayEntries(tile_rays[row + static_cast<size_t>(ti)], static_cast<int32_t>(c), count);
      }
    }
  }
}

// INVALID_ARGUMENT naming the value when the layout cannot hold the scan.
absl::Status CheckLayoutInputs(int tile_side, int64_t columns) {
  if (tile_side < TiledRuns::kMinTileSide || tile_side > TiledRuns::kMaxTileSide) {
    return absl::InvalidArgumentError(absl::StrCat("tile_side: ", tile_side, " must be in [",
                                                   TiledRuns::kMinTileSide, ", ",
                                                   TiledRuns::kMaxTileSide, "]"));
  }
  if (columns >= kTiledNoRay) {
    return absl::InvalidArgumentError(absl::StrCat(
        "columns: ", columns, " must be below ", kTiledNoRay, " for the tiled layout"));
  }
  return absl::OkStatus();
}

// The device bytes of a layout of these counts (TiledRuns::bytes and CountBytes): per slot a
// weight and a place; per warp its 32 lanes' rays and switch steps and its header; the
// (view, orbit) offsets; the orbits; a column bound per view; a norm per stored row; the tasks.
uint64_t LayoutBytes(int64_t views, int64_t orbits, int64_t warps, int64_t slots, int64_t tasks,
                     int64_t stored_rows) {
  const uint64_t groups = static_cast<uint64_t>(views) * static_cast<uint64_t>(orbits);
  return static_cast<uint64_t>(slots) * (sizeof(float) + sizeof(uint16_t)) +
         static_cast<uint64_t>(warps) * (32 * (sizeof(uint32_t) + sizeof(uint16_t)) +
                                         sizeof(TiledWarp)) +
         (groups + 1) * sizeof(int64_t) + static_cast<uint64_t>(orbits) * sizeof(TileOrbit) +
         static_cast<uint64_t>(views) * sizeof(float) +
         static_cast<uint64_t>(stored_rows) * sizeof(float) +
         TiledTasks::BytesFor(tasks, static_cast<int64_t>(groups));
}

// A pixel of T0 in each of the 32 banks (-1: none; small tiles miss some): where pads go.
std::array<int32_t, 32> BankPlaces(const TileOrbit& orbit, int stride) {
  std::array<int32_t, 32> place;
  place.fill(-1);
  for (int32_t ly = orbit.size_y - 1; ly >= 0; --ly) {
    for (int32_t lx = orbit.size_x - 1; lx >= 0; --lx)
      place[static_cast<size_t>((ly * stride + lx) % 32)] = ly * stride + lx;
  }
  return place;
}

// One tile's warps (map = `map`), written at `out` and counted in `counts`: its entries
// (grouped by ray, rays ascending) packed into lanes (PackLanes), 32 to a warp.
void PackTile(const std::vector<TileEntry>& entries, int map,
              const std::array<int32_t, 32>& bank_place, PackScratch& scratch, LayoutCursor& out,
              PackCounts& counts) {
  if (entries.empty()) return;
  std::vector<Piece>& rays = scratch.rays;
  rays.clear();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (rays.empty() || rays.back().column != entries[i].column) {
      rays.push_back({entries[i].column, static_cast<int64_t>(i), 0});
    }
    ++rays.back().count;
  }
  PackLanes(rays, static_cast<int64_t>(entries.size()), scratch);
  const std::vector<Lane>& packed = scratch.lanes;
  const int64_t warps = WarpsFor(rays.size());
  for (int64_t w = 0; w < warps; ++w) {
    const int64_t first = 32 * w;
    const int64_t steps = first < static_cast<int64_t>(packed.size())
                              ? packed[static_cast<size_t>(first)].count()
                              : 0;
    TiledWarp& warp = out.warps[out.warp];
    warp.slot_base = out.slot;
    warp.steps = static_cast<int32_t>(steps);
    warp.map = map;
    uint32_t* lane_rays = out.lane_rays + 32 * out.warp;
    uint16_t* lane_switch = out.lane_switch + 32 * out.warp;
    float* weights = out.weights + out.slot;
    uint16_t* local = out.local + out.slot;
    ++out.warp;
    out.slot += 32 * steps;
    // Each lane's entries, placed step by step: at each step a lane takes one of its next
    // kScheduleWindow entries of the same ray, in a bank of its own where the step's
    // matching (StepBanks) gives it one, else in the least used of its candidates' banks
    // (the first of them on a tie), so that the 32 lanes of a step spread over the banks
    // (the order of a lane's entries does not change its sum). A lane that has run out (or
    // has no ray) pads with weight 0 at a pixel of T0 in the least used bank.
    std::vector<TileEntry>& lane_entries = scratch.lane_entries;
    lane_entries.clear();
    for (int l = 0; l < 32; ++l) {
      const int64_t p = first + l;
      const bool has = p < static_cast<int64_t>(packed.size());
      const Lane lane = has ? packed[static_cast<size_t>(p)] : Lane{};
      lane_rays[l] =
          has ? static_cast<uint32_t>(lane.first.column) |
                    (static_cast<uint32_t>(lane.second.count > 0 ? lane.second.column : kTiledNoRay)
                     << 16)
              : (uint32_t{kTiledNoRay} | (uint32_t{kTiledNoRay} << 16));
      lane_switch[l] = static_cast<uint16_t>(has ? lane.first.count : 0);
      scratch.lane_next[static_cast<size_t>(l)] = lane_entries.size();
      if (has) {
        counts.ray_segments += lane.second.count > 0 ? 2 : 1;
        lane_entries.insert(lane_entries.end(), entries.begin() + lane.first.begin,
                            entries.begin() + lane.first.begin + lane.first.count);
        lane_entries.insert(lane_entries.end(), entries.begin() + lane.second.begin,
                            entries.begin() + lane.second.begin + lane.second.count);
      }
      scratch.lane_end[static_cast<size_t>(l)] = lane_entries.size();
    }
    StepBanks& banks = scratch.banks;
    for (int64_t s = 0; s < steps; ++s) {
      std::array<int, 32> used{};
      std::array<char, 32> placed{};
      float* step_weights = weights + 32 * s;
      uint16_t* step_local = local + 32 * s;
      for (int l = 0; l < 32; ++l) {
        const size_t next = scratch.lane_next[static_cast<size_t>(l)];
        banks.SetCandidates(l, lane_entries.data() + next,
                            scratch.lane_end[static_cast<size_t>(l)] - next);
      }
      banks.Match();
      // The matched lanes hold a bank each; the others take the least used of theirs.
      for (int b = 0; b < 32; ++b) used[static_cast<size_t>(b)] = (banks.taken() >> b) & 1;
      for (int l = 0; l < 32; ++l) {
        size_t& next = scratch.lane_next[static_cast<size_t>(l)];
        const size_t left = scratch.lane_end[static_cast<size_t>(l)] - next;
        if (left == 0) continue;
        TileEntry* lane = lane_entries.data() + next;
        int chosen = banks.choice(l);
        if (chosen < 0) {
          chosen = banks.LeastUsed(l, used);
          ++used[lane[chosen].local % 32];
        }
        const size_t pick = static_cast<size_t>(chosen);
        step_weights[l] = lane[pick].weight;
        step_local[l] = lane[pick].local;
        // Take the pick out keeping the others' order: the entries before it move up one
        // place (fewer than kScheduleWindow), and the lane starts one entry later.
        std::move_backward(lane, lane + pick, lane + pick + 1);
        ++next;
        placed[static_cast<size_t>(l)] = 1;
      }
      // Pads, lane by lane, at the least used bank that holds a pixel of T0 (the lowest such
      // bank on a tie): one sweep up the banks per level of use, not a search per pad. A
      // bank skipped at a level is above it, and one taken goes up to the next: once the
      // sweep passes the last bank, none is left at this level.
      int level = std::numeric_limits<int>::max();
      for (int b = 0; b < 32; ++b) {
        if (bank_place[static_cast<size_t>(b)] >= 0)
          level = std::min(level, used[static_cast<size_t>(b)]);
      }
      int bank = -1;
      for (int l = 0; l < 32; ++l) {
        if (placed[static_cast<size_t>(l)]) continue;
        do {
          if (++bank == 32) {
            bank = 0;
            ++level;
          }
        } while (bank_place[static_cast<size_t>(bank)] < 0 ||
                 used[static_cast<size_t>(bank)] != level);
        step_weights[l] = 0.0f;
        step_local[l] = static_cast<uint16_t>(bank_place[static_cast<size_t>(bank)]);
        ++used[static_cast<size_t>(bank)];
      }
      CountWavefronts(step_local, &counts.gather_wavefronts, &counts.atomic_wavefronts);
    }
  }
  counts.entries += static_cast<int64_t>(entries.size());
}

// Calls f(column, ix, iy, weight) for every entry of stored view v, column by column.
template <typename F>
void ForEachViewEntry(const StoredRows& s, int64_t v, int32_t columns, F&& f) {
  for (int32_t c = 0; c < columns; ++c) {
    ForEachRowEntry(s, static_cast<size_t>(v * columns + c),
                    [&](int32_t ix, int32_t iy, float w) { f(c, ix, iy, w); });
  }
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
  TOMO_RETURN_IF_ERROR(CheckLayoutInputs(tile_side, a.scan().columns()));
  TiledRuns t;
  t.tile_side_ = tile_side;
  t.n_ = static_cast<int32_t>(a.scan().nx());
  t.columns_ = static_cast<int32_t>(a.scan().columns());
  t.bounds_ = Partition(t.n_, tile_side);
  const int32_t n = t.n_, m = static_cast<int32_t>(t.bounds_.size()) - 1, stride = t.stride();
  const std::vector<int32_t> tile_of = TileOfPixel(t.bounds_);
  TileOrbits tile_orbits = FindTileOrbits(t.bounds_);
  t.orbits_ = tile_orbits.orbits;
  const std::vector<int32_t>& orbit_of = tile_orbits.orbit_of;
  const std::vector<int32_t>& map_of = tile_orbits.map_of;
  const int64_t views = a.num_blocks();
  const int64_t orbits = t.orbits_per_view();
  const StoredRows& s = a.rows();
  const auto tile_at = [&](int32_t ix, int32_t iy) {
    return static_cast<size_t>(tile_of[static_cast<size_t>(iy)]) * m +
           tile_of[static_cast<size_t>(ix)];
  };
  // The tiles of each orbit laid out, in this order: M_h(T0) for the h of `distinct`.
  const std::vector<std::vector<std::pair<int, size_t>>>& orbit_tiles = tile_orbits.tiles;
  std::vector<std::array<int32_t, 32>> bank_places(static_cast<size_t>(orbits));
  for (int64_t o = 0; o < orbits; ++o) {
    bank_places[static_cast<size_t>(o)] = BankPlaces(t.orbits_[static_cast<size_t>(o)], stride);
  }
  // Two passes over the stored views, each on all threads, so that the layout is written once,
  // in place, into arrays sized once. The first packs each tile's rays (their entry counts
  // suffice) to count the view's warps and slots, and sums the view's columns; the second,
  // knowing where each view starts, buckets the entries again and packs them into place.
  std::vector<int64_t> orbit_warps(static_cast<size_t>(views * orbits), 0);
  std::vector<int64_t> view_slots(static_cast<size_t>(views), 0);
  t.column_bound_.assign(static_cast<size_t>(views), 0.0f);
  ParallelFor(
      views,
      [&](int64_t v0, int64_t v1) {
        std::vector<std::vector<Piece>> tile_rays(static_cast<size_t>(m) * m);
        std::vector<float> column_sum(static_cast<size_t>(n) * n);
        PackScratch scratch;
        for (int64_t v = v0; v < v1; ++v) {
          for (auto& rays : tile_rays) rays.clear();
          std::fill(column_sum.begin(), column_sum.end(), 0.0f);
          ForEachViewEntry(s, v, t.columns_, [&](int32_t c, int32_t ix, int32_t iy, float w) {
            AddRayEntries(tile_rays[tile_at(ix, iy)], c, 1);
            column_sum[static_cast<size_t>(iy) * n + ix] += std::abs(w);
          });
          t.column_bound_[static_cast<size_t>(v)] =
              *std::max_element(column_sum.begin(), column_sum.end());
          CountViewTiles(tile_rays, tile_orbits, scratch, orbit_warps.data() + v * orbits,
                         &view_slots[static_cast<size_t>(v)], /*tasks=*/nullptr);
        }
      },
      threads);
  t.orbit_warp_begin_.resize(orbit_warps.size() + 1);
  t.orbit_warp_begin_[0] = 0;
  std::partial_sum(orbit_warps.begin(), orbit_warps.end(), t.orbit_warp_begin_.begin() + 1);
  std::vector<int64_t> view_slot_begin(static_cast<size_t>(views) + 1, 0);
  std::partial_sum(view_slots.begin(), view_slots.end(), view_slot_begin.begin() + 1);
  const size_t warps = static_cast<size_t>(t.orbit_warp_begin_.back());
  const size_t slots = static_cast<size_t>(view_slot_begin.back());
  t.warps_.resize(warps);
  t.lane_rays_.resize(32 * warps);
  t.lane_switch_.resize(32 * warps);
  t.weights_.resize(slots);
  t.local_.resize(slots);
  std::vector<PackCounts> view_counts(static_cast<size_t>(views));
  ParallelFor(
      views,
      [&](int64_t v0, int64_t v1) {
        std::vector<std::vector<TileEntry>> tiles(static_cast<size_t>(m) * m);
        PackScratch scratch;
        for (int64_t v = v0; v < v1; ++v) {
          for (auto& tile : tiles) tile.clear();
          ForEachViewEntry(s, v, t.columns_, [&](int32_t c, int32_t ix, int32_t iy, float w) {
            const size_t tile = tile_at(ix, iy);
            const int g = map_of[tile];
            const TileOrbit& orbit = t.orbits_[static_cast<size_t>(orbit_of[tile])];
            int32_t x0, y0;  // the stored pixel mapped back into T0
            MapPixel(kSquareMaps[static_cast<size_t>(InverseSquareMap(g))], n, ix, iy, &x0, &y0);
            const int32_t lx0 = x0 - orbit.corner_x[0], ly0 = y0 - orbit.corner_y[0];
            tiles[tile].push_back({c, static_cast<uint16_t>(ly0 * stride + lx0), w});
          });
          LayoutCursor out{t.warps_.data(),
                           t.lane_rays_.data(),
                           t.lane_switch_.data(),
                           t.weights_.data(),
                           t.local_.data(),
                           t.orbit_warp_begin_[static_cast<size_t>(v * orbits)],
                           view_slot_begin[static_cast<size_t>(v)]};
          for (int64_t o = 0; o < orbits; ++o) {
            for (const auto& [h, tile] : orbit_tiles[static_cast<size_t>(o)]) {
              PackTile(tiles[tile], h, bank_places[static_cast<size_t>(o)], scratch, out,
                       view_counts[static_cast<size_t>(v)]);
            }
          }
        }
      },
      threads);
  for (const PackCounts& counts : view_counts) {
    t.entries_ += counts.entries;
    t.ray_segments_ += counts.ray_segments;
    t.gather_wavefronts_ += counts.gather_wavefronts;
    t.atomic_wavefronts_ += counts.atomic_wavefronts;
  }
  t.row_norm_bytes_ = a.stored_rows() * 4;
  TOMO_ASSIGN_OR_RETURN(t.tasks_, TiledTasks::Build(t.orbit_warp_begin_, t.warps_, orbits));
  return t;
}

absl::StatusOr<uint64_t> TiledRuns::CountBytes(const FanScan& scan, int tile_side, int threads) {
  if (tile_side == 0) tile_side = TileSideFor(scan.nx());
  TOMO_RETURN_IF_ERROR(CheckLayoutInputs(tile_side, scan.columns()));
  const SymmetryReport symmetry = DetectSquareSymmetry(scan);
  if (!symmetry.eight_fold) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the tiled layout needs the scan's square symmetry: ", symmetry.reason));
  }
  const std::vector<int32_t> bounds = Partition(static_cast<int32_t>(scan.nx()), tile_side);
  const int32_t m = static_cast<int32_t>(bounds.size()) - 1;
  const std::vector<int32_t> tile_of = TileOfPixel(bounds);
  const TileOrbits tile_orbits = FindTileOrbits(bounds);
  const int64_t views = static_cast<int64_t>(symmetry.stored_views.size());
  const int64_t orbits = static_cast<int64_t>(tile_orbits.orbits.size());
  const int64_t columns = scan.columns();
  const StripWeights weights(scan);
  std::vector<int64_t> orbit_warps(static_cast<size_t>(views * orbits), 0);
  std::vector<int64_t> view_slots(static_cast<size_t>(views), 0), view_tasks(static_cast<size_t>(views), 0);
  // Build's first pass, with the rays' entries per tile from their extents (AddViewExtents).
  ParallelFor(
      views,
      [&](int64_t v0, int64_t v1) {
        std::vector<std::vector<Piece>> tile_rays(static_cast<size_t>(m) * m);
        PackScratch scratch;
        for (int64_t v = v0; v < v1; ++v) {
          for (auto& rays : tile_rays) rays.clear();
          AddViewExtents(weights, symmetry.stored_views[static_cast<size_t>(v)], columns, bounds,
                         tile_of, tile_rays);
          CountViewTiles(tile_rays, tile_orbits, scratch, orbit_warps.data() + v * orbits,
                         &view_slots[static_cast<size_t>(v)], &view_tasks[static_cast<size_t>(v)]);
        }
      },
      threads);
  const int64_t warps = std::accumulate(orbit_warps.begin(), orbit_warps.end(), int64_t{0});
  const int64_t slots = std::accumulate(view_slots.begin(), view_slots.end(), int64_t{0});
  const int64_t tasks = std::accumulate(view_tasks.begin(), view_tasks.end(), int64_t{0});
  return LayoutBytes(views, orbits, warps, slots, tasks, views * columns);
}

uint64_t TiledRuns::bytes() const {
  return LayoutBytes(static_cast<int64_t>(column_bound_.size()),
                     static_cast<int64_t>(orbits_.size()), static_cast<int64_t>(warps_.size()),
                     static_cast<int64_t>(weights_.size()),
                     static_cast<int64_t>(tasks_.tasks().size()), row_norm_bytes_ / 4);
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
