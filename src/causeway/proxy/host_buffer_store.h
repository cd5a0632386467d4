// One proxy session's host buffers: the bytes of an array on their way
// between the JAX process and the cluster (the IFRT proxy protocol's
// HostBufferStore / HostBufferLookup / HostBufferDelete). The client names
// each buffer by a handle of its own; a request that names a buffer may
// arrive before the buffer's bytes do (the client uploads in the
// background), so Lookup returns a future that resolves when they arrive.
//
// Bounded: a buffer larger than `max_buffer_bytes`, or one that would take
// the store past `max_total_bytes`, is refused (ResourceExhausted); at most
// `max_waiters` lookups may wait at once. Close() fails every waiter
// (Cancelled) and refuses later stores. Thread-safe; futures resolve on the
// thread of the Store or Close that resolves them, outside the lock.
#ifndef CAUSEWAY_PROXY_HOST_BUFFER_STORE_H_
#define CAUSEWAY_PROXY_HOST_BUFFER_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/future.h"

namespace causeway::proxy {

using HostBuffer = std::shared_ptr<const std::string>;

class HostBufferStore {
 public:
  struct Limits {
    int64_t max_buffer_bytes = int64_t{16} << 30;
    int64_t max_total_bytes = int64_t{32} << 30;
    int64_t max_waiters = 1 << 16;
  };
  explicit HostBufferStore(Limits limits) : limits_(limits) {}
  ~HostBufferStore() { Close(); }

  // OK when a buffer of `bytes` may be stored now (checked before an upload
  // starts, so that a too-large one is refused before its bytes arrive).
  absl::Status CheckSize(int64_t bytes) const;
  // AlreadyExists if `handle` holds a buffer; ResourceExhausted over the
  // limits; FailedPrecondition after Close.
  absl::Status Store(uint64_t handle, HostBuffer data);
  // The buffer once stored (at once if it is). ResourceExhausted when too
  // many lookups wait already; Cancelled at Close.
  Future<HostBuffer> Lookup(uint64_t handle);
  // NotFound if `handle` holds no buffer (waiters are not affected).
  absl::Status Delete(uint64_t handle);
  void Close();

  int64_t total_bytes() const;

 private:
  struct Entry {
    HostBuffer data;                             // Null until stored.
    std::vector<Promise<HostBuffer>> waiters;  // Until stored.
  };
  const Limits limits_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  int64_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t num_waiters_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace causeway::proxy

#endif  // CAUSEWAY_PROXY_HOST_BUFFER_STORE_H_
