#include "causeway/runtime/island_sequencer.h"

#include <utility>

namespace causeway::runtime {

IslandSequencer::IslandSequencer(IslandId island, int64_t max_inflight)
    : island_(island), max_inflight_(max_inflight > 0 ? max_inflight : 1) {}

void IslandSequencer::AddSession(SessionId, double) {}
void IslandSequencer::RemoveSession(SessionId) {}

void IslandSequencer::Submit(SessionId session, std::vector<DeviceId>,
                             std::function<void(uint64_t)> release) {
  {
    absl::MutexLock lock(&mu_);
    waiting_.push_back(Pending{session, std::move(release)});
  }
  Drain();
}

void IslandSequencer::Finished(uint64_t) {
  {
    absl::MutexLock lock(&mu_);
    --inflight_;
  }
  Drain();
}

void IslandSequencer::Drain() {
  {
    absl::MutexLock lock(&mu_);
    if (draining_) return;  // That thread will see our work.
    draining_ = true;
  }
  while (true) {
    Pending next;
    uint64_t seq;
    {
      absl::MutexLock lock(&mu_);
      if (waiting_.empty() || inflight_ >= max_inflight_) {
        draining_ = false;
        return;
      }
      next = std::move(waiting_.front());
      waiting_.pop_front();
      seq = next_seq_++;
      ++inflight_;
    }
    next.release(seq);
  }
}

}  // namespace causeway::runtime
