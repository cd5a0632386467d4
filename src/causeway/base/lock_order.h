// Debian's abseil is built with its debug-mode lock-order checker on: every
// absl::Mutex acquisition and release is recorded in a process-wide graph.
// It cost about a quarter of all CPU time in the head's dispatch profile,
// a fifth of the workers', and an eighth of the IFRT proxy's (futures and
// launches create and lock many short-lived mutexes). The lock order of
// every absl::Mutex is checked instead by the ThreadSanitizer run of `make
// tsan`, whose lock-order-inversion detector sees every Mutex
// (docs/async.md).
#ifndef CAUSEWAY_BASE_LOCK_ORDER_H_
#define CAUSEWAY_BASE_LOCK_ORDER_H_

namespace causeway {

// Turns abseil's lock-order graph off for the whole process. Idempotent and
// thread-safe; called by everything that starts Causeway's threads (the
// command line, Head::Create, Worker::Create, client::Connect).
void SkipAbseilLockOrderGraph();

}  // namespace causeway

#endif  // CAUSEWAY_BASE_LOCK_ORDER_H_
