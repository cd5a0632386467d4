// Collectives across processes through Gloo (Debian's libgloo-dev, the 2022
// API, TCP transport). The protocol, with its failure handling, is in
// docs/collectives.md; in short:
//
// * Every device of a launch is a Gloo rank. A collective's group (exec's
//   GroupOf: XLA's group semantics, the same definition the in-process
//   implementation uses) runs on one Gloo context per (island, membership
//   epoch, sorted global device ids of the group), built on first use by a
//   rendezvous through the KeyValueStore under the prefix
//   "gloo/isl/<I>/ep/<E>/grp/<ids>/", cached and reused by every later
//   launch of that epoch. Subgroups get their own contexts. A context is
//   never rebuilt within its epoch. A group whose devices all live in this
//   process (Options::local: the model-parallel groups of a mesh whose
//   rows are hosts) skips Gloo and meets in memory, as a launch inside one
//   process does (exec::InProcessCollectives, shared by the launch's
//   participants here): loopback sockets cost a training step more CPU
//   than its kernels (BENCHMARKS.md, "IFRT proxy").
//
// * Results. The algorithms run on Gloo's TCP pairs (unbound-buffer sends
//   and receives) with buffers this code owns, so that every wait can be
//   woken (see Failure). all-reduce with a plain add/multiply/maximum/
//   minimum/and/or/xor reducer on elements other than bf16/f16 is a
//   pipelined ring (reduce-scatter, then all-gather) that reduces with the
//   in-process implementation's elementwise loop (exec::PlainCombineOf) but
//   in ring order: integer and pred results are bit for bit the in-process
//   ones; f32/f64 add and multiply agree within float rounding, and
//   maximum/minimum may differ in the sign of a zero or the payload of a
//   NaN; every member gets identical bits. Every other all-reduce (bf16/f16,
//   custom reducers) gathers the operands and reduces them with
//   exec::ReduceInputs in group order: bit for bit the in-process result.
//   reduce-scatter is that all-reduce followed by the member's block (so it
//   moves the bytes of a full all-reduce). all-gather, all-to-all and
//   collective-permute send every value straight to the member that needs
//   it; they move bytes only: bit for bit the in-process results.
//
// * Failure: nothing waits past the collective timeout, and a cancelled or
//   aborted participant closes the connections of its launch's contexts
//   (Gloo's own reaction to a timeout: every pending operation on them fails
//   at once, in this process too, and the peers read end of stream), after
//   writing its status under the launch's cancel key so that the peers
//   report it instead of DATA_LOSS. Gloo leaves an operation that is in the
//   middle of its transfer when the pair breaks waiting until its timeout;
//   so while an operation runs, a watchdog wakes its waits every few
//   milliseconds to check the context's pairs (each holds a receive nobody
//   answers, which Gloo does fail), and a closed context wakes them at once.
//   A context that failed is never used again; the head moves the island to
//   a new epoch after a failed launch.
#ifndef CAUSEWAY_TRANSPORT_GLOO_COLLECTIVES_H_
#define CAUSEWAY_TRANSPORT_GLOO_COLLECTIVES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/executor.h"
#include "causeway/base/ids.h"
#include "causeway/exec/collectives.h"
#include "causeway/exec/in_process_collectives.h"
#include "causeway/transport/key_value_store.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace causeway::transport {

class GlooStore;

// The launch a participant belongs to, as its collectives need it.
struct GlooLaunch {
  IslandId island;
  uint64_t epoch = 0;  // The island's membership epoch at dispatch.
  uint64_t seq = 0;    // Its gang sequence number on the island.
  // Every device of the launch, by grid index (replica × num_partitions +
  // partition): each is one Gloo rank.
  std::vector<DeviceId> devices;
};

// The store prefix under which the collectives of (island, epoch) keep
// every key: the head deletes it once no launch of that epoch is live.
std::string GlooEpochPrefix(IslandId island, uint64_t epoch);
// What the head does when (island, epoch) is retired: deletes the keys of
// that epoch and of every earlier one of the island. A cancelled device
// publishes its cancel key on its own thread, possibly after its op
// reported done and the epoch was retired: such a key goes at the island's
// next retirement. (Epochs move on failures and membership changes only,
// so the sweep stays short.)
void DeleteGlooKeysThrough(KeyValueStore& store, IslandId island,
                           uint64_t epoch);
