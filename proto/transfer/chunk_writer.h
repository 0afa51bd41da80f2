// Writes a file from chunks that one thread receives in order (a gRPC stream), so that the
// receiving thread never waits on the disk: Append queues the chunk and returns, a writer
// thread write()s the chunks in order and checksum threads compute each chunk's CRC-32 at
// the same time. One thread doing all three tops out near 1 GB/s, under the wire's 3 GB/s
// (bench/NOTES.md, "tomod upload"). The queue is bounded: when Append reports it full, the
// caller stops receiving until on_room is called (on the writer's thread); a synchronous
// caller uses WaitForRoom instead. With sync, written ranges are handed to the kernel for
// write-back as they complete (sync_file_range), so that the final fsync has little left.
//
//   ChunkWriter::Options options;
//   options.on_room = [this] { StartRead(&request_); };
//   auto writer = ChunkWriter::Create(fd, path, options);      // takes the descriptor
//   TOMO_ASSIGN_OR_RETURN(bool room, writer->Append(std::move(bytes)));
//   writer->FinishAsync(/*sync=*/true, [](absl::StatusOr<ChunkWriter::Summary> sum) {...});
//
// Thread-safe: Append/WaitForRoom from one producer thread; Finish once.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tomo::transfer {

class ChunkWriter {
 public:
  struct Options {
    // Bytes received but not yet written and checksummed, at most, before Append reports
    // the queue full.
    uint64_t max_queued_bytes = uint64_t{64} << 20;
    int checksum_threads = 2;
    // With sync, start the write-back of every this many bytes written (0: only fsync).
    uint64_t writeback_bytes = uint64_t{32} << 20;
    // Called once, on the writer's thread, each time a full queue has room again.
    std::function<void()> on_room;
  };
  struct Summary {
    uint64_t bytes = 0;  // appended and written
    uint32_t crc32 = 0;  // of those bytes (Crc32Update(0, ...))
  };

  // Takes fd (open for writing, positioned where the chunks go); path is for messages.
  static std::unique_ptr<ChunkWriter> Create(int fd, std::string path, Options options);
  // Drops what is still queued, stops the threads and closes the descriptor. May run on
  // the writer's own thread (from a FinishAsync callback): it then detaches.
  ~ChunkWriter();
  ChunkWriter(const ChunkWriter&) = delete;
  ChunkWriter& operator=(const ChunkWriter&) = delete;

  // Queues chunk. true: the caller may append again now; false: the queue is full, append
  // again after on_room (or WaitForRoom). An error: an earlier write failed (the file's
  // path and errno in the message); nothing more is written.
  absl::StatusOr<bool> Append(std::string chunk);
  // Blocks while the queue is full.
  void WaitForRoom();
  // Once every queued chunk is written and checksummed (and, with sync, the file fsynced),
  // calls done on the writer's thread with the summary, or the first error. Append must
  // not be called afterwards.
  void FinishAsync(bool sync, std::function<void(absl::StatusOr<Summary>)> done);
  // The same, waiting.
  absl::StatusOr<Summary> Finish(bool sync);

 private:
  struct Chunk;
  ChunkWriter(int fd, std::string path, Options options);
  void WriteLoop();
  void ChecksumLoop();
  // A chunk's write or checksum is done; frees its bytes when both are.
  void Release(const std::shared_ptr<Chunk>& chunk);
  absl::StatusOr<Summary> Complete(bool sync);

  const int fd_;
  const std::string path_;
  const Options options_;

  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<Chunk>> to_write_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Chunk>> to_checksum_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> crcs_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> sizes_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t unfinished_chunks_ ABSL_GUARDED_BY(mu_) = 0;
  bool full_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_sync_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void(absl::StatusOr<Summary>)> done_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  uint64_t written_bytes_ = 0;        // writer thread only
  uint64_t writeback_from_ = 0;       // writer thread only
  std::thread writer_;
  std::vector<std::thread> checksummers_;
};

}  // namespace tomo::transfer
