// ScopedFileSizeLimit: RLIMIT_FSIZE lowered for the scope, with SIGXFSZ ignored so that a
// write or ftruncate past it returns EFBIG instead of ending the process. Tests use it to
// make a file fail the way a full tmpfs does (RESOURCE_EXHAUSTED, never a SIGBUS).
//
//   {
//     ScopedFileSizeLimit limit(1 << 20);
//     ASSERT_TRUE(limit.ok());
//     status = WriteSomething(4 << 20);
//   }  // the limit and SIGXFSZ's handling are back
#pragma once

#include <signal.h>
#include <sys/resource.h>

#include <cstdint>

namespace tomo::testing {

class ScopedFileSizeLimit {
 public:
  explicit ScopedFileSizeLimit(uint64_t bytes) {
    if (::getrlimit(RLIMIT_FSIZE, &saved_) != 0) return;
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    if (::sigaction(SIGXFSZ, &ignore, &previous_) != 0) return;
    struct rlimit limited = saved_;
    limited.rlim_cur = bytes;
    ok_ = ::setrlimit(RLIMIT_FSIZE, &limited) == 0;
    if (!ok_) ::sigaction(SIGXFSZ, &previous_, nullptr);
  }
  ~ScopedFileSizeLimit() {
    if (!ok_) return;
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    ::sigaction(SIGXFSZ, &previous_, nullptr);
  }
  ScopedFileSizeLimit(const ScopedFileSizeLimit&) = delete;
  ScopedFileSizeLimit& operator=(const ScopedFileSizeLimit&) = delete;

  // The limit is in force.
  bool ok() const { return ok_; }

 private:
  struct rlimit saved_ = {};
  struct sigaction previous_ = {};
  bool ok_ = false;
};

}  // namespace tomo::testing
