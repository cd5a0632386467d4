#include "causeway/head/worker_notices.h"

#include <memory>
#include <vector>

#include "causeway/head/membership.h"
#include "causeway/head/testing/fake_hosts.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace worker_notices_test {

using ::testing::HasSubstr;
using trace::EventRecord;

// Hosts 0, 1 and 2 of two devices each (devices 0, 1 on host 0, 2, 3 on
// host 1, ...): 0 and 2 alive, 1 dead.
class WorkerNoticesTest : public testing::FakeHostsTest {
 protected:
  void SetUp() override {
    AddHosts(3, 2);
    membership_.MarkDead(HostId(1), "test");
  }
  EventRecord Op(int64_t host) {
    trace::OpEvent op;
    op.host = HostId(host);
    return EventRecord{EventRecord::Kind::kOpStarted, op, {}};
  }
  EventRecord Transfer(int64_t from, int64_t to) {
    trace::TransferEvent transfer;
    transfer.source_host = HostId(from);
    transfer.destination_host = HostId(to);
    return EventRecord{EventRecord::Kind::kTransferStarted, transfer, {}};
  }
};

TEST_F(WorkerNoticesTest, AnOpDoneCountsOnlyFromItsDevicesHost) {
  const auto topology = membership_.topology();
  auto done = [](int64_t device) {
    transport::OpDone done;
    done.host = HostId(0);
    done.device = DeviceId(device);
    return done;
  };
  EXPECT_TRUE(OpDoneIsFromItsDevice(*topology, done(1)));
  EXPECT_FALSE(OpDoneIsFromItsDevice(*topology, done(2)));
  EXPECT_FALSE(OpDoneIsFromItsDevice(*topology, done(99)));
}

TEST_F(WorkerNoticesTest, AnUndeliveredPieceMattersOnlyWhileBothEndsLive) {
  transport::UndeliveredPiece piece;
  piece.source_host = HostId(0);
  piece.destination_host = HostId(2);
  EXPECT_TRUE(BothEndsAlive(*membership_.topology(), piece));
  piece.destination_host = HostId(1);
  EXPECT_FALSE(BothEndsAlive(*membership_.topology(), piece));
  piece.destination_host = HostId(7);  // Unknown.
  EXPECT_FALSE(BothEndsAlive(*membership_.topology(), piece));
}

TEST_F(WorkerNoticesTest, AWorkersTraceHoldsOnlyWhatItTookPartIn) {
  absl::StatusOr<std::vector<EventRecord>> own = OwnTraceEvents(
      HostId(1), {Op(1), Op(0), Transfer(0, 1), Transfer(1, 2), Transfer(0, 2)},
      absl::Seconds(1));
  ASSERT_TRUE(own.ok()) << own.status();
  ASSERT_EQ(own->size(), 3u);
  EXPECT_EQ(std::get<trace::OpEvent>((*own)[0].event).host, HostId(1));
  EXPECT_EQ(std::get<trace::TransferEvent>((*own)[1].event).source_host,
            HostId(0));
  EXPECT_EQ(std::get<trace::TransferEvent>((*own)[2].event).source_host,
            HostId(1));
}

TEST_F(WorkerNoticesTest, ABatchIsCappedAndAClockADayOffIsRefused) {
  std::vector<EventRecord> many(kMaxTraceEventsPerBatch + 5, Op(0));
  absl::StatusOr<std::vector<EventRecord>> own =
      OwnTraceEvents(HostId(0), std::move(many), absl::ZeroDuration());
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->size(), kMaxTraceEventsPerBatch);
  absl::Status far =
      OwnTraceEvents(HostId(0), {Op(0)}, absl::Hours(25)).status();
  EXPECT_EQ(far.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(far.message(), HasSubstr("clock offset of 25h"));
}

}  // namespace worker_notices_test
}  // namespace causeway::head