// The key under which a cancelled participant of launch `seq` leaves its
// status for its peers.
std::string GlooCancelKey(IslandId island, uint64_t epoch, uint64_t seq);

// The Gloo side of one process: one TCP device (one I/O thread) and the
// contexts its devices have built. Thread-safe. Must outlive every
// GlooCollectives made with it.
class GlooCommunicators {
 public:
  struct Options {
    KeyValueStore* store = nullptr;  // Not owned; required; outlives this.
    // The address this process's Gloo sockets listen on, as peers reach it.
    std::string hostname = "127.0.0.1";
    // The cluster's token: every pair of every context proves a key made
    // from it and the context's rendezvous secrets (gloo_mesh.h).
    std::string auth_token = "";
    // With a token, every pair is sealed (GlooMeshOptions::encrypt).
    bool encrypt = true;
  };

  // InvalidArgument without a store; Unavailable when the TCP device cannot
  // be made (an address that is not this host's). Ignores SIGPIPE in the
  // process (unless a handler is installed): Gloo's writes to a dead peer
  // raise it.
  static absl::StatusOr<std::unique_ptr<GlooCommunicators>> Create(
      Options options);
  ~GlooCommunicators();

  GlooCommunicators(const GlooCommunicators&) = delete;
  GlooCommunicators& operator=(const GlooCommunicators&) = delete;

  KeyValueStore& store() const { return *options_.store; }

  // `device` starts a launch of `epoch` on `island` and will never run an
  // older one again: its contexts of older epochs are closed (softly: the
  // peers read what was sent, then end of stream).
  void RetireEpochsBefore(IslandId island, DeviceId device, uint64_t epoch);

  // Contexts held (built, building or failed), for tests.
  int64_t NumContexts() const;

 private:
  friend class GlooCollectives;

  struct ContextKey {
    IslandId island;
    uint64_t epoch = 0;
    std::vector<DeviceId> members;  // Sorted: rank r is members[r].
    DeviceId me;
    friend auto operator<=>(const ContextKey&, const ContextKey&) = default;
  };
  struct Entry;  // One rank's context (gloo_collectives.cc).
  struct Transfers;  // One running operation's buffers (gloo_collectives.cc).

  explicit GlooCommunicators(Options options);

  // The entry for `key`, with one more user: the built context, a closed
  // one's status, or null when nobody has built it (the caller builds).
  absl::StatusOr<std::shared_ptr<Entry>> Lookup(const ContextKey& key);
  // Connects rank `rank` of `key`'s group through `store` (its rendezvous)
  // and caches the result, built or failed. One more user on success.
  absl::StatusOr<std::shared_ptr<Entry>> Build(const ContextKey& key, int rank,
                                               GlooStore& store,
                                               absl::Duration timeout);
  void Release(const std::shared_ptr<Entry>& entry);
  // Fails every pending operation on `entry`'s context with `status` and
  // closes its connections; later uses fail with `status`.
  void Close(const std::shared_ptr<Entry>& entry, const absl::Status& status);
  // Closes every context of (island, epoch) whose rank is `me` and whose
  // group lies within `devices`, after `cancel_key` holds `status` (or the
  // store failed to take it): runs on the abort thread.
  void CloseLaunchAfterPublishing(GlooLaunch launch, DeviceId me,
                                  absl::Status status);

  // Wakes the waits of `entry`'s running operations.
  void WakeRunning(const Entry* entry);
  // Every few milliseconds while operations run, wakes their waits so that
  // they check their context's pairs.
  void WatchLoop();

  const Options options_;
  std::shared_ptr<::gloo::transport::Device> device_;
  mutable absl::Mutex mu_;
  std::map<ContextKey, std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  std::set<Transfers*> running_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar watch_cv_;
  std::thread watchdog_;
  // Publishes cancellations and closes contexts off the caller's thread
  // (callers may hold their own locks). Declared last: destroyed (drained)
  // first.
  std::unique_ptr<ThreadPool> aborts_;
};

