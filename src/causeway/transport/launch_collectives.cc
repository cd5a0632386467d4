#include "causeway/transport/launch_collectives.h"

#include <utility>

#include "causeway/base/logging.h"

namespace causeway::transport {

InProcessLaunchCollectives::Launch& InProcessLaunchCollectives::GetLocked(
    uint64_t seq, int64_t participants) {
  Launch& launch = launches_[seq];
  if (launch.collectives == nullptr) {
    launch.collectives = std::make_unique<exec::InProcessCollectives>(
        exec::InProcessCollectives::Options{.timeout = timeout_});
    launch.remaining = participants;
  }
  return launch;
}

void InProcessLaunchCollectives::DepartLocked(uint64_t seq) {
  auto it = launches_.find(seq);
  if (it == launches_.end()) return;
  if (--it->second.remaining <= 0) launches_.erase(it);
}

exec::Collectives* InProcessLaunchCollectives::Join(uint64_t seq,
                                                    int64_t participants) {
  absl::MutexLock lock(&mu_);
  return GetLocked(seq, participants).collectives.get();
}

void InProcessLaunchCollectives::Leave(uint64_t seq) {
  absl::MutexLock lock(&mu_);
  DepartLocked(seq);
}

void InProcessLaunchCollectives::Cancel(uint64_t seq, int64_t participants,
                                        absl::Status status) {
  CW_CHECK(!status.ok());
  absl::MutexLock lock(&mu_);
  // Cancelling an InProcessCollectives only sets its status and wakes its
  // waiters; it does not call back into us.
  GetLocked(seq, participants).collectives->Cancel(std::move(status));
  DepartLocked(seq);
}

void InProcessLaunchCollectives::Abort(uint64_t seq, absl::Status status) {
  CW_CHECK(!status.ok());
  absl::MutexLock lock(&mu_);
  auto it = launches_.find(seq);
  if (it != launches_.end()) it->second.collectives->Cancel(std::move(status));
}

int64_t InProcessLaunchCollectives::NumLive() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(launches_.size());
}

}  // namespace causeway::transport
