#include "core/data/finite_values.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/base/parallel_for.h"

namespace tomo::core {

namespace {

int64_t FirstNonFiniteScalar(const float* values, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return -1;
}

// Values checked at once: a fixed count, so that the compiler vectorizes the check at -O2.
constexpr int64_t kGroup = 1024;

// Whether a group holds an infinity or a NaN (all exponent bits set), as a branch-free
// maximum over the exponent fields: about 3x the speed of the scalar loop with its early
// exit (4 against 12 GB/s on one core), which bounded reading a job's input back.
bool GroupHasNonFinite(const float* values) {
  uint32_t exponents = 0;
  for (int64_t i = 0; i < kGroup; ++i) {
    uint32_t bits;
    std::memcpy(&bits, values + i, sizeof(bits));
    exponents = std::max(exponents, bits & 0x7f800000u);
  }
  return exponents == 0x7f800000u;
}

int64_t FirstNonFiniteSerial(const float* values, int64_t count) {
  int64_t i = 0;
  for (; i + kGroup <= count; i += kGroup) {
    if (GroupHasNonFinite(values + i)) return i + FirstNonFiniteScalar(values + i, kGroup);
  }
  const int64_t tail = FirstNonFiniteScalar(values + i, count - i);
  return tail < 0 ? -1 : i + tail;
}

}  // namespace

int64_t FirstNonFiniteIndex(const float* values, int64_t count) {
  constexpr int64_t kBlock = int64_t{1} << 22;  // 16 MiB of floats
  if (count <= kBlock) return FirstNonFiniteSerial(values, count);
  const int64_t blocks = (count + kBlock - 1) / kBlock;
  std::atomic<int64_t> first{count};
  ParallelFor(blocks, [&](int64_t block_begin, int64_t block_end) {
    for (int64_t b = block_begin; b < block_end; ++b) {
      const int64_t begin = b * kBlock;
      // Blocks after one with a known bad value cannot hold the first.
      if (begin >= first.load(std::memory_order_relaxed)) return;
      const int64_t end = std::min(count, begin + kBlock);
      const int64_t found = FirstNonFiniteSerial(values + begin, end - begin);
      if (found >= 0) {
        const int64_t i = begin + found;
        int64_t seen = first.load();
        while (i < seen && !first.compare_exchange_weak(seen, i)) {
        }
        return;
      }
    }
  });
  const int64_t found = first.load();
  return found < count ? found : -1;
}

}  // namespace tomo::core
