// One upload that arrives over several streams (SubmitRequest.striping, SubmitStripe): one
// gRPC stream holds an upload near 2.1-2.6 GB/s on the H100 machine whatever the spool can
// write (bench/NOTES.md, v0.9-v0.11), so a large input comes as N stripes on N connections.
// Unit u of the input belongs to stripe u % N; each stream sends its units in order.
//
// The spool and the follower (upload_stream.h) keep seeing one stream of bytes in order:
// StripedUpload puts the stripes' units back in order and hands them to the Upload
// (job_manager.h), which writes them with its one ChunkWriter and checksums them there. Units
// that arrive ahead of the first missing one wait here, up to max_ahead_bytes; beyond that a
// stream that is ahead is paused (its reactor does not read) until the others catch up. The
// stream that owns the first missing unit is never paused for that reason, so the streams
// cannot wait on each other. When the Upload's writer queue is full every stream that hands it
// a unit is paused until it has room, as a single stream is.
//
//   auto striped = std::make_shared<StripedUpload>(std::move(upload), client, striping);
//   registry.Add(striped);                              // SubmitStripe calls find it by id
//   // stripe 0 (the Submit call):  striped->Append(0, std::nullopt, data, resume)
//   // stripe k (SubmitStripe):     striped->Open(k); striped->Append(k, offset, data, resume)
//   //                              ... striped->EndStripe(k) at the stream's half-close
//   // upload_end on the Submit call: striped->CommitAsync(total, crc, done)
//
// Append's result: true, read the next message now; false, resume() will be called (once, on
// another thread) when the stream may read again. Any error aborts the whole upload: the job
// and its files are removed, every paused stream is resumed so that its reactor learns of it,
// and later calls return the same error.
//
// Thread safety: all methods from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/jobs/job_manager.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

// UploadStriping's limits (tomoserve.proto).
inline constexpr uint32_t kMaxUploadStripes = 16;
inline constexpr uint64_t kDefaultUploadUnitBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMinUploadUnitBytes = uint64_t{64} << 10;
inline constexpr uint64_t kMaxUploadUnitBytes = uint64_t{4} << 20;

// The stripe count and unit of a SubmitRequest.striping, checked: INVALID_ARGUMENT naming
// striping.count or striping.unit_bytes, the value and the range.
struct UploadStripes {
  uint32_t count = 1;
  uint64_t unit_bytes = kDefaultUploadUnitBytes;
};
absl::StatusOr<UploadStripes> ValidateUploadStriping(const tomoserve::v1::UploadStriping& striping);

class StripedUpload {
 public:
  // Units held out of order, at most, before a stream that is ahead is paused (at least
  // 4 units per stripe).
  static constexpr uint64_t kDefaultMaxAheadBytes = uint64_t{64} << 20;

  // upload is a fresh Upload (not an existing job's); client is who may add stripes
  // (ClientIdentity). stripes.count >= 2.
  StripedUpload(std::unique_ptr<Upload> upload, std::string client, UploadStripes stripes,
                uint64_t max_ahead_bytes = kDefaultMaxAheadBytes);
  // Aborts an upload that was not committed.
  ~StripedUpload();
  StripedUpload(const StripedUpload&) = delete;
  StripedUpload& operator=(const StripedUpload&) = delete;

  const std::string& job_id() const { return job_id_; }
  const std::string& client() const { return client_; }
  const UploadStripes& stripes() const { return stripes_; }
  bool writes_through_mapping() const;

