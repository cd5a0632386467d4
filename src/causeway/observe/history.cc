#include "causeway/observe/history.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "causeway/base/status.h"

namespace causeway::observe {
namespace {

using json = nlohmann::json;

// user_version 1. Times are Unix microseconds, 0 for none. A session's
// programs and failures go with it (ON DELETE CASCADE).
constexpr int kFileVersion = 1;
constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS head_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  started_unix_us INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  head_run INTEGER NOT NULL,
  session INTEGER NOT NULL,
  name TEXT NOT NULL,
  opened_unix_us INTEGER NOT NULL,
  ended_unix_us INTEGER NOT NULL,
  end_reason TEXT NOT NULL,
  complete INTEGER NOT NULL,
  launches INTEGER NOT NULL,
  ops INTEGER NOT NULL,
  failed_ops INTEGER NOT NULL,
  programs_dropped INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS programs (
  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  program TEXT NOT NULL,
  launches INTEGER NOT NULL,
  ops INTEGER NOT NULL,
  failed_ops INTEGER NOT NULL,
  device_seconds REAL NOT NULL,
  first_launch_unix_us INTEGER NOT NULL,
  last_finish_unix_us INTEGER NOT NULL,
  failures_dropped INTEGER NOT NULL,
  PRIMARY KEY (session_id, position));
CREATE TABLE IF NOT EXISTS failures (
  session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  program_position INTEGER NOT NULL,
  position INTEGER NOT NULL,
  time_unix_us INTEGER NOT NULL,
  device INTEGER NOT NULL,
  host INTEGER NOT NULL,
  code TEXT NOT NULL,
  message TEXT NOT NULL,
  PRIMARY KEY (session_id, program_position, position));
CREATE TABLE IF NOT EXISTS host_deaths (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  head_run INTEGER NOT NULL,
  time_unix_us INTEGER NOT NULL,
  host INTEGER NOT NULL,
  reason TEXT NOT NULL);
)sql";

int64_t Micros(absl::Time t) {
  return t == absl::InfinitePast() ? 0 : absl::ToUnixMicros(t);
}

absl::Time FromMicros(int64_t us) {
  return us == 0 ? absl::InfinitePast() : absl::FromUnixMicros(us);
}

json UnixSecondsOrNull(absl::Time t) {
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) return nullptr;
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}

std::string Cut(std::string text) {
  if (text.size() > HistoryRecorder::kMaxMessage) {
    text.resize(HistoryRecorder::kMaxMessage);
  }
  return text;
}

// Every statement of one transaction, rolled back unless committed.
class Transaction {
 public:
  explicit Transaction(SqliteDatabase& db) : db_(db) {}
  ~Transaction() {
    if (open_) db_.Execute("ROLLBACK").IgnoreError();
  }
  absl::Status Begin() {
    CW_RETURN_IF_ERROR(db_.Execute("BEGIN IMMEDIATE"));
    open_ = true;
    return absl::OkStatus();
  }
  absl::Status Commit() {
    CW_RETURN_IF_ERROR(db_.Execute("COMMIT"));
    open_ = false;
    return absl::OkStatus();
  }

 private:
  SqliteDatabase& db_;
  bool open_ = false;
};

}  // namespace

