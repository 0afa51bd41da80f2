#include "core/system_matrix/cuda/tiled_back_threads.h"

#include <algorithm>

namespace tomo::core::system_matrix::cuda {

int TiledBackThreads(int64_t orbits, int64_t most_tasks, int multiprocessors,
                     int threads_per_multiprocessor) {
  const int64_t per_multiprocessor =
      std::max<int64_t>(1, orbits / std::max(1, multiprocessors));
  const int64_t share = threads_per_multiprocessor / per_multiprocessor / 32 * 32;
  const int64_t threads = std::min<int64_t>(share, 32 * std::max<int64_t>(1, most_tasks));
  return static_cast<int>(std::clamp<int64_t>(threads, 64, 1024));
}

}  // namespace tomo::core::system_matrix::cuda
