#include "core/system_matrix/tiled_layout_cache.h"

#include <utility>

#include "core/system_matrix/symmetric_system_matrix.h"
#include "core/system_matrix/tiled_runs.h"

namespace tomo::core::system_matrix {

absl::StatusOr<std::shared_ptr<const TiledRuns>> TiledLayoutCache::Get(
    const SymmetricSystemMatrix& matrix, int tile_side) {
  // The default side is resolved before keying, so that it and its explicit value share.
  if (tile_side <= 0) tile_side = TiledRuns::TileSideFor(matrix.scan().nx());
  std::shared_ptr<Side> side;
  {
    absl::MutexLock lock(&mutex_);
    std::shared_ptr<Side>& slot = sides_[tile_side];
    if (slot == nullptr) slot = std::make_shared<Side>();
    side = slot;
  }
  absl::MutexLock lock(&side->mutex);
  if (!side->built) {
    absl::StatusOr<TiledRuns> built = TiledRuns::Build(matrix, tile_side);
    if (built.ok()) {
      auto layout = std::make_shared<const TiledRuns>(*std::move(built));
      side->bytes.store(layout->bytes(), std::memory_order_relaxed);
      side->layout = std::move(layout);
    } else {
      side->layout = built.status();
    }
    side->built = true;
  }
  return side->layout;
}

uint64_t TiledLayoutCache::bytes() const {
  absl::MutexLock lock(&mutex_);
  uint64_t total = 0;
  for (const auto& [tile_side, side] : sides_) total += side->bytes.load(std::memory_order_relaxed);
  return total;
}

void TiledLayoutCache::Forget() {
  absl::MutexLock lock(&mutex_);
  sides_.clear();
}

}  // namespace tomo::core::system_matrix