json HistoryJson(const HistorySnapshot& history) {
  json sessions = json::array();
  for (const SessionHistory& s : history.sessions) {
    json programs = json::array();
    for (const ProgramHistory& p : s.programs) {
      json failures = json::array();
      for (const ProgramFailure& f : p.failures) {
        failures.push_back({{"time_unix_seconds", UnixSecondsOrNull(f.time)},
                            {"device", f.device.value()},
                            {"host", f.host.value()},
                            {"code", f.code},
                            {"message", f.message}});
      }
      programs.push_back(
          {{"program", p.program},
           {"launches", p.launches},
           {"ops", p.ops},
           {"failed_ops", p.failed_ops},
           {"device_seconds", p.device_seconds},
           {"first_launch_unix_seconds", UnixSecondsOrNull(p.first_launch)},
           {"last_finish_unix_seconds", UnixSecondsOrNull(p.last_finish)},
           {"failures", std::move(failures)},
           {"failures_dropped", p.failures_dropped}});
    }
    json duration = nullptr;
    if (s.opened != absl::InfinitePast() && s.ended != absl::InfinitePast()) {
      duration = absl::ToDoubleSeconds(s.ended - s.opened);
    }
    sessions.push_back({{"id", s.id},
                        {"head_run", s.head_run},
                        {"session", s.session.value()},
                        {"name", s.name},
                        {"opened_unix_seconds", UnixSecondsOrNull(s.opened)},
                        {"ended_unix_seconds", UnixSecondsOrNull(s.ended)},
                        {"duration_seconds", duration},
                        {"end_reason", s.end_reason},
                        {"complete", s.complete},
                        {"launches", s.launches},
                        {"ops", s.ops},
                        {"failed_ops", s.failed_ops},
                        {"programs", std::move(programs)},
                        {"programs_dropped", s.programs_dropped}});
  }
  json deaths = json::array();
  for (const HostDeathHistory& d : history.deaths) {
    deaths.push_back({{"id", d.id},
                      {"head_run", d.head_run},
                      {"time_unix_seconds", UnixSecondsOrNull(d.time)},
                      {"host", d.host.value()},
                      {"reason", d.reason}});
  }
  return {{"schema", kHistorySchema},
          {"head_run", history.head_run},
          {"file", history.file.empty() ? json(nullptr) : json(history.file)},
          {"write_errors", history.write_errors},
          {"last_write_error", history.last_write_error},
          {"sessions", std::move(sessions)},
          {"host_deaths", std::move(deaths)}};
}

// --- HistoryFile ---

absl::StatusOr<std::unique_ptr<HistoryFile>> HistoryFile::Open(
    const std::string& path, int64_t max_rows) {
  CW_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> db,
                      SqliteDatabase::Open(path));
  // WAL: a committed record survives the head being killed, and a reader
  // (sqlite3 on the file) never blocks the head.
  CW_RETURN_IF_ERROR(db->Execute(
      "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
      "PRAGMA foreign_keys=ON;"));
  CW_ASSIGN_OR_RETURN(SqliteStatement version,
                      db->Prepare("PRAGMA user_version"));
  CW_ASSIGN_OR_RETURN(bool has_row, version.Step());
  const int64_t found = has_row ? version.ColumnInt64(0) : 0;
  if (found > kFileVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the history file '", path, "' has layout version ", found,
        "; this head reads up to ", kFileVersion));
  }
  CW_RETURN_IF_ERROR(db->Execute(kSchema));
  CW_RETURN_IF_ERROR(
      db->Execute(absl::StrCat("PRAGMA user_version=", kFileVersion)));
  CW_ASSIGN_OR_RETURN(
      SqliteStatement run,
      db->Prepare("INSERT INTO head_runs (started_unix_us) VALUES (?1)"));
  run.BindInt64(1, absl::ToUnixMicros(absl::Now()));
  CW_RETURN_IF_ERROR(run.Run());
  std::unique_ptr<HistoryFile> file(new HistoryFile(std::move(db), max_rows));
  file->head_run_ = file->db_->LastInsertRowId();
  return file;
}

