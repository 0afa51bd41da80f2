#include "server/checksum.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"

namespace tomo::server {

uint32_t Crc32Update(uint32_t crc, const void* data, size_t size) {
  return static_cast<uint32_t>(
      crc32_z(crc, static_cast<const Bytef*>(data), static_cast<z_size_t>(size)));
}

uint32_t Crc32OfBuffer(const void* data, size_t size) {
  // Blocks of 16 MiB: one thread checksums a few GB/s, a result is up to gigabytes.
  constexpr size_t kBlock = size_t{16} << 20;
  if (size <= kBlock) return Crc32Update(0, data, size);
  const size_t blocks = (size + kBlock - 1) / kBlock;
  std::vector<uint32_t> crcs(blocks);
  const auto* bytes = static_cast<const unsigned char*>(data);
  core::ParallelFor(static_cast<int64_t>(blocks), [&](int64_t first, int64_t end) {
    for (int64_t b = first; b < end; ++b) {
      const size_t offset = static_cast<size_t>(b) * kBlock;
      crcs[static_cast<size_t>(b)] =
          Crc32Update(0, bytes + offset, std::min(kBlock, size - offset));
    }
  });
  uint32_t crc = crcs[0];
  for (size_t b = 1; b < blocks; ++b) {
    const size_t length = std::min(kBlock, size - b * kBlock);
    crc = static_cast<uint32_t>(
        crc32_combine(crc, crcs[b], static_cast<z_off_t>(length)));
  }
  return crc;
}

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
