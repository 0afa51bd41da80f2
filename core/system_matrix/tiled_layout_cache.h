// TiledLayoutCache: the tiled layouts (tiled_runs.h) of one symmetric matrix, built on first
// use and kept, one per tile side, so that the matrix's later uploads for the tiled kernels
// (cuda/device_stored_matrix.h) skip the build: seconds on the host at every upload
// otherwise (bench/NOTES.md), paid again by every tomod job of the same scan.
//
// A SymmetricSystemMatrix owns one (SymmetricSystemMatrix::TiledLayout) and shares it with
// its copies, which hold the same rows. Thread-safe: the callers for one side wait for a
// single build; a build's error is kept and returned to every later caller (it depends on
// the side and the scan alone). The layouts live as long as the cache or a caller holds
// them; Forget lets the cache's go (tomod's matrix cache, over its capacity, drops layouts
// before it drops matrices).
//
//   TOMO_ASSIGN_OR_RETURN(std::shared_ptr<const TiledRuns> layout, a.TiledLayout(16));
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tomo::core::system_matrix {

class SymmetricSystemMatrix;
class TiledRuns;

class TiledLayoutCache {
 public:
  // The layout of `matrix` (the matrix that owns this cache) for tile_side (<= 0:
  // TiledRuns::TileSideFor its grid): built by TiledRuns::Build on the first call for that
  // side, the same object afterwards.
  absl::StatusOr<std::shared_ptr<const TiledRuns>> Get(const SymmetricSystemMatrix& matrix,
                                                       int tile_side);
  // Bytes of the layouts it holds (TiledRuns::bytes()); 0 before the first is built.
  uint64_t bytes() const;
  // Lets go of every layout: the next Get of a side builds it again. Callers holding one
  // keep it; a build under way finishes for its callers and is not kept.
  void Forget();

 private:
  struct Side {
    absl::Mutex mutex;  // held through the build, so that one build serves every caller
    bool built ABSL_GUARDED_BY(mutex) = false;
    absl::StatusOr<std::shared_ptr<const TiledRuns>> layout ABSL_GUARDED_BY(mutex);
    std::atomic<uint64_t> bytes{0};  // set once built: read without waiting for a build
  };
  mutable absl::Mutex mutex_;
  std::map<int, std::shared_ptr<Side>> sides_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace tomo::core::system_matrix