absl::StatusOr<int64_t> HistoryFile::AddSession(const SessionHistory& s) {
  Transaction transaction(*db_);
  CW_RETURN_IF_ERROR(transaction.Begin());
  CW_ASSIGN_OR_RETURN(
      SqliteStatement session,
      db_->Prepare("INSERT INTO sessions (head_run, session, name, "
                   "opened_unix_us, ended_unix_us, end_reason, complete, "
                   "launches, ops, failed_ops, programs_dropped) VALUES "
                   "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"));
  session.BindInt64(1, head_run_);
  session.BindInt64(2, s.session.value());
  session.BindText(3, s.name);
  session.BindInt64(4, Micros(s.opened));
  session.BindInt64(5, Micros(s.ended));
  session.BindText(6, s.end_reason);
  session.BindInt64(7, s.complete ? 1 : 0);
  session.BindInt64(8, s.launches);
  session.BindInt64(9, s.ops);
  session.BindInt64(10, s.failed_ops);
  session.BindInt64(11, s.programs_dropped);
  CW_RETURN_IF_ERROR(session.Run());
  const int64_t id = db_->LastInsertRowId();

  CW_ASSIGN_OR_RETURN(
      SqliteStatement program,
      db_->Prepare("INSERT INTO programs (session_id, position, program, "
                   "launches, ops, failed_ops, device_seconds, "
                   "first_launch_unix_us, last_finish_unix_us, "
                   "failures_dropped) VALUES "
                   "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"));
  CW_ASSIGN_OR_RETURN(
      SqliteStatement failure,
      db_->Prepare("INSERT INTO failures (session_id, program_position, "
                   "position, time_unix_us, device, host, code, message) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"));
  for (size_t i = 0; i < s.programs.size(); ++i) {
    const ProgramHistory& p = s.programs[i];
    program.BindInt64(1, id);
    program.BindInt64(2, static_cast<int64_t>(i));
    program.BindText(3, p.program);
    program.BindInt64(4, p.launches);
    program.BindInt64(5, p.ops);
    program.BindInt64(6, p.failed_ops);
    program.BindDouble(7, p.device_seconds);
    program.BindInt64(8, Micros(p.first_launch));
    program.BindInt64(9, Micros(p.last_finish));
    program.BindInt64(10, p.failures_dropped);
    CW_RETURN_IF_ERROR(program.Run());
    for (size_t j = 0; j < p.failures.size(); ++j) {
      const ProgramFailure& f = p.failures[j];
      failure.BindInt64(1, id);
      failure.BindInt64(2, static_cast<int64_t>(i));
      failure.BindInt64(3, static_cast<int64_t>(j));
      failure.BindInt64(4, Micros(f.time));
      failure.BindInt64(5, f.device.value());
      failure.BindInt64(6, f.host.value());
      failure.BindText(7, f.code);
      failure.BindText(8, f.message);
      CW_RETURN_IF_ERROR(failure.Run());
    }
  }
  CW_ASSIGN_OR_RETURN(SqliteStatement prune,
                      db_->Prepare("DELETE FROM sessions WHERE id <= ?1"));
  prune.BindInt64(1, id - max_rows_);
  CW_RETURN_IF_ERROR(prune.Run());
  CW_RETURN_IF_ERROR(transaction.Commit());
  return id;
}

absl::StatusOr<int64_t> HistoryFile::AddHostDeath(const HostDeathHistory& d) {
  Transaction transaction(*db_);
  CW_RETURN_IF_ERROR(transaction.Begin());
  CW_ASSIGN_OR_RETURN(
      SqliteStatement death,
      db_->Prepare("INSERT INTO host_deaths (head_run, time_unix_us, host, "
                   "reason) VALUES (?1, ?2, ?3, ?4)"));
  death.BindInt64(1, head_run_);
  death.BindInt64(2, Micros(d.time));
  death.BindInt64(3, d.host.value());
  death.BindText(4, d.reason);
  CW_RETURN_IF_ERROR(death.Run());
  const int64_t id = db_->LastInsertRowId();
  CW_ASSIGN_OR_RETURN(SqliteStatement prune,
                      db_->Prepare("DELETE FROM host_deaths WHERE id <= ?1"));
  prune.BindInt64(1, id - max_rows_);
  CW_RETURN_IF_ERROR(prune.Run());
  CW_RETURN_IF_ERROR(transaction.Commit());
  return id;
}

