// JobStoreWriter: the one thread that writes tomod's job records, so that nobody holding
// the job table's lock waits for a disk. Changes are queued with Enqueue() (no I/O, any
// thread, also under the table's lock) and numbered by a ticket; the writer thread takes
// everything queued so far and applies it as one transaction (JobStore::Apply: one fsync
// for the whole batch, group commit), then reports the highest durable ticket. A change
// that must be durable before someone is answered (a Submit's reply) waits for its own
// ticket with Wait(), outside any lock: it waits for its own write and the batch it rides
// in, never for a lock another job's write holds.
//
// Writes are applied in ticket order. When a batch fails, its writes are tried one by one,
// so that one bad write (an idempotency key taken, a full disk) fails alone; a write that
// fails for want of space (RESOURCE_EXHAUSTED) is tried once more after
// free_emergency_space() returns true. Every failure is logged naming the job; Wait
// returns it.
//
// Thread-safe. The callbacks run on the writer thread and must not call Wait.
//
//   JobStoreWriter writer(*store, free_space, [&](JobStoreWriter::Ticket t) { ... });
//   JobStoreWriter::Ticket ticket = writer.Enqueue(JobStoreWrite::Put({job, false, 7}));
//   TOMO_RETURN_IF_ERROR(writer.Wait(ticket));   // durable now
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/storage/job_store.h"

namespace tomo::server {

class JobStoreWriter {
 public:
  using Ticket = uint64_t;
  // store must outlive the writer. free_emergency_space may be empty (no retry);
  // on_durable (may be empty) is called after each batch, before its waiters return, with
  // the highest ticket whose write has ended (written, or failed and logged): every lower
  // ticket has ended too.
  JobStoreWriter(JobStore& store, std::function<bool()> free_emergency_space,
                 std::function<void(Ticket)> on_durable);
  // Stop().
  ~JobStoreWriter();
  JobStoreWriter(const JobStoreWriter&) = delete;
  JobStoreWriter& operator=(const JobStoreWriter&) = delete;

  // Queues write; its ticket (1, 2, ...). After Stop(): the write is applied at once, on
  // the caller's thread.
  Ticket Enqueue(JobStoreWrite write);
  // Blocks until ticket's write has ended: OK when it is durable, else its error.
  // Ticket 0 (nothing written) is OK at once.
  absl::Status Wait(Ticket ticket);
  // The highest ticket whose write has ended.
  Ticket ended() const;
  // Writes what is queued, then ends the thread. Idempotent.
  void Stop();

 private:
  void Loop();
  // Applies batch (tickets first .. first + size - 1); the failures by ticket.
  std::map<Ticket, absl::Status> Write(const std::vector<JobStoreWrite>& batch, Ticket first);
  absl::Status WithRoom(const std::function<absl::Status()>& change);

  JobStore& store_;
  const std::function<bool()> free_emergency_space_;
  const std::function<void(Ticket)> on_durable_;

  mutable absl::Mutex mu_;
  std::deque<JobStoreWrite> queued_ ABSL_GUARDED_BY(mu_);
  Ticket next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  Ticket ended_ ABSL_GUARDED_BY(mu_) = 0;
  // The newest failed writes, for Wait (bounded: the oldest are dropped).
  std::map<Ticket, absl::Status> failures_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Serialises the writes of the thread and, after Stop(), of Enqueue's callers.
  absl::Mutex write_mu_;
  std::thread thread_;
};

}  // namespace tomo::server