  // A SubmitStripe call takes stripe index: INVALID_ARGUMENT when index is out of
  // [1, count) or already taken.
  absl::Status Open(uint32_t index);
  // The stripe's next unit. offset: where the message says it starts (SubmitStripe), or
  // nullopt for the Submit call's data, whose offsets follow from the layout. INVALID_ARGUMENT
  // (naming data.offset or data, the value and what was expected) for a unit out of its
  // place or of the wrong size; the Upload's errors.
  absl::StatusOr<bool> Append(uint32_t index, std::optional<uint64_t> offset, std::string data,
                              std::function<void()> resume);
  // The stripe's stream ended: OK when every unit of it arrived, else INVALID_ARGUMENT naming
  // what arrived (and the upload is aborted).
  absl::Status EndStripe(uint32_t index);
  // Bytes of the stripe received so far.
  uint64_t StripeBytesReceived(uint32_t index) const;
  // upload_end: INVALID_ARGUMENT when a stripe has not ended (or stripe 0 is incomplete);
  // else Upload::CommitAsync (with last_check, see there).
  void CommitAsync(uint64_t total_bytes, uint32_t crc32,
                   std::function<void(absl::StatusOr<tomoserve::v1::Job>)> done,
                   std::function<absl::Status()> last_check = {});
  // Removes the job and its files; resumes paused streams. No-op after the commit began or an
  // earlier abort.
  void Abort(const absl::Status& reason);

 private:
  struct Stripe {
    bool opened = false;
    bool ended = false;
    uint64_t next_offset = 0;  // of its next unit
    uint64_t received_bytes = 0;
    std::function<void()> paused;  // set while its stream waits
  };
  // Append's checks and hand-over; *resume_now gets the paused streams that may read again.
  absl::StatusOr<bool> AppendLocked(uint32_t index, std::optional<uint64_t> offset,
                                    std::string data, std::function<void()>& resume,
                                    std::vector<std::function<void()>>* resume_now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands data (the unit at in_order_bytes_) and the units after it that arrived ahead on to
  // the Upload; false when its writer queue is full.
  absl::StatusOr<bool> HandInOrderLocked(std::string data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the first error and aborts the Upload; returns status.
  absl::Status FailLocked(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The streams paused for being ahead that may read again now, taken off their stripes.
  std::vector<std::function<void()>> ResumableLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After an error: resumes every paused stream (ahead or waiting for room), so that its
  // reactor reads on and learns of the error. Takes mu_ and room_mu_.
  void ResumeEveryPausedStream();
  // The Upload's writer has room again (its on_room, on a writer thread). Takes room_mu_ only:
  // an abort under mu_ joins the writer's threads.
  void OnWriterRoom();
  uint64_t RoomEpoch() const;
  // Pauses the stream until the writer has room, unless room came since epoch: then false.
  bool WaitForRoom(uint64_t epoch, std::function<void()> resume);
  // Where the unit that starts at offset ends.
  uint64_t UnitEnd(uint64_t offset) const;

  const std::string job_id_;
  const std::string client_;
  const UploadStripes stripes_;
  const uint64_t total_bytes_;
  const uint64_t max_ahead_bytes_;

  mutable absl::Mutex mu_;
  std::unique_ptr<Upload> upload_ ABSL_GUARDED_BY(mu_);
  std::vector<Stripe> stripe_ ABSL_GUARDED_BY(mu_);
  // Units arrived ahead of in_order_bytes_, by offset.
  std::map<uint64_t, std::string> ahead_ ABSL_GUARDED_BY(mu_);
  uint64_t ahead_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t in_order_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // handed to the Upload
  bool committing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);

  // Streams paused until the writer has room; the epoch counts its room callbacks.
  mutable absl::Mutex room_mu_ ABSL_ACQUIRED_AFTER(mu_);
  uint64_t room_epoch_ ABSL_GUARDED_BY(room_mu_) = 0;
  std::vector<std::function<void()>> room_waiters_ ABSL_GUARDED_BY(room_mu_);
};

// The striped uploads in progress, by job id, for SubmitStripe calls to find.
class StripedUploadRegistry {
 public:
  void Add(const std::shared_ptr<StripedUpload>& upload);
  void Remove(const std::string& job_id);
  // NOT_FOUND when job_id has no striped upload in progress; PERMISSION_DENIED when client
  // is not the one that began it.
  absl::StatusOr<std::shared_ptr<StripedUpload>> Find(const std::string& job_id,
                                                      const std::string& client) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::weak_ptr<StripedUpload>, std::less<>> uploads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tomo::server
