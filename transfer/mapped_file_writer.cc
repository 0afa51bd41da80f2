#include "transfer/mapped_file_writer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/io/mapped_range.h"
#include "transfer/crc32.h"

namespace tomo::transfer {

struct MappedFileWriter::Chunk {
  uint64_t offset = 0;
  std::vector<std::string_view> pieces;  // laid end to end from offset
  uint64_t bytes = 0;                     // the pieces' sizes summed
  std::shared_ptr<const void> keep;       // what the pieces point into
};

bool MappedFileWriter::Suits(int fd) { return core::IsOnTmpfs(fd); }

absl::StatusOr<std::unique_ptr<MappedFileWriter>> MappedFileWriter::Create(int fd,
                                                                           std::string path,
                                                                           uint64_t begin,
                                                                           uint64_t size,
                                                                           Options options) {
  if (begin > size) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": begin ", begin,
                                                   " is beyond the file's size ", size));
  }
  std::unique_ptr<MappedFileWriter> writer(
      new MappedFileWriter(fd, std::move(path), begin, size, std::move(options)));
  MappedFileWriter* w = writer.get();
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    return core::MappedWriteError(errno, "set the size of", w->path_, 0, size);
  }
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  w->mapping_offset_ = begin / page * page;
  w->mapping_bytes_ = size - w->mapping_offset_;
  if (w->mapping_bytes_ > 0) {
    void* mapping = ::mmap(nullptr, w->mapping_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                           static_cast<off_t>(w->mapping_offset_));
    if (mapping == MAP_FAILED) {
      w->mapping_bytes_ = 0;
      return core::MappedWriteError(errno, "map", w->path_, w->mapping_offset_, size);
    }
    w->mapping_ = static_cast<char*>(mapping);
  }
  return writer;
}

MappedFileWriter::MappedFileWriter(int fd, std::string path, uint64_t begin, uint64_t size,
                                   Options options)
    : fd_(fd), path_(std::move(path)), begin_(begin), size_(size), options_(std::move(options)),
      prefix_(begin),
      copiers_(options_.copy_threads, options_.idle_time, [this] { CopyLoop(); }) {}

MappedFileWriter::~MappedFileWriter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;  // what is still queued is dropped
  }
  copiers_.Join();
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
  ::close(fd_);
}

absl::StatusOr<bool> MappedFileWriter::Append(uint64_t offset, std::string chunk) {
  return Append(offset, std::make_shared<const std::string>(std::move(chunk)));
}

absl::StatusOr<bool> MappedFileWriter::Append(uint64_t offset,
                                              std::shared_ptr<const std::string> chunk) {
  const std::string_view bytes = *chunk;
  return Append(offset, {bytes}, std::move(chunk));
}

absl::StatusOr<bool> MappedFileWriter::Append(uint64_t offset,
                                              std::vector<std::string_view> pieces,
                                              std::shared_ptr<const void> keep) {
  uint64_t bytes = 0;
  for (std::string_view piece : pieces) bytes += piece.size();
  if (offset < begin_ || offset > size_ || bytes > size_ - offset) {
    return absl::DataLossError(absl::StrCat(path_, ": a chunk of ", bytes, " bytes at offset ",
                                            offset, " is outside the bytes to write [", begin_,
                                            ", ", size_, ")"));
  }
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  if (finishing_ || stopping_) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": appended after Finish"));
  }
  if (bytes == 0) return !full_;
  auto entry = std::make_shared<Chunk>();
  entry->offset = offset;
  entry->pieces = std::move(pieces);
  entry->bytes = bytes;
  entry->keep = std::move(keep);
  queue_.push_back(std::move(entry));
  copiers_.StartLocked();
  queued_bytes_ += bytes;
  if (queued_bytes_ > options_.max_queued_bytes) full_ = true;
  return !full_;
}

void MappedFileWriter::WaitForRoom() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](MappedFileWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
        return !w->full_ || w->stopping_ || !w->error_.ok();
      },
      this));
}

