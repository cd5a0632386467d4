// Fetches: reads of an array's buffers for its client. ArrayReady (every
// buffer exists and is computed), Fetch (the global value, assembled from
// one replica of each tile) and FetchShards (every buffer, replicas too:
// they may differ).
//
// Each waits until the messages that create the buffers have left
// (Dispatcher::WhenPlaced), then asks the workers that hold them; a dead
// worker's error is DATA_LOSS (Membership::CallError).
//
// Thread-safe (no state of its own). Start them under the session table's
// lock, in the session's order: they only post. Their promises are
// resolved on `callbacks`, or through the outbox.
#ifndef CAUSEWAY_HEAD_FETCHES_H_
#define CAUSEWAY_HEAD_FETCHES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/base/executor.h"
#include "causeway/base/future.h"
#include "causeway/head/array_table.h"
#include "causeway/head/dispatcher.h"
#include "causeway/head/membership.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/sharding_util.h"

namespace causeway::head {

// The global value of `placement` from the shards fetched: `fetched[k]`
// is the shard index of `values[k]`, one per primary region. A region not
// fetched (a replica) gets a stand-in of its shape, which assembling does
// not read.
absl::StatusOr<hlo::Literal> AssembleFetched(
    const ArrayPlacement& placement,
    const std::vector<hlo::ShardRegion>& regions,
    const std::vector<int64_t>& fetched,
    const std::vector<hlo::Literal>& values);

class Fetches {
 public:
  // Neither owned; both outlive this.
  Fetches(Membership* membership, Dispatcher* dispatcher, Executor* callbacks)
      : membership_(membership),
        dispatcher_(dispatcher),
        callbacks_(callbacks) {}

  Fetches(const Fetches&) = delete;
  Fetches& operator=(const Fetches&) = delete;

  void Ready(std::shared_ptr<const ArrayRecord> array,
             std::shared_ptr<Promise<>> done);
  void Fetch(std::shared_ptr<const ArrayRecord> array,
             std::shared_ptr<Promise<hlo::Literal>> done);
  void FetchShards(std::shared_ptr<const ArrayRecord> array,
                   std::shared_ptr<Promise<std::vector<hlo::Literal>>> done);

 private:
  // Fetches the buffers `which` of `array` from their workers.
  Future<std::vector<hlo::Literal>> FetchBuffers(
      const ArrayRecord& array, const std::vector<int64_t>& which);

  Membership* const membership_;
  Dispatcher* const dispatcher_;
  Executor* const callbacks_;
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_FETCHES_H_
