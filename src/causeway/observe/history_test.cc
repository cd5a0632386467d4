#include "causeway/observe/history.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::observe {
namespace history_test {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

class HistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("history_test_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()
                            ->current_test_info()
                            ->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<HistoryRecorder> Recorder(HistoryRecorder::Options options) {
    absl::StatusOr<std::unique_ptr<HistoryRecorder>> recorder =
        HistoryRecorder::Create(std::move(options));
    EXPECT_TRUE(recorder.ok()) << recorder.status();
    return recorder.ok() ? *std::move(recorder) : nullptr;
  }

  // One launch of `program` by `session` on devices 0 and 1 (host 0); the
  // op on device 1 fails with `failure` unless it is OK.
  void Launch(HistoryRecorder& recorder, SessionId session,
              const std::string& program,
              absl::Status failure = absl::OkStatus()) {
    recorder.LaunchDispatched(trace::LaunchEvent{
        now_, IslandId(0), ++seq_, session, "s", program,
        {DeviceId(0), DeviceId(1)}});
    for (int device = 0; device < 2; ++device) {
      trace::OpEvent op{now_, DeviceId(device), HostId(0), IslandId(0), seq_,
                        session, "s", program, device, 2, {}, 0};
      recorder.OpStarted(op);
      op.time = now_ + absl::Milliseconds(250);
      recorder.OpFinished(op, device == 1 ? failure : absl::OkStatus());
    }
  }

  std::filesystem::path dir_;
  absl::Time now_ = absl::Now();
  uint64_t seq_ = 0;
};

TEST_F(HistoryTest, AnEndedSessionIsKeptWithItsProgramsAndFailures) {
  auto recorder = Recorder({});
  recorder->SessionOpened({now_, SessionId(7), "train", ""});
  Launch(*recorder, SessionId(7), "step");
  Launch(*recorder, SessionId(7), "step",
         absl::DataLossError("host 3 died holding array 5"));
  Launch(*recorder, SessionId(7), "eval");
  recorder->SessionEnded(
      {now_ + absl::Seconds(2), SessionId(7), "train", "it was closed"});
  recorder->Flush();

  const HistorySnapshot history = recorder->Snapshot();
  ASSERT_THAT(history.sessions, SizeIs(1));
  const SessionHistory& session = history.sessions[0];
  EXPECT_EQ(session.name, "train");
  EXPECT_EQ(session.end_reason, "it was closed");
  EXPECT_TRUE(session.complete);
  EXPECT_EQ(session.launches, 3);
  EXPECT_EQ(session.ops, 6);
  EXPECT_EQ(session.failed_ops, 1);
  ASSERT_THAT(session.programs, SizeIs(2));
  const ProgramHistory& step = session.programs[0];
  EXPECT_EQ(step.program, "step");
  EXPECT_EQ(step.launches, 2);
  EXPECT_EQ(step.ops, 4);
  EXPECT_DOUBLE_EQ(step.device_seconds, 1.0);  // Four ops of 250 ms.
  ASSERT_THAT(step.failures, SizeIs(1));
  EXPECT_EQ(step.failures[0].code, "DATA_LOSS");
  EXPECT_EQ(step.failures[0].message, "host 3 died holding array 5");
  EXPECT_EQ(step.failures[0].device, DeviceId(1));
  EXPECT_EQ(session.programs[1].program, "eval");
}

TEST_F(HistoryTest, OpsReportedAfterTheSessionEndedStillCount) {
  auto recorder = Recorder({.linger = absl::Hours(1)});
  recorder->SessionOpened({now_, SessionId(1), "late", ""});
  recorder->LaunchDispatched(trace::LaunchEvent{
      now_, IslandId(0), 1, SessionId(1), "late", "p", {DeviceId(0)}});
  recorder->SessionEnded({now_, SessionId(1), "late", "it was closed"});
  // Its op has not reported: the session is not finished yet.
  EXPECT_THAT(recorder->Snapshot().sessions, IsEmpty());

  trace::OpEvent op{now_, DeviceId(0), HostId(0), IslandId(0), 1,
                    SessionId(1), "late", "p", 0, 1, {}, 0};
  recorder->OpStarted(op);
  recorder->OpFinished(op, absl::InternalError("kernel failed"));
  recorder->Flush();
  const HistorySnapshot history = recorder->Snapshot();
  ASSERT_THAT(history.sessions, SizeIs(1));
  EXPECT_TRUE(history.sessions[0].complete);
  EXPECT_EQ(history.sessions[0].failed_ops, 1);
  EXPECT_EQ(history.sessions[0].programs[0].failures[0].message,
            "kernel failed");
}

TEST_F(HistoryTest, ASessionWhoseOpsNeverReportIsKeptIncomplete) {
  auto recorder = Recorder({.linger = absl::Hours(1)});
  recorder->SessionOpened({now_, SessionId(2), "lost", ""});
  recorder->LaunchDispatched(trace::LaunchEvent{
      now_, IslandId(0), 1, SessionId(2), "lost", "p", {DeviceId(0)}});
  recorder->SessionEnded({now_, SessionId(2), "lost", "its lease expired"});
  recorder->Flush();  // As at the head's shutdown: no more waiting.
  const HistorySnapshot history = recorder->Snapshot();
  ASSERT_THAT(history.sessions, SizeIs(1));
  EXPECT_FALSE(history.sessions[0].complete);
  EXPECT_EQ(history.sessions[0].ops, 0);
}

TEST_F(HistoryTest, ProgramsAndFailuresAreBounded) {
  auto recorder = Recorder({});
  recorder->SessionOpened({now_, SessionId(3), "many", ""});
  for (size_t i = 0; i < HistoryRecorder::kMaxPrograms + 3; ++i) {
    Launch(*recorder, SessionId(3), absl::StrCat("program_", i));
  }
  for (size_t i = 0; i < HistoryRecorder::kMaxFailures + 2; ++i) {
    Launch(*recorder, SessionId(3), "program_0",
           absl::AbortedError(std::string(2000, 'x')));
  }
  recorder->SessionEnded({now_, SessionId(3), "many", "it was closed"});
  recorder->Flush();
  const SessionHistory session = recorder->Snapshot().sessions.at(0);
  EXPECT_THAT(session.programs, SizeIs(HistoryRecorder::kMaxPrograms));
  EXPECT_EQ(session.programs_dropped, 3);
  EXPECT_EQ(session.launches,
            static_cast<int64_t>(HistoryRecorder::kMaxPrograms + 3 +
                                 HistoryRecorder::kMaxFailures + 2));
  const ProgramHistory& first = session.programs[0];
  EXPECT_THAT(first.failures, SizeIs(HistoryRecorder::kMaxFailures));
  EXPECT_EQ(first.failures_dropped, 2);
  EXPECT_EQ(first.failures[0].message.size(), HistoryRecorder::kMaxMessage);
}

TEST_F(HistoryTest, TheFileKeepsSessionsAndDeathsAcrossARestart) {
  const std::string file = (dir_ / "history.db").string();
  int64_t session_id = 0;
  {
    auto recorder = Recorder({.file = file});
    recorder->SessionOpened({now_, SessionId(1), "before", ""});
    Launch(*recorder, SessionId(1), "step", absl::DataLossError("gone"));
    recorder->SessionEnded({now_, SessionId(1), "before", "it was closed"});
    recorder->HostStateChanged(
        {now_, HostId(4), "dead: its connection broke (EOF)"});
    recorder->Flush();
    const HistorySnapshot first = recorder->Snapshot();
    ASSERT_THAT(first.sessions, SizeIs(1));
    EXPECT_EQ(first.head_run, 1);
    session_id = first.sessions[0].id;
    EXPECT_GT(session_id, 0);
  }
  auto restarted = Recorder({.file = file});
  const HistorySnapshot history = restarted->Snapshot();
  EXPECT_EQ(history.head_run, 2);
  ASSERT_THAT(history.sessions, SizeIs(1));
  const SessionHistory& session = history.sessions[0];
  EXPECT_EQ(session.id, session_id);
  EXPECT_EQ(session.head_run, 1);
  EXPECT_EQ(session.name, "before");
  EXPECT_EQ(absl::ToUnixMicros(session.opened), absl::ToUnixMicros(now_));
  ASSERT_THAT(session.programs, SizeIs(1));
  EXPECT_EQ(session.programs[0].ops, 2);
  EXPECT_DOUBLE_EQ(session.programs[0].device_seconds, 0.5);
  ASSERT_THAT(session.programs[0].failures, SizeIs(1));
  EXPECT_EQ(session.programs[0].failures[0].message, "gone");
  ASSERT_THAT(history.deaths, SizeIs(1));
  EXPECT_EQ(history.deaths[0].host, HostId(4));
  EXPECT_EQ(history.deaths[0].reason, "its connection broke (EOF)");
}

TEST_F(HistoryTest, TheFileKeepsOnlyItsNewestRows) {
  const std::string file = (dir_ / "bounded.db").string();
  {
    auto recorder = Recorder({.file = file, .max_file_rows = 2});
    for (int i = 1; i <= 3; ++i) {
      recorder->SessionOpened({now_, SessionId(i), absl::StrCat("s", i), ""});
      recorder->SessionEnded({now_, SessionId(i), absl::StrCat("s", i), "x"});
    }
    recorder->Flush();
    EXPECT_THAT(recorder->Snapshot().sessions, SizeIs(3));  // In memory.
  }
  const HistorySnapshot history = Recorder({.file = file})->Snapshot();
  ASSERT_THAT(history.sessions, SizeIs(2));
  EXPECT_EQ(history.sessions[0].name, "s3");  // Newest first.
  EXPECT_EQ(history.sessions[1].name, "s2");
}

TEST_F(HistoryTest, AFileThatCannotBeOpenedSaysWhy) {
  absl::StatusOr<std::unique_ptr<HistoryRecorder>> recorder =
      HistoryRecorder::Create({.file = dir_.string()});  // A directory.
  ASSERT_FALSE(recorder.ok());
  EXPECT_THAT(recorder.status().message(), HasSubstr(dir_.string()));
}

TEST_F(HistoryTest, TheJsonNamesItsFields) {
  auto recorder = Recorder({});
  recorder->SessionOpened({now_, SessionId(5), "j", ""});
  Launch(*recorder, SessionId(5), "p", absl::CancelledError("stopped"));
  recorder->SessionEnded({now_ + absl::Seconds(3), SessionId(5), "j", "why"});
  recorder->HostStateChanged({now_, HostId(1), "dead: no heartbeat"});
  recorder->HostStateChanged({now_, HostId(2), "alive"});  // Not a death.
  recorder->Flush();
  const nlohmann::json json = HistoryJson(recorder->Snapshot());
  EXPECT_EQ(json["schema"], kHistorySchema);
  EXPECT_TRUE(json["file"].is_null());
  const nlohmann::json& session = json["sessions"][0];
  EXPECT_EQ(session["name"], "j");
  EXPECT_EQ(session["end_reason"], "why");
  EXPECT_DOUBLE_EQ(session["duration_seconds"].get<double>(), 3.0);
  EXPECT_EQ(session["programs"][0]["failures"][0]["code"], "CANCELLED");
  EXPECT_EQ(session["programs"][0]["failed_ops"], 1);
  ASSERT_EQ(json["host_deaths"].size(), 1u);
  EXPECT_EQ(json["host_deaths"][0]["reason"], "no heartbeat");
}

}  // namespace history_test
}  // namespace causeway::observe
