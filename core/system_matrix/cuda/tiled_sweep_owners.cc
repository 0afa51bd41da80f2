#include "core/system_matrix/cuda/tiled_sweep_owners.h"

#include <algorithm>
#include <numeric>
#include <queue>
#include <utility>

namespace tomo::core::system_matrix::cuda {

TiledSweepOwners AssignTiledSweepOwners(const std::vector<int64_t>& orbit_task_begin,
                                        int64_t orbits_per_view, int thread_blocks) {
  const int64_t views =
      orbits_per_view > 0 ? static_cast<int64_t>(orbit_task_begin.size() - 1) / orbits_per_view : 0;
  const auto tasks_of = [&](int64_t view, int64_t orbit) {
    const size_t at = static_cast<size_t>(view * orbits_per_view + orbit);
    return orbit_task_begin[at + 1] - orbit_task_begin[at];
  };
  std::vector<int64_t> total(static_cast<size_t>(orbits_per_view), 0);
  for (int64_t v = 0; v < views; ++v) {
    for (int64_t o = 0; o < orbits_per_view; ++o) total[static_cast<size_t>(o)] += tasks_of(v, o);
  }
  std::vector<int32_t> order(static_cast<size_t>(orbits_per_view));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return total[static_cast<size_t>(a)] > total[static_cast<size_t>(b)];
  });
  // (load, thread block), least loaded first, then the lowest index.
  using Load = std::pair<int64_t, int>;
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> least;
  for (int t = 0; t < thread_blocks; ++t) least.push({0, t});
  std::vector<std::vector<int32_t>> owned(static_cast<size_t>(thread_blocks));
  for (const int32_t o : order) {
    const Load load = least.top();
    least.pop();
    owned[static_cast<size_t>(load.second)].push_back(o);
    least.push({load.first + total[static_cast<size_t>(o)], load.second});
  }
  TiledSweepOwners out;
  out.begin.push_back(0);
  for (const std::vector<int32_t>& list : owned) {
    out.orbits.insert(out.orbits.end(), list.begin(), list.end());
    out.begin.push_back(static_cast<int32_t>(out.orbits.size()));
    out.most_orbits = std::max(out.most_orbits, static_cast<int32_t>(list.size()));
  }
  for (int64_t v = 0; v < views; ++v) {
    int64_t most = 0;
    for (const std::vector<int32_t>& list : owned) {
      int64_t sum = 0;
      for (const int32_t o : list) sum += tasks_of(v, o);
      most = std::max(most, sum);
    }
    out.critical_tasks += most;
  }
  return out;
}

namespace {

// The most, over the stored views and the thread blocks, of per_orbit(at) summed over the
// thread block's orbits, at = view * orbits_per_view + orbit; offsets: any views x orbits
// + 1 offsets of the layout (for the views' count).
template <typename PerOrbit>
int64_t MostPerThreadBlock(const TiledSweepOwners& owners, const std::vector<int64_t>& offsets,
                           int64_t orbits_per_view, PerOrbit per_orbit) {
  int64_t most = 0;
  if (orbits_per_view <= 0) return most;
  const int64_t views = static_cast<int64_t>(offsets.size() - 1) / orbits_per_view;
  for (int64_t v = 0; v < views; ++v) {
    for (size_t t = 0; t + 1 < owners.begin.size(); ++t) {
      int64_t sum = 0;
      for (int32_t i = owners.begin[t]; i < owners.begin[t + 1]; ++i) {
        sum += per_orbit(
            static_cast<size_t>(v * orbits_per_view + owners.orbits[static_cast<size_t>(i)]));
      }
      most = std::max(most, sum);
    }
  }
  return most;
}

}  // namespace

TiledSweepStage CountTiledSweepStage(const TiledSweepOwners& owners,
                                     const std::vector<int64_t>& orbit_warp_begin,
                                     const std::vector<int64_t>& orbit_task_begin,
                                     int64_t orbits_per_view) {
  const auto count_of = [&](const std::vector<int64_t>& begin) {
    return static_cast<int32_t>(MostPerThreadBlock(
        owners, begin, orbits_per_view, [&](size_t at) { return begin[at + 1] - begin[at]; }));
  };
  return {count_of(orbit_warp_begin), count_of(orbit_task_begin)};
}

int64_t CountTiledSweepSlots(const TiledSweepOwners& owners,
                             const std::vector<int64_t>& orbit_warp_begin,
                             const std::vector<TiledWarp>& warps, int64_t orbits_per_view) {
  return MostPerThreadBlock(owners, orbit_warp_begin, orbits_per_view, [&](size_t at) {
    const int64_t first = orbit_warp_begin[at], end = orbit_warp_begin[at + 1];
    if (first == end) return int64_t{0};
    return SlotSpan(warps[static_cast<size_t>(first)], warps[static_cast<size_t>(end - 1)]);
  });
}

}  // namespace tomo::core::system_matrix::cuda
