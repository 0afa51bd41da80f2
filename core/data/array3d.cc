#include "core/data/array3d.h"

#include <algorithm>
#include <cstring>

#include "core/base/parallel_for.h"

namespace tomo::core {
namespace {

// Below this many values one thread fills or copies faster than threads start.
constexpr int64_t kParallelValues = int64_t{1} << 22;
// Contiguous blocks per thread: 16 MiB of floats.
constexpr int64_t kBlockValues = int64_t{1} << 22;

// body(begin, end) over [0, count) in blocks, on several threads when count is large.
template <typename Body>
void ForBlocks(int64_t count, const Body& body) {
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

void Array3D::Fill(float value) {
  float* values = values_.data();
  ForBlocks(size(), [&](int64_t begin, int64_t end) {
    std::fill(values + begin, values + end, value);
  });
}

Array3D Array3D::Clone() const {
  Array3D copy;
  copy.dims_ = dims_;
  copy.values_.resize(values_.size());
  const float* from = values_.data();
  float* to = copy.values_.data();
  ForBlocks(size(), [&](int64_t begin, int64_t end) {
    std::memcpy(to + begin, from + begin, static_cast<size_t>(end - begin) * sizeof(float));
  });
  return copy;
}

}  // namespace tomo::core