// One participant of one launch (one device): an exec::Collectives whose
// calls come from that device's thread, one at a time. Cancel may come from
// any thread.
class GlooCollectives final : public exec::Collectives {
 public:
  struct Options {
    // Bounds every rendezvous and every Gloo operation.
    absl::Duration timeout = absl::Seconds(60);
  };
  // A group whose devices are all in `devices` (this process's) meets in
  // memory through `collectives`, which the launch's participants in this
  // process share, instead of through Gloo's sockets. Null: every group
  // through Gloo.
  struct LocalGroups {
    std::shared_ptr<exec::InProcessCollectives> collectives;
    std::set<DeviceId> devices;
  };

  // `me` is the caller's grid index in `launch.devices`.
  GlooCollectives(GlooCommunicators& communicators, GlooLaunch launch,
                  int64_t me, Options options, LocalGroups local = {});
  ~GlooCollectives() override;

  absl::StatusOr<hlo::Literal> AllReduce(
      const exec::CollectiveOp& op, std::vector<hlo::Literal> operands) override;
  absl::StatusOr<hlo::Literal> AllGather(
      const exec::CollectiveOp& op, std::vector<hlo::Literal> operands) override;
  absl::StatusOr<hlo::Literal> ReduceScatter(
      const exec::CollectiveOp& op, std::vector<hlo::Literal> operands) override;
  absl::StatusOr<hlo::Literal> AllToAll(
      const exec::CollectiveOp& op, std::vector<hlo::Literal> operands) override;
  absl::StatusOr<hlo::Literal> CollectivePermute(const exec::CollectiveOp& op,
                                                 hlo::Literal operand) override;

  // Ends this participant's part of the launch with `status` (not OK; the
  // first one wins): its waiting call and every later one fail with it; the
  // launch's cancel key is set to it; then every context of the launch's
  // epoch that holds this device and lies within the launch is closed, so
  // the peers' waiting calls fail at once and report `status`. Returns at
  // once (the store write and the closing happen on the abort thread).
  void Cancel(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // Cancel's status (OK before it): a device looping without collectives
  // stops with it.
  absl::Status Cancelled() const override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Group;
  class Ring;

  // Whether every member of `members` (grid indices, valid ones) is a
  // device of this process, so that the group meets in memory.
  bool LocalGroup(const std::vector<int64_t>& members) const;
  absl::StatusOr<Group> MakeGroup(const exec::CollectiveOp& op,
                                  std::vector<int64_t> members) const;
  // The context of `group` with one more user (building it if needed).
  absl::StatusOr<std::shared_ptr<GlooCommunicators::Entry>> Acquire(
      const exec::CollectiveOp& op, const Group& group);
  // Runs `body(transfers)` on the group's context; turns a Gloo exception
  // into a status (and closes the context).
  template <typename Body>
  absl::Status RunOnContext(const exec::CollectiveOp& op, const Group& group,
                            Body&& body);
  // Why an operation on `group` failed with Gloo's `what`.
  absl::Status FailureOf(const exec::CollectiveOp& op, const Group& group,
                         const std::string& what);
  // The launch's cancel status, if a peer has set one.
  absl::Status PublishedCancel();
  // OK, or `op`'s error if Cancel was called.
  absl::Status CheckNotCancelled(const exec::CollectiveOp& op)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CheckNotCancelledLocked(const exec::CollectiveOp& op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Every member's operand, in group order.
  absl::StatusOr<std::vector<hlo::Literal>> Gather(
      const exec::CollectiveOp& op, const Group& group,
      const hlo::Literal& operand, int64_t part);
  // Sends each `sends` value to its member and receives each `receives`
  // value from its member (members as positions in the group), on one
  // slot named by `tag`.
  absl::Status SendAndReceive(
      const exec::CollectiveOp& op, const Group& group, uint32_t tag,
      const std::vector<std::pair<int64_t, const hlo::Literal*>>& sends,
      const std::vector<std::pair<int64_t, hlo::Literal*>>& receives);
  // The all-reduce of one operand over `group`.
  absl::StatusOr<hlo::Literal> ReduceOne(const exec::CollectiveOp& op,
                                         const Group& group,
                                         hlo::Literal operand, int64_t part);

  GlooCommunicators& communicators_;
  const GlooLaunch launch_;
  const int64_t me_;
  const Options options_;
  const LocalGroups local_;

  mutable absl::Mutex mu_;
  absl::Status cancelled_ ABSL_GUARDED_BY(mu_);
  GlooStore* building_ ABSL_GUARDED_BY(mu_) = nullptr;  // A rendezvous.
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_GLOO_COLLECTIVES_H_
