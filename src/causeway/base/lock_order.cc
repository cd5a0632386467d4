#include "causeway/base/lock_order.h"

#include "absl/synchronization/mutex.h"

namespace causeway {

void SkipAbseilLockOrderGraph() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace causeway
