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

// Fill and copy of large float arrays on several threads (one thread below 4 Mi values):
// both are bound by memory bandwidth and, on fresh memory, by page faults, and both scale
// with threads (a 512^3 volume takes about 0.3 s to fault in on one thread). Large copies
// use streaming stores (streaming_copy.h).
void ParallelFill(float* to, int64_t count, float value);
void ParallelCopy(const float* from, int64_t count, float* to);

}  // namespace tomo::core
