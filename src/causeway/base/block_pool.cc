#include "causeway/base/block_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

namespace causeway {
namespace {

constexpr size_t kClassesPerPowerOfTwo = 8;

size_t RoundUp(size_t bytes, size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

// Frees a pooled-size block and gives its pages back to the kernel first:
// allocators keep freed large blocks mapped (tcmalloc in its page heap), so
// without this a head that passed a 1 GiB upload on keeps a gigabyte
// resident. Its contents are garbage once freed, and the page-aligned
// interior holds none of the allocator's own data (that is written by free,
// after this, or lives outside the block).
// (Blocks under 1 MiB are left to the allocator: the system call would cost
// more than their pages.)
void ReleaseAndFree(void* allocation, size_t capacity) {
  if (capacity < (size_t{1} << 20)) {
    std::free(allocation);
    return;
  }
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(allocation);
  const uintptr_t first = (start + page - 1) & ~(page - 1);
  const uintptr_t last = (start + capacity) & ~(page - 1);
  if (last > first) {
    madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  }
  std::free(allocation);
}

}  // namespace

BlockPool::~BlockPool() { Trim(); }

BlockPool& BlockPool::Global() {
  static BlockPool* pool = new BlockPool(size_t{1} << 30);
  return *pool;
}

size_t BlockPool::CapacityFor(size_t bytes) {
  if (bytes < kMinPooledBytes) return RoundUp(bytes, kAlignment);
  // The power of two at or below `bytes`, split in eight steps.
  const size_t step =
      std::bit_floor(bytes) / kClassesPerPowerOfTwo;  // >= 8 KiB here.
  return RoundUp(bytes, step);
}

Block BlockPool::Allocate(size_t bytes) {
  Block block;
  block.capacity = CapacityFor(bytes);
  if (bytes < kMinPooledBytes) {
    // malloc, aligned by hand: glibc's aligned allocation is several times
    // slower than malloc for the small arrays an evaluator makes by the
    // thousand.
    block.allocation = std::malloc(block.capacity + kAlignment - 1);
    if (block.allocation == nullptr) throw std::bad_alloc();
    const uintptr_t address = reinterpret_cast<uintptr_t>(block.allocation);
    block.data = reinterpret_cast<void*>((address + kAlignment - 1) &
                                         ~uintptr_t{kAlignment - 1});
    return block;
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = free_.find(block.capacity);
    if (it != free_.end() && !it->second.empty()) {
      block.data = block.allocation = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= static_cast<int64_t>(block.capacity);
      --stats_.cached_blocks;
      ++stats_.reused;
      return block;
    }
    ++stats_.allocated;
  }
  block.allocation = std::aligned_alloc(kAlignment, block.capacity);
  if (block.allocation == nullptr) throw std::bad_alloc();
  block.data = block.allocation;
  return block;
}

void BlockPool::Free(Block block) {
  if (block.allocation == nullptr) return;
  if (block.capacity < kMinPooledBytes) {
    std::free(block.allocation);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (stats_.cached_bytes + static_cast<int64_t>(block.capacity) <=
        static_cast<int64_t>(max_cached_bytes_)) {
      free_[block.capacity].push_back(block.allocation);
      stats_.cached_bytes += static_cast<int64_t>(block.capacity);
      ++stats_.cached_blocks;
      return;
    }
  }
  // Outside the lock, which every allocation of the process takes: giving
  // a large block's pages back is a system call over all of them.
  ReleaseAndFree(block.allocation, block.capacity);
}

void BlockPool::Trim() {
  std::map<size_t, std::vector<void*>> blocks;
  {
    absl::MutexLock lock(&mu_);
    blocks.swap(free_);
    stats_.cached_bytes = 0;
    stats_.cached_blocks = 0;
  }
  for (auto& [capacity, list] : blocks) {
    for (void* allocation : list) ReleaseAndFree(allocation, capacity);
  }
}

void BlockPool::SetMaxCachedBytes(size_t bytes) {
  std::vector<std::pair<void*, size_t>> excess;
  {
    absl::MutexLock lock(&mu_);
    max_cached_bytes_ = bytes;
    // The largest blocks go first: fewest frees for the most bytes.
    for (auto it = free_.rbegin();
         it != free_.rend() &&
         stats_.cached_bytes > static_cast<int64_t>(max_cached_bytes_);
         ++it) {
      std::vector<void*>& list = it->second;
      while (!list.empty() &&
             stats_.cached_bytes > static_cast<int64_t>(max_cached_bytes_)) {
        excess.emplace_back(list.back(), it->first);
        list.pop_back();
        stats_.cached_bytes -= static_cast<int64_t>(it->first);
        --stats_.cached_blocks;
      }
    }
  }
  for (auto [allocation, capacity] : excess) {
    ReleaseAndFree(allocation, capacity);
  }
}

BlockPoolStats BlockPool::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace causeway
