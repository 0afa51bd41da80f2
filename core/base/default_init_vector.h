// DefaultInitVector<T>: a std::vector whose resize() leaves new elements of a trivial type
// uninitialized (default- rather than value-initialized), for large arrays that are sized
// once and then written in full, in parallel.
//
// Why: resize() of a std::vector zero-fills on the calling thread, and that first write is
// what maps the fresh pages (a page fault each); for a layout of 0.5-1.5 GB it was a third
// of the build, one thread, before the threads overwrote every value anyway. Left
// uninitialized, the threads that write the values map the pages too, each its own part.
//
// Every element must be written before it is read. Elements constructed with a value
// (push_back, insert, assign, resize(n, value)) are as in std::vector.
//
//   DefaultInitVector<float> weights;
//   weights.resize(slots);  // no zero-fill
//   ParallelFor(views, [&](int64_t v0, int64_t v1) { ... weights[i] = ...; });
#pragma once

#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace tomo::core {

template <typename T>
class DefaultInitAllocator : public std::allocator<T> {
 public:
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() noexcept = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}

  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <typename T>
using DefaultInitVector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace tomo::core