absl::StatusOr<std::vector<SessionHistory>> HistoryFile::LatestSessions(
    size_t n) {
  CW_ASSIGN_OR_RETURN(
      SqliteStatement sessions,
      db_->Prepare("SELECT id, head_run, session, name, opened_unix_us, "
                   "ended_unix_us, end_reason, complete, launches, ops, "
                   "failed_ops, programs_dropped FROM sessions "
                   "ORDER BY id DESC LIMIT ?1"));
  sessions.BindInt64(1, static_cast<int64_t>(n));
  CW_ASSIGN_OR_RETURN(
      SqliteStatement programs,
      db_->Prepare("SELECT program, launches, ops, failed_ops, "
                   "device_seconds, first_launch_unix_us, "
                   "last_finish_unix_us, failures_dropped FROM programs "
                   "WHERE session_id = ?1 ORDER BY position"));
  CW_ASSIGN_OR_RETURN(
      SqliteStatement failures,
      db_->Prepare("SELECT program_position, time_unix_us, device, host, "
                   "code, message FROM failures WHERE session_id = ?1 "
                   "ORDER BY program_position, position"));
  std::vector<SessionHistory> out;
  while (true) {
    CW_ASSIGN_OR_RETURN(bool row, sessions.Step());
    if (!row) break;
    SessionHistory& s = out.emplace_back();
    s.id = sessions.ColumnInt64(0);
    s.head_run = sessions.ColumnInt64(1);
    s.session = SessionId(sessions.ColumnInt64(2));
    s.name = sessions.ColumnText(3);
    s.opened = FromMicros(sessions.ColumnInt64(4));
    s.ended = FromMicros(sessions.ColumnInt64(5));
    s.end_reason = sessions.ColumnText(6);
    s.complete = sessions.ColumnInt64(7) != 0;
    s.launches = sessions.ColumnInt64(8);
    s.ops = sessions.ColumnInt64(9);
    s.failed_ops = sessions.ColumnInt64(10);
    s.programs_dropped = sessions.ColumnInt64(11);
    programs.BindInt64(1, s.id);
    while (true) {
      CW_ASSIGN_OR_RETURN(bool program_row, programs.Step());
      if (!program_row) break;
      ProgramHistory& p = s.programs.emplace_back();
      p.program = programs.ColumnText(0);
      p.launches = programs.ColumnInt64(1);
      p.ops = programs.ColumnInt64(2);
      p.failed_ops = programs.ColumnInt64(3);
      p.device_seconds = programs.ColumnDouble(4);
      p.first_launch = FromMicros(programs.ColumnInt64(5));
      p.last_finish = FromMicros(programs.ColumnInt64(6));
      p.failures_dropped = programs.ColumnInt64(7);
    }
    programs.Reset();
    failures.BindInt64(1, s.id);
    while (true) {
      CW_ASSIGN_OR_RETURN(bool failure_row, failures.Step());
      if (!failure_row) break;
      const int64_t position = failures.ColumnInt64(0);
      if (position < 0 || position >= static_cast<int64_t>(s.programs.size())) {
        continue;  // A row without its program: nothing to attach it to.
      }
      s.programs[position].failures.push_back(
          ProgramFailure{FromMicros(failures.ColumnInt64(1)),
                         DeviceId(failures.ColumnInt64(2)),
                         HostId(failures.ColumnInt64(3)),
                         failures.ColumnText(4), failures.ColumnText(5)});
    }
    failures.Reset();
  }
  return out;
}

