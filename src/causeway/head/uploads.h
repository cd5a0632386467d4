// Uploads: a client's values (PutArray, PutShards) on their way into a new
// array's buffers, one PutBuffer per shard.
//
// Place runs under the session table's lock (it is a session's deferred
// work: it needs the slice's devices now): it checks what is cheap to check
// (the spec, the slice, each device's memory budget, the value's shape),
// records the array and posts the PutBuffers. Splitting a global value into
// shards copies all of it (up to the devices' memory) and so is left out of
// the lock: it happens when the first PutBuffer leaves, in the outbox, with
// no lock held. Whatever reads the array is sent after the PutBuffers
// (Dispatcher::MarkPlaced).
//
// Thread-safe (no state of its own besides each upload's).
#ifndef CAUSEWAY_HEAD_UPLOADS_H_
#define CAUSEWAY_HEAD_UPLOADS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "causeway/base/executor.h"
#include "causeway/base/future.h"
#include "causeway/head/array_table.h"
#include "causeway/head/dispatcher.h"
#include "causeway/head/membership.h"
#include "causeway/head/outbox.h"
#include "causeway/head/session.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/ir.h"
#include "causeway/transport/session_channel.h"

namespace causeway::head {

// What a client uploads: the shards of an array of `spec`.
class UploadSource {
 public:
  virtual ~UploadSource() = default;
  // "PutArray", "PutShards": names the call in errors.
  virtual const char* what() const = 0;
  // Cheap checks that the value fits: an array of `spec`, cut into `n`
  // shards of `shard_shape`. Under a lock.
  virtual absl::Status Check(const transport::ArraySpec& spec,
                             const hlo::Shape& shard_shape,
                             int64_t n) const = 0;
  // The `n` shards (copies for a global value). Called once, after Check
  // passed, with no lock held.
  virtual absl::StatusOr<std::vector<hlo::Literal>> TakeShards(
      const hlo::Sharding& sharding, int64_t n) = 0;

  // PutArray: a global value, split by the spec's sharding.
  static std::shared_ptr<UploadSource> Global(hlo::Literal value);
  // PutShards: the shards themselves, in device order.
  static std::shared_ptr<UploadSource> Shards(std::vector<hlo::Literal> shards);
};

// The shape of an array a client names must be one the runtime can hold
// (rank, size, no negative dimension). `what` names it in the error.
absl::Status ValidateArrayShape(const hlo::Shape& shape,
                                const std::string& what);

class Uploads {
 public:
  // None owned; all outlive this. `done` promises are resolved through
  // `outbox` (a check that fails) or on `callbacks` (the PutBuffers).
  Uploads(Membership* membership, Dispatcher* dispatcher, ArrayTable* arrays,
          Outbox* outbox, Executor* callbacks);

  Uploads(const Uploads&) = delete;
  Uploads& operator=(const Uploads&) = delete;

  // Under the session table's lock (see the header comment): a new array
  // `spec` of `session` from `source`. `done` hears OK once every shard is
  // on its worker, or the error; an array refused by a check is recorded
  // as an error array (later reads of it fail with the same error).
  void Place(const Session& session, const transport::ArraySpec& spec,
             std::shared_ptr<UploadSource> source,
             std::shared_ptr<Promise<>> done);

 private:
  Membership* const membership_;
  Dispatcher* const dispatcher_;
  ArrayTable* const arrays_;
  Outbox* const outbox_;
  Executor* const callbacks_;
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_UPLOADS_H_
