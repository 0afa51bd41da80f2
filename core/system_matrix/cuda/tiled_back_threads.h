// Threads per thread block of the tiled transpose (cuda/tiled_products.cu), which runs one
// thread block per orbit of tiles: the block owns the orbit's pixels, so the orbit's work
// cannot be split over blocks, and a launch lasts as long as its most loaded multiprocessor.
//
// Measured on an H200 (132 multiprocessors, 1024 threads each at the kernel's 64 registers;
// bench/NOTES.md): with 136 orbits (512^2, 16-pixel tiles) one block of 1024 threads per
// orbit, in two waves, beat every shape in one wave: 512 threads (two blocks on four
// multiprocessors) was 15% slower, and clusters of 2 to 8 blocks per orbit that add their
// accumulators through distributed shared memory were 11-54% slower. With 528 orbits
// (1024^2) four blocks of 256 threads per multiprocessor, one wave, beat 1024 threads in four
// waves by 5%. So the rule: as many blocks per multiprocessor as whole multiples of the
// multiprocessors the orbits make (at least one), sharing its threads. Host code.
#pragma once

#include <cstdint>

namespace tomo::core::system_matrix::cuda {

// threads_per_multiprocessor / max(1, floor(orbits / multiprocessors)), in whole warps,
// then at most 32 per task of the orbit with the most (`most_tasks`), and within [64, 1024].
int TiledBackThreads(int64_t orbits, int64_t most_tasks, int multiprocessors,
                     int threads_per_multiprocessor);

}  // namespace tomo::core::system_matrix::cuda