absl::StatusOr<std::vector<HostDeathHistory>> HistoryFile::LatestHostDeaths(
    size_t n) {
  CW_ASSIGN_OR_RETURN(
      SqliteStatement deaths,
      db_->Prepare("SELECT id, head_run, time_unix_us, host, reason FROM "
                   "host_deaths ORDER BY id DESC LIMIT ?1"));
  deaths.BindInt64(1, static_cast<int64_t>(n));
  std::vector<HostDeathHistory> out;
  while (true) {
    CW_ASSIGN_OR_RETURN(bool row, deaths.Step());
    if (!row) break;
    out.push_back(HostDeathHistory{
        deaths.ColumnInt64(0), deaths.ColumnInt64(1),
        FromMicros(deaths.ColumnInt64(2)), HostId(deaths.ColumnInt64(3)),
        deaths.ColumnText(4)});
  }
  return out;
}

// --- HistoryRecorder ---

absl::StatusOr<std::unique_ptr<HistoryRecorder>> HistoryRecorder::Create(
    Options options, trace::EventSink* next) {
  std::unique_ptr<HistoryFile> file;
  std::vector<SessionHistory> sessions;
  std::vector<HostDeathHistory> deaths;
  if (!options.file.empty()) {
    CW_ASSIGN_OR_RETURN(file,
                        HistoryFile::Open(options.file, options.max_file_rows));
    CW_ASSIGN_OR_RETURN(sessions, file->LatestSessions(options.max_sessions));
    CW_ASSIGN_OR_RETURN(deaths, file->LatestHostDeaths(options.max_deaths));
  }
  std::unique_ptr<HistoryRecorder> recorder(
      new HistoryRecorder(std::move(options), next, std::move(file)));
  {
    absl::MutexLock lock(&recorder->mu_);
    recorder->sessions_.assign(sessions.begin(), sessions.end());
    recorder->deaths_.assign(deaths.begin(), deaths.end());
  }
  recorder->thread_ = std::thread([raw = recorder.get()] { raw->Loop(); });
  return recorder;
}

HistoryRecorder::HistoryRecorder(Options options, trace::EventSink* next,
                                 std::unique_ptr<HistoryFile> file)
    : options_(std::move(options)),
      next_(next),
      file_(std::move(file)),
      head_run_(file_ != nullptr ? file_->head_run() : 1) {}

