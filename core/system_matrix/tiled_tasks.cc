#include "core/system_matrix/tiled_tasks.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace tomo::core::system_matrix {

absl::StatusOr<TiledTasks> TiledTasks::Build(const std::vector<int64_t>& orbit_warp_begin,
                                             const std::vector<TiledWarp>& warps,
                                             int64_t orbits_per_view) {
  constexpr int64_t kMostOf16Bits = std::numeric_limits<uint16_t>::max();
  if (orbits_per_view <= 0 || orbit_warp_begin.empty() ||
      (orbit_warp_begin.size() - 1) % static_cast<size_t>(orbits_per_view) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tiled layout: ", orbit_warp_begin.size(),
                                                   " orbit offsets for ", orbits_per_view,
                                                   " orbits per view"));
  }
  TiledTasks t;
  const int64_t groups = static_cast<int64_t>(orbit_warp_begin.size()) - 1;
  t.orbit_task_begin_.reserve(orbit_warp_begin.size());
  int64_t view_parts = 0;
  for (int64_t at = 0; at < groups; ++at) {
    const int64_t begin = static_cast<int64_t>(t.tasks_.size());
    t.orbit_task_begin_.push_back(begin);
    const int64_t first_warp = orbit_warp_begin[static_cast<size_t>(at)];
    const int64_t end_warp = orbit_warp_begin[static_cast<size_t>(at) + 1];
    if (end_warp - first_warp > kMostOf16Bits + 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tiled layout: ", end_warp - first_warp, " warps in one orbit, more than ",
          kMostOf16Bits + 1));
    }
    for (int64_t w = first_warp; w < end_warp; ++w) {
      const int64_t steps = warps[static_cast<size_t>(w)].steps;
      if ((steps + kTiledTaskSteps - 1) / kTiledTaskSteps > kMostOf16Bits + 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("tiled layout: a warp of ", steps, " steps"));
      }
      for (int64_t s = 0; s < steps; s += kTiledTaskSteps) {
        t.tasks_.push_back({static_cast<uint16_t>(w - first_warp),
                            static_cast<uint16_t>(s / kTiledTaskSteps)});
      }
    }
    const int64_t count = static_cast<int64_t>(t.tasks_.size()) - begin;
    t.most_tasks_per_orbit_ = std::max(t.most_tasks_per_orbit_, count);
    view_parts = std::max(view_parts, (count + kTiledForwardTasks - 1) / kTiledForwardTasks);
    if ((at + 1) % orbits_per_view == 0) {
      t.forward_parts_.push_back(static_cast<int32_t>(view_parts));
      view_parts = 0;
    }
  }
  t.orbit_task_begin_.push_back(static_cast<int64_t>(t.tasks_.size()));
  const auto tasks_of = [&](int64_t at) {
    return t.orbit_task_begin_[static_cast<size_t>(at) + 1] - t.orbit_task_begin_[static_cast<size_t>(at)];
  };
  t.transpose_order_.resize(static_cast<size_t>(groups));
  for (int64_t first = 0; first < groups; first += orbits_per_view) {
    const auto begin = t.transpose_order_.begin() + first;
    std::iota(begin, begin + orbits_per_view, 0);
    std::stable_sort(begin, begin + orbits_per_view, [&](int32_t a, int32_t b) {
      return tasks_of(first + a) > tasks_of(first + b);
    });
  }
  return t;
}

uint64_t TiledTasks::bytes() const {
  return BytesFor(static_cast<int64_t>(tasks_.size()),
                  static_cast<int64_t>(transpose_order_.size()));
}

uint64_t TiledTasks::BytesFor(int64_t tasks, int64_t groups) {
  // The tasks, orbit_task_begin (groups + 1 offsets) and transpose_order (one per group).
  return static_cast<uint64_t>(tasks) * sizeof(TiledTask) +
         static_cast<uint64_t>(groups + 1) * sizeof(int64_t) +
         static_cast<uint64_t>(groups) * sizeof(int32_t);
}

}  // namespace tomo::core::system_matrix
