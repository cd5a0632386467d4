// The size of the process's futex hash table (Linux 6.16 and later).
//
// Every blocked thread waits on a futex, and the kernel finds a futex's
// waiters through a hash table of the process. Since Linux 6.16 a
// multi-threaded process gets a private table sized by the number of online
// CPUs, not by its threads: 16 buckets on a 2-CPU machine. A sim worker of
// 512 hosts has about 6,000 threads, almost all blocked, so each bucket
// chains hundreds of waiters, and every wake-up (every mutex handed over,
// every gRPC completion) walks one chain under the bucket's lock: measured,
// `futex_wake` itself was 32-38% of such a process's CPU (BENCHMARKS.md,
// "sim devices at 2,048"). The head with hundreds of worker streams has the
// same problem on a smaller scale.
#ifndef CAUSEWAY_BASE_FUTEX_HASH_H_
#define CAUSEWAY_BASE_FUTEX_HASH_H_

#include <cstdint>

#include "absl/status/status.h"

namespace causeway {

// Buckets enough for the threads of the largest process Causeway starts
// (a sim worker of 1,024 hosts has about 12,000), at about 64 bytes of
// kernel memory each.
inline constexpr int64_t kFutexHashSlots = 16384;

// Gives this process a private futex hash of `slots` buckets (a power of
// two). Call before starting threads. Unimplemented on kernels without
// PR_FUTEX_HASH (before 6.16), where the table is shared system-wide and
// sized by the kernel: nothing to do there.
absl::Status SizeFutexHash(int64_t slots);

}  // namespace causeway

#endif  // CAUSEWAY_BASE_FUTEX_HASH_H_
