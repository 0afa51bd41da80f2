// glibc's malloc hands freed memory back to the kernel eagerly: a heap whose free top
// exceeds M_TRIM_THRESHOLD is trimmed, and blocks above M_MMAP_THRESHOLD get a mapping of
// their own. A gRPC stream of 1 MiB messages allocates and frees its receive buffers and
// message strings once per message, so the pages went back to the kernel and came again,
// faulted in and zeroed, every time: uploads into tomod ran 3-5x slower (issue 4), and a
// client's download took 40-90 thousand extra page faults per 0.54 GB (bench/NOTES.md
// v0.13). Processes that move bulk data call this once at start-up: tomod, the tomo CLI,
// tomod-bench. A program using the client library may do the same.
#pragma once

namespace tomo::transfer {

// Keeps up to 256 MiB of free heap and serves blocks up to 32 MiB (glibc's largest
// M_MMAP_THRESHOLD) from the heap.
void KeepTransferBuffersInTheHeap();

}  // namespace tomo::transfer
