#include "server/storage/spool_reserve.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tomo::server {

bool SpoolReserve::Release() {
  absl::MutexLock lock(&mu_);
  if (bytes_ == 0) return false;
  const bool removed = ::unlink(path_.c_str()) == 0;
  present_ = false;
  return removed;
}

absl::Status SpoolReserve::Restore() {
  absl::MutexLock lock(&mu_);
  if (bytes_ == 0) return absl::OkStatus();
  struct stat info = {};
  if (::stat(path_.c_str(), &info) == 0 && static_cast<uint64_t>(info.st_size) >= bytes_) {
    return absl::OkStatus();
  }
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot create ", path_, ": ", std::strerror(errno)));
  }
  // Real blocks, not a sparse file: only allocated blocks are freed by the unlink.
  const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes_));
  const bool synced = err == 0 && ::fsync(fd) == 0;
  ::close(fd);
  if (err != 0 || !synced) {
    ::unlink(path_.c_str());
    present_ = false;
    return absl::Status(err == ENOSPC ? absl::StatusCode::kResourceExhausted
                                      : absl::StatusCode::kInternal,
                        absl::StrCat("cannot reserve ", bytes_, " bytes in ", path_, ": ",
                                     std::strerror(err != 0 ? err : errno)));
  }
  return absl::OkStatus();
}

bool SpoolReserve::present() const {
  absl::MutexLock lock(&mu_);
  return present_;
}

}  // namespace tomo::server
