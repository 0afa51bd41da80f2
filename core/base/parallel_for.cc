#include "core/base/parallel_for.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "core/base/streaming_copy.h"

namespace tomo::core {

int DefaultThreadCount() {
  // hardware_concurrency() may return 0 when the count is unknown.
  return std::max(1u, std::thread::hardware_concurrency());
}

void ParallelFor(int64_t count, const std::function<void(int64_t, int64_t)>& body, int threads) {
  if (count <= 0) return;
  if (threads <= 0) threads = DefaultThreadCount();
  const int64_t workers = std::min<int64_t>(threads, count);
  if (workers == 1) {
    body(0, count);
    return;
  }
  // Balanced contiguous chunks: the first `remainder` chunks get one extra item.
  const int64_t base = count / workers;
  const int64_t remainder = count % workers;
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(workers - 1));
  int64_t begin = 0;
  int64_t first_chunk_end = 0;
  for (int64_t w = 0; w < workers; ++w) {
    const int64_t end = begin + base + (w < remainder ? 1 : 0);
    if (w == 0) {
      first_chunk_end = end;  // run on the calling thread, after starting the others
    } else {
      pool.emplace_back([&body, begin, end] { body(begin, end); });
    }
    begin = end;
  }
  body(0, first_chunk_end);
  for (std::thread& t : pool) t.join();
}

namespace {

// Below this many values one thread fills or copies faster than threads start.
constexpr int64_t kParallelValues = int64_t{1} << 22;
// Contiguous blocks handed to the threads: 16 MiB of floats.
constexpr int64_t kBlockValues = int64_t{1} << 22;

// body(begin, end) over [0, count) in blocks, on several threads when count is large.
void ForBlocks(int64_t count, const std::function<void(int64_t, int64_t)>& body) {
  if (count < kParallelValues) {
    body(0, count);
    return;
  }
  const int64_t blocks = (count + kBlockValues - 1) / kBlockValues;
  ParallelFor(blocks, [&](int64_t first, int64_t end) {
    body(first * kBlockValues, std::min(count, end * kBlockValues));
  });
}

}  // namespace

void ParallelFill(float* to, int64_t count, float value) {
  ForBlocks(count, [&](int64_t begin, int64_t end) { std::fill(to + begin, to + end, value); });
}

void ParallelCopy(const float* from, int64_t count, float* to) {
  if (count < kParallelValues) {
    std::memcpy(to, from, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  // Large copies: streaming stores (streaming_copy.h), a third less memory traffic.
  ForBlocks(count, [&](int64_t begin, int64_t end) {
    CopyStreaming(from + begin, end - begin, to + begin);
  });
}

}  // namespace tomo::core
