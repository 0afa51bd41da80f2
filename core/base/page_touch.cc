#include "core/base/page_touch.h"

#include <algorithm>
#include <cstdint>

#include "core/base/parallel_for.h"

namespace tomo::core {
namespace {

// One write per page maps it (a transparent huge page maps 2 MiB at the first write).
constexpr size_t kPage = 4096;
// Touched per step (all threads together) before keep_going is asked again: about a
// millisecond of faulting, so the device never waits long for the download to start.
constexpr size_t kBlock = size_t{64} << 20;

}  // namespace

size_t TouchPagesWhile(void* data, size_t bytes, const std::function<bool()>& keep_going) {
  auto* base = static_cast<volatile char*>(data);
  size_t done = 0;
  while (done < bytes && keep_going()) {
    const size_t block = std::min(kBlock, bytes - done);
    const int64_t pages = static_cast<int64_t>((block + kPage - 1) / kPage);
    ParallelFor(pages, [&](int64_t first, int64_t end) {
      for (int64_t p = first; p < end; ++p) base[done + static_cast<size_t>(p) * kPage] = 0;
    });
    done += block;
  }
  return done;
}

}  // namespace tomo::core
