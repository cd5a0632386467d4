#include "causeway/hlo/collective_groups.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::hlo {
namespace collective_groups_test {

using ::testing::HasSubstr;
using Groups = std::vector<std::vector<int64_t>>;

TEST(CollectiveGroupModeTest, FollowsChannelAndGlobalIds) {
  Instruction all_reduce;
  all_reduce.opcode = Opcode::kAllReduce;
  EXPECT_EQ(GetCollectiveGroupMode(all_reduce),
            CollectiveGroupMode::kCrossReplica);
  all_reduce.channel_id = 3;
  EXPECT_EQ(GetCollectiveGroupMode(all_reduce),
            CollectiveGroupMode::kCrossReplicaAndPartition);
  all_reduce.use_global_device_ids = true;
  EXPECT_EQ(GetCollectiveGroupMode(all_reduce),
            CollectiveGroupMode::kFlattenedId);
}

TEST(CollectiveGroupModeTest, ChannelIdOnAnOpWithoutTheFlagMeansPartitions) {
  Instruction permute;
  permute.opcode = Opcode::kCollectivePermute;
  permute.channel_id = 3;
  EXPECT_FALSE(HasGlobalDeviceIdsFlag(permute.opcode));
  EXPECT_EQ(GetCollectiveGroupMode(permute),
            CollectiveGroupMode::kCrossPartition);
}

TEST(ExpandIotaTest, TransposesTheReshapedIota) {
  // [2,4]T(1,0): iota(8) as 2x4, transposed to 4x2.
  absl::StatusOr<std::vector<int64_t>> ids = ExpandIota({2, 4}, {1, 0});
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int64_t>{0, 4, 1, 5, 2, 6, 3, 7}));
}

TEST(ExpandIotaTest, EmptyPermutationIsTheIdentity) {
  absl::StatusOr<std::vector<int64_t>> ids = ExpandIota({2, 3}, {});
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(ExpandIotaTest, RefusesWhatIsNotAnIota) {
  EXPECT_THAT(ExpandIota({2, 2}, {0, 0}).status().message(),
              HasSubstr("not a permutation"));
  EXPECT_THAT(ExpandIota({2, 0}, {}).status().message(),
              HasSubstr("not positive"));
  EXPECT_THAT(ExpandIota({1 << 12, 1 << 12}, {}).status().message(),
              HasSubstr("more than"));
}

TEST(ExpandReplicaGroupsTest, ExpandsTransposedIota) {
  ReplicaGroups groups;
  groups.iota = ReplicaGroups::Iota{2, 4, {4, 2}, {1, 0}};
  absl::StatusOr<Groups> expanded = ExpandReplicaGroups(groups);
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  EXPECT_EQ(*expanded, (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
}

TEST(ExpandReplicaGroupsTest, ExpandsXlaDocumentedExample) {
  // [2,10]<=[4,5]T(1,0) from XLA's collective_device_list_test.
  ReplicaGroups groups;
  groups.iota = ReplicaGroups::Iota{2, 10, {4, 5}, {1, 0}};
  absl::StatusOr<Groups> expanded = ExpandReplicaGroups(groups);
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  EXPECT_EQ((*expanded)[0],
            (std::vector<int64_t>{0, 5, 10, 15, 1, 6, 11, 16, 2, 7}));
  EXPECT_EQ((*expanded)[1],
            (std::vector<int64_t>{12, 17, 3, 8, 13, 18, 4, 9, 14, 19}));
}

TEST(ExpandReplicaGroupsTest, ExplicitGroupsComeBackAsWritten) {
  ReplicaGroups groups;
  groups.groups = {{0, 3}, {1, 2}};
  groups.iota = ReplicaGroups::Iota{2, 2, {4}, {}};
  absl::StatusOr<Groups> expanded = ExpandReplicaGroups(groups);
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  EXPECT_EQ(*expanded, (Groups{{0, 3}, {1, 2}}));
}

TEST(ExpandReplicaGroupsTest, RejectsInconsistentIota) {
  ReplicaGroups groups;
  groups.iota = ReplicaGroups::Iota{2, 4, {3, 2}, {}};
  EXPECT_THAT(ExpandReplicaGroups(groups).status().message(),
              HasSubstr("do not multiply to 8"));
  groups.iota = ReplicaGroups::Iota{2, 4, {4, 2}, {0, 0}};
  EXPECT_THAT(ExpandReplicaGroups(groups).status().message(),
              HasSubstr("not a permutation"));
  groups.iota = ReplicaGroups::Iota{0, 4, {}, {}};
  EXPECT_THAT(ExpandReplicaGroups(groups).status().message(),
              HasSubstr("empty or too large"));
}

}  // namespace collective_groups_test
}  // namespace causeway::hlo
