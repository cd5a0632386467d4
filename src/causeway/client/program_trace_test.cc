#include "causeway/client/program_trace.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "causeway/client/test_programs.h"
#include "causeway/client/testing/fake_session_channel.h"
#include "causeway/hlo/literal_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::client {
namespace program_trace_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::testutil::Values;
using hlo::testutil::Vector;

class ProgramTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto channel = std::make_unique<FakeSessionChannel>();
    fake_ = channel.get();
    session_ = std::make_unique<Session>(*Session::Open(std::move(channel)));
    slice_ = *session_->CreateSlice(2);
    other_slice_ = *session_->CreateSlice(2);
    double_ = *session_->Compile(
        testing::ElementwiseProgram("double", "multiply", 2, 2), slice_);
    increment_ = *session_->Compile(
        testing::ElementwiseProgram("increment", "add", 1, 2), other_slice_);
    x_ = *session_->FromHost(Vector({1, 2}), slice_,
                             *Sharding::TiledByDims({2}));
  }

  int Count(const std::string& call) {
    std::vector<std::string> calls = fake_->calls();
    return static_cast<int>(std::count(calls.begin(), calls.end(), call));
  }

  FakeSessionChannel* fake_ = nullptr;
  std::unique_ptr<Session> session_;
  Slice slice_, other_slice_;
  Executable double_, increment_;
  Array x_;
};

TEST_F(ProgramTraceTest, ExecutionsAndCopiesGoAsOneGraph) {
  ProgramTrace trace(*session_);
  Array y = (*trace.Execute(double_, {x_}))[0];
  Array moved = *trace.Copy(y, other_slice_, *Sharding::TiledByDims({2}));
  Array z = (*trace.Execute(increment_, {moved}))[0];
  EXPECT_EQ(trace.num_ops(), 3u);
  EXPECT_EQ(Count("Execute") + Count("Copy"), 0);  // Nothing sent yet.
  ASSERT_TRUE(trace.Submit().ok());
  EXPECT_EQ(Count("Submit(3)"), 1);
  EXPECT_EQ(Count("Execute") + Count("Copy"), 0);
  EXPECT_THAT(Values(*z.ToHost().Await()), ElementsAre(3, 5));
  EXPECT_THAT(Values(*y.ToHost().Await()), ElementsAre(2, 4));
}

TEST_F(ProgramTraceTest, ArgumentsOnOtherSlicesAreCopiedInsideTheGraph) {
  ProgramTrace trace(*session_);
  Array y = (*trace.Execute(double_, {x_}))[0];
  Array z = (*trace.Execute(increment_, {y}))[0];  // Lives on slice_.
  ASSERT_TRUE(trace.Submit().ok());
  std::vector<transport::ProgramGraph> graphs = fake_->graphs();
  ASSERT_EQ(graphs.size(), 1u);
  const transport::ProgramGraph& graph = graphs[0];
  ASSERT_EQ(graph.ops.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<transport::CopyOp>(graph.ops[1]));
  EXPECT_THAT(Values(*z.ToHost().Await()), ElementsAre(3, 5));
}

TEST_F(ProgramTraceTest, OutputsAreUnusableOutsideTheTraceUntilSubmit) {
  ProgramTrace trace(*session_);
  Array y = (*trace.Execute(double_, {x_}))[0];
  EXPECT_THAT(y.ToHost().Await().status().message(),
              HasSubstr("not submitted yet"));
  EXPECT_EQ(double_.Execute({y}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(trace.Submit().ok());
  EXPECT_THAT(Values(*y.ToHost().Await()), ElementsAre(2, 4));
}

TEST_F(ProgramTraceTest, ATraceDroppedUnsubmittedSendsNothing) {
  Array y;
  {
    ProgramTrace trace(*session_);
    y = (*trace.Execute(double_, {x_}))[0];
  }
  EXPECT_EQ(fake_->graphs().size(), 0u);
  EXPECT_EQ(Count("Execute"), 0);
  EXPECT_THAT(y.ToHost().Await().status().message(),
              HasSubstr("destroyed without Submit"));
  y = Array();
  EXPECT_EQ(Count("Delete(1)"), 0);  // The head never knew it.
}

TEST_F(ProgramTraceTest, SubmitTwiceAndRecordingAfterSubmitFail) {
  ProgramTrace trace(*session_);
  ASSERT_TRUE(trace.Execute(double_, {x_}).ok());
  ASSERT_TRUE(trace.Submit().ok());
  EXPECT_EQ(trace.Submit().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(trace.Execute(double_, {x_}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(ProgramTraceTest, IntermediatesTheClientDroppedAreDeletedAfterSubmit) {
  ProgramTrace trace(*session_);
  Array v = x_;
  for (int i = 0; i < 4; ++i) v = (*trace.Execute(double_, {v}))[0];
  EXPECT_EQ(Count("Delete(1)"), 0);
  ASSERT_TRUE(trace.Submit().ok());
  // Three of the four outputs are no longer referenced by the client.
  EXPECT_EQ(Count("Delete(1)"), 3);
  EXPECT_THAT(Values(*v.ToHost().Await()), ElementsAre(16, 32));
}

TEST_F(ProgramTraceTest, InputsTheClientDropsBeforeSubmitStayAlive) {
  ProgramTrace trace(*session_);
  Array x = *session_->FromHost(Vector({3, 4}), slice_,
                                *Sharding::TiledByDims({2}));
  Array y = (*trace.Execute(double_, {x}))[0];
  x = Array();  // The trace still reads it.
  EXPECT_EQ(Count("Delete(1)"), 0);
  ASSERT_TRUE(trace.Submit().ok());
  EXPECT_EQ(Count("Delete(1)"), 1);  // Sent after the graph.
  EXPECT_THAT(Values(*y.ToHost().Await()), ElementsAre(6, 8));
}

TEST_F(ProgramTraceTest, AFailedRecordingLeavesTheTraceUnchanged) {
  ProgramTrace trace(*session_);
  ASSERT_TRUE(trace.Execute(double_, {x_}).ok());
  Array wrong = *session_->FromHost(Vector({1, 2, 3}), slice_,
                                    Sharding::Replicated());
  EXPECT_FALSE(trace.Execute(increment_, {wrong}).ok());
  EXPECT_EQ(trace.num_ops(), 1u);
}

}  // namespace program_trace_test
}  // namespace causeway::client
