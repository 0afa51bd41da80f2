#include "core/algorithms/slab_plan.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tomo::core {
namespace {

constexpr uint64_t kVolumeValueBytes = 4;  // float32 volume on every device

uint64_t SliceBytes(const VolumeGeometry& volume) {
  return static_cast<uint64_t>(volume.size().x) * static_cast<uint64_t>(volume.size().y) *
         kVolumeValueBytes;
}

uint64_t ViewBytes(const VectorGeometry& geometry, int bytes_per_value) {
  return static_cast<uint64_t>(geometry.rows()) * static_cast<uint64_t>(geometry.columns()) *
         static_cast<uint64_t>(bytes_per_value);
}

// Splits [0, total) into `parts` contiguous pieces as equal as possible.
template <typename Piece>
std::vector<Piece> SplitEvenly(int64_t total, int64_t parts) {
  std::vector<Piece> pieces;
  pieces.reserve(static_cast<size_t>(parts));
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t begin = p * total / parts;
    const int64_t end = (p + 1) * total / parts;
    pieces.push_back(Piece{begin, end - begin});
  }
  return pieces;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

uint64_t SlabBytes(const VectorGeometry& geometry, const VolumeGeometry& volume,
                   int bytes_per_projection_value, int64_t slices, int64_t views) {
  return static_cast<uint64_t>(slices) * SliceBytes(volume) +
         static_cast<uint64_t>(views) * ViewBytes(geometry, bytes_per_projection_value);
}

absl::StatusOr<SlabPlan> PlanSlabs(const VectorGeometry& geometry, const VolumeGeometry& volume,
                                   int bytes_per_projection_value, uint64_t budget_bytes,
                                   int64_t min_slabs) {
  if (bytes_per_projection_value < 1 || bytes_per_projection_value > 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bytes_per_projection_value: ", bytes_per_projection_value, " is outside [1, 8]"));
  }
  if (min_slabs < 1) {
    return absl::InvalidArgumentError(absl::StrCat("min_slabs: ", min_slabs, " is below 1"));
  }
  const int64_t nz = volume.size().z;
  const int64_t views = geometry.num_views();
  const uint64_t slice = SliceBytes(volume);
  const uint64_t view = ViewBytes(geometry, bytes_per_projection_value);

  int64_t slab_slices = nz;
  int64_t chunk_views = views;
  if (budget_bytes != 0) {
    const uint64_t minimum = slice + view;
    if (budget_bytes < minimum) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "memory budget of ", budget_bytes, " bytes is below the minimum of ", minimum,
          " bytes (one slice of ", volume.size().x, " x ", volume.size().y,
          " voxels and one view of ", geometry.rows(), " x ", geometry.columns(), " values)"));
    }
    const uint64_t all_views = static_cast<uint64_t>(views) * view;
    if (all_views + slice <= budget_bytes) {
      // Every view in one chunk; as many slices as fit beside them.
      slab_slices = static_cast<int64_t>(
          std::min<uint64_t>(static_cast<uint64_t>(nz), (budget_bytes - all_views) / slice));
    } else {
      // Chunks of views: about half the budget (at least one slice) for the volume slab,
      // the rest for the chunk; then give what the chunk leaves back to the slab.
      const uint64_t volume_share = std::max<uint64_t>(slice, budget_bytes / 2);
      slab_slices = static_cast<int64_t>(
          std::min<uint64_t>(static_cast<uint64_t>(nz), volume_share / slice));
      uint64_t left = budget_bytes - static_cast<uint64_t>(slab_slices) * slice;
      if (left < view) {
        slab_slices = static_cast<int64_t>((budget_bytes - view) / slice);  // >= 1
        left = budget_bytes - static_cast<uint64_t>(slab_slices) * slice;
      }
      chunk_views =
          static_cast<int64_t>(std::min<uint64_t>(static_cast<uint64_t>(views), left / view));
      const uint64_t chunk_bytes = static_cast<uint64_t>(chunk_views) * view;
      slab_slices = static_cast<int64_t>(std::min<uint64_t>(
          static_cast<uint64_t>(nz), (budget_bytes - chunk_bytes) / slice));
    }
  }
  // Equal slabs: as few as the budget allows, at least min_slabs (at most nz).
  const int64_t slab_count = std::min(nz, std::max(min_slabs, CeilDiv(nz, slab_slices)));
  const int64_t chunk_count = CeilDiv(views, chunk_views);
  SlabPlan plan;
  plan.slabs = SplitEvenly<Slab>(nz, slab_count);
  plan.view_chunks = SplitEvenly<ViewChunk>(views, chunk_count);
  plan.peak_bytes = SlabBytes(geometry, volume, bytes_per_projection_value,
                              CeilDiv(nz, slab_count), CeilDiv(views, chunk_count));
  return plan;
}

absl::StatusOr<VolumeGeometry> SlabVolume(const VolumeGeometry& volume, const Slab& slab) {
  return volume.Slices(slab.first_slice, slab.slices, "slab");
}

}  // namespace tomo::core
