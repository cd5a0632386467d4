#include "causeway/hlo/sharding_util.h"

#include <vector>

#include "causeway/hlo/literal_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::hlo {
namespace sharding_util_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testutil::Values;

Literal Iota(std::vector<int64_t> dims) {
  Literal literal(Shape(PrimitiveType::kF32, std::move(dims)));
  auto data = literal.mutable_data<float>();
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  return literal;
}

Sharding Tiled(std::vector<int64_t> tile_dims, std::vector<int64_t> devices,
               bool last_tile_dim_replicate = false) {
  Sharding sharding;
  sharding.kind = Sharding::Kind::kTiled;
  sharding.tile_dims = std::move(tile_dims);
  sharding.tile_devices = std::move(devices);
  sharding.last_tile_dim_replicate = last_tile_dim_replicate;
  return sharding;
}

TEST(ShardingUtilTest, ReplicatedGivesEveryPartitionTheWholeArray) {
  Literal global = Iota({2, 3});
  auto shards = SplitGlobal(global, Sharding(), 3);
  ASSERT_TRUE(shards.ok()) << shards.status();
  ASSERT_EQ(shards->size(), 3u);
  for (const Literal& shard : *shards) EXPECT_EQ(shard, global);
  auto assembled = AssembleGlobal(*shards, Sharding(), global.shape());
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_EQ(*assembled, global);
}

TEST(ShardingUtilTest, TiledRowsGoToTheirDevices) {
  Literal global = Iota({4, 3});
  auto shards = SplitGlobal(global, Tiled({2, 1}, {1, 0}), 2);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_EQ((*shards)[0].shape().dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_THAT(Values((*shards)[1]), ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(Values((*shards)[0]), ElementsAre(6, 7, 8, 9, 10, 11));
}

TEST(ShardingUtilTest, TwoDimensionalTilesRoundTrip) {
  Literal global = Iota({4, 6});
  Sharding sharding = Tiled({2, 3}, {0, 1, 2, 3, 4, 5});
  auto shards = SplitGlobal(global, sharding, 6);
  ASSERT_TRUE(shards.ok()) << shards.status();
  // Partition 4 is tile (1, 1): rows 2-3, columns 2-3.
  EXPECT_THAT(Values((*shards)[4]), ElementsAre(14, 15, 20, 21));
  auto assembled = AssembleGlobal(*shards, sharding, global.shape());
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_EQ(*assembled, global);
}

TEST(ShardingUtilTest, UnevenTilesArePaddedWithZerosAndCroppedOnAssembly) {
  Literal global = Iota({5});
  Sharding sharding = Tiled({2}, {0, 1});
  auto shape = ShardShape(sharding, global.shape(), 2);
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->dims(), (std::vector<int64_t>{3}));
  auto shards = SplitGlobal(global, sharding, 2);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_THAT(Values((*shards)[1]), ElementsAre(3, 4, 0));
  auto assembled = AssembleGlobal(*shards, sharding, global.shape());
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_EQ(*assembled, global);
}

TEST(ShardingUtilTest, LastTileDimReplicateCopiesEachTile) {
  Literal global = Iota({4, 2});
  Sharding sharding = Tiled({2, 1, 2}, {0, 1, 2, 3}, true);
  auto regions = ShardRegions(sharding, global.shape(), 4);
  ASSERT_TRUE(regions.ok()) << regions.status();
  EXPECT_TRUE((*regions)[0].primary);
  EXPECT_FALSE((*regions)[1].primary);
  auto shards = SplitGlobal(global, sharding, 4);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_THAT(Values((*shards)[1]), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(Values((*shards)[3]), ElementsAre(4, 5, 6, 7));
  auto assembled = AssembleGlobal(*shards, sharding, global.shape());
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_EQ(*assembled, global);
}

TEST(ShardingUtilTest, IotaDeviceListWithTransposeIsExpanded) {
  // JAX's {devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}: devices
  // 0,2,4,6 hold rows 0-1 and 1,3,5,7 rows 2-3.
  Sharding sharding = Tiled({2, 1, 4}, {}, true);
  sharding.iota = ReplicaGroups::Iota{.num_groups = 0,
                                      .group_size = 0,
                                      .reshape_dims = {4, 2},
                                      .transpose_perm = {1, 0}};
  auto shards = SplitGlobal(Iota({4, 1}), sharding, 8);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_THAT(Values((*shards)[6]), ElementsAre(0, 1));
  EXPECT_THAT(Values((*shards)[3]), ElementsAre(2, 3));
}

TEST(ShardingUtilTest, MaximalAssemblesFromItsDevice) {
  Sharding sharding;
  sharding.kind = Sharding::Kind::kMaximal;
  sharding.maximal_device = 1;
  std::vector<Literal> shards = {Iota({2}), Iota({2})};
  shards[1].mutable_data<float>()[0] = 42;
  auto assembled = AssembleGlobal(shards, sharding, shards[0].shape());
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_THAT(Values(*assembled), ElementsAre(42, 1));
}

TEST(ShardingUtilTest, TupleShardingAppliesPerElement) {
  Sharding sharding;
  sharding.kind = Sharding::Kind::kTuple;
  sharding.tuple_elements = {Tiled({2}, {0, 1}), Sharding()};
  Literal global = Literal::MakeTuple({Iota({4}), Iota({1})});
  auto shards = SplitGlobal(global, sharding, 2);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_THAT(Values((*shards)[1].elements()[0]), ElementsAre(2, 3));
  EXPECT_THAT(Values((*shards)[1].elements()[1]), ElementsAre(0));
  auto assembled = AssembleGlobal(*shards, sharding, global.shape());
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_EQ(*assembled, global);
}

TEST(ShardingUtilTest, GlobalShapeFromShardMultipliesTiledDims) {
  auto global = GlobalShapeFromShard(Tiled({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7}),
                                     Shape(PrimitiveType::kF32, {2, 3}), 8);
  ASSERT_TRUE(global.ok()) << global.status();
  EXPECT_EQ(global->dims(), (std::vector<int64_t>{8, 6}));
}

TEST(ShardingUtilTest, TileCountMustMatchPartitions) {
  auto shards = SplitGlobal(Iota({4}), Tiled({2}, {0, 1}), 4);
  EXPECT_EQ(shards.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shards.status().message(), HasSubstr("4 partitions"));
}

TEST(ShardingUtilTest, WrongShardShapeOnAssemblyNamesThePartition) {
  std::vector<Literal> shards = {Iota({2}), Iota({3})};
  auto assembled = AssembleGlobal(shards, Tiled({2}, {0, 1}),
                                  Shape(PrimitiveType::kF32, {4}));
  EXPECT_EQ(assembled.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(assembled.status().message(), HasSubstr("partition 1"));
}

TEST(ShardingUtilTest, ManualShardingIsUnimplemented) {
  Sharding sharding;
  sharding.kind = Sharding::Kind::kManual;
  EXPECT_EQ(SplitGlobal(Iota({2}), sharding, 2).status().code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace sharding_util_test
}  // namespace causeway::hlo
