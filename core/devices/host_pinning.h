// PinHostMemory: page-locks a range of host memory that already exists (an Array3D's
// values) for the devices' copy engines, so that a CUDA backend copies straight from it
// with asynchronous copies at the link's speed instead of through its own page-locked
// staging buffers. Device-neutral: callers need no CUDA header and work the same in a
// CPU-only build.
//
// With the CUDA backend built in and a device present, the range is registered with
// cudaHostRegister(cudaHostRegisterPortable: locked for every device's context, not only
// the current one's) and unregistered (cudaHostUnregister) when the region is destroyed.
// cudaHostRegisterReadOnly is not used: it only matters for a device reading the memory
// through a mapping, which no copy does, and a device without
// cudaDevAttrHostRegisterReadOnlySupported refuses a registration asking for it.
// Otherwise (a CPU-only build, no driver, no device, no bytes) the region pins nothing and
// says why: pinned() is false, and the memory is used as it is.
//
// Contract: the memory must outlive the region and stay where it is; the region must be
// destroyed BEFORE the memory is freed (a freed range that is still registered may be
// handed out again by the allocator while the driver still treats it as locked). An owner
// holding both keeps the region in a member declared after the memory's (destroyed first)
// and resets it before assigning new memory over the old.
//
// Errors (callers treat any as "use the memory unpinned"): RESOURCE_EXHAUSTED when the
// pages cannot be locked (cudaErrorMemoryAllocation), INTERNAL for any other CUDA error (e.g.
// cudaErrorHostMemoryAlreadyRegistered for a range overlapping a registered one).
//
// Thread safety: PinHostMemory may be called from any thread (it does not change the
// calling thread's current device); a region may be destroyed on any thread.
//
//   TOMO_ASSIGN_OR_RETURN(std::unique_ptr<PinnedHostRegion> pinned,
//                         PinHostMemory(projections.data(), projections.size_bytes()));
//   if (!pinned->pinned()) Log(pinned->why_not());  // copies go through staging
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace tomo::core {

class PinnedHostRegion {
 public:
  // A region that pins nothing, saying why (for logs).
  static std::unique_ptr<PinnedHostRegion> Unpinned(const void* data, size_t bytes,
                                                    std::string why_not);
  // Unlocks the pages when pinned (errors are ignored: nobody to report them to).
  virtual ~PinnedHostRegion() = default;
  PinnedHostRegion(const PinnedHostRegion&) = delete;
  PinnedHostRegion& operator=(const PinnedHostRegion&) = delete;

  // True when [data(), data() + size_bytes()) is page-locked until this is destroyed.
  bool pinned() const { return pinned_; }
  const void* data() const { return data_; }
  size_t size_bytes() const { return bytes_; }
  // Why nothing is pinned; empty when pinned().
  const std::string& why_not() const { return why_not_; }

 protected:
  // For implementations (the CUDA one, tests' fakes).
  PinnedHostRegion(const void* data, size_t bytes, bool pinned, std::string why_not)
      : data_(data), bytes_(bytes), pinned_(pinned), why_not_(std::move(why_not)) {}

 private:
  const void* data_;
  size_t bytes_;
  bool pinned_;
  std::string why_not_;
};

// Page-locks [data, data + bytes) for every CUDA device until the region is destroyed, or
// returns a region that pins nothing (see the file's comment for when, and the errors).
absl::StatusOr<std::unique_ptr<PinnedHostRegion>> PinHostMemory(const void* data, size_t bytes);

}  // namespace tomo::core
