#include "proto/transfer/chunk_writer.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "proto/transfer/crc32.h"

namespace tomo::transfer {
namespace {

// With checksums on the writer threads, a chunk is copied and checksummed in blocks this
// large, so that the checksum reads bytes the copy has just brought into the core's cache.
constexpr size_t kCopyBlockBytes = size_t{64} << 10;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older C libraries lack the name
#endif

absl::Status IoError(int error, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(error));
  if (error == ENOSPC || error == EDQUOT || error == EFBIG) {
    return absl::ResourceExhaustedError(message);
  }
  return absl::InternalError(message);
}

}  // namespace

struct ChunkWriter::Chunk {
  std::string bytes;
  size_t index = 0;
  uint64_t offset = 0;  // in the file; parallel mode
  int pending = 2;      // the write and the checksum; guarded by ChunkWriter::mu_
};

std::unique_ptr<ChunkWriter> ChunkWriter::Create(int fd, std::string path, Options options) {
  bool parallel = options.expected_bytes > 0 && options.write_threads > 1;
  if (parallel && !options.parallel_on_disk) {
    struct statfs fs;
    parallel = ::fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
  }
  std::unique_ptr<ChunkWriter> writer(
      new ChunkWriter(fd, std::move(path), std::move(options), parallel));
  ChunkWriter* w = writer.get();
  if (parallel) {
    absl::Status started = w->StartParallel();
    if (!started.ok()) {
      // Nothing is ever written: Append and Finish report why.
      absl::MutexLock lock(&w->mu_);
      w->error_ = std::move(started);
      parallel = false;
    }
  }
  if (parallel) {
    for (int i = 0; i < w->options_.write_threads; ++i) {
      w->writers_.emplace_back([w] { w->CopyLoop(); });
    }
  } else {
    w->writers_.emplace_back([w] { w->WriteLoop(); });
  }
  const int checksum_threads =
      w->ChecksumsOnWriters() ? 0 : std::max(1, w->options_.checksum_threads);
  for (int i = 0; i < checksum_threads; ++i) {
    w->checksummers_.emplace_back([w] { w->ChecksumLoop(); });
  }
  return writer;
}

ChunkWriter::ChunkWriter(int fd, std::string path, Options options, bool parallel)
    : fd_(fd), path_(std::move(path)), options_(std::move(options)), parallel_(parallel) {}

absl::Status ChunkWriter::StartParallel() {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return IoError(errno, absl::StrCat("cannot stat ", path_));
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": writing with write_threads ", options_.write_threads,
        " maps the file, which needs a regular file (use write_threads 1)"));
  }
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0) return IoError(errno, absl::StrCat("cannot read the flags of ", path_));
  if ((flags & O_APPEND) != 0) {
    base_offset_ = static_cast<uint64_t>(st.st_size);
  } else {
    const off_t position = ::lseek(fd_, 0, SEEK_CUR);
    if (position < 0) return IoError(errno, absl::StrCat("cannot seek in ", path_));
    base_offset_ = static_cast<uint64_t>(position);
  }
  if ((flags & O_ACCMODE) != O_RDWR) {
    // A shared writable mapping needs a descriptor open for reading too: the same file,
    // opened again through /proc.
    const std::string self = absl::StrCat("/proc/self/fd/", fd_);
    const int read_write = ::open(self.c_str(), O_RDWR | O_CLOEXEC);
    if (read_write < 0) {
      return IoError(errno, absl::StrCat("cannot open ", path_,
                                         " for reading and writing (", self, "), as mapping "
                                         "it for write_threads ", options_.write_threads,
                                         " needs"));
    }
    ::close(fd_);
    fd_ = read_write;
  }
  struct statvfs fs;
  if (::fstatvfs(fd_, &fs) == 0) {
    const uint64_t free_bytes = uint64_t{fs.f_bavail} * fs.f_frsize;
    if (options_.expected_bytes > free_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(path_, ": expected_bytes ", options_.expected_bytes, " exceed the ",
                       free_bytes, " bytes free on its filesystem"));
    }
  }
  // Can the filesystem reserve space? (tmpfs, ext4, xfs, btrfs can.) Reserving one byte
  // without changing the size says so. Where it cannot, all of it is reserved now, in
  // this thread, by posix_fallocate's emulation (which writes into the file and so must
  // not run beside the copying threads).
  if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(base_offset_), 1) != 0) {
    const int error = errno;
    if (error != EOPNOTSUPP) {
      return IoError(error, absl::StrCat("cannot reserve space in ", path_));
    }
    const int failed = ::posix_fallocate(fd_, static_cast<off_t>(base_offset_),
                                         static_cast<off_t>(options_.expected_bytes));
    if (failed != 0) {
      return IoError(failed, absl::StrCat("cannot reserve ", options_.expected_bytes,
                                          " bytes in ", path_));
    }
  }
  page_bytes_ = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  map_offset_ = base_offset_ / page_bytes_ * page_bytes_;
  map_length_ = base_offset_ + options_.expected_bytes - map_offset_;
  // The mapping may reach past the end of the file: only pages of reserved chunks, which
  // fallocate has brought inside it, are ever touched.
  void* map = ::mmap(nullptr, map_length_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_,
                     static_cast<off_t>(map_offset_));
  if (map == MAP_FAILED) {
    const int error = errno;
    const std::string message = absl::StrCat("cannot map ", map_length_, " bytes of ", path_,
                                              ": ", std::strerror(error));
    return error == ENOMEM ? absl::ResourceExhaustedError(message)
                           : absl::InternalError(message);
  }
  map_ = static_cast<char*>(map);
  return absl::OkStatus();
}

