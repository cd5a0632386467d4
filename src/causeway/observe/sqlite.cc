#include "causeway/observe/sqlite.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace causeway::observe {
namespace {

absl::Status SqliteError(sqlite3* db, int code, const std::string& what) {
  const char* message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(code);
  const std::string text = absl::StrCat(what, ": ", message);
  switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(text);
    case SQLITE_CANTOPEN:
    case SQLITE_NOTADB:
    case SQLITE_PERM:
    case SQLITE_READONLY:
      return absl::FailedPreconditionError(text);
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(text);
    case SQLITE_CORRUPT:
      return absl::DataLossError(text);
    default:
      return absl::InternalError(text);
  }
}

}  // namespace

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : db_(other.db_), statement_(std::exchange(other.statement_, nullptr)) {}

SqliteStatement& SqliteStatement::operator=(SqliteStatement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(statement_);
    db_ = other.db_;
    statement_ = std::exchange(other.statement_, nullptr);
  }
  return *this;
}

SqliteStatement::~SqliteStatement() { sqlite3_finalize(statement_); }

void SqliteStatement::BindInt64(int index, int64_t value) {
  sqlite3_bind_int64(statement_, index, value);
}

void SqliteStatement::BindDouble(int index, double value) {
  sqlite3_bind_double(statement_, index, value);
}

void SqliteStatement::BindText(int index, std::string_view value) {
  sqlite3_bind_text64(statement_, index, value.data(), value.size(),
                      SQLITE_TRANSIENT, SQLITE_UTF8);
}

absl::StatusOr<bool> SqliteStatement::Step() {
  const int code = sqlite3_step(statement_);
  if (code == SQLITE_ROW) return true;
  if (code == SQLITE_DONE) return false;
  return SqliteError(db_, code,
                     absl::StrCat("sqlite: ", sqlite3_sql(statement_)));
}

absl::Status SqliteStatement::Run() {
  absl::StatusOr<bool> row;
  do {
    row = Step();
  } while (row.ok() && *row);
  Reset();
  return row.status();
}

void SqliteStatement::Reset() {
  sqlite3_reset(statement_);
  sqlite3_clear_bindings(statement_);
}

int64_t SqliteStatement::ColumnInt64(int column) const {
  return sqlite3_column_int64(statement_, column);
}

double SqliteStatement::ColumnDouble(int column) const {
  return sqlite3_column_double(statement_, column);
}

std::string SqliteStatement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(statement_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text),
                     sqlite3_column_bytes(statement_, column));
}

absl::StatusOr<std::unique_ptr<SqliteDatabase>> SqliteDatabase::Open(
    const std::string& path, int busy_timeout_ms) {
  sqlite3* db = nullptr;
  const int code = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (code != SQLITE_OK) {
    absl::Status error =
        SqliteError(db, code, absl::StrCat("cannot open '", path, "'"));
    sqlite3_close(db);  // A handle comes back even on failure.
    return error;
  }
  sqlite3_busy_timeout(db, busy_timeout_ms);
  sqlite3_extended_result_codes(db, 1);
  return std::unique_ptr<SqliteDatabase>(new SqliteDatabase(db, path));
}

SqliteDatabase::~SqliteDatabase() { sqlite3_close(db_); }

absl::Status SqliteDatabase::Execute(const std::string& sql) {
  char* message = nullptr;
  const int code = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message);
  if (code == SQLITE_OK) return absl::OkStatus();
  absl::Status error =
      SqliteError(db_, code, absl::StrCat("sqlite: '", path_, "'"));
  sqlite3_free(message);
  return error;
}

absl::StatusOr<SqliteStatement> SqliteDatabase::Prepare(
    const std::string& sql) {
  sqlite3_stmt* statement = nullptr;
  const int code = sqlite3_prepare_v2(db_, sql.c_str(),
                                      static_cast<int>(sql.size()), &statement,
                                      nullptr);
  if (code != SQLITE_OK) {
    sqlite3_finalize(statement);
    return SqliteError(db_, code, absl::StrCat("sqlite: preparing ", sql));
  }
  return SqliteStatement(db_, statement);
}

int64_t SqliteDatabase::LastInsertRowId() const {
  return sqlite3_last_insert_rowid(db_);
}

}  // namespace causeway::observe
