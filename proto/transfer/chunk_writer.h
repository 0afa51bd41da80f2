// Writes a file from chunks that one thread receives in order (a gRPC stream), so that the
// receiving thread never waits on the disk: Append queues the chunk and returns, writer
// threads put the chunks in the file and checksum threads compute each chunk's CRC-32 at
// the same time. One thread doing all three tops out near 1 GB/s, under the wire's 3 GB/s
// (bench/NOTES.md, "tomod transfers"). The queue is bounded: when Append reports it full,
// the caller stops receiving until on_room is called (on a writer or checksum thread); a
// synchronous caller uses WaitForRoom instead.
//
// Two modes, chosen by Create from the options:
// - Sequential (the default; any descriptor, the final size unknown): one writer thread
//   write()s the chunks in order. With sync, written ranges are handed to the kernel for
//   write-back as they complete (sync_file_range), so that the final fsync has little left.
// - Parallel (options.expected_bytes > 0 and options.write_threads > 1, a file on tmpfs
//   unless parallel_on_disk; a regular file whose final size is known, as an upload's
//   input.size_bytes): one write() thread into tmpfs stops at 2.4-3.0 GB/s (page allocation
//   and zeroing; pwrite from more threads is no faster, the inode lock serialises them).
//   On a disk filesystem a mapped write costs far more CPU than write() (ext4: 1.4 s per
//   GB against 0.3 s, chunk-writer-bench) and write() with early write-back already beats
//   write + fsync, so there the sequential mode stays. Here the file is mapped MAP_SHARED and
//   write_threads threads copy chunks into their offsets at once, each chunk's space
//   reserved with fallocate just before it is copied, so that a full filesystem (or a file
//   size limit) is a RESOURCE_EXHAUSTED at that chunk and never a SIGBUS. Free space short of
//   expected_bytes is refused at once (the first Append reports it). Finish unmaps and, with
//   sync, fsyncs; the file then ends exactly where the last chunk ends. Appending more than
//   expected_bytes is an INVALID_ARGUMENT; fewer is fine. With checksum_threads = 0 each
//   writer thread checksums the chunk it copies in the same pass.
//
//   ChunkWriter::Options options;
//   options.on_room = [this] { StartRead(&request_); };
//   options.expected_bytes = size_bytes;  // known up front: write in parallel
//   options.write_threads = 4;
//   auto writer = ChunkWriter::Create(fd, path, options);      // takes the descriptor
//   TOMO_ASSIGN_OR_RETURN(bool room, writer->Append(std::move(bytes)));
//   writer->FinishAsync(/*sync=*/true, [](absl::StatusOr<ChunkWriter::Summary> sum) {...});
//
// Thread-safe: Append/WaitForRoom from one producer thread; Finish once. Errors (from
// Append and Finish) name the file: RESOURCE_EXHAUSTED for ENOSPC, EDQUOT and EFBIG,
// INVALID_ARGUMENT for a descriptor the parallel mode cannot map or too many bytes, INTERNAL
// for other I/O errors.
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
    // Sequential mode: at least 1. Parallel mode: 0 checksums on the writer threads.
    int checksum_threads = 2;
    // Start the write-back of every this many bytes written (0: only the final fsync).
    uint64_t writeback_bytes = uint64_t{32} << 20;
    // Called once, on a writer or checksum thread, each time a full queue has room again.
    std::function<void()> on_room;
    // The parallel mode: the bytes that will be appended (at most), and the threads that
    // copy them into the mapped file. Both must be set (> 0, > 1) to choose it.
    uint64_t expected_bytes = 0;
    int write_threads = 1;
    // The parallel mode on any filesystem, not only on tmpfs (tests, benchmarks).
    bool parallel_on_disk = false;
  };
  struct Summary {
    uint64_t bytes = 0;  // appended and written
    uint32_t crc32 = 0;  // of those bytes (Crc32Update(0, ...))
  };

  // Takes fd (open for writing, positioned where the chunks go: its offset, or its end
  // with O_APPEND); path is for messages. A parallel mode that cannot start (not a regular
  // file, no room) reports why from the first Append and from Finish.
  static std::unique_ptr<ChunkWriter> Create(int fd, std::string path, Options options);
  // Drops what is still queued, stops the threads and closes the descriptor. May run on a
  // writer thread (from a FinishAsync callback): that thread then detaches.
  ~ChunkWriter();
  ChunkWriter(const ChunkWriter&) = delete;
  ChunkWriter& operator=(const ChunkWriter&) = delete;

  // Whether Create chose the parallel mode.
  bool parallel() const { return parallel_; }

  // Queues chunk. true: the caller may append again now; false: the queue is full, append
  // again after on_room (or WaitForRoom). An error: an earlier write failed (the file's
  // path and errno in the message); nothing more is written.
  absl::StatusOr<bool> Append(std::string chunk);
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
  ChunkWriter(int fd, std::string path, Options options, bool parallel);
  // Parallel mode: opens the file for mapping, checks the free space and maps it.
  absl::Status StartParallel();
  void WriteLoop();
  void CopyLoop();
  void ChecksumLoop();
  // Parallel mode: reserves the chunk's bytes and copies them into the mapping (and with
  // checksums on the writers, sets *crc in the same pass).
  absl::Status CopyChunk(const Chunk& chunk, uint32_t* crc);
  // Records a write error, waking a producer waiting for room so that it learns of it.
  void Fail(absl::Status status);
  // A chunk's write or checksum is done; frees its bytes when both are.
  void Release(const std::shared_ptr<Chunk>& chunk);
  // Parallel mode: chunk is in the mapping; starts the write-back of the written prefix.
  void Copied(const Chunk& chunk);
  // Runs once, when finishing and every chunk is done, then calls done.
  void CompleteAndReport(bool sync);
  absl::StatusOr<Summary> Complete(bool sync);
  bool ChecksumsOnWriters() const { return parallel_ && options_.checksum_threads <= 0; }

  int fd_;  // replaced by a read-write descriptor by StartParallel, before any thread runs
  const std::string path_;
  const Options options_;
  const bool parallel_;
  // Parallel mode, fixed by StartParallel: where the chunks go and the mapping over them.
  uint64_t base_offset_ = 0;
  char* map_ = nullptr;      // file offset map_offset_; unmapped by Complete or ~ChunkWriter
  uint64_t map_offset_ = 0;
  uint64_t map_length_ = 0;
  uint64_t page_bytes_ = 4096;

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
  bool completing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_sync_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void(absl::StatusOr<Summary>)> done_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  // Parallel mode: which chunks are in the mapping, and the prefix of them (in bytes) that
  // is contiguous and whose write-back has started.
  std::vector<bool> copied_ ABSL_GUARDED_BY(mu_);
  size_t copied_prefix_chunks_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t copied_prefix_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t writeback_from_ ABSL_GUARDED_BY(mu_) = 0;
  // Sequential mode, writer thread only.
  uint64_t written_bytes_ = 0;
  uint64_t written_writeback_from_ = 0;
  std::vector<std::thread> writers_;
  std::vector<std::thread> checksummers_;
};

}  // namespace tomo::transfer
