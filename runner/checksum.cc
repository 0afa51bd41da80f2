#include "runner/checksum.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tomo::server {

absl::StatusOr<FileChecksum> Crc32OfFile(const std::string& path, bool sync) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  FileChecksum sum;
  std::vector<unsigned char> buffer(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return absl::DataLossError(absl::StrCat("cannot read ", path, ": ", std::strerror(err)));
    }
    if (n == 0) break;
    sum.crc32 = Crc32Update(sum.crc32, buffer.data(), static_cast<size_t>(n));
    sum.size_bytes += static_cast<uint64_t>(n);
  }
  if (sync && ::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat("cannot fsync ", path, ": ", std::strerror(err)));
  }
  ::close(fd);
  return sum;
}

}  // namespace tomo::server