ChunkWriter::~ChunkWriter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : checksummers_) thread.join();
  for (std::thread& thread : writers_) {
    if (thread.get_id() == std::this_thread::get_id()) {
      // Destroyed from a FinishAsync callback: the loop returns right after it and touches
      // nothing of this object any more.
      thread.detach();
    } else {
      thread.join();
    }
  }
  if (map_ != nullptr) ::munmap(map_, map_length_);
  ::close(fd_);
}

absl::StatusOr<bool> ChunkWriter::Append(std::string chunk) {
  auto entry = std::make_shared<Chunk>();
  entry->bytes = std::move(chunk);
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  if (finishing_ || stopping_) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": appended after Finish"));
  }
  if (parallel_ && entry->bytes.size() > options_.expected_bytes - appended_bytes_) {
    error_ = absl::InvalidArgumentError(
        absl::StrCat(path_, ": ", appended_bytes_ + entry->bytes.size(),
                     " bytes appended exceed expected_bytes ", options_.expected_bytes));
    return error_;
  }
  entry->index = crcs_.size();
  entry->offset = base_offset_ + appended_bytes_;
  appended_bytes_ += entry->bytes.size();
  crcs_.push_back(0);
  sizes_.push_back(entry->bytes.size());
  if (parallel_) copied_.push_back(false);
  queued_bytes_ += entry->bytes.size();
  ++unfinished_chunks_;
  if (ChecksumsOnWriters()) {
    entry->pending = 1;
  } else {
    to_checksum_.push_back(entry);
  }
  to_write_.push_back(std::move(entry));
  if (queued_bytes_ > options_.max_queued_bytes) full_ = true;
  return !full_;
}

void ChunkWriter::WaitForRoom() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](ChunkWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
        return !w->full_ || w->stopping_ || !w->error_.ok();
      },
      this));
}

void ChunkWriter::Release(const std::shared_ptr<Chunk>& chunk) {
  bool notify = false;
  {
    absl::MutexLock lock(&mu_);
    if (--chunk->pending > 0) return;
    queued_bytes_ -= chunk->bytes.size();
    --unfinished_chunks_;
    std::string().swap(chunk->bytes);
    if (full_ && queued_bytes_ <= options_.max_queued_bytes / 2) {
      full_ = false;
      notify = static_cast<bool>(options_.on_room);
    }
  }
  if (notify) options_.on_room();
}

void ChunkWriter::Fail(absl::Status status) {
  bool notify;
  {
    absl::MutexLock lock(&mu_);
    if (error_.ok()) error_ = std::move(status);
    // A producer waiting for room appends again and learns of the error.
    notify = full_ && static_cast<bool>(options_.on_room);
    full_ = false;
  }
  if (notify) options_.on_room();
}

