#include "server/storage/sqlite_job_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "server/security/tenant_keys.h"

namespace tomo::server {
namespace {

namespace pb = ::tomoserve::v1;

constexpr char kCreateTable[] = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY NOT NULL,
  state INTEGER NOT NULL,
  idempotency_key TEXT UNIQUE,
  finished_unix_nanos INTEGER,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  event_sequence INTEGER NOT NULL DEFAULT 0,
  job BLOB NOT NULL
);
)sql";

constexpr char kColumns[] = "job, cancel_requested, event_sequence";

}  // namespace

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path) {
  return SqliteJobStore::Open(path);
}

absl::StatusOr<std::unique_ptr<JobStore>> SqliteJobStore::Open(const std::string& path) {
  TOMO_ASSIGN_OR_RETURN(SqliteDb db, SqliteDb::Open(path));
  // Another tomod holding the database would be refused by the spool's lock first; the
  // timeout only covers a reader such as the sqlite3 shell.
  TOMO_RETURN_IF_ERROR(db.Exec("PRAGMA busy_timeout=5000"));
  TOMO_ASSIGN_OR_RETURN(std::string mode, db.QueryText("PRAGMA journal_mode=WAL"));
  if (mode != "wal") {
    return absl::FailedPreconditionError(
        absl::StrCat("job database ", path, ": journal_mode is \"", mode,
                     "\" after asking for WAL (is the spool on a file system without shared "
                     "memory, e.g. a network file system?)"));
  }
  TOMO_RETURN_IF_ERROR(db.Exec("PRAGMA synchronous=FULL"));
  TOMO_ASSIGN_OR_RETURN(int64_t version, db.QueryInt("PRAGMA user_version"));
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job database ", path, ": schema version ", version,
        " was written by a newer tomod; this one knows versions up to ", kSchemaVersion));
  }
  TOMO_RETURN_IF_ERROR(db.Exec(absl::StrCat("BEGIN IMMEDIATE;", kCreateTable,
                                            "PRAGMA user_version=", kSchemaVersion, ";COMMIT;")));
  return std::unique_ptr<JobStore>(new SqliteJobStore(path, std::move(db)));
}

