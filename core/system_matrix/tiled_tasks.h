// TiledTasks: the tiled layout's warps (tiled_runs.h) cut into the units of work of its GPU
// kernels, so that a product has many short, independent pieces of work instead of one
// long walk per warp.
//
// A task is up to kTiledTaskSteps consecutive steps of one warp: one batch of slot loads,
// then its shared-memory work, with no loop. Per stored view and orbit of tiles the tasks
// lie together (orbit_task_begin), in the order of the orbit's warps: the transpose, whose
// thread block owns the orbit's pixels, takes them all, a warp per task in turn. The
// forward has no owner to respect (its ray sums are added atomically), so its thread
// blocks take kTiledForwardTasks consecutive tasks of one orbit each (forward_blocks, per
// stored view from forward_block_begin): several thread blocks per orbit, each loading the
// orbit's x into shared memory.
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
  // INVALID_ARGUMENT when a warp or task index would not fit 31 bits.
  static absl::StatusOr<TiledTasks> Build(const std::vector<int64_t>& orbit_warp_begin,
                                          const std::vector<TiledWarp>& warps,
                                          int64_t orbits_per_view);

  const std::vector<TiledTask>& tasks() const { return tasks_; }
  // Tasks of (stored view v, orbit o): [orbit_task_begin[v * orbits + o], ... [+ 1]).
  const std::vector<int64_t>& orbit_task_begin() const { return orbit_task_begin_; }
  const std::vector<TiledForwardBlock>& forward_blocks() const { return forward_blocks_; }
  // Forward thread blocks of stored view v: [forward_block_begin[v], ... [v + 1]).
  const std::vector<int64_t>& forward_block_begin() const { return forward_block_begin_; }
  // The most tasks of one (stored view, orbit): what sizes the transpose's thread blocks.
  int64_t most_tasks_per_orbit() const { return most_tasks_per_orbit_; }
  // Device bytes of tasks(), orbit_task_begin() and forward_blocks().
  uint64_t bytes() const;

 private:
  std::vector<TiledTask> tasks_;
  std::vector<int64_t> orbit_task_begin_;
  std::vector<TiledForwardBlock> forward_blocks_;
  std::vector<int64_t> forward_block_begin_;
  int64_t most_tasks_per_orbit_ = 0;
};

}  // namespace tomo::core::system_matrix
