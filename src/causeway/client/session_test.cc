#include "causeway/client/session.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "causeway/client/array.h"
#include "causeway/client/executable.h"
#include "causeway/client/test_programs.h"
#include "causeway/client/testing/fake_session_channel.h"
#include "causeway/hlo/literal_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::client {
namespace session_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using hlo::Literal;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::testutil::Values;
using hlo::testutil::Vector;

int Count(const std::vector<std::string>& calls, const std::string& call) {
  return static_cast<int>(std::count(calls.begin(), calls.end(), call));
}

class SessionTest : public ::testing::Test {
 protected:
  void Open(FakeSessionChannel::Options options = {}) {
    auto channel = std::make_unique<FakeSessionChannel>(options);
    fake_ = channel.get();
    absl::StatusOr<Session> session = Session::Open(std::move(channel));
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = std::make_unique<Session>(*std::move(session));
  }
  void SetUp() override { Open(); }

  Array Upload(std::vector<float> values, const Slice& slice) {
    absl::StatusOr<Array> array = session_->FromHost(
        Vector(values), slice, *Sharding::TiledByDims({slice.num_devices()}));
    CW_CHECK(array.ok()) << array.status();
    return *array;
  }

  FakeSessionChannel* fake_ = nullptr;
  std::unique_ptr<Session> session_;
};

TEST_F(SessionTest, FromHostThenToHostGivesTheValueBack) {
  Slice slice = *session_->CreateSlice(2);
  Array x = Upload({1, 2, 3, 4}, slice);
  EXPECT_EQ(x.shape().ToString(false), "f32[4]");
  EXPECT_EQ(x.sharding().ToString(), "{devices=[2]<=[2]}");
  absl::StatusOr<Literal> back = x.ToHost().Await();
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(Values(*back), ElementsAre(1, 2, 3, 4));
}

TEST_F(SessionTest, CompileTakesGlobalShapesAndShardingsFromTheModule) {
  Slice slice = *session_->CreateSlice(2);
  absl::StatusOr<Executable> exe = session_->Compile(
      testing::ElementwiseProgram("double", "multiply", 2, 2, 3), slice);
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ(exe->name(), "double");
  ASSERT_EQ(exe->parameter_shapes().size(), 1u);
  EXPECT_EQ(exe->parameter_shapes()[0].ToString(false), "f32[6]");
  EXPECT_EQ(exe->parameter_shardings()[0].ToString(), "{devices=[2]<=[2]}");
  ASSERT_EQ(exe->output_shapes().size(), 1u);
  EXPECT_EQ(exe->output_shapes()[0].ToString(false), "f32[6]");
}

TEST_F(SessionTest, ExecuteReturnsOutputsThatHoldTheResult) {
  Slice slice = *session_->CreateSlice(2);
  Executable exe = *session_->Compile(
      testing::ElementwiseProgram("double", "multiply", 2, 2), slice);
  absl::StatusOr<std::vector<Array>> y = exe.Execute({Upload({1, 2}, slice)});
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->size(), 1u);
  EXPECT_EQ((*y)[0].shape().ToString(false), "f32[2]");
  EXPECT_THAT(Values(*(*y)[0].ToHost().Await()), ElementsAre(2, 4));
}

TEST_F(SessionTest, ExecuteSendsOneMessageAndWaitsForNoReply) {
  Slice slice = *session_->CreateSlice(2);
  Executable exe = *session_->Compile(
      testing::ElementwiseProgram("double", "multiply", 2, 2), slice);
  Array x = Upload({1, 2}, slice);
  for (int i = 0; i < 3; ++i) x = (*exe.Execute({x}))[0];
  std::vector<std::string> calls = fake_->calls();
  EXPECT_EQ(Count(calls, "Execute"), 3);
  EXPECT_EQ(Count(calls, "ArrayReady") + Count(calls, "Fetch"), 0);
  EXPECT_THAT(Values(*x.ToHost().Await()), ElementsAre(8, 16));
}

TEST_F(SessionTest, ExecuteOfATupleProgramReturnsOneArrayPerElement) {
  Slice slice = *session_->CreateSlice(2);
  Executable exe =
      *session_->Compile(testing::SumAndProductProgram(2, 2), slice);
  Array x = *session_->FromHost(Vector({1, 2}), slice, Sharding::Replicated());
  Array y = *session_->FromHost(Vector({3, 4}), slice, Sharding::Replicated());
  std::vector<Array> out = *exe.Execute({x, y});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_THAT(Values(*out[0].ToHost().Await()), ElementsAre(4, 6));
  EXPECT_THAT(Values(*out[1].ToHost().Await()), ElementsAre(3, 8));
}

