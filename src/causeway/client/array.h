// An Array: a logical tensor (global shape, dtype) sharded over a slice. It
// is a future: it exists, and can be passed to Execute, Copy and program
// traces, before its data does. Errors live inside arrays: an array whose
// producer failed (or whose input failed, transitively) holds that error,
// and Ready() / ToHost() return it, naming the program and the op.
//
// A copyable handle to shared state. When the last handle is dropped the
// array is deleted on the devices (work already queued that reads it still
// runs). Thread-safe.
#ifndef CAUSEWAY_CLIENT_ARRAY_H_
#define CAUSEWAY_CLIENT_ARRAY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "causeway/base/future.h"
#include "causeway/base/ids.h"
#include "causeway/client/sharding.h"
#include "causeway/client/slice.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/shape.h"

namespace causeway::client {

namespace internal {
struct ArrayState;
}  // namespace internal

class Array {
 public:
  // Invalid: its accessors give empty values (handle 0, an empty shape),
  // Ready/ToHost/ShardsToHost fail with InvalidArgument, Delete does
  // nothing, and Execute or Copy refuses it.
  Array() = default;
  explicit Array(std::shared_ptr<internal::ArrayState> state);

  bool valid() const { return state_ != nullptr; }
  ArrayHandle handle() const;
  // The global (logical) shape.
  const hlo::Shape& shape() const;
  hlo::PrimitiveType dtype() const { return shape().type(); }
  const Sharding& sharding() const;
  const Slice& slice() const;

  // Resolves when every shard of the array holds its data, or with the
  // array's error. Never blocks.
  Future<> Ready() const;
  // The global value, assembled from the shards on the host.
  Future<hlo::Literal> ToHost() const;
  // Every device's buffer, in the order of the slice's devices, replicas
  // too (JAX's addressable_shards): what each partition of the program that
  // produced the array computed.
  Future<std::vector<hlo::Literal>> ShardsToHost() const;
  // Frees the array's buffers once queued work that reads it is done.
  // Later uses of this array fail with FailedPrecondition. Idempotent.
  void Delete() const;
  bool IsDeleted() const;

  // "array 12 f32[2]{devices=[2]<=[2]} on slice 3".
  std::string ToString() const;

  const std::shared_ptr<internal::ArrayState>& state() const { return state_; }

 private:
  std::shared_ptr<internal::ArrayState> state_;
};

}  // namespace causeway::client

#endif  // CAUSEWAY_CLIENT_ARRAY_H_
