// Reconstructing an FBP/FDK job while its projections are still being uploaded, so that
// upload and compute overlap (issue 4: the FDK case end to end within 0.3 s of the upload
// alone).
//
// The spool file stays the truth; the follower only saves the second read of it. The
// upload shares each chunk it receives with the feed (UploadFeed::Received) as it hands it
// to its ChunkWriter, and reports how much of input.bin is written (UploadFeed::Written).
// A worker that JobManager set to follow the upload assembles whole views from those
// chunks in memory (copied while they are still in the cache, with no second pass over
// the page cache: reading 2.4 GB back from the tmpfs file took cores from the upload and
// held it under 2.5 GB/s on the H100 machine), checks them finite and feeds them to the
// algorithm's view stream (core::AlgorithmRegistry::BeginViewStream: Fdk's weights,
// filter and back projection chunk by chunk). The feed keeps at most max_kept_bytes of
// chunks; when a slow follower falls that far behind, chunks are not kept and it reads
// those bytes back from the file once they are written. After the last view it finishes
// the volume and waits for the upload's end:
//   committed  the job is durably QUEUED with this CRC-checked input (the chunks the
//              follower copied are the ones the CRC covers): the volume is used, only the
//              outputs remain to be written;
//   aborted    the upload failed (size, CRC, disconnect) or the job was cancelled: the
//              volume is dropped;
//   yielded    the worker is wanted elsewhere (a committed job waits for it, tomod
//              pauses, drains or stops): the volume is dropped.
// Whenever following fails (a budget that needs slabs, a non-finite value, a read error,
// the end before the last view) the job simply runs from the spool like any other, which
// then reports any error in the data. A crash loses only the in-memory stream.
//
// Which jobs: FBP on a vector geometry (parallel, fan or cone beam) whose input is the
// projections as they are: float32 little endian, view-row-column, one file, no dark/flat
// or -log preprocessing, the geometry in the spec (CanReconstructWhileUploading).
//
//   auto feed = std::make_shared<UploadFeed>();
//   // upload side, for each chunk, in order:   feed->Received(chunk);
//   //                                           writer->Append(chunk);
//   // (ChunkWriter's on_written):             feed->Written(bytes);
//   // at the commit:                            feed->Finish(UploadFeed::End::kCommitted);
//   // the worker:
//   absl::StatusOr<core::Array3D> volume = ReconstructWhileUploading(
//       job, input_path, *feed, registry, backend, context);
//
// Thread safety: UploadFeed's methods may be called from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/algorithms/reconstruction.h"
#include "core/base/run_context.h"
#include "core/data/array3d.h"
#include "core/operators/backend.h"
#include "runner/job_spec.h"

namespace tomo::server {

class UploadFeed {
 public:
  enum class End { kNone, kCommitted, kAborted, kYielded };
  // A received chunk and where it starts in the input.
  struct Chunk {
    uint64_t offset = 0;
    std::shared_ptr<const std::string> bytes;
  };
  // Chunks kept for the follower by default, at most: 32 pieces; the follower normally
  // trails by less than one.
  static constexpr uint64_t kDefaultMaxKeptBytes = uint64_t{256} << 20;

  explicit UploadFeed(uint64_t max_kept_bytes = kDefaultMaxKeptBytes)
      : max_kept_bytes_(max_kept_bytes) {}

  // The next chunk of the input as received (back to back, in order): kept for the
  // follower unless max_kept_bytes are kept already or it has stopped following.
  void Received(std::shared_ptr<const std::string> chunk);
  // Bytes of the input file written so far (increasing).
  void Written(uint64_t bytes);
  // The upload's outcome, or the worker's release; the first one counts. Aborted and
  // yielded also drop the kept chunks.
  void Finish(End end);
  // The follower is done with the chunks: drops them and keeps no more.
  void StopKeeping();

  // Waits until bytes [0, end) are received (returns kNone) or the feed has ended before
  // that (returns how). Then *kept gets the kept chunks that overlap [begin, end), in
  // order, and the feed lets go of those that end at or before `end`: the follower reads
  // forward only.
  End TakeReceived(uint64_t begin, uint64_t end, std::vector<Chunk>* kept);

  // Waits until at least `bytes` are written (returns kNone) or the feed has ended before
  // that (returns how).
  End WaitForBytes(uint64_t bytes) const;
  // Waits until the feed has ended; returns how.
  End WaitForEnd() const;
  End end() const;
  // Bytes of the input received so far.
  uint64_t received_bytes() const;

 private:
  void DropKeptLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t max_kept_bytes_;
  mutable absl::Mutex mu_;
  uint64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Chunk> kept_ ABSL_GUARDED_BY(mu_);
  uint64_t kept_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool keeping_ ABSL_GUARDED_BY(mu_) = true;
  End end_ ABSL_GUARDED_BY(mu_) = End::kNone;
};

const char* UploadFeedEndName(UploadFeed::End end);

// Whether ReconstructWhileUploading can follow the job's upload (see above): the input is
// the plain projections (InputIsPlainProjections) and the registry can stream the request.
bool CanReconstructWhileUploading(const ValidatedJob& job, const core::AlgorithmRegistry& registry);

// Where a follower's time went (for its log line and the benchmark notes).
struct FollowTimes {
  double waiting_s = 0;   // for the upload to receive the next piece
  double reading_s = 0;   // copying pieces from the chunks (or the file) and checking them
  double feeding_s = 0;   // AddViews: the copies to the device (and chunk launches)
  double finishing_s = 0; // the last chunk and the volume's download
};

// While the upload goes on, views are assembled and fed in pieces of whole views of about
// this many bytes: one AddViews call each, and the last piece, which waits for the end of
// the upload, stays quick. Once every byte has arrived, the backlog goes in larger pieces
// on more threads.
inline constexpr uint64_t kFollowPieceBytes = uint64_t{8} << 20;

// Follows the upload of input_path through feed, as above, in pieces of piece_bytes (at
// least one view); the volume when the upload was committed. Stops the feed keeping
// chunks when it returns. times, when given, gets where the time went (also when following
// fails). Otherwise: CANCELLED naming the feed's end (aborted, yielded),
// FAILED_PRECONDITION when the request cannot be streamed within
// context.memory_budget_bytes, INVALID_ARGUMENT for a non-finite value (naming view, row and
// detector), INTERNAL/NOT_FOUND for read errors, the backend's errors. The backend is used
// by the calling thread only.
absl::StatusOr<core::Array3D> ReconstructWhileUploading(const ValidatedJob& job,
                                                        const std::string& input_path,
                                                        UploadFeed& feed,
                                                        const core::AlgorithmRegistry& registry,
                                                        core::Backend& backend,
                                                        const core::RunContext& context,
                                                        uint64_t piece_bytes = kFollowPieceBytes,
                                                        FollowTimes* times = nullptr);

}  // namespace tomo::server
