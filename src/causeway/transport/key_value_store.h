// A small key-value store for rendezvous between processes: how the Gloo
// ranks of a collective group find each other's addresses (see
// docs/collectives.md). The head holds the store; a worker reaches it over
// its stream to the head; tests use InProcessKeyValueStore.
//
// Keys are '/'-separated paths ("gloo/isl/0/ep/3/grp/1,4/0"), so that
// everything one user wrote can be deleted by prefix. Values are bytes.
//
// Every call is asynchronous: it returns a future at once and never blocks
// the caller, so an implementation over a stream sends one request and
// resolves the future when the reply (matched by id) arrives. Futures
// resolve on a thread the implementation chooses (its reply thread, or the
// caller's when the answer is at hand): continuations given an
// InlineExecutor must not block. An implementation that shuts down, or loses
// its connection, resolves every pending future with an error (never leaves
// one waiting). Implementations are thread-safe and never run a
// continuation while holding their own lock.
//
// Ordering: a Set whose future has resolved OK is visible to every Get
// issued afterwards, from any process (the store is linearizable).
#ifndef CAUSEWAY_TRANSPORT_KEY_VALUE_STORE_H_
#define CAUSEWAY_TRANSPORT_KEY_VALUE_STORE_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "causeway/base/future.h"

namespace causeway::transport {

class KeyValueStore {
 public:
  // Bounds every implementation enforces (InvalidArgument beyond them).
  static constexpr int64_t kMaxKeyBytes = 1024;
  static constexpr int64_t kMaxValueBytes = 1 << 20;

  virtual ~KeyValueStore() = default;

  // Stores `value` under `key`, replacing an earlier value. Resolves once
  // the store holds it.
  virtual Future<> Set(std::string key, std::string value) = 0;

  // The value of `key` as soon as it is set. DeadlineExceeded (naming the
  // key) if it is not set by `deadline`; a deadline that has passed makes
  // this a plain lookup.
  virtual Future<std::string> Get(std::string key, absl::Time deadline) = 0;

  // Removes every key that starts with `prefix`. Gets that wait for such a
  // key keep waiting (for a later Set, or their deadline).
  virtual Future<> DeletePrefix(std::string prefix) = 0;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_KEY_VALUE_STORE_H_
