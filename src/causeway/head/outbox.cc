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
}

void Outbox::Drain() {
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
    }
    for (Action& action : batch) std::move(action)();
  }
}

int64_t Outbox::pending() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(actions_.size());
}

}  // namespace causeway::head