void MappedFileWriter::CopyLoop() {
  for (;;) {
    std::shared_ptr<Chunk> chunk;
    bool failed;
    {
      absl::MutexLock lock(&mu_);
      const bool work = mu_.AwaitWithTimeout(
          absl::Condition(
              +[](MappedFileWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
                return !w->queue_.empty() || w->stopping_;
              },
              this),
          copiers_.idle_time());
      if (!work || stopping_) {
        copiers_.ExitingLocked();  // idle: started again with the next chunk
        return;
      }
      chunk = std::move(queue_.front());
      queue_.pop_front();
      ++in_flight_;
      failed = !error_.ok();  // after an error the rest is dropped, not copied
    }
    absl::Status copied;
    Copied done{chunk->offset, chunk->bytes, 0};
    if (!failed) {
      copied = core::CopyPiecesIntoMappedRange(fd_, mapping_, mapping_offset_, chunk->offset,
                                               chunk->pieces, path_);
      if (copied.ok()) {
        for (std::string_view piece : chunk->pieces) {
          done.crc32 = Crc32Update(done.crc32, piece.data(), piece.size());
        }
      }
    }
    chunk.reset();
    bool notify = false;
    uint64_t grown_prefix = 0;
    {
      absl::MutexLock lock(&mu_);
      --in_flight_;
      queued_bytes_ -= done.bytes;
      if (!copied.ok() && error_.ok()) error_ = copied;
      if (!failed && copied.ok()) {
        copied_.push_back(done);
        grown_prefix = GrowPrefixLocked(done.offset, done.bytes);
      }
      // A producer waiting for room appends again and learns of an error.
      if (full_ && (queued_bytes_ <= options_.max_queued_bytes / 2 || !error_.ok())) {
        full_ = false;
        notify = static_cast<bool>(options_.on_room);
      }
    }
    if (grown_prefix > 0 && options_.on_written) options_.on_written(grown_prefix);
    if (notify) options_.on_room();
  }
}

uint64_t MappedFileWriter::GrowPrefixLocked(uint64_t offset, uint64_t bytes) {
  uint64_t& end = beyond_prefix_[offset];
  end = std::max(end, offset + bytes);
  const uint64_t before = prefix_;
  // Overlapping copies (an error Finish reports) still count: what is copied is copied.
  for (auto next = beyond_prefix_.begin();
       next != beyond_prefix_.end() && next->first <= prefix_; next = beyond_prefix_.erase(next)) {
    prefix_ = std::max(prefix_, next->second);
  }
  return prefix_ > before ? prefix_ : 0;
}

absl::Status MappedFileWriter::Drain() {
  if (drained_) return absl::OkStatus();
  drained_ = true;
  {
    absl::MutexLock lock(&mu_);
    finishing_ = true;
    mu_.Await(absl::Condition(
        +[](MappedFileWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
          return w->queue_.empty() && w->in_flight_ == 0;
        },
        this));
    stopping_ = true;
  }
  copiers_.Join();
  if (mapping_ != nullptr) {
    const int unmapped = ::munmap(mapping_, mapping_bytes_);
    mapping_ = nullptr;
    if (unmapped != 0) {
      return core::MappedWriteError(errno, "unmap", path_, mapping_offset_, size_);
    }
  }
  return absl::OkStatus();
}

std::vector<MappedFileWriter::Copied> MappedFileWriter::SortedCopies() const {
  std::vector<Copied> copies;
  {
    absl::MutexLock lock(&mu_);
    copies = copied_;
  }
  std::sort(copies.begin(), copies.end(), [](const Copied& a, const Copied& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.bytes < b.bytes;
  });
  return copies;
}

uint64_t MappedFileWriter::written_prefix() const {
  absl::MutexLock lock(&mu_);
  return prefix_;
}

absl::StatusOr<MappedFileWriter::Summary> MappedFileWriter::Finish() {
  if (absl::Status drained = Drain(); !drained.ok()) return drained;
  {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
  }
  Summary summary;
  uint64_t end = begin_;  // of the bytes checked so far
  for (const Copied& copy : SortedCopies()) {
    if (copy.offset > end) {
      return absl::DataLossError(absl::StrCat(path_, ": no bytes came for [", end, ", ",
                                              copy.offset, ") of [", begin_, ", ", size_, ")"));
    }
    if (copy.offset < end) {
      return absl::DataLossError(absl::StrCat(path_, ": bytes [", copy.offset, ", ",
                                              std::min(end, copy.offset + copy.bytes),
                                              ") came more than once"));
    }
    summary.crc32 = end == begin_ ? copy.crc32
                                  : Crc32Combine(summary.crc32, copy.crc32, copy.bytes);
    end += copy.bytes;
  }
  if (end != size_) {
    return absl::DataLossError(absl::StrCat(path_, ": no bytes came for [", end, ", ", size_,
                                            ") of [", begin_, ", ", size_, ")"));
  }
  summary.bytes = size_ - begin_;
  if (::fsync(fd_) != 0) return core::MappedWriteError(errno, "fsync", path_, begin_, size_);
  return summary;
}

absl::Status MappedFileWriter::CutToWrittenPrefix() {
  if (absl::Status drained = Drain(); !drained.ok()) return drained;
  const uint64_t prefix = written_prefix();
  if (::ftruncate(fd_, static_cast<off_t>(prefix)) != 0) {
    return core::MappedWriteError(errno, "cut", path_, 0, prefix);
  }
  if (::fsync(fd_) != 0) return core::MappedWriteError(errno, "fsync", path_, 0, prefix);
  return absl::OkStatus();
}

}  // namespace tomo::transfer
