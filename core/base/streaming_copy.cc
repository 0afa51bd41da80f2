#include "core/base/streaming_copy.h"

#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define TOMO_STREAMING_STORES 1
#endif

namespace tomo::core {

void CopyStreaming(const float* from, int64_t count, float* to) {
  if (count <= 0) return;
#ifdef TOMO_STREAMING_STORES
  // Values before the destination's first 16-byte boundary (at most 3 when `to` is
  // float-aligned; all of them when it is not even that).
  const auto address = reinterpret_cast<uintptr_t>(to);
  int64_t head = address % sizeof(float) != 0
                     ? count
                     : static_cast<int64_t>(((16 - address % 16) % 16) / sizeof(float));
  if (head > count) head = count;
  std::memcpy(to, from, static_cast<size_t>(head) * sizeof(float));
  int64_t i = head;
  // Four 16-byte stores per step: a whole 64-byte line.
  for (; i + 16 <= count; i += 16) {
    const __m128 a = _mm_loadu_ps(from + i);
    const __m128 b = _mm_loadu_ps(from + i + 4);
    const __m128 c = _mm_loadu_ps(from + i + 8);
    const __m128 d = _mm_loadu_ps(from + i + 12);
    _mm_stream_ps(to + i, a);
    _mm_stream_ps(to + i + 4, b);
    _mm_stream_ps(to + i + 8, c);
    _mm_stream_ps(to + i + 12, d);
  }
  for (; i + 4 <= count; i += 4) _mm_stream_ps(to + i, _mm_loadu_ps(from + i));
  std::memcpy(to + i, from + i, static_cast<size_t>(count - i) * sizeof(float));
  _mm_sfence();
#else
  std::memcpy(to, from, static_cast<size_t>(count) * sizeof(float));
#endif
}

}  // namespace tomo::core
