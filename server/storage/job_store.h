// JobStore: tomod's job records, durable in SQLite at <spool>/tomod.db. At start-up the
// store is the truth; while tomod runs, JobManager keeps its records in memory as a cache
// and writes every state change here before anyone (a Submit reply, a watcher) is told.
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
// Durability: journal_mode=WAL and synchronous=FULL, so Put() and Delete() return only
// after the WAL is fsynced: a change survives a crash of tomod and of the machine.
// (synchronous=NORMAL would survive only a crash of tomod, and a Submit reply promises the
// job is safe.) One fsync per change is cheap next to the upload it follows.
//
// Thread-safe: one connection behind a mutex. Errors name the database path and carry
// SQLite's message: ALREADY_EXISTS when the idempotency key is taken by another job,
// DATA_LOSS for a row that Get cannot parse, FAILED_PRECONDITION for a newer schema or a
// database locked by another process, RESOURCE_EXHAUSTED for a full disk, else INTERNAL.
//
//   TOMO_ASSIGN_OR_RETURN(std::unique_ptr<JobStore> store,
//                         JobStore::Open(spool.DatabasePath()));
//   TOMO_RETURN_IF_ERROR(store->Put({job}));
//   TOMO_ASSIGN_OR_RETURN(std::vector<StoredJob> jobs, store->LoadAll());
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/storage/sqlite.h"
#include "tomoserve/v1/tomoserve.pb.h"

namespace tomo::server {

struct StoredJob {
  tomoserve::v1::Job job;
  // A cancel was asked for while the job was RUNNING: after a crash it ends CANCELLED
  // instead of running again.
  bool cancel_requested = false;
  uint64_t event_sequence = 0;
};

class JobStore {
 public:
  inline static constexpr int kSchemaVersion = 1;

  // Opens or creates the database at path and its table.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path);
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // Inserts or replaces the record of job.id. ALREADY_EXISTS (naming the key and the job
  // that has it) when the job is committed with an idempotency key another job has.
  absl::Status Put(const StoredJob& record);
  // OK when there is no such record.
  absl::Status Delete(absl::string_view id);
  // Every record, ordered by id (creation order). Records that do not parse (e.g. a string
  // that is not UTF-8, which proto3 refuses) are left out, their ids added to unreadable
  // when given: one bad row must not keep tomod from starting.
  absl::StatusOr<std::vector<StoredJob>> LoadAll(
      std::vector<std::string>* unreadable = nullptr) const;
  absl::StatusOr<std::optional<StoredJob>> Get(absl::string_view id) const;
  // The id of the committed job with this scoped idempotency key (tenant_keys.h).
  absl::StatusOr<std::optional<std::string>> FindByIdempotencyKey(absl::string_view key) const;

  const std::string& path() const { return path_; }

 private:
  JobStore(std::string path, SqliteDb db) : path_(std::move(path)), db_(std::move(db)) {}
  absl::StatusOr<StoredJob> ReadRow(const SqliteStatement& row) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  mutable absl::Mutex mu_;
  mutable SqliteDb db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tomo::server
