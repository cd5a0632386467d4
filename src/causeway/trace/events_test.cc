#include "causeway/trace/events.h"

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::trace {
namespace events_test {

using ::testing::ElementsAre;

// Remembers what it was told, as "<method> <time since epoch in ms>".
class RecordingSink : public EventSink {
 public:
  void OpStarted(const OpEvent& event) override {
    Add("OpStarted", event.time, event.program);
  }
  void OpFinished(const OpEvent& event, const absl::Status& status) override {
    Add("OpFinished", event.time, status.ToString());
  }
  void WaitStarted(const WaitEvent& event) override {
    Add("WaitStarted", event.time, event.detail);
  }
  void TransferFinished(const TransferEvent& event,
                        const absl::Status& status) override {
    Add("TransferFinished", event.time, event.description);
  }
  std::vector<std::string> seen;

 private:
  void Add(const char* what, absl::Time time, const std::string& text) {
    seen.push_back(
        absl::StrCat(what, " ", absl::ToUnixMillis(time), " ",
                     text.size() > 20 ? absl::StrCat(text.size()) : text));
  }
};

OpEvent Op(int64_t millis, std::string program = "p") {
  OpEvent event;
  event.time = absl::FromUnixMillis(millis);
  event.program = std::move(program);
  return event;
}

TEST(EventBufferTest, KeepsAWorkersEventsInOrderUntilTaken) {
  EventBuffer buffer;
  buffer.OpStarted(Op(1));
  buffer.OpFinished(Op(2), absl::InternalError("x"));
  buffer.LaunchDispatched(LaunchEvent{});  // The head's: not kept.
  std::vector<EventRecord> taken = buffer.Take();
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].kind, EventRecord::Kind::kOpStarted);
  EXPECT_EQ(taken[1].kind, EventRecord::Kind::kOpFinished);
  EXPECT_EQ(taken[1].status, absl::InternalError("x"));
  EXPECT_TRUE(buffer.Take().empty());
}

TEST(EventBufferTest, DropsTheOldestBeyondItsBound) {
  EventBuffer buffer(2);
  for (int i = 0; i < 5; ++i) buffer.OpStarted(Op(i));
  std::vector<EventRecord> taken = buffer.Take();
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(std::get<OpEvent>(taken[0].event).time, absl::FromUnixMillis(3));
  EXPECT_EQ(buffer.dropped(), 3);
}

TEST(ReplayTest, MovesEveryEventByTheClockOffset) {
  EventBuffer buffer;
  buffer.OpStarted(Op(100));
  WaitEvent wait;
  wait.time = absl::FromUnixMillis(150);
  wait.detail = "inputs";
  buffer.WaitStarted(wait);
  TransferEvent transfer;
  transfer.time = absl::FromUnixMillis(200);
  transfer.description = "a -> b";
  buffer.TransferFinished(transfer, absl::OkStatus());
  RecordingSink sink;
  EXPECT_EQ(Replay(buffer.Take(), absl::Milliseconds(-50), sink), 3);
  EXPECT_THAT(sink.seen, ElementsAre("OpStarted 50 p", "WaitStarted 100 inputs",
                                     "TransferFinished 150 a -> b"));
}

TEST(ReplayTest, CutsLongStringsAndSkipsRecordsThatDoNotAgree) {
  std::vector<EventRecord> records;
  records.push_back(EventRecord{
      EventRecord::Kind::kOpStarted, Op(1, std::string(5000, 'x')), {}});
  records.push_back(
      EventRecord{EventRecord::Kind::kWaitStarted, Op(2), {}});  // Not a wait.
  RecordingSink sink;
  EXPECT_EQ(Replay(records, absl::ZeroDuration(), sink), 1);
  EXPECT_THAT(sink.seen,
              ElementsAre(absl::StrCat("OpStarted 1 ", kMaxReplayedString)));
}

}  // namespace events_test
}  // namespace causeway::trace
