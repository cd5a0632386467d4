#include "causeway/head/session.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace session_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class SessionTest : public ::testing::Test {
 protected:
  SessionTest() : session_(SessionId(7), "s", 1.0, 0, false, {2, 2}) {}

  SliceRecord& AddSlice(uint64_t handle) {
    transport::SliceRequest request;
    request.handle = SliceHandle(handle);
    request.num_devices = 2;
    absl::StatusOr<SliceRecord*> slice = session_.AddSlice(request);
    EXPECT_TRUE(slice.ok()) << slice.status();
    session_.SliceQueued(SliceHandle(handle), SliceId(handle + 100));
    return **slice;
  }
  bool Grant(SliceRecord& slice, uint64_t generation = 1) {
    return session_.SliceOnDevices(slice, IslandId(0),
                                   {DeviceId(3), DeviceId(4)}, {2}, generation);
  }
  // Work that records `name` when it runs, and `name` with the status
  // when it is cancelled.
  void Work(Session::WaitsFor waits_for, const std::string& name) {
    session_.RunOrDefer(
        waits_for, [this, name](Session&) { log_.push_back(name); },
        [this, name](const absl::Status& status) {
          log_.push_back(name + ": " + std::string(status.message()));
        });
  }

  Session session_;
  std::vector<std::string> log_;
};

TEST_F(SessionTest, WorkRunsAtOnceWhenItsSliceIsGranted) {
  SliceRecord& slice = AddSlice(1);
  ASSERT_TRUE(Grant(slice));
  Work(SliceHandle(1), "put");
  EXPECT_THAT(log_, ElementsAre("put"));
  EXPECT_EQ(session_.num_deferred(), 0);
}

TEST_F(SessionTest, WorkWaitsForItsSliceAndWhateverCameAfterWaitsBehindIt) {
  SliceRecord& slice = AddSlice(1);
  Work(SliceHandle(1), "put");
  Work({}, "fetch");  // Needs nothing, but keeps the session's order.
  EXPECT_THAT(log_, IsEmpty());
  EXPECT_EQ(session_.num_deferred(), 2);
  ASSERT_TRUE(Grant(slice));
  session_.DrainDeferred();
  EXPECT_THAT(log_, ElementsAre("put", "fetch"));
}

TEST_F(SessionTest, DrainingStopsAtTheFirstWorkStillWaiting) {
  SliceRecord& first = AddSlice(1);
  AddSlice(2);
  Work(SliceHandle(1), "a");
  Work(SliceHandle(2), "b");
  Work({}, "c");
  ASSERT_TRUE(Grant(first));
  session_.DrainDeferred();
  EXPECT_THAT(log_, ElementsAre("a"));
  EXPECT_EQ(session_.num_deferred(), 2);
}

TEST_F(SessionTest, AnExecutableWaitsForTheSliceItIsBoundTo) {
  SliceRecord& slice = AddSlice(1);
  auto executable = std::make_shared<ExecutableRecord>();
  executable->handle = ExecutableHandle(5);
  executable->slice = SliceHandle(1);
  ASSERT_TRUE(session_.AddExecutable(executable).ok());
  Work(ExecutableHandle(5), "execute");
  EXPECT_THAT(log_, IsEmpty());
  ASSERT_TRUE(Grant(slice));
  session_.DrainDeferred();
  EXPECT_THAT(log_, ElementsAre("execute"));
}

TEST_F(SessionTest, AFailedSliceNoLongerHoldsItsWorkBack) {
  AddSlice(1);
  Work(SliceHandle(1), "put");
  session_.SliceFailed(SliceHandle(1), absl::ResourceExhaustedError("full"));
  session_.DrainDeferred();
  EXPECT_THAT(log_, ElementsAre("put"));  // It runs, and fails itself.
  EXPECT_EQ(session_.FindSlice(SliceHandle(1))->state,
            SliceRecord::State::kFailed);
}

TEST_F(SessionTest, CancellingTellsEveryWaitingOperationWhyInOrder) {
  AddSlice(1);
  Work(SliceHandle(1), "a");
  Work({}, "b");
  session_.CancelDeferred(absl::CancelledError("closed"));
  EXPECT_THAT(log_, ElementsAre("a: closed", "b: closed"));
  EXPECT_EQ(session_.num_deferred(), 0);
}

TEST_F(SessionTest, AnOlderMappingThanTheOneKeptIsIgnored) {
  SliceRecord& slice = AddSlice(1);
  ASSERT_TRUE(Grant(slice, 1));
  EXPECT_TRUE(session_.SliceOnDevices(slice, IslandId(0), {DeviceId(9)}, {1},
                                      3));  // A remap.
  EXPECT_FALSE(Grant(slice, 2));            // The grant, late.
  EXPECT_THAT(slice.devices, ElementsAre(DeviceId(9)));
  EXPECT_EQ(slice.Info().generation, 3u);
  session_.SliceBroken(slice, 2);
  EXPECT_EQ(slice.state, SliceRecord::State::kBroken);
  EXPECT_EQ(slice.generation, 3u);
}

TEST_F(SessionTest, AReleasedSliceGivesBackItsIdOnlyIfItHadOne) {
  AddSlice(1);
  transport::SliceRequest request;
  request.handle = SliceHandle(2);
  ASSERT_TRUE(session_.AddSlice(request).ok());
  EXPECT_EQ(session_.SliceReleased(SliceHandle(1)), SliceId(101));
  EXPECT_EQ(session_.SliceReleased(SliceHandle(2)), std::nullopt);
  EXPECT_EQ(session_.SliceReleased(SliceHandle(3)), std::nullopt);
  EXPECT_STREQ(SliceStateName(session_.FindSlice(SliceHandle(1))->state),
               "released");
}

TEST_F(SessionTest, HandlesAreUniqueAndBoundedWithAClearError) {
  AddSlice(1);
  transport::SliceRequest again;
  again.handle = SliceHandle(1);
  EXPECT_THAT(session_.AddSlice(again).status().message(),
              HasSubstr("slice handle 1 is already used"));
  AddSlice(2);
  transport::SliceRequest third;
  third.handle = SliceHandle(3);
  absl::Status too_many = session_.AddSlice(third).status();
  EXPECT_EQ(too_many.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(too_many.message(), HasSubstr("--max-slices-per-session"));
  EXPECT_EQ(session_.GetSlice(SliceHandle(9)).status().code(),
            absl::StatusCode::kNotFound);
  for (uint64_t h : {1, 2}) {
    auto executable = std::make_shared<ExecutableRecord>();
    executable->handle = ExecutableHandle(h);
    ASSERT_TRUE(session_.AddExecutable(executable).ok());
  }
  EXPECT_EQ(session_.CheckNewExecutable(ExecutableHandle(1)).code(),
            absl::StatusCode::kAlreadyExists);
  too_many = session_.CheckNewExecutable(ExecutableHandle(3));
  EXPECT_EQ(too_many.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(too_many.message(), HasSubstr("--max-executables-per-session"));
}

}  // namespace session_test
}  // namespace causeway::head
