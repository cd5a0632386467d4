#include "causeway/proxy/ifrt_convert.h"

#include <cstring>
#include <string>
#include <string_view>

#include "causeway/proxy/testing/requests.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::proxy {
namespace ifrt_convert_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

xla::ifrt::ShardingProto HloShardingOn(std::vector<int32_t> devices,
                                       const xla::OpSharding& op) {
  xla::ifrt::HloShardingProto hlo;
  for (int32_t d : devices) hlo.mutable_devices()->add_device_ids(d);
  *hlo.mutable_xla_op_sharding() = op;
  xla::ifrt::ShardingProto proto;
  proto.mutable_serialized_sharding()->set_type_name(kHloShardingTypeName);
  proto.mutable_serialized_sharding()->set_data(hlo.SerializeAsString());
  return proto;
}

xla::OpSharding Tiled(std::vector<int64_t> dims, std::vector<int64_t> iota) {
  xla::OpSharding op;
  op.set_type(xla::OpSharding::OTHER);
  for (int64_t d : dims) op.add_tile_assignment_dimensions(d);
  for (int64_t d : iota) op.add_iota_reshape_dims(d);
  return op;
}

TEST(IfrtConvertTest, IotaTiledShardingOverFourDevicesReadsAsTiled) {
  absl::StatusOr<IfrtSharding> sharding =
      ShardingFromProto(HloShardingOn({4, 5, 6, 7}, Tiled({4, 1}, {4})), 8);
  ASSERT_TRUE(sharding.ok()) << sharding.status();
  EXPECT_THAT(sharding->devices, ElementsAre(4, 5, 6, 7));
  EXPECT_EQ(sharding->sharding.kind, hlo::Sharding::Kind::kTiled);
  EXPECT_THAT(sharding->sharding.tile_dims, ElementsAre(4, 1));
  EXPECT_THAT(sharding->sharding.tile_devices, ElementsAre(0, 1, 2, 3));
}

TEST(IfrtConvertTest, TransposedIotaExpandsAsXlaDoes) {
  // [2,2]<=[2,2]T(1,0) lists devices 0,2,1,3.
  xla::OpSharding op = Tiled({2, 2}, {2, 2});
  op.add_iota_transpose_perm(1);
  op.add_iota_transpose_perm(0);
  absl::StatusOr<hlo::Sharding> sharding = ShardingFromOpSharding(op, 4);
  ASSERT_TRUE(sharding.ok()) << sharding.status();
  EXPECT_THAT(sharding->tile_devices, ElementsAre(0, 2, 1, 3));
}

TEST(IfrtConvertTest, ReplicatedLastTileOfAllDevicesIsReplicated) {
  xla::OpSharding op = Tiled({1, 4}, {4});
  op.set_replicate_on_last_tile_dim(true);
  absl::StatusOr<hlo::Sharding> sharding = ShardingFromOpSharding(op, 4);
  ASSERT_TRUE(sharding.ok()) << sharding.status();
  EXPECT_EQ(sharding->kind, hlo::Sharding::Kind::kReplicated);
}

TEST(IfrtConvertTest, TileCountThatDoesNotMatchTheDevicesIsRefused) {
  absl::StatusOr<hlo::Sharding> sharding =
      ShardingFromOpSharding(Tiled({2, 1}, {2}), 4);
  ASSERT_FALSE(sharding.ok());
  EXPECT_THAT(sharding.status().message(), HasSubstr("2 tiles over 4 devices"));
}

TEST(IfrtConvertTest, DeviceUsedTwiceInATileAssignmentIsRefused) {
  xla::OpSharding op = Tiled({2}, {});
  op.add_tile_assignment_devices(1);
  op.add_tile_assignment_devices(1);
  EXPECT_FALSE(ShardingFromOpSharding(op, 2).ok());
}