absl::Status SqliteJobStore::Apply(const std::vector<JobStoreWrite>& writes) {
  if (writes.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  // One transaction: one fsync of the WAL at its COMMIT, however many writes.
  TOMO_RETURN_IF_ERROR(db_.Exec("BEGIN IMMEDIATE"));
  absl::Status status;
  for (const JobStoreWrite& write : writes) {
    status = write.put.has_value() ? PutLocked(*write.put) : DeleteLocked(write.id);
    if (!status.ok()) break;
  }
  if (status.ok()) status = db_.Exec("COMMIT");
  if (!status.ok()) db_.Exec("ROLLBACK").IgnoreError();
  return status;
}

absl::Status SqliteJobStore::PutLocked(const StoredJob& record) {
  const pb::Job& job = record.job;
  std::string blob;
  if (!job.SerializeToString(&blob)) {
    return absl::InternalError(absl::StrCat("job ", job.id(), ": cannot serialize its record"));
  }
  TOMO_ASSIGN_OR_RETURN(
      SqliteStatement put,
      db_.Prepare("INSERT INTO jobs (id, state, idempotency_key, finished_unix_nanos, "
                  "cancel_requested, event_sequence, job) VALUES (?, ?, ?, ?, ?, ?, ?) "
                  "ON CONFLICT(id) DO UPDATE SET state = excluded.state, "
                  "idempotency_key = excluded.idempotency_key, "
                  "finished_unix_nanos = excluded.finished_unix_nanos, "
                  "cancel_requested = excluded.cancel_requested, "
                  "event_sequence = excluded.event_sequence, job = excluded.job"));
  TOMO_RETURN_IF_ERROR(put.BindText(1, job.id()));
  TOMO_RETURN_IF_ERROR(put.BindInt(2, job.state()));
  // Only a committed job owns its key: two uploads with one key may race, and the first
  // to commit wins (JobManager), so an UPLOADING record must not claim it.
  const std::string& key = job.spec().idempotency_key();
  if (key.empty() || job.state() == pb::JOB_STATE_UPLOADING) {
    TOMO_RETURN_IF_ERROR(put.BindNull(3));
  } else {
    TOMO_RETURN_IF_ERROR(put.BindText(3, ScopedIdempotencyKey(job.tenant(), key)));
  }
  if (job.has_finished()) {
    TOMO_RETURN_IF_ERROR(
        put.BindInt(4, job.finished().seconds() * 1000000000 + job.finished().nanos()));
  } else {
    TOMO_RETURN_IF_ERROR(put.BindNull(4));
  }
  TOMO_RETURN_IF_ERROR(put.BindInt(5, record.cancel_requested ? 1 : 0));
  TOMO_RETURN_IF_ERROR(put.BindInt(6, static_cast<int64_t>(record.event_sequence)));
  TOMO_RETURN_IF_ERROR(put.BindBlob(7, blob));
  absl::Status status = put.Run();
  if (absl::IsAlreadyExists(status)) {
    return absl::AlreadyExistsError(absl::StrCat("idempotency_key: \"", key,
                                                 "\" already belongs to another job than ",
                                                 job.id(), " (", status.message(), ")"));
  }
  return status;
}

absl::Status SqliteJobStore::DeleteLocked(absl::string_view id) {
  TOMO_ASSIGN_OR_RETURN(SqliteStatement erase, db_.Prepare("DELETE FROM jobs WHERE id = ?"));
  TOMO_RETURN_IF_ERROR(erase.BindText(1, id));
  return erase.Run();
}

absl::StatusOr<StoredJob> SqliteJobStore::ReadRow(const SqliteStatement& row) const {
  StoredJob record;
  if (!record.job.ParseFromString(row.ColumnBlob(0))) {
    return absl::DataLossError(
        absl::StrCat("job database ", path_, ": a record does not parse as a tomoserve.v1.Job"));
  }
  record.cancel_requested = row.ColumnInt(1) != 0;
  record.event_sequence = static_cast<uint64_t>(row.ColumnInt(2));
  return record;
}

absl::StatusOr<std::vector<StoredJob>> SqliteJobStore::LoadAll(
    std::vector<std::string>* unreadable) const {
  absl::MutexLock lock(&mu_);
  TOMO_ASSIGN_OR_RETURN(
      SqliteStatement all,
      db_.Prepare(absl::StrCat("SELECT ", kColumns, ", id FROM jobs ORDER BY id")));
  std::vector<StoredJob> records;
  for (;;) {
    TOMO_ASSIGN_OR_RETURN(bool row, all.Step());
    if (!row) break;
    absl::StatusOr<StoredJob> record = ReadRow(all);
    if (!record.ok()) {
      if (unreadable != nullptr) unreadable->push_back(all.ColumnText(3));
      continue;
    }
    records.push_back(std::move(*record));
  }
  return records;
}

absl::StatusOr<std::optional<StoredJob>> SqliteJobStore::Get(absl::string_view id) const {
  absl::MutexLock lock(&mu_);
  TOMO_ASSIGN_OR_RETURN(SqliteStatement get,
                        db_.Prepare(absl::StrCat("SELECT ", kColumns, " FROM jobs WHERE id = ?")));
  TOMO_RETURN_IF_ERROR(get.BindText(1, id));
  TOMO_ASSIGN_OR_RETURN(bool row, get.Step());
  if (!row) return std::nullopt;
  TOMO_ASSIGN_OR_RETURN(StoredJob record, ReadRow(get));
  return record;
}

absl::StatusOr<std::optional<std::string>> SqliteJobStore::FindByIdempotencyKey(
    absl::string_view key) const {
  absl::MutexLock lock(&mu_);
  TOMO_ASSIGN_OR_RETURN(SqliteStatement find,
                        db_.Prepare("SELECT id FROM jobs WHERE idempotency_key = ?"));
  TOMO_RETURN_IF_ERROR(find.BindText(1, key));
  TOMO_ASSIGN_OR_RETURN(bool row, find.Step());
  if (!row) return std::nullopt;
  return find.ColumnText(0);
}

}  // namespace tomo::server
