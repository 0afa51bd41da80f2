#include "transfer/chunk_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "transfer/crc32.h"

namespace tomo::transfer {
namespace {

absl::Status IoError(int error, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(error));
  if (error == ENOSPC || error == EDQUOT || error == EFBIG) {
    return absl::ResourceExhaustedError(message);
  }
  return absl::InternalError(message);
}

}  // namespace

struct ChunkWriter::Chunk {
  std::shared_ptr<const std::string> bytes;
  size_t index = 0;
  int pending = 2;      // the write and the checksum; guarded by ChunkWriter::mu_
};

std::unique_ptr<ChunkWriter> ChunkWriter::Create(int fd, std::string path, Options options) {
  return std::unique_ptr<ChunkWriter>(new ChunkWriter(fd, std::move(path), std::move(options)));
}

ChunkWriter::ChunkWriter(int fd, std::string path, Options options)
    : fd_(fd), path_(std::move(path)), options_(std::move(options)),
      writer_(1, options_.idle_time, [this] { WriteLoop(); }),
      checksummers_(options_.checksum_threads, options_.idle_time, [this] { ChecksumLoop(); }) {}

ChunkWriter::~ChunkWriter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  checksummers_.Join();
  // Destroyed from a FinishAsync callback, the writer thread detaches: its loop returns
  // right after the callback and touches nothing of this object any more.
  writer_.Join();
  ::close(fd_);
}

bool ChunkWriter::AwaitWork(const absl::Condition& cond, OnDemandThreads& threads) {
  const bool work = mu_.AwaitWithTimeout(cond, threads.idle_time());
  if (work && !stopping_) return true;
  threads.ExitingLocked();
  return false;
}

absl::StatusOr<bool> ChunkWriter::Append(std::string chunk) {
  return Append(std::make_shared<const std::string>(std::move(chunk)));
}

absl::StatusOr<bool> ChunkWriter::Append(std::shared_ptr<const std::string> chunk) {
  auto entry = std::make_shared<Chunk>();
  entry->bytes = std::move(chunk);
  const uint64_t size = entry->bytes->size();
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  if (finishing_ || stopping_) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": appended after Finish"));
  }
  entry->index = crcs_.size();
  appended_bytes_ += size;
  crcs_.push_back(0);
  sizes_.push_back(size);
  queued_bytes_ += size;
  ++unfinished_chunks_;
  to_checksum_.push_back(entry);
  to_write_.push_back(std::move(entry));
  writer_.StartLocked();
  checksummers_.StartLocked();
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
    queued_bytes_ -= chunk->bytes->size();
    --unfinished_chunks_;
    chunk->bytes.reset();
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
      if (!AwaitWork(absl::Condition(
                         +[](ChunkWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
                           return !w->to_checksum_.empty() || w->stopping_;
                         },
                         this),
                     checksummers_)) {
        return;
      }
      chunk = std::move(to_checksum_.front());
      to_checksum_.pop_front();
    }
    const uint32_t crc = Crc32Update(0, chunk->bytes->data(), chunk->bytes->size());
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
      if (!AwaitWork(absl::Condition(
                         +[](ChunkWriter* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
                           return !w->to_write_.empty() || w->stopping_ ||
                                  (w->finishing_ && w->unfinished_chunks_ == 0);
                         },
                         this),
                     writer_)) {
        return;
      }
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
    const char* p = chunk->bytes->data();
    size_t left = failed ? 0 : chunk->bytes->size();
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        Fail(IoError(errno, absl::StrCat("cannot write ", path_)));
        failed = true;
        break;
      }
      p += n;
      left -= static_cast<size_t>(n);
      written_bytes_ += static_cast<uint64_t>(n);
    }
    if (!failed && options_.on_written) options_.on_written(written_bytes_);
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
  writer_.StartLocked();  // the writer reports, though no chunk (or none lately) came
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
