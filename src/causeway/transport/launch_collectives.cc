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

exec::Collectives* InProcessLaunchCollectives::Join(
    const LaunchMember& member) {
  absl::MutexLock lock(&mu_);
  return GetLocked(member.seq, static_cast<int64_t>(member.devices.size()))
      .collectives.get();
}

void InProcessLaunchCollectives::Leave(const LaunchMember& member) {
  absl::MutexLock lock(&mu_);
  DepartLocked(member.seq);
}

void InProcessLaunchCollectives::Cancel(const LaunchMember& member,
                                        absl::Status status) {
  CW_CHECK(!status.ok());
  absl::MutexLock lock(&mu_);
  // Cancelling an InProcessCollectives only sets its status and wakes its
  // waiters; it does not call back into us.
  GetLocked(member.seq, static_cast<int64_t>(member.devices.size()))
      .collectives->Cancel(std::move(status));
  DepartLocked(member.seq);
}

void InProcessLaunchCollectives::Abort(const LaunchMember& member,
                                       absl::Status status) {
  CW_CHECK(!status.ok());
  absl::MutexLock lock(&mu_);
  auto it = launches_.find(member.seq);
  if (it != launches_.end()) it->second.collectives->Cancel(std::move(status));
}

int64_t InProcessLaunchCollectives::NumLive() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(launches_.size());
}

}  // namespace causeway::transport
