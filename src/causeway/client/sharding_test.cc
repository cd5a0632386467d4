#include "causeway/client/sharding.h"

#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::client {
namespace sharding_test {

using ::testing::HasSubstr;
using hlo::PrimitiveType;
using hlo::Shape;

Mesh Mesh2x2() { return *Mesh::Create({2, 2}, {"x", "y"}); }

TEST(MeshTest, DefaultAxisNamesAreXYZ) {
  absl::StatusOr<Mesh> mesh = Mesh::Create({2, 3, 1});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->axis_names(), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(mesh->num_devices(), 6);
  EXPECT_EQ(mesh->ToString(), "mesh[x=2,y=3,z=1]");
}

TEST(MeshTest, RefusesRepeatedAxisNamesAndBadSizes) {
  EXPECT_THAT(Mesh::Create({2, 2}, {"x", "x"}).status().message(),
              HasSubstr("used twice"));
  EXPECT_FALSE(Mesh::Create({2, 0}).ok());
  EXPECT_FALSE(Mesh::Create({2, 2}, {"x"}).ok());
}

TEST(ShardingTest, TiledOverFirstMeshAxisReplicatesOverTheOther) {
  absl::StatusOr<Sharding> s = Sharding::Tiled(Mesh2x2(), {"x", std::nullopt});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ToString(), "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
  EXPECT_EQ(s->hlo().tile_devices, (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(ShardingTest, TiledOverSecondMeshAxisTransposesTheDevices) {
  absl::StatusOr<Sharding> s = Sharding::Tiled(Mesh2x2(), {"y", std::nullopt});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ToString(),
            "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
  EXPECT_EQ(s->hlo().tile_devices, (std::vector<int64_t>{0, 2, 1, 3}));
}

TEST(ShardingTest, TiledOverBothAxesInEitherOrder) {
  EXPECT_EQ(Sharding::Tiled(Mesh2x2(), {"x", "y"})->ToString(),
            "{devices=[2,2]<=[4]}");
  EXPECT_EQ(Sharding::Tiled(Mesh2x2(), {"y", "x"})->ToString(),
            "{devices=[2,2]<=[2,2]T(1,0)}");
}

TEST(ShardingTest, TiledOverNoAxisIsReplicated) {
  absl::StatusOr<Sharding> s =
      Sharding::Tiled(Mesh2x2(), {std::nullopt, std::nullopt});
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->IsReplicated());
  EXPECT_EQ(s->ToString(), "{replicated}");
}

TEST(ShardingTest, TiledRefusesUnknownAndRepeatedAxes) {
  EXPECT_EQ(Sharding::Tiled(Mesh2x2(), {"q"}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(Sharding::Tiled(Mesh2x2(), {"x", "x"}).status().message(),
              HasSubstr("shards two dimensions"));
}

TEST(ShardingTest, ParsePrintsBackAsXlaWritesIt) {
  for (const char* text :
       {"{devices=[2,1]<=[2]}", "{replicated}", "{maximal device=1}",
        "{devices=[2,2]0,2,1,3}",
        "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"}) {
    absl::StatusOr<Sharding> s = Sharding::Parse(text);
    ASSERT_TRUE(s.ok()) << text << ": " << s.status();
    EXPECT_EQ(s->ToString(), text);
  }
}

TEST(ShardingTest, ParseRefusesTupleAndManualShardings) {
  EXPECT_EQ(Sharding::Parse("{{replicated}, {replicated}}").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Sharding::Parse("{manual}").status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(Sharding::Parse("{devices=[2").ok());
}

TEST(ShardingTest, TiledByDimsLaysTilesOnDevicesInOrder) {
  absl::StatusOr<Sharding> s = Sharding::TiledByDims({2, 1});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->ToString(), "{devices=[2,1]<=[2]}");
  absl::StatusOr<Shape> shard =
      s->ShardShape(Shape(PrimitiveType::kF32, {4, 6}), 2);
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->ToString(false), "f32[2,6]");
}

TEST(ShardingTest, ValidateRefusesTilesThatDoNotDivideTheArrayEvenly) {
  const hlo::Shape odd(hlo::PrimitiveType::kF32, {3, 4});
  absl::Status status = Sharding::TiledByDims({2, 1})->Validate(odd, 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("cuts dimension 0 of f32[3,4] into 2 tiles, which "
                        "does not divide its size 3 evenly"));
  EXPECT_TRUE(Sharding::TiledByDims({1, 2})->Validate(odd, 2).ok());
}

TEST(ShardingTest, ValidateRefusesShardingsThatDoNotFit) {
  Shape vec(PrimitiveType::kF32, {4});
  EXPECT_FALSE(Sharding::TiledByDims({2})->Validate(vec, 4).ok());
  EXPECT_FALSE(Sharding::TiledByDims({2, 1})->Validate(vec, 2).ok());
  EXPECT_THAT(Sharding::SingleDevice(3).Validate(vec, 2).message(),
              HasSubstr("names device 3"));
  EXPECT_TRUE(Sharding::Replicated().Validate(vec, 5).ok());
}

TEST(ShardingTest, EquivalenceComparesWhereDataLivesNotHowItIsWritten) {
  Shape vec(PrimitiveType::kF32, {4});
  Sharding iota = *Sharding::Parse("{devices=[2]<=[2]}");
  Sharding listed = *Sharding::Parse("{devices=[2]0,1}");
  Sharding swapped = *Sharding::Parse("{devices=[2]1,0}");
  EXPECT_TRUE(iota.IsEquivalent(listed, vec, 2));
  EXPECT_FALSE(iota.IsEquivalent(swapped, vec, 2));
  EXPECT_FALSE(iota.IsEquivalent(Sharding::Replicated(), vec, 2));
  EXPECT_FALSE(
      Sharding::SingleDevice(0).IsEquivalent(Sharding::SingleDevice(1), vec, 2));
}

}  // namespace sharding_test
}  // namespace causeway::client
