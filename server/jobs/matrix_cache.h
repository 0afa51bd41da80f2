// MatrixCache: tomod's bounded store of built system matrices for ART (the "art"
// algorithm, core/algorithms/stored_matrix_art.h), so that a second job of the same scan
// and grid skips the build. Keyed by everything the matrix depends on: the fan beam's
// views and detector, the volume's grid and the requested format. Least recently used
// matrices are dropped when the bytes kept would exceed the capacity (tomod's
// --matrix_cache_bytes; 0 keeps nothing); a matrix larger than the capacity is built and
// used but not kept. A matrix's bytes are what it holds (StoredMatrix::held_bytes): the
// tiled layout that a job's upload builds from a kept matrix stays with it for later jobs
// and counts from then on. They are counted again at every Get, and while they exceed the
// capacity the cache lets go of layouts (least recently used matrix first), then of whole
// matrices. Jobs running meanwhile keep the matrices they use alive (shared
// ownership). It also remembers the tiled layouts' counted bytes per scan (admission asks
// at each submitted job; TiledLayoutBytes). Thread-safe: builds happen outside the lock
// (two jobs of one new scan at once may both build it; the second's copy is not kept).
//
//   auto cache = std::make_shared<MatrixCache>(4ull << 30);
//   registry.Register("art", core::MakeStoredMatrixArtAlgorithm(cache));
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/algorithms/stored_matrix_art.h"

namespace tomo::server {

class MatrixCache final : public core::StoredMatrixSource {
 public:
  explicit MatrixCache(uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  absl::StatusOr<Found> Get(const core::VectorGeometry& geometry,
                            const core::VolumeGeometry& volume,
                            core::system_matrix::MatrixFormat format,
                            uint64_t budget_bytes) override;
  // Counted once per scan and remembered (kLayoutCounts scans, the oldest forgotten first):
  // each submitted tiled ART job asks, and a count takes seconds.
  absl::StatusOr<uint64_t> TiledLayoutBytes(const core::VectorGeometry& geometry,
                                            const core::VolumeGeometry& volume) override;
  static constexpr size_t kLayoutCounts = 64;

  uint64_t capacity_bytes() const { return capacity_bytes_; }
  uint64_t kept_bytes() const;
  int64_t kept_matrices() const;
  int64_t hits() const;    // Gets answered with a kept matrix
  int64_t misses() const;  // Gets that built one
  int64_t layout_counts() const;  // TiledLayoutBytes calls that counted

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const core::system_matrix::StoredMatrix> matrix;
    uint64_t bytes = 0;  // its held_bytes() when last counted
  };
  // The exact bytes of everything the matrix depends on (doubles as their bit patterns).
  static std::string KeyOf(const core::VectorGeometry& geometry,
                           const core::VolumeGeometry& volume,
                           core::system_matrix::MatrixFormat format);
  void Keep(std::string key, std::shared_ptr<const core::system_matrix::StoredMatrix> matrix)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Counts every kept matrix's bytes again (layouts built since); while they exceed
  // `capacity`, forgets layouts, then drops matrices, least recently used first.
  void RecountAndDropOver(uint64_t capacity) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const uint64_t capacity_bytes_;
  mutable absl::Mutex mutex_;
  std::list<Entry> recent_ ABSL_GUARDED_BY(mutex_);  // most recently used first
  std::map<std::string, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mutex_);
  uint64_t kept_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t hits_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mutex_) = 0;
  // The tiled layouts' counted bytes by scan key, and the keys oldest first.
  std::map<std::string, uint64_t> layout_bytes_ ABSL_GUARDED_BY(mutex_);
  std::list<std::string> layout_keys_ ABSL_GUARDED_BY(mutex_);
  int64_t layout_counts_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace tomo::server
