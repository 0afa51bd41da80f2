// JobTable: tomod's jobs in memory, the single point where a job changes, and the watchers
// of each job. The records are a cache of the job store (JobStore) that is the truth at
// start-up; every change goes through Commit(), which makes it the record's job at once
// and queues its write to the store's writer thread (JobStoreWriter) without waiting: the
// table's lock is never held across a disk write, so one job's fsync stalls no Watch, List,
// GetJob or progress event of another job.
//
// What waits for durability:
//   - watchers: a change's JobEvent is given to a job's watchers only once its write (and
//     every earlier write of that job) is durable, in the job's event order; progress
//     events (not written) queue behind a pending write of their job and overtake nothing.
//   - whoever must promise durability waits for the change's ticket (WaitDurable), outside
//     the lock: a Submit's reply (JobManager commits QUEUED with Write() first and makes it
//     the record's job only once it is durable, so a failed write leaves the job as it
//     was), a Delete's reply, a cancel's reply.
// Queries (GetJob, ListJobs, FindResult) see the newest change, which may still be on its
// way to the disk: after a crash the job is what the store last held.
//
// Locking: one mutex, mu(), guards the records and, by the other parts of the job manager
// sharing it (Scheduler, Admission), the queue, the workers' slots and the spool
// accounting: a change of state moves all of them at once. Nothing slow runs under it (no
// disk writes, no file removal, no RPC). Lock order: mu() before the writer's own lock; the
// writer thread takes mu() only to hand events over (never holding its own).
//
// Thread safety: methods marked ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu()) with mu() held; the
// others from any thread without it.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/data/array3d.h"
#include "runner/job_spec.h"
#include "server/storage/job_store.h"
#include "server/storage/job_store_writer.h"
#include "server/uploads/upload_stream.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

// Receives one job's events. Enqueue() and Close() are called with the table's lock held
// and in event order; they must only record what they are given (no blocking, no RPC
// calls, no calls back into the job manager). When one returns true, the table calls
// Flush() once, after releasing its lock; until that Flush() has returned, the watcher
// must stay alive (a watcher returns true only when it is idle, so this is the token
// that lets exactly one party drive its writes).
class JobWatcher {
 public:
  virtual ~JobWatcher() = default;
  // An event; after a terminal state (SUCCEEDED, FAILED, CANCELLED) no more calls come.
  virtual bool Enqueue(const tomoserve::v1::JobEvent& event) = 0;
  // The watch ends without a terminal event: the job was removed, or tomod stops.
  virtual bool Close(const absl::Status& status) = 0;
  virtual void Flush() = 0;
};

bool IsTerminal(tomoserve::v1::JobState state);
// UPLOADING, QUEUED or RUNNING.
bool IsUnfinished(tomoserve::v1::JobState state);

// Watchers to Flush() once the table's lock is released: declare before the MutexLock.
class WatcherFlushes {
 public:
  WatcherFlushes() = default;
  WatcherFlushes(const WatcherFlushes&) = delete;
  WatcherFlushes& operator=(const WatcherFlushes&) = delete;
  ~WatcherFlushes() {
    for (JobWatcher* watcher : watchers_) watcher->Flush();
  }
  void Add(JobWatcher* watcher) { watchers_.push_back(watcher); }

 private:
  std::vector<JobWatcher*> watchers_;
};

// One job as tomod holds it. The job table owns the job, its events and watchers; the
// scheduler and admission keep their parts here too (marked), under the same lock.
struct JobRecord {
  tomoserve::v1::Job job;
  std::shared_ptr<const ValidatedJob> validated;
  // The newest event (in memory) and the newest one the watchers were given.
  tomoserve::v1::JobEvent last_event;
  tomoserve::v1::JobEvent last_told;
  // Events waiting for a write of this job to be durable, with the ticket they wait for.
  std::deque<std::pair<JobStoreWriter::Ticket, tomoserve::v1::JobEvent>> untold;
  // The newest write of this record queued to the store (0: none).
  JobStoreWriter::Ticket last_ticket = 0;
  std::vector<JobWatcher*> watchers;
  // Persisted: a crash during the cancel must not make the job run again.
  bool cancel_requested = false;
  // Set while the job's commit to QUEUED is being written (JobManager::CommitUpload).
  bool committing = false;

  // Scheduler's: set while RUNNING; the run polls it.
  std::shared_ptr<std::atomic<bool>> cancel;
  std::string cancel_reason;
  // Scheduler's: set when Shutdown() stops the run: the job goes back to QUEUED.
  bool requeue_on_stop = false;
  // Scheduler's: when it last became QUEUED in this process (start of its queue wait).
  absl::Time queued_at = absl::InfinitePast();
  // Scheduler's: set while a worker follows the upload (and, once committed, holds the job
  // out of the queue for that worker).
  std::shared_ptr<UploadFeed> feed;
  // Scheduler's: QUEUED but not in the queue; committed while followed.
  bool held_for_follower = false;
  // Scheduler's: set while RUNNING and the worker writes the outputs (early fetch).
  std::shared_ptr<const core::Array3D> being_written;

  // Admission's: the job's share of the spool's bytes: its files, or while UPLOADING the
  // full input size, plus reserved_output_bytes until the job ends.
  uint64_t disk_bytes = 0;
  // Admission's bound of the outputs (disk_space.h), reserved until the job ends.
  uint64_t reserved_output_bytes = 0;
  // Admission's: the input's bytes reserved while UPLOADING (part of pending_bytes_): they
  // grow as the bytes arrive (Admission::GrowUploadLocked), up to the input's size.
  uint64_t pending_input_bytes = 0;
};

