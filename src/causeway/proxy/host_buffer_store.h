// One proxy session's host buffers: the bytes of an array on their way
// between the JAX process and the cluster (the IFRT proxy protocol's
// HostBufferStore / HostBufferLookup / HostBufferDelete). The client names
// each buffer by a handle of its own; a request that names a buffer may
// arrive before the buffer's bytes do (the client uploads in the
// background), so Lookup returns a future that resolves when they arrive.
//
// A buffer's bytes live in an hlo::Literal's storage (block-pool memory,
// shared without copying): an upload is received straight into the storage
// its array is then made of, and a fetched value is stored as it came from
// the cluster, so neither is copied again inside the proxy.
//
// Bounded: a buffer larger than `max_buffer_bytes`, or one that would take
// the store past `max_total_bytes`, is refused (ResourceExhausted); at most
// `max_waiters` lookups may wait at once. Close() fails every waiter
// (Cancelled) and refuses later stores. A failure (Fail) is held until a
// lookup takes it, or Delete or Close. Thread-safe; futures resolve on the
// thread of the Store or Close that resolves them, outside the lock.
#ifndef CAUSEWAY_PROXY_HOST_BUFFER_STORE_H_
#define CAUSEWAY_PROXY_HOST_BUFFER_STORE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/future.h"
#include "causeway/hlo/literal.h"

namespace causeway::proxy {

// A host buffer: the bytes of an array literal, in its storage. Cheap to
// copy (the storage is shared).
class HostBuffer {
 public:
  // `value` is an array literal; its bytes are the buffer's.
  explicit HostBuffer(hlo::Literal value) : value_(std::move(value)) {}
  // `size` uninitialised bytes (u8[size]), to be filled through data()
  // before the buffer is shared.
  explicit HostBuffer(int64_t size);
  // A copy of `bytes`.
  static HostBuffer Copy(std::string_view bytes);

  int64_t size() const { return value_.size_bytes(); }
  std::string_view bytes() const;
  // The storage, for filling; copies it first if it is shared.
  char* data() { return static_cast<char*>(value_.mutable_untyped_data()); }
  // The bytes as an array literal (their storage, whatever its shape).
  const hlo::Literal& literal() const { return value_; }

 private:
  hlo::Literal value_;
};

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
  // The buffer `handle` will not be stored (the fetch that was to fill it
  // failed): its waiting lookups, or else the next one, get `status` (not
  // OK). Nothing changes if the buffer is stored already.
  void Fail(uint64_t handle, absl::Status status);
  // AlreadyExists if `handle` holds a buffer or a failure.
  absl::Status CheckUnused(uint64_t handle) const;
  // NotFound if `handle` holds no buffer and no failure (waiters are not
  // affected).
  absl::Status Delete(uint64_t handle);
  void Close();

  int64_t total_bytes() const;

 private:
  struct Entry {
    std::optional<HostBuffer> data;            // Until stored: none.
    std::vector<Promise<HostBuffer>> waiters;  // Until stored.
    absl::Status failure;  // Fail's, until a lookup or Delete takes it.
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
