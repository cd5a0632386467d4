// The dispatcher: takes launches and transfers the head has planned, runs
// them through their island's scheduler (gang order, fair share, window)
// and sends the messages out, ONE per worker per dispatched graph. See
// docs/dispatch.md.
//
// It also follows every array's buffers on their way to the workers
// (ArrayBuffers): whether the messages that create them have left, which
// launches still need them, which sends wait for them, and when they can
// be handed back.
//
// Nothing here calls a channel or a callback under a lock: messages and
// callbacks are posted to the head's Outbox, in the order decided, and run
// when the outbox is drained. A batch scope gathers every message produced
// while it is open (on any thread) into one message per worker.
//
// Thread-safe. Lock order: the head's session lock, then mu_, then
// inflight_mu_; the island schedulers are called with neither of the
// dispatcher's locks held (their release callback takes mu_).
#ifndef CAUSEWAY_HEAD_DISPATCHER_H_
#define CAUSEWAY_HEAD_DISPATCHER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/ids.h"
#include "causeway/head/island_scheduler.h"
#include "causeway/head/membership.h"
#include "causeway/head/outbox.h"
#include "causeway/head/transfer_plan.h"
#include "causeway/trace/events.h"
#include "causeway/transport/control_channel.h"
#include "causeway/transport/topology.h"

namespace causeway::head {

// Where an array's buffers are on their way to the workers. `buffers` is
// fixed at creation; everything else is guarded by the dispatcher's lock.
struct ArrayBuffers {
  // Shard i: its buffer and the host it is on.
  std::vector<std::pair<HostId, transport::DeviceBuffer>> buffers;
  // The messages that create the buffers are sent (or in the open batch).
  bool placed = false;
  bool deleted = false;
  bool handed_back = false;
  // Launches planned, not yet sent, that read the buffers.
  int64_t pending_uses = 0;
  // Sends from this array planned before it was placed.
  std::vector<std::pair<HostId, transport::SendSpec>> pending_sends;
  // Waiters for the buffers to exist (OK) or for the news that they never
  // will (`dropped`).
  std::vector<absl::AnyInvocable<void(absl::Status) &&>> on_placed;
  absl::Status dropped;
};

// Buffers named `internal` for shard i on placement.devices[i].
std::shared_ptr<ArrayBuffers> NewArrayBuffers(
    ArrayHandle internal, const ArrayPlacement& placement,
    const transport::Topology& topology);

// A launch ready to go once its island's scheduler gives it a sequence
// number (launch_plan.h builds it).
struct PreparedLaunch {
  IslandId island;
  SessionId session;
  std::string program;
  std::string session_name;
  std::vector<DeviceId> devices;
  std::set<HostId> hosts;
  // One op per device, addressed to its host.
  std::vector<std::pair<HostId, transport::LaunchOp>> ops;
  // Sends that fill the staging inputs, grouped by source array.
  std::vector<std::pair<std::shared_ptr<ArrayBuffers>,
                        std::vector<std::pair<HostId, transport::SendSpec>>>>
      source_sends;
  // Arrays it reads and the arrays it fills.
  std::vector<std::shared_ptr<ArrayBuffers>> used;
  std::vector<std::shared_ptr<ArrayBuffers>> outputs;
};

class Dispatcher {
 public:
  struct Options {
    // Launches released and not finished per island before its scheduler
    // holds back more (its fair-share order then decides).
    int64_t max_inflight_launches_per_island = 64;
    trace::EventSink* events = nullptr;  // Required; not owned.
    // Called once for every (island, epoch) that had launches, when the
    // island has moved to a later epoch and no launch of that epoch is in
    // flight any more (what the collectives keep for that epoch can go).
    // Through the outbox, no lock held. Optional.
    std::function<void(IslandId island, uint64_t epoch)> epoch_retired;
  };

  // `membership` says where each host is; `outbox` carries everything
  // out. Neither is owned; both outlive the dispatcher.
  Dispatcher(Options options, Membership* membership, Outbox* outbox);
  // Drops queued launches (their outputs fail).
  ~Dispatcher();

  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // While one is open (on any thread) every message produced joins one
  // batch, posted when the outermost closes.
  class Batch {
   public:
    explicit Batch(Dispatcher& dispatcher);
    ~Batch();
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;

   private:
    Dispatcher& dispatcher_;
  };

