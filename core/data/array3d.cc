#include "core/data/array3d.h"

#include "core/base/parallel_for.h"
#include "core/data/host_block_pool.h"

namespace tomo::core {

void* Array3D::AllocateLarge(size_t bytes) {
  if (bytes < kLargeBlockBytes) return ::operator new(bytes);
  return HostBlockPool::Get().Take(bytes);
}

void Array3D::FreeLarge(void* p, size_t bytes) noexcept {
  if (bytes < kLargeBlockBytes) {
    ::operator delete(p);
  } else {
    HostBlockPool::Get().GiveBack(p, bytes);
  }
}

void Array3D::Fill(float value) { ParallelFill(values_.data(), size(), value); }

Array3D Array3D::Clone() const {
  Array3D copy;
  copy.dims_ = dims_;
  copy.values_.resize(values_.size());
  ParallelCopy(values_.data(), size(), copy.values_.data());
  return copy;
}

}  // namespace tomo::core
