#include "causeway/head/array_table.h"

#include <memory>
#include <string>
#include <vector>

#include "causeway/head/dispatcher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace array_table_test {

using ::testing::HasSubstr;

const SessionId kAlice(1);
const SessionId kBob(2);

transport::ArraySpec Spec(uint64_t handle) {
  transport::ArraySpec spec;
  spec.handle = ArrayHandle(handle);
  spec.global_shape = hlo::Shape(hlo::PrimitiveType::kF32, {4});
  spec.slice = SliceHandle(1);
  return spec;
}

class ArrayTableTest : public ::testing::Test {
 protected:
  // An array of `session` with one shard on each of `devices`.
  std::shared_ptr<const ArrayRecord> Add(SessionId session, uint64_t handle,
                                         std::vector<DeviceId> devices) {
    auto record = std::make_shared<ArrayRecord>();
    record->session = session;
    record->handle = ArrayHandle(handle);
    record->internal = table_.NewInternalHandle();
    record->placement.global_shape = Spec(handle).global_shape;
    record->placement.devices = std::move(devices);
    record->buffers = std::make_shared<ArrayBuffers>();
    table_.Add(record);
    return record;
  }

  ArrayTable table_;
};

TEST_F(ArrayTableTest, SessionsWithTheSameHandleNumbersSeeTheirOwnArrays) {
  auto alice = Add(kAlice, 7, {DeviceId(0)});
  auto bob = Add(kBob, 7, {DeviceId(1)});
  auto found = table_.Find(kBob, ArrayHandle(7), [] { return ""; });
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->get(), bob.get());
  EXPECT_NE(alice->internal, bob->internal);
}

TEST_F(ArrayTableTest, AnUnknownHandleIsNotFoundWithTheCallersContext) {
  Add(kAlice, 7, {DeviceId(0)});
  auto found = table_.Find(kBob, ArrayHandle(7), [] { return "Copy"; });
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(found.status().message(),
              HasSubstr("Copy: unknown array handle 7"));
}

TEST_F(ArrayTableTest, AHandleInUseOrRepeatedIsRefused) {
  Add(kAlice, 7, {DeviceId(0)});
  EXPECT_EQ(table_.CheckNewHandles(kAlice, {Spec(7)}).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(table_.CheckNewHandles(kAlice, {Spec(8), Spec(8)}).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(table_.CheckNewHandles(kBob, {Spec(7)}).ok());
}

TEST_F(ArrayTableTest, ASessionCannotHoldMoreArraysThanItsLimit) {
  ArrayTable small(ArrayTable::Options{.max_arrays_per_session = 2});
  small.AddErrors(kAlice, {Spec(1), Spec(2)}, absl::InternalError("x"));
  absl::Status status = small.CheckNewHandles(kAlice, {Spec(3)});
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("at most 2"));
  EXPECT_THAT(status.message(), HasSubstr("--max-arrays-per-session"));
  EXPECT_TRUE(small.CheckNewHandles(kBob, {Spec(3)}).ok());
}

TEST_F(ArrayTableTest, AnErrorArrayFailsWithItsErrorAndNeverClobbers) {
  Add(kAlice, 1, {DeviceId(0)});
  table_.AddErrors(kAlice, {Spec(1), Spec(2)},
                   absl::InvalidArgumentError("bad shape"));
  EXPECT_TRUE(table_.Find(kAlice, ArrayHandle(1), [] { return ""; }).ok());
  auto failed = table_.Find(kAlice, ArrayHandle(2), [] { return ""; });
  EXPECT_EQ(failed.status(), absl::InvalidArgumentError("bad shape"));
}

TEST_F(ArrayTableTest, ArraysWithAShardOnALostHostBecomeDataLoss) {
  transport::Topology topology = *transport::Topology::Uniform(1, 2, 1, 64);
  Add(kAlice, 1, {DeviceId(0), DeviceId(1)});
  Add(kAlice, 2, {DeviceId(0)});
  auto before = table_.Find(kAlice, ArrayHandle(1), [] { return ""; });
  std::vector<std::shared_ptr<const ArrayRecord>> failed =
      table_.FailArraysOnHost(HostId(1), topology,
                              absl::DataLossError("host 1 was lost"));
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]->handle, ArrayHandle(1));
  EXPECT_NE(failed[0]->buffers, nullptr);  // The caller releases them.
  auto after = table_.Find(kAlice, ArrayHandle(1), [] { return ""; });
  EXPECT_EQ(after.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(after.status().message(),
              HasSubstr("array 1 lost shard 1 on device 1: host 1 was lost"));
  EXPECT_TRUE((*before)->error.ok());  // A reader's record is unchanged.
  EXPECT_TRUE(table_.Find(kAlice, ArrayHandle(2), [] { return ""; }).ok());
}

TEST_F(ArrayTableTest, RemovingASessionRemovesOnlyItsArrays) {
  Add(kAlice, 1, {DeviceId(0)});
  Add(kAlice, 2, {DeviceId(0)});
  Add(kBob, 1, {DeviceId(0)});
  EXPECT_EQ(table_.RemoveSession(kAlice).size(), 2u);
  EXPECT_EQ(table_.Count(kAlice), 0);
  EXPECT_EQ(table_.Count(kBob), 1);
  EXPECT_EQ(table_.Remove(kBob, ArrayHandle(1))->handle, ArrayHandle(1));
  EXPECT_EQ(table_.Remove(kBob, ArrayHandle(1)), nullptr);
  EXPECT_EQ(table_.size(), 0);
}

}  // namespace array_table_test
}  // namespace causeway::head
