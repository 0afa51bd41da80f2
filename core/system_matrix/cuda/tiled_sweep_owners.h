// Which thread block of the one-launch ART sweep (cuda/tiled_products.cu, TiledSweepKernel)
// owns which orbits of tiles. The sweep's thread blocks stay resident for the whole sweep
// and meet at two grid-wide barriers per ART block; between them a thread block runs the
// forward and the transpose of its own orbits only. Owning an orbit for the whole sweep is
// what lets the transpose of one ART block and the forward of the next follow each other
// with no barrier: the orbit's pixels are written and read again by the same thread block.
//
// An ART block lasts as long as its most loaded thread block, so the orbits are dealt
// longest processing time first: by decreasing tasks summed over the stored views (ties:
// by index), each to the thread block with the fewest tasks so far (ties: the lowest).
// Host code.
#pragma once

#include <cstdint>
#include <vector>

#include "core/system_matrix/tiled_slab.h"

namespace tomo::core::system_matrix::cuda {

struct TiledSweepOwners {
  // Thread block t owns orbits[begin[t]] .. orbits[begin[t + 1] - 1]; begin has
  // thread_blocks + 1 entries.
  std::vector<int32_t> begin;
  std::vector<int32_t> orbits;
  int32_t most_orbits = 0;  // the most orbits one thread block owns
  // Per stored view, the most tasks one thread block takes, summed over the views: the
  // tasks on the sweep's critical path (compare with the total over thread blocks).
  int64_t critical_tasks = 0;
};

// orbit_task_begin: TiledTasks::orbit_task_begin() (stored views x orbits + 1 offsets).
// thread_blocks >= 1; thread blocks beyond the orbits own none.
TiledSweepOwners AssignTiledSweepOwners(const std::vector<int64_t>& orbit_task_begin,
                                        int64_t orbits_per_view, int thread_blocks);

// The most layout warps and the most tasks one thread block holds in one stored view
// (summed over its orbits): what the sweep stages in shared memory per ART block.
struct TiledSweepStage {
  int32_t warps = 0;
  int32_t tasks = 0;
};
// orbit_warp_begin, orbit_task_begin: TiledRuns::orbit_warp_begin(),
// TiledTasks::orbit_task_begin() (stored views x orbits + 1 offsets each).
TiledSweepStage CountTiledSweepStage(const TiledSweepOwners& owners,
                                     const std::vector<int64_t>& orbit_warp_begin,
                                     const std::vector<int64_t>& orbit_task_begin,
                                     int64_t orbits_per_view);

// The most slots one thread block holds in one stored view, summed over its orbits: each
// orbit's slots run from its first layout warp's slot_base to its last warp's end (the
// warps of an orbit follow each other), which the sweep copies whole into shared memory
// when two blocks' worth fit there. warps: TiledRuns::warps().
int64_t CountTiledSweepSlots(const TiledSweepOwners& owners,
                             const std::vector<int64_t>& orbit_warp_begin,
                             const std::vector<TiledWarp>& warps, int64_t orbits_per_view);

}  // namespace tomo::core::system_matrix::cuda
