// Writes a file from chunks that one thread receives in order (a gRPC stream), so that the
// receiving thread never waits on the disk: Append queues the chunk and returns, writer
// threads put the chunks in the file and checksum threads compute each chunk's CRC-32 at
// the same time. One thread doing all three tops out near 1 GB/s, under the wire's 3 GB/s
// (bench/NOTES.md, "tomod transfers"). The queue is bounded: when Append reports it full,
// the caller stops receiving until on_room is called (on a writer or checksum thread); a
// synchronous caller uses WaitForRoom instead.
//
// One writer thread write()s the chunks in order (any descriptor; the final size need not be
// known). With sync, written ranges are handed to the kernel for write-back as they
// complete (sync_file_range), so that the final fsync has little left. A mode that copied
// chunks from several threads into a shared mapping of the file measured slower, on tmpfs
// (2.9-3.1 against 3.3 GB/s) and far slower on disk (bench/NOTES.md, "tomod transfers"),
// and was removed. on_written reports the bytes in the file so far, so that a reader can
// follow the file as it grows (tomod's early start of an FDK job, server/uploads/upload_stream.h).
//
// The threads run only while there is work (transfer/on_demand_threads.h): they start with
// the first chunk and each ends after idle_time with nothing to do, to start again with the
// next chunk, so a writer whose producer has stalled (an upload waiting for its client)
// holds no thread. A steady stream keeps them running.
//
//   ChunkWriter::Options options;
//   options.on_room = [this] { StartRead(&request_); };
//   options.on_written = [feed](uint64_t bytes) { feed->Written(bytes); };
//   auto writer = ChunkWriter::Create(fd, path, options);      // takes the descriptor
//   TOMO_ASSIGN_OR_RETURN(bool room, writer->Append(std::move(bytes)));
//   writer->FinishAsync(/*sync=*/true, [](absl::StatusOr<ChunkWriter::Summary> sum) {...});
//
// Thread-safe: Append/WaitForRoom from one producer thread; Finish once. Errors (from
// Append and Finish) name the file: RESOURCE_EXHAUSTED for ENOSPC, EDQUOT and EFBIG,
// INTERNAL for other I/O errors.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "transfer/on_demand_threads.h"

namespace tomo::transfer {

class ChunkWriter {
 public:
  struct Options {
    // Bytes received but not yet written and checksummed, at most, before Append reports
    // the queue full.
    uint64_t max_queued_bytes = uint64_t{64} << 20;
    // Threads computing the chunks' CRC-32 beside the writer (at least 1).
    int checksum_threads = 2;
    // Start the write-back of every this many bytes written (0: only the final fsync).
    uint64_t writeback_bytes = uint64_t{32} << 20;
    // A thread with nothing to do this long ends (started again when chunks come).
    absl::Duration idle_time = absl::Milliseconds(250);
    // Called once, on a writer or checksum thread, each time a full queue has room again.
    std::function<void()> on_room;
    // Called on the writer thread after each chunk is in the file (not yet checksummed or
    // synced), with the bytes written so far; not called after a write error.
    std::function<void(uint64_t written_bytes)> on_written;
  };
  struct Summary {
    uint64_t bytes = 0;  // appended and written
    uint32_t crc32 = 0;  // of those bytes (Crc32Update(0, ...))
  };

  // Takes fd (open for writing, positioned where the chunks go: its offset, or its end
  // with O_APPEND); path is for messages.
  static std::unique_ptr<ChunkWriter> Create(int fd, std::string path, Options options);
  // Drops what is still queued, stops the threads and closes the descriptor. May run on a
  // writer thread (from a FinishAsync callback): that thread then detaches.
  ~ChunkWriter();
  ChunkWriter(const ChunkWriter&) = delete;
  ChunkWriter& operator=(const ChunkWriter&) = delete;

  // Queues chunk. true: the caller may append again now; false: the queue is full, append
  // again after on_room (or WaitForRoom). An error: an earlier write failed (the file's
  // path and errno in the message); nothing more is written.
  absl::StatusOr<bool> Append(std::string chunk);
  // The same for a chunk that others read too (tomod's follower copies the upload's chunks
  // from memory, server/uploads/upload_stream.h): the writer holds its reference until the chunk
  // is written and checksummed; only those bytes count against max_queued_bytes.
  absl::StatusOr<bool> Append(std::shared_ptr<const std::string> chunk);
  // Blocks while the queue is full.
  void WaitForRoom();
  // Once every queued chunk is written and checksummed (and, with sync, the file fsynced),
  // calls done on a writer thread with the summary, or the first error. Append must not be
  // called afterwards.
  void FinishAsync(bool sync, std::function<void(absl::StatusOr<Summary>)> done);
  // The same, waiting.
  absl::StatusOr<Summary> Finish(bool sync);

 private:
  struct Chunk;
  ChunkWriter(int fd, std::string path, Options options);
  void WriteLoop();
  void ChecksumLoop();
  // Waits up to idle_time for the loop's work (cond) or stopping_; false when the loop's
  // thread is to end (stopping, or idle: then it is marked ended in threads).
  bool AwaitWork(const absl::Condition& cond, OnDemandThreads& threads)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records a write error, waking a producer waiting for room so that it learns of it.
  void Fail(absl::Status status);
  // A chunk's write or checksum is done; frees its bytes when both are.
  void Release(const std::shared_ptr<Chunk>& chunk);
  // Runs once, when finishing and every chunk is done, then calls done.
  void CompleteAndReport(bool sync);
  absl::StatusOr<Summary> Complete(bool sync);

  const int fd_;
  const std::string path_;
  const Options options_;

  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<Chunk>> to_write_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Chunk>> to_checksum_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> crcs_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> sizes_ ABSL_GUARDED_BY(mu_);
  uint64_t appended_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t unfinished_chunks_ ABSL_GUARDED_BY(mu_) = 0;
  bool full_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_sync_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void(absl::StatusOr<Summary>)> done_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  // The writer thread's (one at a time; a thread that ends hands them on through mu_).
  uint64_t written_bytes_ = 0;
  uint64_t written_writeback_from_ = 0;
  // Started under mu_, when chunks are appended (and the writer when finishing).
  OnDemandThreads writer_;
  OnDemandThreads checksummers_;
};

}  // namespace tomo::transfer
