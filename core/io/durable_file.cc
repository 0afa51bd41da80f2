#include "core/io/durable_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/io/mapped_range.h"

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

// Renames temporary (synced) to path, and syncs the directory: the rename itself is durable
// only once the directory is. Removes temporary on error.
absl::Status RenameDurably(const std::string& temporary, const std::string& path) {
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat("cannot rename ", temporary, " to ", path));
  }
  std::string directory = std::filesystem::path(path).parent_path().string();
  if (directory.empty()) directory = ".";
  return SyncPath(directory, O_RDONLY | O_DIRECTORY, "sync directory");
}

// tmpfs takes the inode's lock for every write(), so one thread's write() is the limit
// (2.1-2.9 GB/s on the H100 machine, page allocation included); faults on a shared mapping
// are taken by several threads at once (540 MB: 0.26 s by write(), 0.175 s by 8 threads
// copying into a mapping; bench/result_write_bench.cc). Each thread first allocates its own
// range's pages (core/io/mapped_range.h: MADV_POPULATE_WRITE, in parallel), so that a full
// tmpfs is an error here rather than a SIGBUS during the copy; a serial posix_fallocate of
// the whole file before the copy ate most of the gain (0.228 s).
absl::Status CopyIntoMapping(int fd, absl::string_view bytes, const std::string& path,
                             int threads) {
  if (::ftruncate(fd, static_cast<off_t>(bytes.size())) != 0) {
    return MappedWriteError(errno, "reserve space for", path, 0, bytes.size());
  }
  void* mapping = ::mmap(nullptr, bytes.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) return ErrnoError(errno, "map", path);
  // Page-aligned ranges, so that no two threads fault the same page.
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t per_thread = (bytes.size() / threads + page - 1) / page * page;
  std::vector<absl::Status> copied((bytes.size() + per_thread - 1) / per_thread);
  std::vector<std::thread> copying;
  for (size_t begin = 0, k = 0; begin < bytes.size(); begin += per_thread, ++k) {
    const size_t size = std::min(per_thread, bytes.size() - begin);
    copying.emplace_back([=, &copied] {
      copied[k] = CopyIntoMappedRange(fd, static_cast<char*>(mapping), 0, begin,
                                      bytes.data() + begin, size, path);
    });
  }
  for (std::thread& thread : copying) thread.join();
  const bool unmapped = ::munmap(mapping, bytes.size()) == 0;
  const int unmap_error = errno;
  for (absl::Status& status : copied) {
    if (!status.ok()) return status;
  }
  if (!unmapped) return ErrnoError(unmap_error, "unmap", path);
  return absl::OkStatus();
}

absl::Status WritePiecesDurably(const std::string& path, absl::string_view head,
                                absl::string_view tail, const ParallelWrite& parallel) {
  const std::string temporary = TemporaryPathFor(path);
  // O_RDWR: a shared mapping needs the file open for reading too.
  const int fd = ::open(temporary.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "create", temporary);
  absl::Status written;
  const absl::string_view whole = tail.empty() ? head : head.empty() ? tail : absl::string_view();
  if (!whole.empty() && whole.size() >= parallel.min_bytes && parallel.threads > 1 &&
      IsOnTmpfs(fd)) {
    written = CopyIntoMapping(fd, whole, temporary, parallel.threads);
  } else {
    written = WriteAll(fd, head, temporary);
    if (written.ok()) written = WriteAll(fd, tail, temporary);
  }
  if (written.ok() && ::fsync(fd) != 0) written = ErrnoError(errno, "sync", temporary);
  if (::close(fd) != 0 && written.ok()) written = ErrnoError(errno, "close", temporary);
  if (!written.ok()) {
    std::remove(temporary.c_str());
    return written;
  }
  return RenameDurably(temporary, path);
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
  return RenameDurably(temporary, path);
}

absl::Status WriteFileDurably(const std::string& path, absl::string_view bytes,
                              const ParallelWrite& parallel) {
  return WritePiecesDurably(path, bytes, absl::string_view(), parallel);
}

absl::Status WriteFileDurably(const std::string& path, absl::string_view head,
                              absl::string_view tail) {
  return WritePiecesDurably(path, head, tail, ParallelWrite());
}

}  // namespace tomo::core
