// CopyStreaming: a copy of float values whose stores bypass the caches (non-temporal
// stores), for large copies into memory that is not read again soon: projections gathered
// into page-locked staging buffers that a copy engine then reads, a downloaded volume
// written into the result.
//
// Why: an ordinary store to a line that is not in the cache first reads the line (read for
// ownership), so a cached copy moves 12 bytes of memory traffic per 4 copied (read the
// source, read and write the destination). Non-temporal stores write whole lines without
// reading them: 8 bytes per 4. glibc's memcpy switches to them only above a threshold of
// the order of the last-level cache, larger than the pieces (a view's band of rows, a few
// MB) the gathers copy. When several devices are fed at once the host's memory bandwidth
// is what they share, so the third saved counts.
//
// On x86-64 (SSE2, always present there) the destination's unaligned head and tail are
// copied plainly and the rest with 16-byte streaming stores, followed by a store fence so
// the values are visible to other threads (and to a copy engine the caller starts after
// this returns). Elsewhere it is memcpy. Source and destination must not overlap.
#pragma once

#include <cstdint>

namespace tomo::core {

void CopyStreaming(const float* from, int64_t count, float* to);

}  // namespace tomo::core
