// SlabPlan: how a back projection that does not fit the device is split (STYLE.md point 10:
// a pure function from geometry and a memory budget to a plan; the executor, Fdk in
// core/algorithms/filtered_back_projection.cc, follows it).
//
// The volume is cut along z into slabs of whole slices (each a VolumeGeometry with the same
// x/y grid, fewer z slices and its centre shifted: SlabVolume). When even all projections
// do not fit beside one slice, the views are cut into chunks as well: the back projection is
// a sum over views, so the executor back projects chunk after chunk into the same slab and
// adds them up. Memory model per back projection call (the device holds one slab and one
// chunk):  slices * nx * ny * 4  +  chunk_views * rows * columns * bytes_per_projection_value
// <= budget. Projections are counted whole (every detector row), not only the rows a slab's
// cone reaches: simple and conservative. A budget of 0 means no limit (one slab, one chunk).
// The plan prefers all views in one chunk (fewest uploads); with chunks, the volume and the
// chunk share the budget about half and half.
//
// Pure and thread-compatible; no device code.
// Errors: INVALID_ARGUMENT for bytes_per_projection_value outside {1..8} or min_slabs < 1;
// RESOURCE_EXHAUSTED naming the budget and the minimum when not even one slice and one
// view fit.
//
//   TOMO_ASSIGN_OR_RETURN(SlabPlan plan, PlanSlabs(geometry, volume, 4, 1 << 30));
//   for (const Slab& slab : plan.slabs) {
//     TOMO_ASSIGN_OR_RETURN(VolumeGeometry part, SlabVolume(volume, slab));
//     for (const ViewChunk& chunk : plan.view_chunks) { ... }
//   }
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/geometry/vector_geometry.h"
#include "core/geometry/volume_geometry.h"

namespace tomo::core {

// Slices [first_slice, first_slice + slices) of the volume along z.
struct Slab {
  int64_t first_slice = 0;
  int64_t slices = 0;
};

// Views [first_view, first_view + views) of the geometry.
struct ViewChunk {
  int64_t first_view = 0;
  int64_t views = 0;
};

struct SlabPlan {
  std::vector<Slab> slabs;             // cover [0, nz) in order, no overlap
  std::vector<ViewChunk> view_chunks;  // cover [0, views) in order, no overlap
  // Device bytes of the largest (slab, chunk) pair under the memory model above.
  uint64_t peak_bytes = 0;
};

// Device bytes of one back projection call under the memory model.
uint64_t SlabBytes(const VectorGeometry& geometry, const VolumeGeometry& volume,
                   int bytes_per_projection_value, int64_t slices, int64_t views);

// The plan for back projecting `geometry`'s projections into `volume` within budget_bytes
// (0: no limit). min_slabs (>= 1) asks for at least that many slabs (capped at nz), e.g.
// one per device to share the work; slabs are then as equal as whole slices allow.
absl::StatusOr<SlabPlan> PlanSlabs(const VectorGeometry& geometry, const VolumeGeometry& volume,
                                   int bytes_per_projection_value, uint64_t budget_bytes,
                                   int64_t min_slabs = 1);

// The VolumeGeometry of a slab: same x/y size, voxel size and centre x/y; slab.slices
// slices; centre z at the centre of the slab's slices in the full volume, so slab voxel
// (ix, iy, k) sits where full voxel (ix, iy, first_slice + k) does. INVALID_ARGUMENT when
// the slab is not inside the volume.
absl::StatusOr<VolumeGeometry> SlabVolume(const VolumeGeometry& volume, const Slab& slab);

}  // namespace tomo::core
