// BlockPool: recycles large host memory blocks (array buffers) instead of
// handing them back to the C library.
//
// Why: glibc serves large allocations with fresh mmap'd pages (or trims them
// off a thread's heap on free), so every new buffer of a few hundred KiB or
// more pays page faults and the kernel's zeroing, often more than the kernel
// that fills it. A device runtime keeps its memory: XLA's BFC allocator and
// CUDA's caching allocator do the same for device memory. Measured on the
// pipeline benchmark's stage programs (512x512 f32 weights), recycling cut a
// stage's time alone from 5.8 to 3.2 ms (BENCHMARKS.md).
//
// Blocks of at least kMinPooledBytes are rounded up to a size class (eight
// classes per power of two, so at most 12.5% is wasted) and, when freed, kept
// on that class's free list for the next allocation of the class, up to
// max_cached_bytes in all (beyond that they are freed). Smaller blocks go
// straight to malloc, which is fast for them. Every block is 64-byte aligned.
//
// Thread-safe: blocks may be allocated on one thread and freed on another
// (a buffer produced on a device thread and dropped by the client).
#ifndef CAUSEWAY_BASE_BLOCK_POOL_H_
#define CAUSEWAY_BASE_BLOCK_POOL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace causeway {

// A block from BlockPool::Allocate: `data` is 64-byte aligned and holds at
// least the bytes asked for. The whole struct goes back to Free.
struct Block {
  void* data = nullptr;
  void* allocation = nullptr;  // What the C library returned.
  size_t capacity = 0;         // Bytes usable at `data`.
};

struct BlockPoolStats {
  int64_t cached_bytes = 0;  // Held on free lists now.
  int64_t cached_blocks = 0;
  int64_t reused = 0;     // Allocations served from a free list.
  int64_t allocated = 0;  // Pooled-size allocations that went to malloc.
};

class BlockPool {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kMinPooledBytes = 64 << 10;

  explicit BlockPool(size_t max_cached_bytes)
      : max_cached_bytes_(max_cached_bytes) {}
  ~BlockPool();  // Frees every cached block.
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // The process-wide pool behind hlo::Literal (1 GiB of cached blocks at
  // most). Never destroyed.
  static BlockPool& Global();

  // A block of at least `bytes` bytes, uninitialised. Throws std::bad_alloc
  // when the C library has no memory.
  Block Allocate(size_t bytes);
  // Returns a block from Allocate (nullptr data is a no-op).
  void Free(Block block);

  // The capacity Allocate gives for `bytes`: the size class for pooled sizes,
  // `bytes` rounded up to the alignment otherwise.
  static size_t CapacityFor(size_t bytes);

  // Frees every cached block now.
  void Trim();
  // Keeps at most `bytes` of cached blocks from now on, freeing at once
  // what is cached beyond them (a process that wants its memory back, such
  // as the head, which holds no device buffers).
  void SetMaxCachedBytes(size_t bytes);
  BlockPoolStats Stats() const;

 private:
  mutable absl::Mutex mu_;
  size_t max_cached_bytes_ ABSL_GUARDED_BY(mu_);
  // Size class -> free blocks of that capacity (data pointers).
  std::map<size_t, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);
  BlockPoolStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway

#endif  // CAUSEWAY_BASE_BLOCK_POOL_H_
