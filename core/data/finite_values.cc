#include "core/data/finite_values.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "core/base/parallel_for.h"

namespace tomo::core {

int64_t FirstNonFiniteIndex(const float* values, int64_t count) {
  constexpr int64_t kBlock = int64_t{1} << 22;  // 16 MiB of floats
  if (count <= kBlock) {
    for (int64_t i = 0; i < count; ++i) {
      if (!std::isfinite(values[i])) return i;
    }
    return -1;
  }
  const int64_t blocks = (count + kBlock - 1) / kBlock;
  std::atomic<int64_t> first{count};
  ParallelFor(blocks, [&](int64_t block_begin, int64_t block_end) {
    for (int64_t b = block_begin; b < block_end; ++b) {
      const int64_t begin = b * kBlock;
      // Blocks after one with a known bad value cannot hold the first.
      if (begin >= first.load(std::memory_order_relaxed)) return;
      const int64_t end = std::min(count, begin + kBlock);
      for (int64_t i = begin; i < end; ++i) {
        if (!std::isfinite(values[i])) {
          int64_t seen = first.load();
          while (i < seen && !first.compare_exchange_weak(seen, i)) {
          }
          return;
        }
      }
    }
  });
  const int64_t found = first.load();
  return found < count ? found : -1;
}

}  // namespace tomo::core