HistoryRecorder::~HistoryRecorder() {
  Flush();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

HistorySnapshot HistoryRecorder::Snapshot() const {
  HistorySnapshot snapshot;
  snapshot.head_run = head_run_;
  snapshot.file = options_.file;
  absl::MutexLock lock(&mu_);
  snapshot.sessions.assign(sessions_.begin(), sessions_.end());
  snapshot.deaths.assign(deaths_.begin(), deaths_.end());
  snapshot.write_errors = write_errors_;
  snapshot.last_write_error = last_write_error_;
  return snapshot;
}

void HistoryRecorder::Flush() {
  absl::MutexLock lock(&mu_);
  std::vector<SessionId> ended;
  for (const auto& [id, open] : open_) {
    if (open.ended) ended.push_back(id);
  }
  for (SessionId id : ended) MaybeFinishLocked(id, /*force=*/true);
  const int64_t generation = ++flush_asked_;
  auto done = [this, generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return flush_done_ >= generation;
  };
  mu_.Await(absl::Condition(&done));
}

HistoryRecorder::Open& HistoryRecorder::OpenLocked(SessionId session,
                                                   const std::string& name,
                                                   absl::Time time) {
  auto [it, inserted] = open_.try_emplace(session);
  if (inserted) {
    it->second.record.head_run = head_run_;
    it->second.record.session = session;
    it->second.record.name = name;
    it->second.record.opened = time;
  }
  return it->second;
}

ProgramHistory* HistoryRecorder::ProgramLocked(Open& open,
                                               const std::string& program) {
  auto it = open.program_index.find(program);
  if (it != open.program_index.end()) return &open.record.programs[it->second];
  if (open.record.programs.size() >= kMaxPrograms) {
    return nullptr;
  }
  open.program_index.emplace(program, open.record.programs.size());
  ProgramHistory& added = open.record.programs.emplace_back();
  added.program = program;
  return &added;
}

void HistoryRecorder::MaybeFinishLocked(SessionId session, bool force) {
  auto it = open_.find(session);
  if (it == open_.end() || !it->second.ended) return;
  Open& open = it->second;
  const bool all_reported = open.record.ops >= open.expected_ops;
  if (!all_reported && !force) return;
  open.record.complete = all_reported;
  to_keep_.push_back(std::move(open.record));
  open_.erase(it);
}

void HistoryRecorder::SessionOpened(const trace::SessionEvent& event) {
  {
    absl::MutexLock lock(&mu_);
    OpenLocked(event.session, event.session_name, event.time);
  }
  if (next_ != nullptr) next_->SessionOpened(event);
}

void HistoryRecorder::SessionEnded(const trace::SessionEvent& event) {
  {
    absl::MutexLock lock(&mu_);
    Open& open = OpenLocked(event.session, event.session_name, event.time);
    open.ended = true;
    open.record.ended = event.time;
    open.record.end_reason = Cut(event.why);
    open.linger_until = event.time + options_.linger;
    MaybeFinishLocked(event.session, /*force=*/false);
  }
  if (next_ != nullptr) next_->SessionEnded(event);
}

void HistoryRecorder::LaunchDispatched(const trace::LaunchEvent& event) {
  {
    absl::MutexLock lock(&mu_);
    auto it = open_.find(event.session);
    if (it != open_.end()) {
      Open& open = it->second;
      ++open.record.launches;
      open.expected_ops += static_cast<int64_t>(event.devices.size());
      if (ProgramHistory* program = ProgramLocked(open, event.program)) {
        ++program->launches;
        program->first_launch = std::min(
            program->first_launch == absl::InfinitePast()
                ? absl::InfiniteFuture()
                : program->first_launch,
            event.time);
      } else {
        ++open.record.programs_dropped;
      }
    }
  }
  if (next_ != nullptr) next_->LaunchDispatched(event);
}

void HistoryRecorder::OpEnqueued(const trace::OpEvent& event) {
  if (next_ != nullptr) next_->OpEnqueued(event);
}

void HistoryRecorder::OpStarted(const trace::OpEvent& event) {
  {
    absl::MutexLock lock(&mu_);
    running_[event.device] = RunningOp{event.time, event.session};
  }
  if (next_ != nullptr) next_->OpStarted(event);
}

void HistoryRecorder::OpFinished(const trace::OpEvent& event,
                                 const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    double ran = 0;
    auto running = running_.find(event.device);
    if (running != running_.end() && running->second.session == event.session) {
      ran = std::max(0.0, absl::ToDoubleSeconds(event.time -
                                                running->second.started));
      running_.erase(running);
    }
    auto it = open_.find(event.session);
    if (it != open_.end()) {
      Open& open = it->second;
      ++open.record.ops;
      if (!status.ok()) ++open.record.failed_ops;
      // Only programs already listed: a program past the bound was counted
      // as dropped at its launch.
      auto index = open.program_index.find(event.program);
      if (index != open.program_index.end()) {
        ProgramHistory& program = open.record.programs[index->second];
        ++program.ops;
        program.device_seconds += ran;
        program.last_finish = std::max(program.last_finish, event.time);
        if (!status.ok()) {
          ++program.failed_ops;
          if (program.failures.size() < kMaxFailures) {
            program.failures.push_back(ProgramFailure{
                event.time, event.device, event.host,
                absl::StatusCodeToString(status.code()),
                Cut(std::string(status.message()))});
          } else {
            ++program.failures_dropped;
          }
        }
      }
      if (open.ended) MaybeFinishLocked(event.session, /*force=*/false);
    }
  }
  if (next_ != nullptr) next_->OpFinished(event, status);
}

void HistoryRecorder::WaitStarted(const trace::WaitEvent& event) {
  if (next_ != nullptr) next_->WaitStarted(event);
}

