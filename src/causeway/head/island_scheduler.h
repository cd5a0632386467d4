// The island scheduler: one per island. It gives every launch on the island a
// gang sequence number and releases launches in that order, so every device
// sees the launches that involve it in the same relative order and
// collectives cannot deadlock; between sessions it decides who goes next by
// weighted fair queuing. See docs/scheduling.md.
//
// * Gang order. Sequence numbers come from one counter, 0, 1, 2, ..., and are
//   assigned when a launch is released. Releases happen one at a time, in
//   sequence order: the integrator's `release(seq)` callback enqueues the
//   launch's ops on all its devices, and the next release starts only after
//   it returned. So on every device the ops of two launches that share it are
//   queued in the same order.
// * Per-session FIFO. A session's launches are released in the order it
//   submitted them (dataflow order).
// * Fair share. Among sessions with launches waiting, the next release is the
//   head launch with the smallest finish tag (self-clocked fair queuing):
//   tag = max(V, the session's last tag) + cost / weight, computed when the
//   launch reaches the head of its session's queue; V is the tag of the last
//   launch released. Backlogged sessions get releases (and cost) in
//   proportion to their weights; an idle session earns no credit.
// * Window (back-pressure). At most `max_in_flight` launches are released and
//   not yet completed (OnLaunchComplete), and optionally at most
//   `max_in_flight_per_device` on any device, so that when the island is
//   saturated the fair-share order decides what runs. A launch that waits for
//   a device's window holds back launches behind it in fair-share order that
//   need the same device (a gang is never starved by small launches).
//
// Thread-safe. Callbacks run outside the scheduler's lock, on the thread of a
// caller of Submit, OnLaunchComplete, SetWeight or RemoveSession: the first
// such caller that finds releasable launches and no release in progress
// releases them (possibly other sessions' launches) before it returns; calls
// that arrive meanwhile only queue their work for it. Callbacks may call back
// into the scheduler (e.g. Submit or OnLaunchComplete from `release`); they
// must not block on another thread that calls into the scheduler.
#ifndef CAUSEWAY_HEAD_ISLAND_SCHEDULER_H_
#define CAUSEWAY_HEAD_ISLAND_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/ids.h"

namespace causeway::head {

struct Launch {
  SessionId session;
  std::vector<DeviceId> devices;  // Distinct, at least one.
  // Fair-share cost: 1 per launch by default, or an estimated run time (in
  // any unit, the same for all launches of the island). Finite, positive.
  double cost = 1;
  // Called exactly once with the launch's gang sequence number, serially with
  // every other release of this scheduler and in sequence order. Required.
  absl::AnyInvocable<void(uint64_t seq)> release;
  // Called instead of `release` if the launch is dropped before it was
  // released (RemoveSession, destruction): with kCancelled. Optional.
  absl::AnyInvocable<void(absl::Status)> on_drop;
};

struct SessionSchedulingStats {
  SessionId session;
  double weight = 1;
  int64_t queued = 0;             // Submitted, not yet released.
  int64_t in_flight = 0;          // Released, not yet completed.
  int64_t launches_released = 0;  // Since the session first appeared.
  double cost_released = 0;
};

struct IslandSchedulingStats {
  uint64_t next_seq = 0;  // Sequence numbers released so far.
  int64_t queued = 0;
  int64_t in_flight = 0;
  std::vector<SessionSchedulingStats> sessions;  // By session id.
};

class IslandScheduler {
 public:
  struct Options {
    // Released-but-not-completed launches on the island (at least 1).
    int64_t max_in_flight = 64;
    // The same per device; 0 means no per-device limit.
    int64_t max_in_flight_per_device = 0;
    // Launches one session may have waiting; more are refused.
    int64_t max_queued_per_session = int64_t{1} << 20;
    // For DebugString ("island 0").
    std::string name = "island";
  };
  // Weights are bounded to keep tags well-conditioned.
  static constexpr double kMinWeight = 1e-6;
  static constexpr double kMaxWeight = 1e6;

  explicit IslandScheduler(Options options);
  // Drops every queued launch (on_drop(kCancelled)). Must not race with other
  // calls.
  ~IslandScheduler();

  IslandScheduler(const IslandScheduler&) = delete;
  IslandScheduler& operator=(const IslandScheduler&) = delete;

  // Queues a launch (releasing it at once if the window allows and it is
  // next in fair-share order). InvalidArgument for a malformed launch and
  // ResourceExhausted when the session's queue is full; then neither
  // callback is called.
  absl::Status Submit(Launch launch);

  // A released launch finished on all its devices: its window slot is free.
  // NotFound for a sequence number that is not in flight.
  absl::Status OnLaunchComplete(uint64_t seq);

  // Sets a session's fair-share weight (default 1); it applies from the
  // session's next head launch on. InvalidArgument outside
  // [kMinWeight, kMaxWeight] or not finite.
  absl::Status SetWeight(SessionId session, double weight);

  // Forgets a session: drops its queued launches (their on_drop is called
  // with kCancelled, their release never) and returns how many. Its launches
  // in flight still complete normally.
  int64_t RemoveSession(SessionId session);

  IslandSchedulingStats Stats() const;
  std::string DebugString() const;

 private:
  struct Queued {
    Launch launch;
    uint64_t arrival = 0;
  };
  struct Session {
    double weight = 1;
    double last_tag = 0;  // Finish tag of its last released launch.
    std::deque<Queued> queue;
    double head_tag = 0;  // Valid while the queue is not empty.
    int64_t in_flight = 0;
    int64_t launches_released = 0;
    double cost_released = 0;
  };
  struct InFlight {
    SessionId session;
    std::vector<DeviceId> devices;
  };
  // (finish tag, arrival, session): the fair-share order of head launches.
  using HeadKey = std::tuple<double, uint64_t, SessionId>;

  absl::Status ValidateLaunch(const Launch& launch) const;
  // Tags the head of `session`'s queue and files it in heads_.
  void FileHeadLocked(SessionId id, Session& session)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DeviceWindowFullLocked(const std::vector<DeviceId>& devices) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Picks the next launch to release, assigns its sequence number and moves
  // it in flight. False if none may go now.
  bool PickLocked(Launch& launch, uint64_t& seq)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases launches until none may go, unless another thread is doing so.
  void ReleaseReady() ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;

  mutable absl::Mutex mu_;
  std::map<SessionId, Session> sessions_ ABSL_GUARDED_BY(mu_);
  std::set<HeadKey> heads_ ABSL_GUARDED_BY(mu_);
  double virtual_time_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_arrival_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, InFlight> in_flight_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<DeviceId, int64_t> device_in_flight_ ABSL_GUARDED_BY(mu_);
  // True while one thread runs the release loop (the only place that calls
  // `release`), which keeps releases serial and in sequence order.
  bool releasing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_ISLAND_SCHEDULER_H_
