// Writes a file of known size from chunks placed at given offsets, through a shared mapping
// of the file copied by a pool of threads: the client's download of a large result into
// tmpfs (tomo_client.cc). tmpfs serialises one file's write()s on its inode lock, so one
// thread's write() (ChunkWriter) caps near 2.1-2.9 GB/s on the H100 machine and N threads'
// pwrite()s are no faster; N threads copying into a mapping measured 1.4-1.5x faster
// (bench/NOTES.md v0.10). Each copy thread first allocates its chunk's pages
// (core/io/mapped_range.h: MADV_POPULATE_WRITE, fallocate on older kernels), so that a full
// file system is an error, not a SIGBUS; then copies, and computes the chunk's CRC-32.
//
// Chunks may come in any order and from several threads (the streams of a striped fetch);
// Finish checks that they covered [begin, size) exactly once and returns the CRC-32 of
// those bytes in file order. begin > 0 resumes a file: its first begin bytes are already
// there and are not touched. After a failure, CutToWrittenPrefix keeps the longest run of
// copied bytes from begin (the file is cut there), so that a later fetch resumes from it.
// The queue is bounded as ChunkWriter's: when Append reports it full, the producer stops
// until on_room is called (on a copy thread), or waits in WaitForRoom. The copy threads run
// only while there are chunks (transfer/on_demand_threads.h: they start with a chunk and end
// after idle_time without one), so a writer whose producer stalls holds no thread.
//
//   MappedFileWriter::Options options;
//   options.on_room = [this] { StartRead(&response_); };
//   TOMO_ASSIGN_OR_RETURN(auto writer,
//                         MappedFileWriter::Create(fd, path, /*begin=*/resume_offset, size, options));
//   TOMO_ASSIGN_OR_RETURN(bool room, writer->Append(offset, std::move(bytes)));  // any thread
//   if (!room) writer->WaitForRoom();
//   TOMO_ASSIGN_OR_RETURN(MappedFileWriter::Summary sum, writer->Finish());   // fsynced
//
// Thread-safe: Append and WaitForRoom from any threads; Finish (or CutToWrittenPrefix) from
// one thread, once, after the last Append. Errors name the file: RESOURCE_EXHAUSTED for a
// full file system (ENOSPC, EFBIG, EDQUOT, a populate that cannot allocate), INTERNAL for
// other I/O errors, DATA_LOSS for chunks outside [begin, size) (Append) and for a gap or
// overlap (Finish), naming the first one.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "transfer/on_demand_threads.h"

namespace tomo::transfer {

class MappedFileWriter {
 public:
  struct Options {
    // Threads populating, copying and checksumming chunks (at least 1). Four measured
    // 1.4x one write() on tmpfs, eight a little more (bench/NOTES.md v0.10).
    int copy_threads = 4;
    // Bytes appended but not yet copied, at most, before Append reports the queue full.
    uint64_t max_queued_bytes = uint64_t{64} << 20;
    // A copy thread with nothing to do this long ends (started again when chunks come).
    absl::Duration idle_time = absl::Milliseconds(250);
    // Called once, on a copy thread, each time a full queue has room again.
    std::function<void()> on_room;
    // Called on a copy thread when the run of copied bytes from begin has grown, with its
    // end (tomod's follower reads the spool file up to there). Calls from different copy
    // threads may arrive out of order: keep the largest.
    std::function<void(uint64_t written_prefix)> on_written;
  };
  struct Summary {
    uint64_t bytes = 0;  // size - begin
    uint32_t crc32 = 0;  // of [begin, size), Crc32Update(0, ...)
  };

  // True where writing through a mapping pays off: the open file is on tmpfs. Elsewhere
  // (a disk) one writer thread is as fast or faster (bench/NOTES.md, "tomod transfers").
  static bool Suits(int fd);

  // Takes fd (open for reading and writing: a shared mapping needs both), sets the file's
  // size to size (bytes beyond it are cut) and maps [begin, size). path is for messages.
  // INVALID_ARGUMENT when begin > size; the file's size or mapping failing as in the
  // header comment (RESOURCE_EXHAUSTED for EFBIG, e.g. over RLIMIT_FSIZE). The descriptor
  // is closed on error too.
  static absl::StatusOr<std::unique_ptr<MappedFileWriter>> Create(int fd, std::string path,
                                                                  uint64_t begin, uint64_t size,
                                                                  Options options);
  // Drops what is still queued, stops the threads, unmaps and closes the descriptor.
  ~MappedFileWriter();
  MappedFileWriter(const MappedFileWriter&) = delete;
  MappedFileWriter& operator=(const MappedFileWriter&) = delete;

  // Queues chunk for [offset, offset + chunk->size()). true: append again now; false: the
  // queue is full, append again after on_room (or WaitForRoom). Errors: a copy failed
  // earlier (nothing more is copied); DATA_LOSS for a chunk outside [begin, size) (not
  // queued; the writer goes on); FAILED_PRECONDITION after Finish.
  absl::StatusOr<bool> Append(uint64_t offset, std::shared_ptr<const std::string> chunk);
  absl::StatusOr<bool> Append(uint64_t offset, std::string chunk);
  // The chunk as pieces laid end to end from offset (a gRPC message's slices), which keep
  // holds until they are copied: no copy is made before the one into the file.
  absl::StatusOr<bool> Append(uint64_t offset, std::vector<std::string_view> pieces,
                              std::shared_ptr<const void> keep);
  // Blocks while the queue is full (returns at once after an error).
  void WaitForRoom();

  // Waits for the queued chunks, checks that the chunks covered [begin, size) exactly once,
  // unmaps and fsyncs the file. The descriptor stays open until destruction.
  absl::StatusOr<Summary> Finish();
  // After a failure (of this writer, or of the source of its chunks): waits for the queued
  // chunks, unmaps, cuts the file to written_prefix() and fsyncs it. May follow a Finish
  // that failed.
  absl::Status CutToWrittenPrefix();
  // The end of the longest run of bytes from begin that are copied into the file: begin
  // when none.
  uint64_t written_prefix() const;

  uint64_t begin() const { return begin_; }
  uint64_t size() const { return size_; }

 private:
  struct Chunk;
  struct Copied {
    uint64_t offset = 0, bytes = 0;
    uint32_t crc32 = 0;
  };
  MappedFileWriter(int fd, std::string path, uint64_t begin, uint64_t size, Options options);
  void CopyLoop();
  // Waits for every queued chunk, stops the threads and unmaps (once).
  absl::Status Drain();
  // Records [offset, offset + bytes) as copied; the new end of the run from begin when it
  // grew, else 0.
  uint64_t GrowPrefixLocked(uint64_t offset, uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The copied chunks in file order.
  std::vector<Copied> SortedCopies() const;

  const int fd_;
  const std::string path_;
  const uint64_t begin_;
  const uint64_t size_;
  const Options options_;
  char* mapping_ = nullptr;       // file offset mapping_offset_ at mapping_[0]
  uint64_t mapping_offset_ = 0;   // begin rounded down to a page
  uint64_t mapping_bytes_ = 0;

  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<Chunk>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<Copied> copied_ ABSL_GUARDED_BY(mu_);
  // The run copied from begin (written_prefix, on_written), and the copied ranges beyond
  // it (by offset).
  uint64_t prefix_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, uint64_t> beyond_prefix_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // appended, not yet copied
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;        // being copied
  bool full_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool drained_ = false;  // the finishing thread's
  OnDemandThreads copiers_;  // started under mu_ as chunks are appended
};

}  // namespace tomo::transfer
