// Gang order for one island, as the dispatcher uses it: every launch gets
// the island's next sequence number and is released (handed to `release`)
// strictly in sequence order, at most `max_inflight` launches at a time
// (Finished(seq) makes room). Releases happen on the thread of the Submit
// or Finished call that made them possible, never under the sequencer's
// lock, one at a time and in order even when several threads call in.
//
// This is the head's adapter; the weighted fair share between sessions
// belongs to the island scheduler (island_scheduler.h) and plugs in here.
#ifndef CAUSEWAY_RUNTIME_ISLAND_SEQUENCER_H_
#define CAUSEWAY_RUNTIME_ISLAND_SEQUENCER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/ids.h"

namespace causeway::runtime {

class IslandSequencer {
 public:
  IslandSequencer(IslandId island, int64_t max_inflight);

  void AddSession(SessionId session, double weight);
  void RemoveSession(SessionId session);

  // Queues a launch of `session` on `devices`; `release(seq)` runs when its
  // turn comes (see the header comment).
  void Submit(SessionId session, std::vector<DeviceId> devices,
              std::function<void(uint64_t)> release);
  // The launch `seq` finished on every device.
  void Finished(uint64_t seq);

  IslandId island() const { return island_; }

 private:
  struct Pending {
    SessionId session;
    std::function<void(uint64_t)> release;
  };
  // Releases whatever may go, in order, unless another thread is already
  // doing so (it then picks up our work too).
  void Drain();

  const IslandId island_;
  const int64_t max_inflight_;
  absl::Mutex mu_;
  std::deque<Pending> waiting_ ABSL_GUARDED_BY(mu_);
  int64_t inflight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace causeway::runtime

#endif  // CAUSEWAY_RUNTIME_ISLAND_SEQUENCER_H_
