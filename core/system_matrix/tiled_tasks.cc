#include "core/system_matrix/tiled_tasks.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tomo::core::system_matrix {

absl::StatusOr<TiledTasks> TiledTasks::Build(const std::vector<int64_t>& orbit_warp_begin,
                                             const std::vector<TiledWarp>& warps,
                                             int64_t orbits_per_view) {
  constexpr int64_t kLargest = std::numeric_limits<int32_t>::max();
  if (static_cast<int64_t>(warps.size()) > kLargest) {
    return absl::InvalidArgumentError(
        absl::StrCat("tiled layout: ", warps.size(), " warps, more than ", kLargest));
  }
  if (orbits_per_view <= 0 || orbit_warp_begin.empty() ||
      (orbit_warp_begin.size() - 1) % static_cast<size_t>(orbits_per_view) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tiled layout: ", orbit_warp_begin.size(),
                                                   " orbit offsets for ", orbits_per_view,
                                                   " orbits per view"));
  }
  TiledTasks t;
  const int64_t groups = static_cast<int64_t>(orbit_warp_begin.size()) - 1;
  t.orbit_task_begin_.reserve(orbit_warp_begin.size());
  t.forward_block_begin_.push_back(0);
  for (int64_t at = 0; at < groups; ++at) {
    const int64_t begin = static_cast<int64_t>(t.tasks_.size());
    t.orbit_task_begin_.push_back(begin);
    for (int64_t w = orbit_warp_begin[static_cast<size_t>(at)];
         w < orbit_warp_begin[static_cast<size_t>(at) + 1]; ++w) {
      for (int32_t s = 0; s < warps[static_cast<size_t>(w)].steps; s += kTiledTaskSteps) {
        t.tasks_.push_back({static_cast<int32_t>(w), s});
      }
    }
    const int64_t end = static_cast<int64_t>(t.tasks_.size());
    if (end > kLargest) {
      return absl::InvalidArgumentError(
          absl::StrCat("tiled layout: more than ", kLargest, " tasks"));
    }
    t.most_tasks_per_orbit_ = std::max(t.most_tasks_per_orbit_, end - begin);
    const int32_t orbit = static_cast<int32_t>(at % orbits_per_view);
    for (int64_t first = begin; first < end; first += kTiledForwardTasks) {
      t.forward_blocks_.push_back({orbit, static_cast<int32_t>(first),
                                   static_cast<int32_t>(std::min<int64_t>(kTiledForwardTasks, end - first)),
                                   0});
    }
    if ((at + 1) % orbits_per_view == 0) {
      t.forward_block_begin_.push_back(static_cast<int64_t>(t.forward_blocks_.size()));
    }
  }
  t.orbit_task_begin_.push_back(static_cast<int64_t>(t.tasks_.size()));
  return t;
}

uint64_t TiledTasks::bytes() const {
  return tasks_.size() * sizeof(TiledTask) + orbit_task_begin_.size() * sizeof(int64_t) +
         forward_blocks_.size() * sizeof(TiledForwardBlock);
}

}  // namespace tomo::core::system_matrix