  // Queues a launch with its island's scheduler. ResourceExhausted (or
  // InvalidArgument) if the scheduler refuses it; nothing is sent then and
  // the outputs' waiters hear the error.
  absl::Status Schedule(std::shared_ptr<PreparedLaunch> launch)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A copy: `plan` moves `source` into `destination` (new buffers, placed
  // by this).
  void Transfer(TransferPlan plan, std::shared_ptr<ArrayBuffers> source,
                std::shared_ptr<ArrayBuffers> destination)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Calls `call` with the channel of `host`, or with null if the host is
  // not alive by then: after everything posted so far, but ahead of the
  // open batch's messages, which may need what it does (a LoadProgram or
  // PutBuffer before the launches that read it).
  void Call(HostId host,
            absl::AnyInvocable<void(transport::ControlChannel*) &&> call)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Calls `call` for every alive host after everything produced so far
  // (the open batch included) has left.
  void Broadcast(
      absl::AnyInvocable<void(transport::ControlChannel&) const> call)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `action` after everything produced so far has left.
  void AfterSent(Outbox::Action action) ABSL_LOCKS_EXCLUDED(mu_);

  // The buffers exist on their workers once the messages creating them
  // left (PutArray: the caller sent them).
  void MarkPlaced(ArrayBuffers& array) ABSL_LOCKS_EXCLUDED(mu_);
  // Calls `callback(OK)` once the buffers' messages have left, or
  // `callback(error)` if they never will, through the outbox.
  void WhenPlaced(std::shared_ptr<ArrayBuffers> array,
                  absl::AnyInvocable<void(absl::Status) &&> callback)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The array is gone: its buffers go back once nothing queued here still
  // needs them.
  void Delete(std::shared_ptr<ArrayBuffers> array) ABSL_LOCKS_EXCLUDED(mu_);

  // A device finished (or abandoned) its op of a launch. The first failure
  // of a launch across several hosts moves its island to a new epoch (the
  // communicators of the failed one may be closed), unless a later epoch
  // came already.
  void OnOpDone(const transport::OpDone& done) ABSL_LOCKS_EXCLUDED(mu_);
  // The membership changed (a host joined or died, an epoch moved): every
  // alive worker is told (UpdateMembership, with the newest snapshot when
  // the message leaves), after everything produced so far; epochs no launch
  // needs any more are retired.
  void MembershipChanged() ABSL_LOCKS_EXCLUDED(mu_, inflight_mu_);
  // `host` died (Membership says so already): launches in flight stop
  // waiting for its devices, and every alive worker hears PeerLost(host,
  // lost) after everything already produced, so launches on their way are
  // abandoned too.
  void HostLost(HostId host, const absl::Status& lost) ABSL_LOCKS_EXCLUDED(mu_);
  // A session ended: its queued launches are dropped and every alive
  // worker hears CancelSession after everything already produced. If one
  // of its launches across several hosts is still running, cancelling it
  // closes its communicators: its island moves to a new epoch now, before
  // anything else is released (as OnOpDone does for a failed one).
  void EndSession(SessionId session, const absl::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);
  void SetWeight(SessionId session, double weight) ABSL_LOCKS_EXCLUDED(mu_);

  // Launches sent and not finished (for tests and status).
  int64_t InFlight() const ABSL_LOCKS_EXCLUDED(inflight_mu_);
  std::string DebugString() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct LaunchInFlight {
    std::set<DeviceId> running;  // Devices still running it.
    uint64_t epoch = 0;
    bool across_hosts = false;
    bool failed = false;  // A device reported an error.
    SessionId session;
  };

  // The messages of one dispatch, per worker, and what runs after them.
  // Workers handle a batch's receives, then launches, then sends, then
  // releases, so adding them in any order keeps that order.
  struct Messages {
    std::vector<Outbox::Action> before;
    std::map<HostId, transport::WorkerBatch> batches;
    std::vector<Outbox::Action> after;
    bool empty() const {
      return before.empty() && batches.empty() && after.empty();
    }
  };

  IslandScheduler& SchedulerFor(IslandId island) ABSL_LOCKS_EXCLUDED(mu_);
  // The open batch, or `*local` (which PostIfLocalLocked then posts).
  Messages& MessagesLocked(Messages* local) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PostIfLocalLocked(Messages& messages, Messages* local)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PostLocked(Messages messages) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AfterSentLocked(Outbox::Action action)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands the buffers back if deleted, placed and no longer needed.
  void MaybeHandBackLocked(ArrayBuffers& array, Messages& messages)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The buffers' messages are in `messages`: parked sends go and waiters
  // are told after them.
  void PlacedLocked(ArrayBuffers& array, Messages& messages)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void ReleaseLaunch(PreparedLaunch& launch, uint64_t seq)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The scheduler dropped (or refused) a launch it never released.
  void DropLaunch(PreparedLaunch& launch, const absl::Status& why)
      ABSL_LOCKS_EXCLUDED(mu_);
  void LaunchFinished(IslandId island, uint64_t seq)
      ABSL_LOCKS_EXCLUDED(mu_, inflight_mu_);
  using InFlightMap = std::map<std::pair<IslandId, uint64_t>, LaunchInFlight>;
  // The launch is no longer in flight.
  void EraseInFlightLocked(InFlightMap::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(inflight_mu_);
  void RetireEpochs() ABSL_LOCKS_EXCLUDED(inflight_mu_);

  const Options options_;
  Membership* const membership_;
  Outbox* const outbox_;
  // The newest topology version MembershipChanged's actions sent (they
  // run one at a time, in order, on the outbox).
  const std::shared_ptr<std::atomic<uint64_t>> membership_versions_sent_ =
      std::make_shared<std::atomic<uint64_t>>(0);

  mutable absl::Mutex mu_;
  Messages open_ ABSL_GUARDED_BY(mu_);
  int open_depth_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<SessionId, double> weights_ ABSL_GUARDED_BY(mu_);
  // Created on an island's first launch; never destroyed before the
  // dispatcher, so a reference stays valid outside the lock.
  std::map<IslandId, std::unique_ptr<IslandScheduler>> schedulers_
      ABSL_GUARDED_BY(mu_);

  // Launches sent and not finished on every device, by (island, seq).
  mutable absl::Mutex inflight_mu_ ABSL_ACQUIRED_AFTER(mu_);
  InFlightMap inflight_ ABSL_GUARDED_BY(inflight_mu_);
  // Launches in flight per (island, epoch); an entry stays (at zero) until
  // the epoch is retired.
  std::map<std::pair<IslandId, uint64_t>, int64_t> epochs_
      ABSL_GUARDED_BY(inflight_mu_);
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_DISPATCHER_H_
