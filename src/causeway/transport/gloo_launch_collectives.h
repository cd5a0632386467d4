// The LaunchCollectives of one worker process: a launch whose devices all
// live in this process meets in memory (InProcessLaunchCollectives); a
// launch that spans processes runs its collectives through Gloo, every
// device of it one rank (GlooCollectives; the protocol is in
// docs/collectives.md), but for its groups that lie within this process,
// which meet in memory (one exec::InProcessCollectives per launch, shared by
// its participants here).
#ifndef CAUSEWAY_TRANSPORT_GLOO_LAUNCH_COLLECTIVES_H_
#define CAUSEWAY_TRANSPORT_GLOO_LAUNCH_COLLECTIVES_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/ids.h"
#include "causeway/transport/gloo_collectives.h"
#include "causeway/transport/key_value_store.h"
#include "causeway/transport/launch_collectives.h"

namespace causeway::transport {

// Thread-safe. Cancel and Abort never block (the Gloo side publishes and
// closes on its own thread).
class GlooLaunchCollectives final : public LaunchCollectives {
 public:
  struct Options {
    KeyValueStore* store = nullptr;  // Not owned; required; outlives this.
    // The address this process's Gloo sockets listen on, as its peers
    // reach it (the host of the worker's data-plane address).
    std::string hostname = "127.0.0.1";
    // The devices of this process.
    std::vector<DeviceId> local_devices;
    // Bounds every collective and every rendezvous.
    absl::Duration timeout = absl::Seconds(60);
    // The cluster's token (GlooCommunicators::Options::auth_token).
    std::string auth_token = "";
    // With a token, every pair is sealed (GlooMeshOptions::encrypt).
    bool encrypt = true;
  };

  static absl::StatusOr<std::unique_ptr<GlooLaunchCollectives>> Create(
      Options options);
  ~GlooLaunchCollectives() override;

  exec::Collectives* Join(const LaunchMember& member) override;
  void Leave(const LaunchMember& member) override;
  void Cancel(const LaunchMember& member, absl::Status status) override;
  void Abort(const LaunchMember& member, absl::Status status) override;

  // Launches with live collectives here, in memory or through Gloo (for
  // tests: none once all are done).
  int64_t NumLive() const;
  GlooCommunicators& communicators() { return *communicators_; }

 private:
  using ParticipantKey = std::tuple<IslandId, uint64_t, int64_t>;

  GlooLaunchCollectives(Options options,
                        std::unique_ptr<GlooCommunicators> communicators);
  bool InProcess(const LaunchMember& member) const;
  // A participant for `member`, or null when the member does not name its
  // own device among the launch's.
  std::unique_ptr<GlooCollectives> MakeParticipant(const LaunchMember& member)
      ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  const std::set<DeviceId> local_;
  std::unique_ptr<GlooCommunicators> communicators_;
  InProcessLaunchCollectives in_process_;

  mutable absl::Mutex mu_;
  std::map<ParticipantKey, std::unique_ptr<GlooCollectives>> participants_
      ABSL_GUARDED_BY(mu_);
  // An Abort that found no participant yet (it came between the device
  // taking the launch and joining it), by device: the Join of that launch
  // starts cancelled. One per device at most.
  std::map<DeviceId, std::pair<uint64_t, absl::Status>> early_aborts_
      ABSL_GUARDED_BY(mu_);
  // The newest epoch each device has joined a launch of: a launch of an
  // older one (released out of order around a bump) starts cancelled.
  std::map<DeviceId, uint64_t> newest_epochs_ ABSL_GUARDED_BY(mu_);
  // The in-memory collectives of a spanning launch's groups that lie in
  // this process, kept until each of its partitions here has left or
  // cancelled (so that a partition cancelled before its peers join still
  // fails them).
  struct LocalGroups {
    std::shared_ptr<exec::InProcessCollectives> collectives;
    int64_t partitions = 0;   // The launch's partitions in this process.
    std::set<int64_t> gone;   // Those that left or cancelled.
  };
  // Counts `member` as gone from its launch's local groups.
  void DepartLocalGroupsLocked(const LaunchMember& member)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::map<std::pair<IslandId, uint64_t>, LocalGroups> local_groups_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_GLOO_LAUNCH_COLLECTIVES_H_
