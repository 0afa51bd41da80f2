#include "server/storage/sqlite.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace tomo::server {
namespace {

absl::Status SqliteError(sqlite3* db, int err, absl::string_view path, absl::string_view what) {
  const int primary = err & 0xff;
  absl::StatusCode code = absl::StatusCode::kInternal;
  if (primary == SQLITE_FULL) code = absl::StatusCode::kResourceExhausted;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    code = absl::StatusCode::kFailedPrecondition;
  }
  if (primary == SQLITE_READONLY || primary == SQLITE_PERM) {
    code = absl::StatusCode::kPermissionDenied;
  }
  if (err == SQLITE_CONSTRAINT_UNIQUE || err == SQLITE_CONSTRAINT_PRIMARYKEY) {
    code = absl::StatusCode::kAlreadyExists;
  }
  // sqlite3_errmsg describes the connection's last error, which may be more precise than
  // the code's generic text (e.g. which constraint failed).
  const char* detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(err);
  return absl::Status(code, absl::StrCat("job database ", path, ": ", what, ": ", detail,
                                         " (SQLite error ", err, ")"));
}

}  // namespace

absl::StatusOr<SqliteDb> SqliteDb::Open(const std::string& path) {
  sqlite3* db = nullptr;
  const int err = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (err != SQLITE_OK) {
    absl::Status status = SqliteError(db, err, path, "open");
    sqlite3_close(db);  // a handle is returned even on failure
    return status;
  }
  sqlite3_extended_result_codes(db, 1);
  return SqliteDb(path, db);
}

SqliteDb::SqliteDb(SqliteDb&& other) noexcept
    : path_(std::move(other.path_)), db_(std::exchange(other.db_, nullptr)) {}

SqliteDb& SqliteDb::operator=(SqliteDb&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) sqlite3_close_v2(db_);
    path_ = std::move(other.path_);
    db_ = std::exchange(other.db_, nullptr);
  }
  return *this;
}

SqliteDb::~SqliteDb() {
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

absl::Status SqliteDb::Exec(const std::string& sql) {
  char* message = nullptr;
  const int err = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message);
  sqlite3_free(message);  // sqlite3_errmsg has the same text
  if (err != SQLITE_OK) return SqliteError(db_, err, path_, sql);
  return absl::OkStatus();
}

absl::StatusOr<SqliteStatement> SqliteDb::Prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  const int err =
      sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (err != SQLITE_OK) return SqliteError(db_, err, path_, absl::StrCat("prepare ", sql));
  return SqliteStatement(db_, path_, stmt);
}

absl::StatusOr<int64_t> SqliteDb::QueryInt(const std::string& sql) {
  absl::StatusOr<SqliteStatement> statement = Prepare(sql);
  if (!statement.ok()) return statement.status();
  absl::StatusOr<bool> row = statement->Step();
  if (!row.ok()) return row.status();
  if (!*row) return SqliteError(db_, SQLITE_ERROR, path_, absl::StrCat(sql, ": no row"));
  return statement->ColumnInt(0);
}

absl::StatusOr<std::string> SqliteDb::QueryText(const std::string& sql) {
  absl::StatusOr<SqliteStatement> statement = Prepare(sql);
  if (!statement.ok()) return statement.status();
  absl::StatusOr<bool> row = statement->Step();
  if (!row.ok()) return row.status();
  if (!*row) return SqliteError(db_, SQLITE_ERROR, path_, absl::StrCat(sql, ": no row"));
  return statement->ColumnText(0);
}

int64_t SqliteDb::changes() const { return sqlite3_changes64(db_); }

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : db_(other.db_), path_(std::move(other.path_)), stmt_(std::exchange(other.stmt_, nullptr)) {}

SqliteStatement& SqliteStatement::operator=(SqliteStatement&& other) noexcept {
  if (this != &other) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    db_ = other.db_;
    path_ = std::move(other.path_);
    stmt_ = std::exchange(other.stmt_, nullptr);
  }
  return *this;
}

SqliteStatement::~SqliteStatement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

absl::Status SqliteStatement::BindResult(int err, int index) {
  if (err == SQLITE_OK) return absl::OkStatus();
  return SqliteError(db_, err, path_,
                     absl::StrCat("bind parameter ", index, " of ", sqlite3_sql(stmt_)));
}

absl::Status SqliteStatement::BindInt(int index, int64_t value) {
  return BindResult(sqlite3_bind_int64(stmt_, index, value), index);
}

absl::Status SqliteStatement::BindText(int index, absl::string_view value) {
  return BindResult(
      sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
      index);
}

absl::Status SqliteStatement::BindBlob(int index, absl::string_view value) {
  // A zero-length blob from a null pointer would bind NULL; "" keeps it a blob.
  const char* data = value.empty() ? "" : value.data();
  return BindResult(sqlite3_bind_blob64(stmt_, index, data, value.size(), SQLITE_TRANSIENT), index);
}

absl::Status SqliteStatement::BindNull(int index) {
  return BindResult(sqlite3_bind_null(stmt_, index), index);
}

absl::StatusOr<bool> SqliteStatement::Step() {
  const int err = sqlite3_step(stmt_);
  if (err == SQLITE_ROW) return true;
  if (err == SQLITE_DONE) return false;
  return SqliteError(db_, err, path_, sqlite3_sql(stmt_));
}

absl::Status SqliteStatement::Run() {
  for (;;) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

void SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t SqliteStatement::ColumnInt(int index) const { return sqlite3_column_int64(stmt_, index); }

bool SqliteStatement::ColumnIsNull(int index) const {
  return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

std::string SqliteStatement::ColumnText(int index) const {
  const unsigned char* text = sqlite3_column_text(stmt_, index);
  const int size = sqlite3_column_bytes(stmt_, index);
  return text == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(text), size);
}

std::string SqliteStatement::ColumnBlob(int index) const {
  const void* blob = sqlite3_column_blob(stmt_, index);
  const int size = sqlite3_column_bytes(stmt_, index);
  return blob == nullptr ? std::string() : std::string(static_cast<const char*>(blob), size);
}

}  // namespace tomo::server
