// JobStore: where tomod's job records are durable. At start-up the store is the truth;
// while tomod runs, the job table keeps the records in memory and writes every state change
// here (through JobStoreWriter's thread) before the change's Submit reply or watchers are
// told. The interface lets a store shared by several daemons come later; the embedded
// default is SQLite (SqliteJobStore, sqlite_job_store.h, at <spool>/tomod.db).
//
// A record is a StoredJob: the whole tomoserve.v1.Job, whether a cancel of the running job
// was asked for, and the sequence of its last durable JobEvent. A committed job's
// idempotency key belongs to it alone (an UPLOADING record does not claim it: two uploads
// with one key may race and the first to commit wins).
//
// Durability: a write returns only once it survives a crash of tomod and of the machine.
// Thread-safe. Errors name the store and carry its reason: ALREADY_EXISTS when the
// idempotency key is taken by another job, DATA_LOSS for a record that does not parse,
// FAILED_PRECONDITION for a store this tomod cannot use, RESOURCE_EXHAUSTED for a full
// disk, else INTERNAL.
//
//   TOMO_ASSIGN_OR_RETURN(std::unique_ptr<JobStore> store,
//                         JobStore::Open(spool.DatabasePath()));   // SQLite
//   TOMO_RETURN_IF_ERROR(store->Apply({JobStoreWrite::Put({job}), JobStoreWrite::Delete(id)}));
//   TOMO_ASSIGN_OR_RETURN(std::vector<StoredJob> jobs, store->LoadAll());
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

struct StoredJob {
  tomoserve::v1::Job job;
  // A cancel was asked for while the job was RUNNING: after a crash it ends CANCELLED
  // instead of running again.
  bool cancel_requested = false;
  uint64_t event_sequence = 0;
};

// One change of the store: the record of put->job.id() inserted or replaced, or (put
// empty) the record of id removed.
struct JobStoreWrite {
  std::string id;
  std::optional<StoredJob> put;

  static JobStoreWrite Put(StoredJob record) {
    std::string id = record.job.id();
    return {std::move(id), std::move(record)};
  }
  static JobStoreWrite Delete(std::string id) { return {std::move(id), std::nullopt}; }
};

class JobStore {
 public:
  // The embedded default: SqliteJobStore::Open(path).
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path);

  virtual ~JobStore() = default;

  // All of writes, in order, as one change: all durable on OK, none on an error (one
  // durability barrier for the lot: tomod's writer thread commits many jobs' changes at
  // once). ALREADY_EXISTS (naming the key and the job that has it) when a job is committed
  // with an idempotency key another job has.
  virtual absl::Status Apply(const std::vector<JobStoreWrite>& writes) = 0;
  // Apply of one write each. Delete is OK when there is no such record.
  absl::Status Put(const StoredJob& record) { return Apply({JobStoreWrite::Put(record)}); }
  absl::Status Delete(absl::string_view id) {
    return Apply({JobStoreWrite::Delete(std::string(id))});
  }
  // Every record, ordered by id (creation order). Records that do not parse (e.g. a string
  // that is not UTF-8, which proto3 refuses) are left out, their ids added to unreadable
  // when given: one bad row must not keep tomod from starting.
  virtual absl::StatusOr<std::vector<StoredJob>> LoadAll(
      std::vector<std::string>* unreadable = nullptr) const = 0;
  virtual absl::StatusOr<std::optional<StoredJob>> Get(absl::string_view id) const = 0;
  // The id of the committed job with this scoped idempotency key (tenant_keys.h).
  virtual absl::StatusOr<std::optional<std::string>> FindByIdempotencyKey(
      absl::string_view key) const = 0;
  // Where the records are, for messages (a file path, a URL).
  virtual const std::string& path() const = 0;
};

}  // namespace tomo::server