class JobTable {
 public:
  using Ticket = JobStoreWriter::Ticket;
  using RecordMap = std::map<std::string, JobRecord, std::less<>>;
  enum class Durability {
    kPersist,     // written to the store (queued; watchers told once durable)
    kMemoryOnly,  // not written (progress: after a crash a run starts again anyway)
    kWritten,     // already made durable by Write()
  };
  // Called under mu() for every change of a record's job, before it is made (record.job is
  // still the old one): the other parts keep their counts.
  using ChangeHook = std::function<void(JobRecord& record, const tomoserve::v1::Job& next,
                                        const std::string& message)>;
  // Called under mu() when a record is forgotten.
  using EraseHook = std::function<void(JobRecord& record)>;

  JobTable(ChangeHook on_change, EraseHook on_erase)
      : on_change_(std::move(on_change)), on_erase_(std::move(on_erase)) {}
  // Close().
  ~JobTable();
  JobTable(const JobTable&) = delete;
  JobTable& operator=(const JobTable&) = delete;

  // Starts writing to store (its writer thread). Records may be added before (recovery
  // writes to the store directly). free_emergency_space: as JobManagerOptions'.
  void Open(std::unique_ptr<JobStore> store, std::function<bool()> free_emergency_space);
  // Writes what is queued, gives the watchers their events, then stops the writer; later
  // writes happen on the caller's thread. Idempotent.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);
  bool is_open() const { return writer_ != nullptr; }
  JobStore& store() { return *store_; }

  absl::Mutex& mu() const ABSL_LOCK_RETURNED(mu_) { return mu_; }
  // Ordered by id, that is by creation time.
  RecordMap& records() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return records_; }
  const RecordMap& records() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return records_; }
  // Scoped idempotency key (security/tenant_keys.h) -> id of the committed job that has it.
  std::map<std::string, std::string, std::less<>>& keys() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return keys_;
  }
  // NOT_FOUND naming the id.
  absl::StatusOr<JobRecord*> Find(absl::string_view id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<const JobRecord*> Find(absl::string_view id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The single commit point: next becomes the record's job now; kPersist queues its write
  // (never waits for it); the change's event goes to the watchers once the write is
  // durable. The ticket to WaitDurable for (0 for kMemoryOnly and kWritten).
  Ticket Commit(JobRecord& record, tomoserve::v1::Job next, const std::string& message,
                Durability durability, WatcherFlushes& flushes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the write of next as the record's next change without making it (Commit with
  // kWritten follows once WaitDurable said OK, with no other change of the record
  // between). For changes whose failure must leave the job as it was.
  Ticket Write(JobRecord& record, const tomoserve::v1::Job& next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the removal of a record from the store (the record itself stays, if any).
  Ticket WriteDelete(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets a record: its idempotency key, its entry (the erase hook first). Not the store,
  // not files. Its watchers are given its untold events, then (when still open) closed with
  // status, or ABORTED naming the job when status is OK.
  RecordMap::iterator Erase(RecordMap::iterator it, const absl::Status& status,
                            WatcherFlushes& flushes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Blocks until the write of ticket has ended: OK when durable, else its error. Never with
  // mu() held.
  absl::Status WaitDurable(Ticket ticket) ABSL_LOCKS_EXCLUDED(mu_);

  // Gives watcher the job's newest durable event, then (unless that is terminal) every
  // later one. NOT_FOUND for an unknown id.
  absl::Status Watch(absl::string_view id, JobWatcher* watcher) ABSL_LOCKS_EXCLUDED(mu_);
  void Unwatch(absl::string_view id, JobWatcher* watcher) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends every watch with status; later Watch calls end at once. After Close().
  void CloseWatches(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  size_t watcher_count() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Events whose writes are durable up to ticket go to their watchers (writer thread).
  void OnDurable(Ticket ticket) ABSL_LOCKS_EXCLUDED(mu_);
  void TellLocked(JobRecord& record, const tomoserve::v1::JobEvent& event,
                  WatcherFlushes& flushes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TellDurableLocked(JobRecord& record, Ticket durable, WatcherFlushes& flushes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TellAllDurableLocked(Ticket durable, WatcherFlushes& flushes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ChangeHook on_change_;
  const EraseHook on_erase_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<JobStoreWriter> writer_;

  mutable absl::Mutex mu_;
  RecordMap records_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string, std::less<>> keys_ ABSL_GUARDED_BY(mu_);
  // Records with untold events.
  std::set<std::string, std::less<>> untold_ ABSL_GUARDED_BY(mu_);
  // Every write up to this ticket has ended and its events are told (OnDurable).
  Ticket told_upto_ ABSL_GUARDED_BY(mu_) = 0;
  // Close() has run: writes happen on the caller's thread, durable when Commit goes on.
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool watches_closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status watches_closed_status_ ABSL_GUARDED_BY(mu_);
};

// Timestamps of the wire contract.
void SetTimestamp(google::protobuf::Timestamp* timestamp, absl::Time time);
absl::Time FromTimestamp(const google::protobuf::Timestamp& timestamp);

}  // namespace tomo::server