TEST_F(SessionTest, ExecuteRefusesWrongArgumentCountAndShape) {
  Slice slice = *session_->CreateSlice(2);
  Executable exe = *session_->Compile(
      testing::ElementwiseProgram("double", "multiply", 2, 2), slice);
  EXPECT_THAT(exe.Execute({}).status().message(),
              HasSubstr("takes 1 arguments, got 0"));
  Array wrong = Upload({1, 2, 3, 4}, slice);
  EXPECT_THAT(exe.Execute({wrong}).status().message(),
              HasSubstr("expected f32[2], got f32[4]"));
  EXPECT_EQ(Count(fake_->calls(), "Execute"), 0);
}

TEST_F(SessionTest, ArgumentOnAnotherSliceIsCopiedInTheSameSubmission) {
  Slice a = *session_->CreateSlice(2);
  Slice b = *session_->CreateSlice(2);
  Executable exe = *session_->Compile(
      testing::ElementwiseProgram("double", "multiply", 2, 2), b);
  std::vector<Array> y = *exe.Execute({Upload({5, 6}, a)});
  std::vector<transport::ProgramGraph> graphs = fake_->graphs();
  ASSERT_EQ(graphs.size(), 1u);
  ASSERT_EQ(graphs[0].ops.size(), 2u);
  const auto& copy = std::get<transport::CopyOp>(graphs[0].ops[0]);
  EXPECT_EQ(copy.destination.slice, b.handle());
  EXPECT_TRUE(std::holds_alternative<transport::ExecuteOp>(graphs[0].ops[1]));
  EXPECT_THAT(Values(*y[0].ToHost().Await()), ElementsAre(10, 12));
}

TEST_F(SessionTest, ArgumentWithAnotherShardingIsReshardedFirst) {
  Slice slice = *session_->CreateSlice(2);
  Executable exe = *session_->Compile(
      testing::ElementwiseProgram("double", "multiply", 2, 2), slice);
  Array replicated =
      *session_->FromHost(Vector({1, 3}), slice, Sharding::Replicated());
  std::vector<Array> y = *exe.Execute({replicated});
  std::vector<transport::ProgramGraph> graphs = fake_->graphs();
  ASSERT_EQ(graphs.size(), 1u);
  const auto& copy = std::get<transport::CopyOp>(graphs[0].ops[0]);
  EXPECT_EQ(Sharding::FromHlo(copy.destination.sharding)->ToString(),
            "{devices=[2]<=[2]}");
  EXPECT_THAT(Values(*y[0].ToHost().Await()), ElementsAre(2, 6));
}

TEST_F(SessionTest, CopyAndReshardKeepTheValue) {
  Slice a = *session_->CreateSlice(2);
  Slice b = *session_->CreateSlice(1);
  Array x = Upload({7, 8}, a);
  absl::StatusOr<Array> on_b = session_->Copy(x, b, Sharding::Replicated());
  ASSERT_TRUE(on_b.ok()) << on_b.status();
  EXPECT_EQ(on_b->slice(), b);
  absl::StatusOr<Array> replicated =
      session_->Reshard(x, Sharding::Replicated());
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  EXPECT_THAT(Values(*on_b->ToHost().Await()), ElementsAre(7, 8));
  EXPECT_THAT(Values(*replicated->ToHost().Await()), ElementsAre(7, 8));
  EXPECT_FALSE(
      session_->Copy(x, b, *Sharding::TiledByDims({2})).ok());  // 1 device.
}

TEST_F(SessionTest, CompileWorksWhileTheSliceWaitsInTheQueue) {
  FakeSessionChannel::Options options;
  options.hold_slices = true;
  Open(options);
  Slice slice = *session_->CreateSlice(2);
  EXPECT_FALSE(slice.Ready().IsReady());
  absl::StatusOr<Executable> exe = session_->Compile(
      testing::ElementwiseProgram("double", "multiply", 2, 2), slice);
  ASSERT_TRUE(exe.ok()) << exe.status();
  std::vector<Array> y = *exe->Execute({Upload({1, 2}, slice)});
  Future<Literal> value = y[0].ToHost();
  EXPECT_FALSE(value.IsReady());
  fake_->GrantHeldSlices();
  ASSERT_TRUE(slice.Ready().Await().ok());
  EXPECT_THAT(Values(*value.Await()), ElementsAre(2, 4));
}

