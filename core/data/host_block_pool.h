// HostBlockPool: where large host arrays (Array3D from kLargeBlockBytes on) get their memory,
// and where it goes when they are freed. A freed block is kept, its pages still mapped, for
// the next array of the same size, instead of being handed back to the system: a service
// that reconstructs one volume size after another then neither unmaps nor faults in (and
// zeroes) gigabytes per job. Blocks are huge-page aligned and advised for transparent huge
// pages where the kernel offers them.
//
// A block in use can carry an attachment: something that must live exactly as long as the
// block's memory, such as its page-locked registration (core/devices/host_pinning.h's
// PageLockReusedBlock). It is destroyed before the memory is really freed, and not when the
// block goes back into the pool, so that a block page-locked once stays so for every later
// array that gets it.
//
// The kept bytes are bounded (SetKeptBytesLimit; by default an eighth of the machine's
// memory): giving back a block past the bound frees the blocks kept longest first; a block
// larger than the bound is freed at once. A block handed out again holds what its last
// array left there (Array3D::Uninitialized's contract: the caller writes every value).
//
// Thread-safe: every function may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace tomo::core {

// Arrays from this size on take their memory from the pool.
inline constexpr size_t kLargeBlockBytes = size_t{32} << 20;

struct HostBlock {
  void* start = nullptr;
  size_t bytes = 0;  // the block's size: the request rounded up to whole huge pages
  int64_t uses = 0;  // arrays that have had it, the current one included
  bool attached = false;
};

class HostBlockPool {
 public:
  // The process's pool.
  static HostBlockPool& Get();

  // A block of at least `bytes` (>= kLargeBlockBytes): a kept one of the same rounded size
  // when there is one (an attached one first), else new memory. When the system has none,
  // frees every kept block and tries once more; then throws std::bad_alloc.
  void* Take(size_t bytes);
  // Gives back what Take returned for `bytes`: kept, or freed when past the bound.
  void GiveBack(void* start, size_t bytes) noexcept;

  // The block in use (taken and not given back) that holds `address`, if any.
  std::optional<HostBlock> FindInUse(const void* address) const;
  // Attaches `attachment` to the block in use that starts at `start`, to be destroyed just
  // before the block's memory is freed. False (and `attachment` dropped) when there is no
  // such block or it has an attachment already.
  bool Attach(void* start, std::shared_ptr<void> attachment);

  // The most bytes kept for reuse (blocks in use do not count); lowering it frees kept
  // blocks at once. 0 keeps nothing.
  void SetKeptBytesLimit(size_t bytes);
  size_t kept_bytes_limit() const;
  size_t kept_bytes() const;
  // Frees every kept block (their attachments first).
  void Clear();

  HostBlockPool(const HostBlockPool&) = delete;
  HostBlockPool& operator=(const HostBlockPool&) = delete;

 private:
  HostBlockPool();
  ~HostBlockPool();
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tomo::core
