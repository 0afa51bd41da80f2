// ParallelFor: runs body(begin, end) over [0, count) split into contiguous chunks on
// std::thread workers (hardware concurrency by default). Returns when all are done.
// Exceptions are not used in the core; the body must not throw.
//
//   ParallelFor(ny, [&](int64_t y0, int64_t y1) { for (y = y0; y < y1; ++y) ... });
#pragma once

#include <cstdint>
#include <functional>

namespace tomo::core {

int DefaultThreadCount();
void ParallelFor(int64_t count, const std::function<void(int64_t, int64_t)>& body,
                 int threads = 0);

}  // namespace tomo::core
