// Writing a large file on tmpfs from several threads at once, through a MAP_SHARED mapping
// of it: each thread allocates the pages of its own byte range, then copies into them.
//
// Why: tmpfs allocates and zeroes a file's pages under the inode's lock in write(), so one
// file takes one thread's write() (2.1-2.9 GB/s on the H100 machine) and N threads' pwrite()s
// are no faster. Page faults on a shared mapping are taken by several threads at once
// (540 MB: pwrite 0.26 s, 8 threads copying into a mapping 0.175 s; bench/NOTES.md v0.10).
// But a page that tmpfs cannot allocate (the file system is full) kills the copying process
// with SIGBUS. So each thread first populates its range with madvise(MADV_POPULATE_WRITE)
// (Linux >= 5.14): the pages are allocated in parallel and a full file system is an error
// return, not a signal. Where madvise does not know the advice (EINVAL: an older kernel)
// the range is reserved with fallocate(2) instead, which is correct but serial.
//
//   if (!IsOnTmpfs(fd)) ... write() as usual ...
//   ftruncate(fd, size);   // the mapping must not reach beyond the file's end
//   char* mapping = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
//   // on each of several threads, its own [offset, offset + n):
//   TOMO_RETURN_IF_ERROR(CopyIntoMappedRange(fd, mapping, 0, offset, bytes, n, path));
//
// Header-only (libc and absl::Status): used by core/io/durable_file.cc (tomod's results)
// and by transfer/mapped_file_writer.cc (the client's downloads), which links no core.
// Thread-safe: threads may populate and copy disjoint, or even overlapping, ranges at once.
// Errors name the file: RESOURCE_EXHAUSTED "cannot reserve space for <path> ..." for a full
// file system (ENOSPC, EDQUOT, EFBIG, and madvise's ENOMEM/EFAULT, which is how a page that
// cannot be allocated shows), INTERNAL for any other errno.
#pragma once

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older C libraries lack the name
#endif

namespace tomo::core {

// True when the open file lives on tmpfs (where the mapped write pays off).
inline bool IsOnTmpfs(int fd) {
  struct statfs fs;
  return ::fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}
// The same for a path (a file or directory that exists).
inline bool IsOnTmpfs(const char* path) {
  struct statfs fs;
  return ::statfs(path, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

// True for the errnos that mean "no room for these pages" rather than a broken file.
inline bool IsNoSpaceErrno(int error) {
  return error == ENOSPC || error == EDQUOT || error == EFBIG || error == ENOMEM ||
         error == EFAULT;
}

// The status of a failed step on path: RESOURCE_EXHAUSTED for no space, INTERNAL otherwise.
inline absl::Status MappedWriteError(int error, absl::string_view what, const std::string& path,
                                     uint64_t offset, uint64_t size) {
  const std::string message = absl::StrCat("cannot ", what, " ", path, " (bytes [", offset, ", ",
                                           offset + size, ")): ", std::strerror(error));
  if (IsNoSpaceErrno(error)) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

// Allocates the file pages behind [offset, offset + size) of fd, which is mapped (shared,
// writable) at mapping from file offset mapping_offset (page-aligned, <= offset); the range
// must lie within the file's size. MADV_POPULATE_WRITE, or fallocate(2) where the kernel
// does not know it.
inline absl::Status PopulateMappedRange(int fd, char* mapping, uint64_t mapping_offset,
                                        uint64_t offset, uint64_t size,
                                        const std::string& path) {
  if (size == 0) return absl::OkStatus();
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t first_page = offset / page * page;  // madvise wants an aligned start
  char* start = mapping + (first_page - mapping_offset);
  const size_t length = static_cast<size_t>(offset + size - first_page);
  int advised;
  do {
    advised = ::madvise(start, length, MADV_POPULATE_WRITE);
  } while (advised != 0 && errno == EINTR);
  if (advised == 0) return absl::OkStatus();
  if (errno == EFAULT || errno == ENOMEM) {
    // How madvise reports a page that the file system could not allocate.
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot reserve space for ", path, " (bytes [", offset, ", ", offset + size,
                     ")): pages cannot be allocated (", std::strerror(errno),
                     "), the file system is full"));
  }
  if (errno != EINVAL) return MappedWriteError(errno, "reserve space for", path, offset, size);
  // fallocate(2) rather than posix_fallocate: the latter emulates a file system without
  // fallocate by writing zeros, which would clobber bytes another thread has copied.
  int reserved;
  do {
    reserved = ::fallocate(fd, 0, static_cast<off_t>(offset), static_cast<off_t>(size));
  } while (reserved != 0 && errno == EINTR);
  if (reserved != 0) return MappedWriteError(errno, "reserve space for", path, offset, size);
  return absl::OkStatus();
}

// PopulateMappedRange of [offset, offset + size), size being the pieces' sizes summed, then
// a copy of the pieces there, one after the other; the whole pages of the range are then
// dropped from the mapping (MADV_DONTNEED: the bytes stay in the file, a later access maps
// them again). Pieces: bytes that arrived in several buffers (a gRPC message's slices).
inline absl::Status CopyPiecesIntoMappedRange(int fd, char* mapping, uint64_t mapping_offset,
                                              uint64_t offset,
                                              absl::Span<const std::string_view> pieces,
                                              const std::string& path) {
  size_t size = 0;
  for (std::string_view piece : pieces) size += piece.size();
  if (absl::Status populated = PopulateMappedRange(fd, mapping, mapping_offset, offset, size, path);
      !populated.ok()) {
    return populated;
  }
  char* to = mapping + (offset - mapping_offset);
  for (std::string_view piece : pieces) {
    std::memcpy(to, piece.data(), piece.size());
    to += piece.size();
  }
  // The whole pages just written leave the page tables at once, on the writing thread: the
  // bytes stay in the file (the mapping is shared), and the final munmap, which tore down
  // a 2.4 GB upload's mapping in one piece at the commit, has almost nothing left to do.
  // Best effort: a failure only leaves the entries to munmap.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t first_whole = (offset + page - 1) / page * page;
  const uint64_t end_whole = (offset + size) / page * page;
  if (end_whole > first_whole) {
    ::madvise(mapping + (first_whole - mapping_offset), end_whole - first_whole, MADV_DONTNEED);
  }
  return absl::OkStatus();
}

// CopyPiecesIntoMappedRange of one piece: bytes [0, size).
inline absl::Status CopyIntoMappedRange(int fd, char* mapping, uint64_t mapping_offset,
                                        uint64_t offset, const void* bytes, size_t size,
                                        const std::string& path) {
  const std::string_view piece(static_cast<const char*>(bytes), size);
  return CopyPiecesIntoMappedRange(fd, mapping, mapping_offset, offset, {&piece, 1}, path);
}

}  // namespace tomo::core
