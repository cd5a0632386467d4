// A thin RAII wrapper over SQLite's C API (Debian's libsqlite3-dev), for the
// head's history file (history.h): a database that closes itself, prepared
// statements that finalize themselves, and every error as an absl::Status
// carrying SQLite's own message.
//
//   auto db = SqliteDatabase::Open(path);
//   CW_RETURN_IF_ERROR((*db)->Execute("CREATE TABLE IF NOT EXISTS t (x)"));
//   auto insert = (*db)->Prepare("INSERT INTO t VALUES (?1)");
//   insert->BindInt64(1, 42);
//   CW_RETURN_IF_ERROR(insert->Run());
//
// Not thread-safe: a database and its statements belong to one thread at a
// time (SQLite's default serialized mode would allow more; we never need it).
#ifndef CAUSEWAY_OBSERVE_SQLITE_H_
#define CAUSEWAY_OBSERVE_SQLITE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace causeway::observe {

class SqliteStatement {
 public:
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&& other) noexcept;
  ~SqliteStatement();  // Finalizes.

  // Parameters are numbered from 1 (?1, ?2, ...). Text is copied.
  void BindInt64(int index, int64_t value);
  void BindDouble(int index, double value);
  void BindText(int index, std::string_view value);

  // One step: true while it produced a row (read it with the Column
  // functions), false once done.
  absl::StatusOr<bool> Step();
  // Steps to the end, for a statement that returns no rows; then Reset().
  absl::Status Run();
  // Ready to run again with new bindings.
  void Reset();

  // Columns of the current row, numbered from 0.
  int64_t ColumnInt64(int column) const;
  double ColumnDouble(int column) const;
  std::string ColumnText(int column) const;

 private:
  friend class SqliteDatabase;
  SqliteStatement(sqlite3* db, sqlite3_stmt* statement)
      : db_(db), statement_(statement) {}

  sqlite3* db_ = nullptr;              // Not owned.
  sqlite3_stmt* statement_ = nullptr;  // Owned.
};

class SqliteDatabase {
 public:
  // Opens (creating if missing) the database file at `path`. Waits up to
  // `busy_timeout_ms` for a lock another process holds.
  static absl::StatusOr<std::unique_ptr<SqliteDatabase>> Open(
      const std::string& path, int busy_timeout_ms = 2000);
  ~SqliteDatabase();  // Closes.

  SqliteDatabase(const SqliteDatabase&) = delete;
  SqliteDatabase& operator=(const SqliteDatabase&) = delete;

  // Runs one or more statements that return no rows.
  absl::Status Execute(const std::string& sql);
  absl::StatusOr<SqliteStatement> Prepare(const std::string& sql);
  // The rowid of the last row inserted through this connection.
  int64_t LastInsertRowId() const;

  const std::string& path() const { return path_; }

 private:
  SqliteDatabase(sqlite3* db, std::string path)
      : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  std::string path_;
};

}  // namespace causeway::observe

#endif  // CAUSEWAY_OBSERVE_SQLITE_H_
