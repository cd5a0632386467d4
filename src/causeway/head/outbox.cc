#include "causeway/head/outbox.h"

#include <utility>

#include "causeway/base/logging.h"

namespace causeway::head {

Outbox::~Outbox() {
  {
    absl::MutexLock lock(&mu_);
    CW_CHECK(!draining_) << "Outbox destroyed while an action runs";
  }
  Drain();
}

void Outbox::Post(Action action) {
  absl::MutexLock lock(&mu_);
  actions_.push_back(std::move(action));
  posted_.fetch_add(1, std::memory_order_release);
}

void Outbox::Drain() {
  // A post that races with this check is run by its poster's own drain.
  if (posted_.load(std::memory_order_acquire) == 0) return;
  {
    absl::MutexLock lock(&mu_);
    if (draining_ || actions_.empty()) return;
    draining_ = true;
  }
  while (true) {
    std::deque<Action> batch;
    {
      absl::MutexLock lock(&mu_);
      if (actions_.empty()) {
        draining_ = false;
        return;
      }
      batch.swap(actions_);
      posted_.fetch_sub(static_cast<int64_t>(batch.size()),
                        std::memory_order_relaxed);
    }
    for (Action& action : batch) std::move(action)();
  }
}

int64_t Outbox::pending() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(actions_.size());
}

}  // namespace causeway::head
