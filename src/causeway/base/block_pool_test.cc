#include "causeway/base/block_pool.h"

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace causeway {
namespace block_pool_test {

bool Aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % BlockPool::kAlignment == 0;
}

TEST(BlockPoolTest, SmallBlocksAreAlignedAndNeverCached) {
  BlockPool pool(1 << 20);
  Block block = pool.Allocate(100);
  EXPECT_TRUE(Aligned(block.data));
  EXPECT_GE(block.capacity, 100u);
  std::memset(block.data, 1, 100);
  pool.Free(block);
  EXPECT_EQ(pool.Stats().cached_blocks, 0);
}

TEST(BlockPoolTest, AFreedLargeBlockServesTheNextAllocationOfItsClass) {
  BlockPool pool(16 << 20);
  Block first = pool.Allocate(1 << 20);
  EXPECT_TRUE(Aligned(first.data));
  std::memset(first.data, 7, 1 << 20);
  pool.Free(first);
  EXPECT_EQ(pool.Stats().cached_bytes, 1 << 20);
  // A slightly smaller size rounds up to the same class.
  Block second = pool.Allocate((1 << 20) - 1000);
  EXPECT_EQ(second.data, first.data);
  EXPECT_EQ(second.capacity, first.capacity);
  BlockPoolStats stats = pool.Stats();
  EXPECT_EQ(stats.reused, 1);
  EXPECT_EQ(stats.cached_bytes, 0);
  pool.Free(second);
}

TEST(BlockPoolTest, SizeClassesWasteAtMostAnEighth) {
  for (size_t bytes : {size_t{65536}, size_t{70001}, size_t{1000003},
                       size_t{123456789}}) {
    const size_t capacity = BlockPool::CapacityFor(bytes);
    EXPECT_GE(capacity, bytes);
    EXPECT_LE(capacity - bytes, bytes / 8) << bytes;
    EXPECT_EQ(capacity % BlockPool::kAlignment, 0u) << bytes;
  }
}

TEST(BlockPoolTest, BlocksBeyondTheCacheLimitGoBackToTheSystem) {
  BlockPool pool(1 << 20);
  Block a = pool.Allocate(1 << 20);
  Block b = pool.Allocate(1 << 20);
  pool.Free(a);
  pool.Free(b);  // Would exceed 1 MiB cached.
  BlockPoolStats stats = pool.Stats();
  EXPECT_EQ(stats.cached_blocks, 1);
  EXPECT_EQ(stats.cached_bytes, 1 << 20);
  pool.Trim();
  EXPECT_EQ(pool.Stats().cached_bytes, 0);
}

TEST(BlockPoolTest, LoweringTheLimitFreesWhatIsCachedBeyondIt) {
  BlockPool pool(4 << 20);
  Block big = pool.Allocate(2 << 20);
  Block small = pool.Allocate(1 << 20);
  pool.Free(big);
  pool.Free(small);
  ASSERT_EQ(pool.Stats().cached_bytes, 3 << 20);
  pool.SetMaxCachedBytes(1 << 20);  // The 2 MiB block goes, the 1 MiB stays.
  BlockPoolStats stats = pool.Stats();
  EXPECT_EQ(stats.cached_blocks, 1);
  EXPECT_EQ(stats.cached_bytes, 1 << 20);
  Block again = pool.Allocate(2 << 20);  // Not cached any more: malloc.
  pool.Free(again);                      // Over the new limit: freed.
  EXPECT_EQ(pool.Stats().cached_bytes, 1 << 20);
  pool.SetMaxCachedBytes(0);
  EXPECT_EQ(pool.Stats().cached_bytes, 0);
}

TEST(BlockPoolTest, BlocksAllocatedOnOneThreadAreFreedOnAnother) {
  BlockPool pool(64 << 20);
  std::vector<Block> blocks;
  std::thread producer([&] {
    for (int i = 0; i < 32; ++i) blocks.push_back(pool.Allocate(256 << 10));
  });
  producer.join();
  std::thread consumer([&] {
    for (Block& block : blocks) pool.Free(block);
  });
  consumer.join();
  EXPECT_EQ(pool.Stats().cached_blocks, 32);
  Block again = pool.Allocate(256 << 10);
  EXPECT_EQ(pool.Stats().reused, 1);
  pool.Free(again);
}

}  // namespace block_pool_test
}  // namespace causeway
