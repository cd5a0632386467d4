#include "causeway/head/fetches.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/head/testing/fake_hosts.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::head {
namespace fetches_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

hlo::Shape F32(std::vector<int64_t> dims) {
  return hlo::Shape(hlo::PrimitiveType::kF32, std::move(dims));
}

hlo::Literal Values(std::vector<float> values) {
  hlo::Literal literal(F32({static_cast<int64_t>(values.size())}));
  for (size_t i = 0; i < values.size(); ++i) {
    literal.mutable_data<float>()[i] = values[i];
  }
  return literal;
}

// Halves along dimension 0 over devices 0 and 1, each replicated twice
// (devices 0, 1 hold the first half, 2, 3 the second).
ArrayPlacement HalvesTwice() {
  hlo::Sharding sharding;
  sharding.kind = hlo::Sharding::Kind::kTiled;
  sharding.tile_dims = {2, 2};
  sharding.tile_devices = {0, 1, 2, 3};
  sharding.last_tile_dim_replicate = true;
  return ArrayPlacement{
      F32({4}), sharding, {DeviceId(0), DeviceId(1), DeviceId(2), DeviceId(3)}};
}

TEST(AssembleFetchedTest, OnlyThePrimaryReplicasMakeTheGlobalValue) {
  const ArrayPlacement placement = HalvesTwice();
  absl::StatusOr<std::vector<hlo::ShardRegion>> regions = RegionsOf(placement);
  ASSERT_TRUE(regions.ok()) << regions.status();
  std::vector<int64_t> fetched;
  for (size_t i = 0; i < regions->size(); ++i) {
    if ((*regions)[i].primary) fetched.push_back(static_cast<int64_t>(i));
  }
  ASSERT_THAT(fetched, ElementsAre(0, 2));
  absl::StatusOr<hlo::Literal> global = AssembleFetched(
      placement, *regions, fetched, {Values({1, 2}), Values({3, 4})});
  ASSERT_TRUE(global.ok()) << global.status();
  std::span<const float> data = global->data<float>();
  EXPECT_THAT(std::vector<float>(data.begin(), data.end()),
              ElementsAre(1, 2, 3, 4));
}

// One alive host of two devices behind a fake channel; a second host
// registered and then dead.
class FetchesTest : public testing::FakeHostsTest {
 protected:
  void SetUp() override {
    AddHosts(2, 2);
    membership_.MarkDead(HostId(1), "test");
  }

  // A placed array with one replicated shard on each of `devices`.
  std::shared_ptr<const ArrayRecord> Array(std::vector<int64_t> devices) {
    auto array = std::make_shared<ArrayRecord>();
    array->placement.global_shape = F32({2});
    for (int64_t d : devices) array->placement.devices.push_back(DeviceId(d));
    array->internal = ArrayHandle(next_++);
    array->buffers = NewArrayBuffers(array->internal, array->placement,
                                     *membership_.topology());
    dispatcher_.MarkPlaced(*array->buffers);
    return array;
  }

  Fetches fetches_{&membership_, &dispatcher_, &InlineExecutor::Instance()};
  uint64_t next_ = 1;
};

TEST_F(FetchesTest, FetchAsksOnlyForOneReplicaAndFetchShardsForEvery) {
  hosts_[0]->set_fetch_result(Values({5, 6}));
  auto [fetch, fetched] = MakePromise<hlo::Literal>();
  fetches_.Fetch(Array({0, 1}),
                 std::make_shared<Promise<hlo::Literal>>(std::move(fetch)));
  auto [shards, all] = MakePromise<std::vector<hlo::Literal>>();
  fetches_.FetchShards(
      Array({0, 1}),
      std::make_shared<Promise<std::vector<hlo::Literal>>>(std::move(shards)));
  outbox_.Drain();
  absl::StatusOr<hlo::Literal> value = fetched.Await();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->data<float>()[1], 6);
  absl::StatusOr<std::vector<hlo::Literal>> every = all.Await();
  ASSERT_TRUE(every.ok()) << every.status();
  EXPECT_EQ(every->size(), 2u);
  EXPECT_THAT(hosts_[0]->calls(), ElementsAre("FetchBuffer array 1 shard 0",
                                              "FetchBuffer array 2 shard 0",
                                              "FetchBuffer array 2 shard 1"));
}

TEST_F(FetchesTest, ReadingFromADeadHostIsDataLossNamingIt) {
  auto [ready, readied] = MakePromise<>();
  fetches_.Ready(Array({0, 2}), std::make_shared<Promise<>>(std::move(ready)));
  outbox_.Drain();
  absl::Status status = readied.Await();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("host 1 was lost"));
}

}  // namespace fetches_test
}  // namespace causeway::head
