// The head's history (docs/operate.md, `/api/history`): finished sessions
// with their programs (launches, ops, device time, failures with their
// messages) and host deaths, kept after the sessions are gone.
//
// HistoryRecorder is an EventSink in the head's chain (head_command.cc):
// while a session is open it counts its launches and ops by program; when
// the session ends (EventSink::SessionEnded) its record is finished, once
// every op it launched has reported (a worker's events come in batches) or
// `linger` has passed (a dead host's ops never report), and kept: in a
// bounded list in memory and, with a history file, in SQLite (HistoryFile)
// first, so that what /api/history shows is on disk and a restarted head on
// the same file shows it again.
//
// Bounds: at most Options::max_sessions sessions and max_deaths deaths in
// memory (the newest), max_file_rows of each in the file; per session at
// most kMaxPrograms programs listed (the rest counted in the session's
// totals and `programs_dropped`), per program the first kMaxFailures
// failures (the rest counted), messages cut at kMaxMessage bytes.
//
// Thread-safe: the EventSink methods take one short lock and never touch
// the file; one thread of its own finishes lingering records and writes
// the file (SQLite never runs on a runtime thread).
#ifndef CAUSEWAY_OBSERVE_HISTORY_H_
#define CAUSEWAY_OBSERVE_HISTORY_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/ids.h"
#include "causeway/observe/sqlite.h"
#include "causeway/trace/events.h"
#include "nlohmann/json.hpp"

namespace causeway::observe {

struct ProgramFailure {
  absl::Time time;
  DeviceId device;
  HostId host;
  std::string code;  // "DATA_LOSS".
  std::string message;
};

struct ProgramHistory {
  std::string program;
  int64_t launches = 0;
  int64_t ops = 0;         // Finished (ok or not), one per device per launch.
  int64_t failed_ops = 0;
  double device_seconds = 0;  // Running time of its ops, summed.
  absl::Time first_launch = absl::InfinitePast();
  absl::Time last_finish = absl::InfinitePast();  // Past: none finished.
  std::vector<ProgramFailure> failures;  // The first kMaxFailures.
  int64_t failures_dropped = 0;
};

struct SessionHistory {
  // Unique in its file (across head runs), or in memory; 0: the file
  // refused it (HistorySnapshot::last_write_error says why).
  int64_t id = 0;
  int64_t head_run = 0;  // Which start of the head it ran under.
  SessionId session;     // Its id on that head run.
  std::string name;
  absl::Time opened = absl::InfinitePast();
  absl::Time ended = absl::InfinitePast();
  std::string end_reason;  // "it was closed", "its lease expired", ...
  // False: it was kept before every op it launched reported.
  bool complete = true;
  int64_t launches = 0;
  int64_t ops = 0;
  int64_t failed_ops = 0;
  std::vector<ProgramHistory> programs;  // By first launch.
  int64_t programs_dropped = 0;
};

struct HostDeathHistory {
  int64_t id = 0;
  int64_t head_run = 0;
  absl::Time time;
  HostId host;
  std::string reason;
};

struct HistorySnapshot {
  int64_t head_run = 0;
  std::string file;                       // Empty: memory only.
  std::vector<SessionHistory> sessions;   // Newest first.
  std::vector<HostDeathHistory> deaths;   // Newest first.
  int64_t write_errors = 0;               // Records the file refused.
  std::string last_write_error;
};

// `/api/history` (docs/operate.md; stable field names, `"schema"`).
inline constexpr int kHistorySchema = 1;
nlohmann::json HistoryJson(const HistorySnapshot& history);

// The SQLite file (schema in history.cc; `sqlite3 FILE .schema`). Opening
// it starts a new head run. Not thread-safe: one thread at a time.
class HistoryFile {
 public:
  static absl::StatusOr<std::unique_ptr<HistoryFile>> Open(
      const std::string& path, int64_t max_rows);

  int64_t head_run() const { return head_run_; }
  const std::string& path() const { return db_->path(); }

  // Stores one record (one transaction); its id.
  absl::StatusOr<int64_t> AddSession(const SessionHistory& session);
  absl::StatusOr<int64_t> AddHostDeath(const HostDeathHistory& death);
  // The newest `n`, newest first.
  absl::StatusOr<std::vector<SessionHistory>> LatestSessions(size_t n);
  absl::StatusOr<std::vector<HostDeathHistory>> LatestHostDeaths(size_t n);

