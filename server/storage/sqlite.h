// A small RAII layer over SQLite's C API, just what tomod's job store needs: a connection
// (SqliteDb) and prepared statements (SqliteStatement), both move-only and closed on
// destruction. No ORM: callers write their SQL.
//
//   TOMO_ASSIGN_OR_RETURN(SqliteDb db, SqliteDb::Open("/spool/tomod.db"));
//   TOMO_RETURN_IF_ERROR(db.Exec("PRAGMA journal_mode=WAL"));
//   TOMO_ASSIGN_OR_RETURN(SqliteStatement get, db.Prepare("SELECT job FROM jobs WHERE id = ?"));
//   TOMO_RETURN_IF_ERROR(get.BindText(1, id));
//   TOMO_ASSIGN_OR_RETURN(bool row, get.Step());
//   if (row) std::string blob = get.ColumnBlob(0);
//
// Errors are INTERNAL (FAILED_PRECONDITION for a database another process holds locked,
// RESOURCE_EXHAUSTED for a full disk, ALREADY_EXISTS for a UNIQUE or PRIMARY KEY
// conflict) with the database's path and SQLite's own message.
// Not thread-safe: one thread at a time per connection (the caller locks), which is why
// the connection is opened with SQLITE_OPEN_NOMUTEX. Statements must be destroyed before
// their connection.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tomo::server {

class SqliteStatement;

class SqliteDb {
 public:
  // Opens (creating when missing) the database file at path.
  static absl::StatusOr<SqliteDb> Open(const std::string& path);
  SqliteDb(SqliteDb&& other) noexcept;
  SqliteDb& operator=(SqliteDb&& other) noexcept;
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;
  ~SqliteDb();

  // Runs one or more statements that return no rows worth reading.
  absl::Status Exec(const std::string& sql);
  absl::StatusOr<SqliteStatement> Prepare(const std::string& sql);
  // The first column of the first row of a query, as an integer (e.g. a PRAGMA's value).
  absl::StatusOr<int64_t> QueryInt(const std::string& sql);
  absl::StatusOr<std::string> QueryText(const std::string& sql);
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t changes() const;
  const std::string& path() const { return path_; }

 private:
  friend class SqliteStatement;
  SqliteDb(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  std::string path_;
  sqlite3* db_ = nullptr;
};

class SqliteStatement {
 public:
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&& other) noexcept;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  ~SqliteStatement();

  // Parameters are numbered from 1, as in SQLite. Text and blobs are copied.
  absl::Status BindInt(int index, int64_t value);
  absl::Status BindText(int index, absl::string_view value);
  absl::Status BindBlob(int index, absl::string_view value);
  absl::Status BindNull(int index);
  // True when a row is ready (read it with Column*), false when the statement is done.
  absl::StatusOr<bool> Step();
  // Steps to the end (for statements without rows).
  absl::Status Run();
  // Makes the statement ready to run again, with its bindings cleared.
  void Reset();

  // Columns are numbered from 0, as in SQLite.
  int64_t ColumnInt(int index) const;
  bool ColumnIsNull(int index) const;
  std::string ColumnText(int index) const;
  std::string ColumnBlob(int index) const;

 private:
  friend class SqliteDb;
  SqliteStatement(sqlite3* db, std::string path, sqlite3_stmt* stmt)
      : db_(db), path_(std::move(path)), stmt_(stmt) {}
  absl::Status BindResult(int err, int index);

  sqlite3* db_ = nullptr;  // the connection, for error messages; it outlives the statement
  std::string path_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace tomo::server