void ChunkWriter::ChecksumLoop() {
  for (;;) {
    std::shared_ptr<Chunk> chunk;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ChunkWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return !w->to_checksum_.empty() || w->stopping_;
          },
          this));
      if (stopping_) return;
      chunk = std::move(to_checksum_.front());
      to_checksum_.pop_front();
    }
    const uint32_t crc = Crc32Update(0, chunk->bytes.data(), chunk->bytes.size());
    {
      absl::MutexLock lock(&mu_);
      crcs_[chunk->index] = crc;
    }
    Release(chunk);
  }
}

void ChunkWriter::CompleteAndReport(bool sync) {
  absl::StatusOr<Summary> summary = Complete(sync);
  std::function<void(absl::StatusOr<Summary>)> done;
  {
    absl::MutexLock lock(&mu_);
    done = std::move(done_);
    stopping_ = true;  // the loops end
  }
  done(std::move(summary));  // may destroy this object: nothing of it is touched after
}

void ChunkWriter::WriteLoop() {
  for (;;) {
    std::shared_ptr<Chunk> chunk;
    bool sync = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ChunkWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return !w->to_write_.empty() || w->stopping_ ||
                   (w->finishing_ && w->unfinished_chunks_ == 0);
          },
          this));
      if (stopping_) return;
      if (to_write_.empty()) {
        // Finishing and everything is written and checksummed.
        sync = finish_sync_;
      } else {
        chunk = std::move(to_write_.front());
        to_write_.pop_front();
      }
    }
    if (!chunk) return CompleteAndReport(sync);
    bool failed;
    {
      absl::MutexLock lock(&mu_);
      failed = !error_.ok();
    }
    const char* p = chunk->bytes.data();
    size_t left = failed ? 0 : chunk->bytes.size();
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        Fail(IoError(errno, absl::StrCat("cannot write ", path_)));
        break;
      }
      p += n;
      left -= static_cast<size_t>(n);
      written_bytes_ += static_cast<uint64_t>(n);
    }
    if (options_.writeback_bytes > 0 &&
        written_bytes_ - written_writeback_from_ >= options_.writeback_bytes) {
      // Start write-back of what was written since last time; the final fsync waits for it.
      ::sync_file_range(fd_, static_cast<off64_t>(written_writeback_from_),
                        static_cast<off64_t>(written_bytes_ - written_writeback_from_),
                        SYNC_FILE_RANGE_WRITE);
      written_writeback_from_ = written_bytes_;
    }
    Release(chunk);
  }
}

void ChunkWriter::CopyLoop() {
  for (;;) {
    std::shared_ptr<Chunk> chunk;
    bool sync = false;
    bool failed = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ChunkWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return !w->to_write_.empty() || w->stopping_ ||
                   (w->finishing_ && w->unfinished_chunks_ == 0 && !w->completing_);
          },
          this));
      if (stopping_) return;
      if (to_write_.empty()) {
        // Finishing, everything is written and checksummed, and no other writer thread
        // has seen it yet: this one completes.
        completing_ = true;
        sync = finish_sync_;
      } else {
        chunk = std::move(to_write_.front());
        to_write_.pop_front();
      }
      failed = !error_.ok();
    }
    if (!chunk) return CompleteAndReport(sync);
    if (!failed) {
      uint32_t crc = 0;
      absl::Status copied = CopyChunk(*chunk, &crc);
      if (copied.ok()) {
        if (ChecksumsOnWriters()) {
          absl::MutexLock lock(&mu_);
          crcs_[chunk->index] = crc;
        }
        Copied(*chunk);
      } else {
        Fail(std::move(copied));
      }
    }
    Release(chunk);
  }
}

