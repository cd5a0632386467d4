// How the devices of one launch (one execution of a program on its devices)
// meet for their collectives. Every launch gets its own rendezvous, named by
// its island and gang sequence number, so concurrent launches on one island
// never mix and one failing launch cancels only its own peers.
//
// Every participant of a launch calls Join before running and Leave after;
// a participant that will not run (its inputs failed, a peer's host died)
// calls Cancel instead, which fails the collectives of those that do run,
// now or later, so nobody waits for it. Abort fails a running launch's
// collectives (its session closed, a peer's host died, its own program
// failed). Each call names the caller as a LaunchMember. The rendezvous is
// forgotten once every participant has left or cancelled.
//
// Implementations: InProcessLaunchCollectives (one per island, shared by its
// hosts in embedded mode) and GlooLaunchCollectives (one per worker process:
// in memory when every device of a launch is in the process, through Gloo
// when the launch spans processes; gloo_launch_collectives.h).
#ifndef CAUSEWAY_TRANSPORT_LAUNCH_COLLECTIVES_H_
#define CAUSEWAY_TRANSPORT_LAUNCH_COLLECTIVES_H_

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/ids.h"
#include "causeway/exec/collectives.h"
#include "causeway/exec/in_process_collectives.h"

namespace causeway::transport {

// One participant of a launch, as the launch's collectives know it.
struct LaunchMember {
  IslandId island;
  // The island's membership epoch when the launch was dispatched.
  uint64_t epoch = 0;
  uint64_t seq = 0;  // Gang sequence number on `island`.
  int64_t partition = 0;  // The caller's.
  // Every device of the launch, in partition order (devices[partition] is
  // the caller's).
  std::vector<DeviceId> devices;
};

class LaunchCollectives {
 public:
  virtual ~LaunchCollectives() = default;
  // The collectives of `member`'s launch. The pointer stays valid until
  // this participant's Leave.
  virtual exec::Collectives* Join(const LaunchMember& member) = 0;
  virtual void Leave(const LaunchMember& member) = 0;
  // Fails the launch's collectives (waiting and later calls) with `status`
  // (not OK) and counts the caller as gone.
  virtual void Cancel(const LaunchMember& member, absl::Status status) = 0;
  // Fails the launch's collectives with `status` without counting anyone
  // as gone (the caller is running, or has run). Never blocks: callers may
  // hold their own locks.
  virtual void Abort(const LaunchMember& member, absl::Status status) = 0;
};

// Thread-safe.
class InProcessLaunchCollectives final : public LaunchCollectives {
 public:
  explicit InProcessLaunchCollectives(
      absl::Duration timeout = absl::Seconds(60))
      : timeout_(timeout) {}

  exec::Collectives* Join(const LaunchMember& member) override;
  void Leave(const LaunchMember& member) override;
  void Cancel(const LaunchMember& member, absl::Status status) override;
  void Abort(const LaunchMember& member, absl::Status status) override;

  // Launches with a live rendezvous (for tests: none once all are done).
  int64_t NumLive() const;

 private:
  struct Launch {
    std::unique_ptr<exec::InProcessCollectives> collectives;
    int64_t remaining = 0;  // Participants that have not left.
  };
  Launch& GetLocked(uint64_t seq, int64_t participants)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DepartLocked(uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration timeout_;
  mutable absl::Mutex mu_;
  std::unordered_map<uint64_t, Launch> launches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_LAUNCH_COLLECTIVES_H_
