#include "causeway/head/session_table.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace session_table_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class SessionTableTest : public ::testing::Test {
 protected:
  SessionTable::Opened Open(const std::string& name = "") {
    absl::StatusOr<SessionTable::Opened> opened =
        table_.Open(name, 1.0, 0, false);
    EXPECT_TRUE(opened.ok()) << opened.status();
    return *opened;
  }

  SessionTable table_{SessionTable::Limits{
      .max_sessions = 2, .max_name_length = 8, .per_session = {}}};
};

TEST_F(SessionTableTest, SessionsGetNewIdsAndANameIfTheyHaveNone) {
  SessionTable::Opened a = Open();
  SessionTable::Opened b = Open("train");
  EXPECT_EQ(a.id, SessionId(1));
  EXPECT_EQ(a.name, "session 1");
  EXPECT_EQ(b.name, "train");
  EXPECT_THAT(table_.Ids(), ElementsAre(SessionId(1), SessionId(2)));
}

TEST_F(SessionTableTest, TooManySessionsALongNameAndShutdownAreRefused) {
  EXPECT_EQ(table_.Open("a name too long", 1, 0, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  Open();
  Open();
  absl::Status too_many = table_.Open("", 1, 0, false).status();
  EXPECT_EQ(too_many.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(too_many.message(), HasSubstr("--max-sessions"));
  table_.Shutdown();
  ASSERT_TRUE(table_.End(SessionId(1), absl::CancelledError("x"), "x").ok());
  EXPECT_EQ(table_.Open("", 1, 0, false).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(SessionTableTest, AnEndedSessionIsNotOpenAndCallsAreToldWhy) {
  SessionTable::Opened a = Open("a");
  absl::StatusOr<std::string> ended =
      table_.End(a.id, absl::CancelledError("closed"), "its lease expired");
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(*ended, "a");
  bool called = false;
  absl::Status status =
      table_.WithSession(a.id, [&](Session&) { called = true; });
  EXPECT_FALSE(called);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("is not open: its lease expired"));
  EXPECT_THAT(table_.NotOpen(SessionId(99)).message(),
              HasSubstr("call OpenSession first"));
  EXPECT_EQ(
      table_.End(a.id, absl::CancelledError("again"), "again").status().code(),
      absl::StatusCode::kFailedPrecondition);
}

TEST_F(SessionTableTest, EndingASessionCancelsItsWaitingWork) {
  SessionTable::Opened a = Open();
  std::string heard;
  ASSERT_TRUE(table_
                  .WithSession(a.id,
                               [&](Session& session) {
                                 transport::SliceRequest request;
                                 request.handle = SliceHandle(1);
                                 ASSERT_TRUE(session.AddSlice(request).ok());
                                 session.RunOrDefer(
                                     SliceHandle(1), [](Session&) {},
                                     [&](const absl::Status& status) {
                                       heard = std::string(status.message());
                                     });
                               })
                  .ok());
  ASSERT_TRUE(table_.End(a.id, absl::CancelledError("closed"), "closed").ok());
  EXPECT_EQ(heard, "closed");
}

TEST_F(SessionTableTest, ASlicesEventsReachItsSessionUntilItIsForgotten) {
  SessionTable::Opened a = Open();
  ASSERT_TRUE(table_
                  .WithSession(a.id,
                               [&](Session& session) {
                                 transport::SliceRequest request;
                                 request.handle = SliceHandle(4);
                                 ASSERT_TRUE(session.AddSlice(request).ok());
                               })
                  .ok());
  ASSERT_TRUE(table_.SliceQueued(a.id, SliceHandle(4), SliceId(40)));
  SliceHandle reached;
  EXPECT_TRUE(table_.WithSliceOwner(
      SliceId(40), [&](Session& session, SliceRecord& slice) {
        EXPECT_EQ(session.id(), a.id);
        EXPECT_EQ(slice.state, SliceRecord::State::kQueued);
        reached = slice.handle;
      }));
  EXPECT_EQ(reached, SliceHandle(4));
  table_.ForgetSlice(SliceId(40));
  EXPECT_FALSE(table_.WithSliceOwner(SliceId(40),
                                     [](Session&, SliceRecord&) { FAIL(); }));
  EXPECT_FALSE(table_.SliceQueued(SessionId(99), SliceHandle(1), SliceId(1)));
}

TEST_F(SessionTableTest, AwaitEndedReturnsOnceTheSessionIsGone) {
  SessionTable::Opened a = Open();
  EXPECT_EQ(table_.AwaitEnded(a.id, absl::Now()).code(),
            absl::StatusCode::kDeadlineExceeded);
  std::thread ender(
      [&] { table_.End(a.id, absl::CancelledError("x"), "x").IgnoreError(); });
  EXPECT_TRUE(table_.AwaitEnded(a.id, absl::InfiniteFuture()).ok());
  ender.join();
}

}  // namespace session_table_test
}  // namespace causeway::head