TEST_F(SessionTest, CompileErrorsCarryTheLine) {
  Slice slice = *session_->CreateSlice(1);
  absl::StatusOr<Executable> exe = session_->Compile(
      "HloModule bad\n\nENTRY %main () -> f32[] {\n  ROOT %x = f32[] "
      "frobnicate()\n}\n",
      slice);
  ASSERT_FALSE(exe.ok());
  EXPECT_THAT(exe.status().message(), HasSubstr("line 4"));
}

TEST_F(SessionTest, AFailingProgramFailsItsDependantsAndNothingElse) {
  FakeSessionChannel::Options options;
  options.failing_programs = {"broken"};
  Open(options);
  Slice slice = *session_->CreateSlice(2);
  Executable broken = *session_->Compile(
      testing::ElementwiseProgram("broken", "add", 1, 2), slice);
  Executable fine = *session_->Compile(
      testing::ElementwiseProgram("fine", "add", 1, 2), slice);
  Array x = Upload({1, 2}, slice);
  Array bad = (*broken.Execute({x}))[0];
  Array downstream = (*fine.Execute({bad}))[0];
  Array independent = (*fine.Execute({x}))[0];
  absl::Status error = downstream.Ready().Await();
  EXPECT_THAT(error.message(), HasSubstr("program 'broken'"));
  EXPECT_THAT(error.message(), HasSubstr("at op 'y'"));
  EXPECT_THAT(downstream.ToHost().Await().status().message(),
              HasSubstr("program 'broken'"));
  EXPECT_THAT(Values(*independent.ToHost().Await()), ElementsAre(2, 3));
}

TEST_F(SessionTest, DeleteFreesTheArrayAndLaterUsesFail) {
  Slice slice = *session_->CreateSlice(2);
  Array x = Upload({1, 2}, slice);
  fake_->Drain();
  EXPECT_EQ(fake_->num_live_arrays(), 1);
  x.Delete();
  x.Delete();
  EXPECT_TRUE(x.IsDeleted());
  EXPECT_EQ(fake_->num_live_arrays(), 0);
  EXPECT_EQ(Count(fake_->calls(), "Delete(1)"), 1);
  EXPECT_EQ(x.ToHost().Await().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(SessionTest, DroppingTheLastHandleDeletesTheArray) {
  Slice slice = *session_->CreateSlice(2);
  {
    Array x = Upload({1, 2}, slice);
    Array copy = x;
  }
  EXPECT_EQ(fake_->num_live_arrays(), 0);
  EXPECT_EQ(Count(fake_->calls(), "Delete(1)"), 1);
}

TEST_F(SessionTest, ClosingTheSessionMakesEverythingUnusable) {
  Slice slice = *session_->CreateSlice(2);
  Array x = Upload({1, 2}, slice);
  ASSERT_TRUE(session_->Close().ok());
  EXPECT_TRUE(session_->closed());
  EXPECT_EQ(x.ToHost().Await().status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(session_->CreateSlice(1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Count(fake_->calls(), "CloseSession"), 1);
  EXPECT_TRUE(session_->Close().ok());  // Idempotent.
  EXPECT_EQ(Count(fake_->calls(), "CloseSession"), 1);
}

TEST_F(SessionTest, ASliceThatCanNeverFitFailsItsReadyFuture) {
  Slice slice = *session_->CreateSlice(64);
  EXPECT_EQ(slice.Ready().Await().status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(SessionTest, CreateSliceRefusesMeshesOfTheWrongSize) {
  EXPECT_THAT(session_->CreateSlice(4, {3, 2}).status().message(),
              HasSubstr("has 6 devices, not 4"));
  absl::StatusOr<Slice> slice = session_->CreateSlice(4, {2, 2});
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ(slice->mesh().ToString(), "mesh[x=2,y=2]");
}

TEST_F(SessionTest, ArraysOfAnotherSessionAreRefused) {
  absl::StatusOr<Session> other =
      Session::Open(std::make_unique<FakeSessionChannel>());
  ASSERT_TRUE(other.ok());
  Slice theirs = *other->CreateSlice(2);
  Array foreign = *other->FromHost(Vector({1, 2}), theirs,
                                   Sharding::Replicated());
  Slice mine = *session_->CreateSlice(2);
  Executable exe = *session_->Compile(
      testing::ElementwiseProgram("double", "multiply", 2, 2), mine);
  EXPECT_THAT(exe.Execute({foreign}).status().message(),
              HasSubstr("belongs to session"));
  EXPECT_FALSE(session_->FromHost(Vector({1, 2}), theirs,
                                  Sharding::Replicated()).ok());
}

}  // namespace session_test
}  // namespace causeway::client