absl::Status ChunkWriter::CopyChunk(const Chunk& chunk, uint32_t* crc) {
  const size_t size = chunk.bytes.size();
  if (size == 0) return absl::OkStatus();
  // Reserved first: a page of the mapping whose space is not reserved would raise SIGBUS
  // on a full filesystem. Reserving also moves the end of the file past the chunk.
  int failed;
  do {
    failed = ::fallocate(fd_, 0, static_cast<off_t>(chunk.offset), static_cast<off_t>(size))
                 ? errno
                 : 0;
  } while (failed == EINTR);
  if (failed == EOPNOTSUPP) failed = 0;  // reserved up front by StartParallel
  if (failed != 0) {
    return IoError(failed, absl::StrCat("cannot write ", path_, ": reserving ", size,
                                        " bytes at offset ", chunk.offset));
  }
  char* to = map_ + (chunk.offset - map_offset_);
  const char* from = chunk.bytes.data();
  // Fault the chunk's pages in with one call rather than one fault per page during the
  // copy (less CPU per byte in write_probe); all of them are reserved, by this chunk's
  // fallocate, which covers whole blocks. Best effort: kernels before 5.14 lack it.
  const uintptr_t first_page = reinterpret_cast<uintptr_t>(to) / page_bytes_ * page_bytes_;
  ::madvise(reinterpret_cast<void*>(first_page),
            reinterpret_cast<uintptr_t>(to) + size - first_page, MADV_POPULATE_WRITE);
  if (!ChecksumsOnWriters()) {
    std::memcpy(to, from, size);
    return absl::OkStatus();
  }
  uint32_t sum = 0;
  for (size_t done = 0; done < size; done += kCopyBlockBytes) {
    const size_t block = std::min(kCopyBlockBytes, size - done);
    std::memcpy(to + done, from + done, block);
    sum = Crc32Update(sum, from + done, block);
  }
  *crc = sum;
  return absl::OkStatus();
}

void ChunkWriter::Copied(const Chunk& chunk) {
  uint64_t from = 0;
  uint64_t to = 0;
  {
    absl::MutexLock lock(&mu_);
    copied_[chunk.index] = true;
    while (copied_prefix_chunks_ < copied_.size() && copied_[copied_prefix_chunks_]) {
      copied_prefix_bytes_ += sizes_[copied_prefix_chunks_];
      ++copied_prefix_chunks_;
    }
    if (options_.writeback_bytes == 0 ||
        copied_prefix_bytes_ - writeback_from_ < options_.writeback_bytes) {
      return;
    }
    from = writeback_from_;
    to = writeback_from_ = copied_prefix_bytes_;
  }
  // Start the write-back of the chunks copied since last time, all of them whole (a page
  // written back while still being copied into would fault again); the final fsync waits.
  ::sync_file_range(fd_, static_cast<off64_t>(base_offset_ + from),
                    static_cast<off64_t>(to - from), SYNC_FILE_RANGE_WRITE);
}

absl::StatusOr<ChunkWriter::Summary> ChunkWriter::Complete(bool sync) {
  Summary summary;
  {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
    for (size_t i = 0; i < crcs_.size(); ++i) {
      summary.crc32 = i == 0 ? crcs_[0] : Crc32Combine(summary.crc32, crcs_[i], sizes_[i]);
      summary.bytes += sizes_[i];
    }
  }
  if (map_ != nullptr) {
    // Unmapping hands the pages written through the mapping to the file's write-back, which
    // the fsync below then waits for.
    if (::munmap(map_, map_length_) != 0) {
      return IoError(errno, absl::StrCat("cannot unmap ", path_));
    }
    map_ = nullptr;
    // The file ends where the last chunk ends: reservations moved it there, except that
    // of StartParallel's emulation (all of expected_bytes) or of no chunk at all.
    const off_t end = static_cast<off_t>(base_offset_ + summary.bytes);
    struct stat st;
    if (::fstat(fd_, &st) != 0) return IoError(errno, absl::StrCat("cannot stat ", path_));
    if (st.st_size != end && ::ftruncate(fd_, end) != 0) {
      return IoError(errno, absl::StrCat("cannot truncate ", path_, " to ", end, " bytes"));
    }
  }
  if (sync && ::fsync(fd_) != 0) {
    return IoError(errno, absl::StrCat("cannot fsync ", path_));
  }
  return summary;
}

void ChunkWriter::FinishAsync(bool sync, std::function<void(absl::StatusOr<Summary>)> done) {
  absl::MutexLock lock(&mu_);
  finish_sync_ = sync;
  done_ = std::move(done);
  finishing_ = true;
}

absl::StatusOr<ChunkWriter::Summary> ChunkWriter::Finish(bool sync) {
  absl::Notification finished;
  absl::StatusOr<Summary> result;
  FinishAsync(sync, [&](absl::StatusOr<Summary> summary) {
    result = std::move(summary);
    finished.Notify();
  });
  finished.WaitForNotification();
  return result;
}

}  // namespace tomo::transfer