 private:
  HistoryFile(std::unique_ptr<SqliteDatabase> db, int64_t max_rows)
      : db_(std::move(db)), max_rows_(max_rows) {}

  std::unique_ptr<SqliteDatabase> db_;
  const int64_t max_rows_;
  int64_t head_run_ = 0;
};

class HistoryRecorder final : public trace::EventSink {
 public:
  static constexpr size_t kMaxPrograms = 64;
  static constexpr size_t kMaxFailures = 8;
  static constexpr size_t kMaxMessage = 512;

  struct Options {
    std::string file = "";  // Empty: memory only.
    size_t max_sessions = 256;
    size_t max_deaths = 256;
    int64_t max_file_rows = 100000;
    absl::Duration linger = absl::Seconds(5);
  };

  // Opens the file (if any) and reads its newest records back. `next`
  // (not owned, may be null) gets every event after it is counted.
  static absl::StatusOr<std::unique_ptr<HistoryRecorder>> Create(
      Options options, trace::EventSink* next = nullptr);
  ~HistoryRecorder() override;  // Flush(), then its thread stops.

  HistoryRecorder(const HistoryRecorder&) = delete;
  HistoryRecorder& operator=(const HistoryRecorder&) = delete;

  HistorySnapshot Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);
  // Finishes every ended session now (lingering or not) and returns once
  // all of them and every death so far are kept (written, with a file).
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);

  void LaunchDispatched(const trace::LaunchEvent& event) override;
  void OpEnqueued(const trace::OpEvent& event) override;
  void OpStarted(const trace::OpEvent& event) override;
  void OpFinished(const trace::OpEvent& event,
                  const absl::Status& status) override;
  void WaitStarted(const trace::WaitEvent& event) override;
  void WaitFinished(const trace::WaitEvent& event) override;
  void TransferStarted(const trace::TransferEvent& event) override;
  void TransferFinished(const trace::TransferEvent& event,
                        const absl::Status& status) override;
  void HostStateChanged(const trace::HostEvent& event) override;
  void SessionOpened(const trace::SessionEvent& event) override;
  void SessionEnded(const trace::SessionEvent& event) override;
  absl::StatusOr<std::string> ExportChromeTrace() override;

 private:
  // A session being counted: open, or ended with ops still to report.
  struct Open {
    SessionHistory record;
    std::map<std::string, size_t> program_index;  // Into record.programs.
    int64_t expected_ops = 0;
    bool ended = false;
    absl::Time linger_until = absl::InfiniteFuture();
  };
  struct RunningOp {
    absl::Time started;
    SessionId session;
  };
  using Pending = std::variant<SessionHistory, HostDeathHistory>;

  HistoryRecorder(Options options, trace::EventSink* next,
                  std::unique_ptr<HistoryFile> file);
  Open& OpenLocked(SessionId session, const std::string& name,
                   absl::Time time) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Null past kMaxPrograms (counted as dropped).
  ProgramHistory* ProgramLocked(Open& open, const std::string& program)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves an ended session to the writer if it is done or `force`.
  void MaybeFinishLocked(SessionId session, bool force)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();
  // Writes `pending` (file first), then keeps it in memory.
  void Keep(std::vector<Pending> pending) ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  trace::EventSink* const next_;
  // Used only by the writer thread (and Create, before it starts).
  std::unique_ptr<HistoryFile> file_;
  const int64_t head_run_;

  mutable absl::Mutex mu_;
  std::map<SessionId, Open> open_ ABSL_GUARDED_BY(mu_);
  std::map<DeviceId, RunningOp> running_ ABSL_GUARDED_BY(mu_);
  std::vector<Pending> to_keep_ ABSL_GUARDED_BY(mu_);
  std::deque<SessionHistory> sessions_ ABSL_GUARDED_BY(mu_);  // Newest first.
  std::deque<HostDeathHistory> deaths_ ABSL_GUARDED_BY(mu_);
  int64_t write_errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_write_error_ ABSL_GUARDED_BY(mu_);
  int64_t next_memory_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Flush: generations asked and kept.
  int64_t flush_asked_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t flush_done_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace causeway::observe

#endif  // CAUSEWAY_OBSERVE_HISTORY_H_