void HistoryRecorder::WaitFinished(const trace::WaitEvent& event) {
  if (next_ != nullptr) next_->WaitFinished(event);
}

void HistoryRecorder::TransferStarted(const trace::TransferEvent& event) {
  if (next_ != nullptr) next_->TransferStarted(event);
}

void HistoryRecorder::TransferFinished(const trace::TransferEvent& event,
                                       const absl::Status& status) {
  if (next_ != nullptr) next_->TransferFinished(event, status);
}

void HistoryRecorder::HostStateChanged(const trace::HostEvent& event) {
  constexpr char kDead[] = "dead: ";
  if (absl::StartsWith(event.what, kDead)) {
    absl::MutexLock lock(&mu_);
    to_keep_.push_back(HostDeathHistory{0, head_run_, event.time, event.host,
                                        Cut(event.what.substr(sizeof(kDead) - 1))});
  }
  if (next_ != nullptr) next_->HostStateChanged(event);
}

absl::StatusOr<std::string> HistoryRecorder::ExportChromeTrace() {
  if (next_ == nullptr) return trace::EventSink::ExportChromeTrace();
  return next_->ExportChromeTrace();
}

void HistoryRecorder::Loop() {
  while (true) {
    std::vector<Pending> pending;
    int64_t flush_generation = 0;
    bool stop = false;
    {
      absl::MutexLock lock(&mu_);
      absl::Time next_deadline = absl::InfiniteFuture();
      for (const auto& [id, open] : open_) {
        if (open.ended) next_deadline = std::min(next_deadline, open.linger_until);
      }
      auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !to_keep_.empty() || flush_asked_ > flush_done_;
      };
      mu_.AwaitWithDeadline(absl::Condition(&wake), next_deadline);
      const absl::Time now = absl::Now();
      std::vector<SessionId> overdue;
      for (const auto& [id, open] : open_) {
        if (open.ended && open.linger_until <= now) overdue.push_back(id);
      }
      for (SessionId id : overdue) MaybeFinishLocked(id, /*force=*/true);
      pending.swap(to_keep_);
      flush_generation = flush_asked_;
      stop = stop_;
    }
    Keep(std::move(pending));
    {
      absl::MutexLock lock(&mu_);
      flush_done_ = std::max(flush_done_, flush_generation);
    }
    if (stop) return;
  }
}

void HistoryRecorder::Keep(std::vector<Pending> pending) {
  if (pending.empty()) return;
  std::vector<std::string> errors;
  if (file_ != nullptr) {
    for (Pending& item : pending) {
      absl::StatusOr<int64_t> id =
          std::holds_alternative<SessionHistory>(item)
              ? file_->AddSession(std::get<SessionHistory>(item))
              : file_->AddHostDeath(std::get<HostDeathHistory>(item));
      if (id.ok()) {
        std::visit([&](auto& record) { record.id = *id; }, item);
      } else {
        errors.push_back(std::string(id.status().message()));
      }
    }
  }
  absl::MutexLock lock(&mu_);
  for (Pending& item : pending) {
    // Memory only: an id of this run's own. A record the file refused
    // keeps id 0.
    if (file_ == nullptr) {
      const int64_t id = next_memory_id_++;
      std::visit([id](auto& record) { record.id = id; }, item);
    }
    if (auto* session = std::get_if<SessionHistory>(&item)) {
      sessions_.push_front(std::move(*session));
      while (sessions_.size() > options_.max_sessions) sessions_.pop_back();
    } else {
      deaths_.push_front(std::get<HostDeathHistory>(std::move(item)));
      while (deaths_.size() > options_.max_deaths) deaths_.pop_back();
    }
  }
  write_errors_ += static_cast<int64_t>(errors.size());
  if (!errors.empty()) last_write_error_ = errors.back();
}

}  // namespace causeway::observe
