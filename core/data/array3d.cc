#include "core/data/array3d.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

#include "core/base/parallel_for.h"

namespace tomo::core {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// Arrays from this size on get huge-page-aligned memory.
constexpr size_t kLargeBytes = size_t{32} << 20;

}  // namespace

void* Array3D::AllocateLarge(size_t bytes) {
  if (bytes < kLargeBytes) return ::operator new(bytes);
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p == nullptr) throw std::bad_alloc();
  // A hint: without transparent huge pages (or with them off) this fails and nothing
  // changes.
  madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

void Array3D::FreeLarge(void* p, size_t bytes) noexcept {
  if (bytes < kLargeBytes) {
    ::operator delete(p);
  } else {
    std::free(p);
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
