// TiledTasks: the tiled layout's warps (tiled_runs.h) cut into the units of work of its GPU
// kernels, so that a product has many short, independent pieces of work instead of one
// long walk per warp.
//
// A task is up to kTiledTaskSteps consecutive steps of one warp: one batch of slot loads,
// then its shared-memory work, with no loop. Per stored view and orbit of tiles the tasks
// lie together (orbit_task_begin), in the order of the orbit's warps: the transpose, whose
// thread block owns the orbit's pixels, takes them all, a warp per task in turn. The
// forward has no owner to respect (its ray sums are added atomically), so its thread
// blocks take kTiledForwardTasks consecutive tasks of one orbit each: block (part, orbit)
// of a view's launch takes tasks [part * kTiledForwardTasks, + kTiledForwardTasks) of the
// orbit, forward_parts(view) parts per orbit (those past an orbit's tasks have none). Each
// loads the orbit's x into shared memory.
//
//   TOMO_ASSIGN_OR_RETURN(TiledTasks t, TiledTasks::Build(layout.orbit_warp_begin(),
//                                                         layout.warps(), orbits_per_view));
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/system_matrix/tiled_slab.h"

namespace tomo::core::system_matrix {

class TiledTasks {
 public:
  // orbit_warp_begin: the layout's (stored views x orbits + 1 offsets into warps).
  // INVALID_ARGUMENT when an orbit has 65536 warps or more, a warp 65536 tasks or more, or
  // the offsets are not whole views.
  static absl::StatusOr<TiledTasks> Build(const std::vector<int64_t>& orbit_warp_begin,
                                          const std::vector<TiledWarp>& warps,
                                          int64_t orbits_per_view);

  const std::vector<TiledTask>& tasks() const { return tasks_; }
  // Tasks of (stored view v, orbit o): [orbit_task_begin[v * orbits + o], ... [+ 1]).
  const std::vector<int64_t>& orbit_task_begin() const { return orbit_task_begin_; }
  // Forward thread blocks per orbit in stored view v's launch: the most tasks of one of its
  // orbits over kTiledForwardTasks, rounded up.
  int32_t forward_parts(int64_t view) const { return forward_parts_[static_cast<size_t>(view)]; }
  // Per stored view, its orbits by decreasing tasks (ties: by index): the transpose's block
  // b of view v takes orbit transpose_order[v * orbits + b]. Blocks start in about that
  // order, so when the orbits outnumber what the device holds at once, the largest run
  // first and the last to start are the smallest (longest processing time first).
  const std::vector<int32_t>& transpose_order() const { return transpose_order_; }
  // The most tasks of one (stored view, orbit): what sizes the transpose's thread blocks.
  int64_t most_tasks_per_orbit() const { return most_tasks_per_orbit_; }
  // Device bytes of tasks(), orbit_task_begin() and transpose_order().
  uint64_t bytes() const;
  // The device bytes of `tasks` tasks over `groups` (stored view, orbit) pairs.
  static uint64_t BytesFor(int64_t tasks, int64_t groups);

 private:
  std::vector<TiledTask> tasks_;
  std::vector<int64_t> orbit_task_begin_;
  std::vector<int32_t> forward_parts_;  // per stored view
  std::vector<int32_t> transpose_order_;
  int64_t most_tasks_per_orbit_ = 0;
};

}  // namespace tomo::core::system_matrix
