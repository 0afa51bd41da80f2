// SqliteJobStore: the JobStore of one tomod, SQLite at <spool>/tomod.db.
//
// One table, one row per job:
//   jobs(id TEXT PRIMARY KEY,             the job id (server/jobs/job_id.h)
//        state INTEGER,                   tomoserve.v1.JobState, for queries
//        idempotency_key TEXT UNIQUE,     JobSpec.idempotency_key scoped to Job.tenant
//                                         (security/tenant_keys.h) once the job is committed
//                                         (NULL while UPLOADING or when the spec has none)
//        finished_unix_nanos INTEGER,     Job.finished (NULL until the job ends)
//        cancel_requested INTEGER,        1 once a cancel of the RUNNING job was asked for
//        event_sequence INTEGER,          the sequence of the job's last durable JobEvent
//        job BLOB)                        the serialized tomoserve.v1.Job (spec, results,
//                                         times, attempts, error)
// The blob holds everything; the other columns exist for indexes and queries. The schema
// version is PRAGMA user_version (1); a database of a newer version is refused.
//
// Durability: journal_mode=WAL and synchronous=FULL, so Apply() returns only after the WAL
// is fsynced: a change survives a crash of tomod and of the machine. (synchronous=NORMAL
// would survive only a crash of tomod, and a Submit reply promises the job is safe.) One
// Apply is one transaction and one fsync, however many writes it holds.
//
// Thread-safe: one connection behind a mutex. FAILED_PRECONDITION also for a database
// locked by another process or not in WAL mode (a file system without shared memory).
//
//   TOMO_ASSIGN_OR_RETURN(std::unique_ptr<JobStore> store,
//                         SqliteJobStore::Open(spool.DatabasePath()));
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/storage/job_store.h"
#include "server/storage/sqlite.h"

namespace tomo::server {

class SqliteJobStore final : public JobStore {
 public:
  inline static constexpr int kSchemaVersion = 1;

  // Opens or creates the database at path and its table.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path);
  SqliteJobStore(const SqliteJobStore&) = delete;
  SqliteJobStore& operator=(const SqliteJobStore&) = delete;

  absl::Status Apply(const std::vector<JobStoreWrite>& writes) override;
  absl::StatusOr<std::vector<StoredJob>> LoadAll(
      std::vector<std::string>* unreadable = nullptr) const override;
  absl::StatusOr<std::optional<StoredJob>> Get(absl::string_view id) const override;
  absl::StatusOr<std::optional<std::string>> FindByIdempotencyKey(
      absl::string_view key) const override;
  const std::string& path() const override { return path_; }

 private:
  SqliteJobStore(std::string path, SqliteDb db) : path_(std::move(path)), db_(std::move(db)) {}
  absl::Status PutLocked(const StoredJob& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status DeleteLocked(absl::string_view id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<StoredJob> ReadRow(const SqliteStatement& row) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  mutable absl::Mutex mu_;
  mutable SqliteDb db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tomo::server
