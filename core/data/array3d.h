// Array3D: a dense float32 host array of three dimensions, slowest first.
//
// Volumes are (z, y, x) and projections (view, row, column), x and column fastest.
// Move-only, so that a large volume is never copied by accident; Clone() copies on
// purpose. Not thread-safe for concurrent writes to the same element.
//
//   Array3D volume({1, 512, 512});           // zero-filled
//   volume.at(0, y, x) = 1.0f;
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace tomo::core {

struct Dims3 {
  int64_t d0 = 0;  // slowest: z or view
  int64_t d1 = 0;  // y or detector row
  int64_t d2 = 0;  // fastest: x or detector column
  int64_t count() const { return d0 * d1 * d2; }
  friend bool operator==(const Dims3& a, const Dims3& b) {
    return a.d0 == b.d0 && a.d1 == b.d1 && a.d2 == b.d2;
  }
  friend bool operator!=(const Dims3& a, const Dims3& b) { return !(a == b); }
};

class Array3D {
 public:
  Array3D() = default;
  // Filled with `fill`, by several threads for large arrays (ParallelFill: their pages are
  // faulted in in parallel).
  explicit Array3D(Dims3 dims, float fill = 0.0f) : dims_(dims), values_(Count(dims)) {
    Fill(fill);
  }
  // Contents unspecified: for outputs that are then written in full (a volume a back
  // projection overwrites), which saves a pass over the memory; its pages are first
  // touched by whoever writes them.
  static Array3D Uninitialized(Dims3 dims) {
    Array3D array;
    array.dims_ = dims;
    array.values_.resize(Count(dims));
    return array;
  }
  Array3D(Array3D&&) noexcept = default;
  Array3D& operator=(Array3D&&) noexcept = default;
  Array3D(const Array3D&) = delete;
  Array3D& operator=(const Array3D&) = delete;

  Array3D Clone() const;

  const Dims3& dims() const { return dims_; }
  int64_t size() const { return static_cast<int64_t>(values_.size()); }
  size_t size_bytes() const { return values_.size() * sizeof(float); }
  float* data() { return values_.data(); }
  const float* data() const { return values_.data(); }

  float& at(int64_t i0, int64_t i1, int64_t i2) {
    return values_[static_cast<size_t>((i0 * dims_.d1 + i1) * dims_.d2 + i2)];
  }
  float at(int64_t i0, int64_t i1, int64_t i2) const {
    return values_[static_cast<size_t>((i0 * dims_.d1 + i1) * dims_.d2 + i2)];
  }

 private:
  // Leaves elements uninitialised when the vector is sized, so that the constructor's
  // (parallel) fill or Clone's (parallel) copy is the first touch; and backs large arrays
  // with transparent huge pages where the kernel offers them (AllocateLarge): a 4 GB volume
  // is a million 4 KiB page faults, which made multi-GPU FDK host-bound (bench/NOTES.md).
  template <typename T>
  struct DefaultInitAllocator : std::allocator<T> {
    template <typename U>
    struct rebind {
      using other = DefaultInitAllocator<U>;
    };
    DefaultInitAllocator() = default;
    template <typename U>
    DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
    T* allocate(size_t n) { return static_cast<T*>(AllocateLarge(n * sizeof(T))); }
    void deallocate(T* p, size_t n) noexcept { FreeLarge(p, n * sizeof(T)); }
    template <typename U, typename... Args>
    void construct(U* p, Args&&... args) {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
    template <typename U>
    void construct(U* p) noexcept {
      ::new (static_cast<void*>(p)) U;
    }
  };
  static size_t Count(const Dims3& dims) { return static_cast<size_t>(dims.count()); }
  // operator new for small blocks; 2 MiB-aligned memory advised for huge pages for large.
  static void* AllocateLarge(size_t bytes);
  static void FreeLarge(void* p, size_t bytes) noexcept;
  void Fill(float value);

  Dims3 dims_;
  std::vector<float, DefaultInitAllocator<float>> values_;
};

}  // namespace tomo::core