TEST(IfrtConvertTest, HugeTileAssignmentIsRefusedWithoutAllocating) {
  xla::OpSharding op = Tiled({1 << 20, 1 << 20}, {1 << 20, 1 << 20});
  EXPECT_EQ(ShardingFromOpSharding(op, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(IfrtConvertTest, ShardingNamingAnUnknownDeviceIsRefused) {
  xla::OpSharding replicated;
  absl::StatusOr<IfrtSharding> sharding =
      ShardingFromProto(HloShardingOn({0, 9}, replicated), 8);
  ASSERT_FALSE(sharding.ok());
  EXPECT_THAT(sharding.status().message(), HasSubstr("device 9"));
}

TEST(IfrtConvertTest, SingleDeviceShardingReadsAsOneReplicatedDevice) {
  absl::StatusOr<IfrtSharding> sharding =
      ShardingFromProto(testing::SingleDeviceSharding(3), 4);
  ASSERT_TRUE(sharding.ok()) << sharding.status();
  EXPECT_THAT(sharding->devices, ElementsAre(3));
  EXPECT_EQ(sharding->sharding.kind, hlo::Sharding::Kind::kReplicated);
}

TEST(IfrtConvertTest, UnknownShardingTypeIsUnimplementedAndNamed) {
  xla::ifrt::ShardingProto proto;
  proto.mutable_serialized_sharding()->set_type_name("xla::ifrt::Mystery");
  absl::StatusOr<IfrtSharding> sharding = ShardingFromProto(proto, 4);
  ASSERT_FALSE(sharding.ok());
  EXPECT_EQ(sharding.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(sharding.status().message(), HasSubstr("xla::ifrt::Mystery"));
}

TEST(IfrtConvertTest, GarbageShardingBytesAreInvalidArgument) {
  xla::ifrt::ShardingProto proto;
  proto.mutable_serialized_sharding()->set_type_name(kHloShardingTypeName);
  proto.mutable_serialized_sharding()->set_data("\xff\xff\xff");
  EXPECT_EQ(ShardingFromProto(proto, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(IfrtConvertTest, ShardingRoundTripsThroughOpSharding) {
  xla::OpSharding op = Tiled({2, 2}, {4});
  absl::StatusOr<hlo::Sharding> sharding = ShardingFromOpSharding(op, 4);
  ASSERT_TRUE(sharding.ok());
  absl::StatusOr<hlo::Sharding> again =
      ShardingFromOpSharding(ShardingToOpSharding(*sharding), 4);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *sharding);
}

TEST(IfrtConvertTest, ArrayShapeBoundsRankSignAndSize) {
  xla::ifrt::DTypeProto f32;
  f32.set_kind(xla::ifrt::DTypeProto::KIND_F32);
  xla::ifrt::ShapeProto shape;
  shape.add_dims(2);
  shape.add_dims(3);
  absl::StatusOr<hlo::Shape> ok = ArrayShapeFromProto(f32, shape);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->ByteSize(), 24);
  shape.add_dims(-1);
  EXPECT_FALSE(ArrayShapeFromProto(f32, shape).ok());
  xla::ifrt::ShapeProto huge;
  for (int i = 0; i < 8; ++i) huge.add_dims(int64_t{1} << 20);
  EXPECT_FALSE(ArrayShapeFromProto(f32, huge).ok());
  xla::ifrt::ShapeProto deep;
  for (int i = 0; i < kMaxRank + 1; ++i) deep.add_dims(1);
  EXPECT_FALSE(ArrayShapeFromProto(f32, deep).ok());
}

TEST(IfrtConvertTest, UnsupportedDTypeIsUnimplemented) {
  xla::ifrt::DTypeProto string_type;
  string_type.set_kind(xla::ifrt::DTypeProto::KIND_STRING);
  EXPECT_EQ(DTypeFromProto(string_type).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(IfrtConvertTest, DenseRowMajorStridesAreRecognised) {
  hlo::Shape shape(hlo::PrimitiveType::kF32, {2, 3});
  EXPECT_TRUE(IsDenseRowMajor(shape, {12, 4}));
  EXPECT_FALSE(IsDenseRowMajor(shape, {4, 8}));
  EXPECT_FALSE(IsDenseRowMajor(shape, {12}));
}

// A host buffer's bytes as the proxy holds them: a u8 array literal.
hlo::Literal Bytes(std::string_view bytes) {
  hlo::Literal literal = hlo::Literal::Uninitialized(hlo::Shape(
      hlo::PrimitiveType::kU8, {static_cast<int64_t>(bytes.size())}));
  if (!bytes.empty()) {
    std::memcpy(literal.mutable_untyped_data(), bytes.data(), bytes.size());
  }
  return literal;
}

TEST(IfrtConvertTest, DenseHostBufferBecomesTheArrayWithoutACopy) {
  std::vector<float> values = {1, 2, 3, 4, 5, 6};
  hlo::Literal bytes =
      Bytes(std::string_view(reinterpret_cast<const char*>(values.data()), 24));
  hlo::Shape shape(hlo::PrimitiveType::kF32, {2, 3});
  absl::StatusOr<hlo::Literal> literal =
      LiteralFromHostBuffer(bytes, shape, std::vector<int64_t>{12, 4});
  ASSERT_TRUE(literal.ok()) << literal.status();
  EXPECT_EQ(literal->shape(), shape);
  EXPECT_THAT(literal->data<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(literal->untyped_data(), bytes.untyped_data());
}

TEST(IfrtConvertTest, StridedHostBufferIsGatheredElementByElement) {
  // A 2x2 view of a 2x3 f32 array: row stride 12 bytes, column stride 4.
  std::vector<float> base = {1, 2, 3, 4, 5, 6};
  hlo::Literal bytes =
      Bytes(std::string_view(reinterpret_cast<const char*>(base.data()), 20));
  hlo::Shape shape(hlo::PrimitiveType::kF32, {2, 2});
  absl::StatusOr<hlo::Literal> literal =
      LiteralFromHostBuffer(bytes, shape, std::vector<int64_t>{12, 4});
  ASSERT_TRUE(literal.ok()) << literal.status();
  EXPECT_THAT(literal->data<float>(), ElementsAre(1, 2, 4, 5));
}

TEST(IfrtConvertTest, StridesReachingPastTheBufferAreRefused) {
  hlo::Literal bytes = Bytes(std::string(16, '\0'));
  hlo::Shape shape(hlo::PrimitiveType::kF32, {2, 2});
  EXPECT_EQ(LiteralFromHostBuffer(bytes, shape, std::vector<int64_t>{12, 4})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(LiteralFromHostBuffer(bytes, shape, std::vector<int64_t>{-8, 4}).ok());
  EXPECT_FALSE(
      LiteralFromHostBuffer(bytes, shape,
                            std::vector<int64_t>{int64_t{1} << 62, 4})
          .ok());
}

TEST(IfrtConvertTest, DenseHostBufferOfTheWrongSizeIsRefused) {
  hlo::Shape shape(hlo::PrimitiveType::kF32, {2, 2});
  EXPECT_FALSE(LiteralFromHostBuffer(Bytes(std::string(15, '\0')), shape, std::nullopt).ok());
  EXPECT_TRUE(LiteralFromHostBuffer(Bytes(std::string(16, '\0')), shape, std::nullopt).ok());
}

}  // namespace ifrt_convert_test
}  // namespace causeway::proxy
