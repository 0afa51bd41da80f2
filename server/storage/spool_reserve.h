// SpoolReserve: a file of pre-allocated bytes on the spool's file system, given back when
// the disk is full so that tomod can still write its job database (a delete's record, a
// job's end) and start; made again once there is room. tomod keeps two
// (<spool>/reserve.runtime and reserve.startup, tomod_server.h).
//
// Thread-safe.
//
//   SpoolReserve reserve(spool.root() + "/reserve.runtime", 16 << 20);
//   reserve.Restore(free_bytes_needed).IgnoreError();   // when there is room
//   if (reserve.Release()) { /* retry the write */ }
#pragma once

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace tomo::server {

class SpoolReserve {
 public:
  // bytes 0: no reserve (Release and Restore do nothing).
  SpoolReserve(std::string path, uint64_t bytes) : path_(std::move(path)), bytes_(bytes) {}

  // Removes the file; true when it was there (space was freed).
  bool Release();
  // Makes the file (posix_fallocate, then fsync) when it is missing; RESOURCE_EXHAUSTED
  // (and no file) when the file system has no room for it.
  absl::Status Restore();
  // Whether the file is there, as far as this object knows.
  bool present() const;
  uint64_t bytes() const { return bytes_; }
  const std::string& path() const { return path_; }

 private:
  const std::string path_;
  const uint64_t bytes_;
  mutable absl::Mutex mu_;
  bool present_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tomo::server
