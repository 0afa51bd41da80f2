#include "core/io/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace tomo::core {
namespace {

absl::Status ErrnoError(int error, absl::string_view what, const std::string& path) {
  return absl::ErrnoToStatus(error, absl::StrCat("cannot ", what, " ", path));
}

absl::Status WriteAll(int fd, absl::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "write", path);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status SyncPath(const std::string& path, int flags, absl::string_view what) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, what, path);
  const int synced = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (synced != 0) return ErrnoError(error, what, path);
  return absl::OkStatus();
}

}  // namespace

std::string TemporaryPathFor(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path target(path);
  return (target.parent_path() /
          absl::StrCat(".tmp-", ::getpid(), "-", counter.fetch_add(1), "-",
                       target.filename().string()))
      .string();
}

absl::Status SyncAndRename(const std::string& temporary, const std::string& path) {
  if (absl::Status synced = SyncPath(temporary, O_RDONLY, "sync"); !synced.ok()) {
    std::remove(temporary.c_str());
    return synced;
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat("cannot rename ", temporary, " to ", path));
  }
  // The rename itself is durable only once the directory is.
  std::string directory = std::filesystem::path(path).parent_path().string();
  if (directory.empty()) directory = ".";
  return SyncPath(directory, O_RDONLY | O_DIRECTORY, "sync directory");
}

absl::Status WriteFileDurably(const std::string& path, absl::string_view bytes) {
  return WriteFileDurably(path, bytes, absl::string_view());
}

absl::Status WriteFileDurably(const std::string& path, absl::string_view head,
                              absl::string_view tail) {
  const std::string temporary = TemporaryPathFor(path);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "create", temporary);
  absl::Status written = WriteAll(fd, head, temporary);
  if (written.ok()) written = WriteAll(fd, tail, temporary);
  if (written.ok() && ::fsync(fd) != 0) written = ErrnoError(errno, "sync", temporary);
  if (::close(fd) != 0 && written.ok()) written = ErrnoError(errno, "close", temporary);
  if (!written.ok()) {
    std::remove(temporary.c_str());
    return written;
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat("cannot rename ", temporary, " to ", path));
  }
  std::string directory = std::filesystem::path(path).parent_path().string();
  if (directory.empty()) directory = ".";
  return SyncPath(directory, O_RDONLY | O_DIRECTORY, "sync directory");
}

}  // namespace tomo::core
