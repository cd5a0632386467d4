// Collectives between threads of one process: each device of an SPMD
// program runs on its own thread and they meet here.
#ifndef CAUSEWAY_EXEC_IN_PROCESS_COLLECTIVES_H_
#define CAUSEWAY_EXEC_IN_PROCESS_COLLECTIVES_H_

#include <functional>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/exec/collectives.h"

namespace causeway::exec {

// One rendezvous per (instance key, group): each member deposits its
// input and waits until its whole group has arrived; the last to arrive
// computes every member's result once (all-reduce bits are identical on
// every member by construction) and wakes the others.
//
// Never hangs: a wait ends with DeadlineExceeded naming the op and the
// devices that did not arrive once `timeout` passes, or with the given
// status once Cancel() is called. Thread-safe.
class InProcessCollectives : public Collectives {
 public:
  struct Options {
    absl::Duration timeout = absl::Seconds(60);
  };

  InProcessCollectives() : InProcessCollectives(Options()) {}
  explicit InProcessCollectives(Options options) : options_(options) {}
  ~InProcessCollectives() override;

  absl::StatusOr<hlo::Literal> AllReduce(
      const CollectiveOp& op, std::vector<hlo::Literal> operands) override;
  absl::StatusOr<hlo::Literal> AllGather(
      const CollectiveOp& op, std::vector<hlo::Literal> operands) override;
  absl::StatusOr<hlo::Literal> ReduceScatter(
      const CollectiveOp& op, std::vector<hlo::Literal> operands) override;
  absl::StatusOr<hlo::Literal> AllToAll(
      const CollectiveOp& op, std::vector<hlo::Literal> operands) override;
  absl::StatusOr<hlo::Literal> CollectivePermute(const CollectiveOp& op,
                                                 hlo::Literal operand) override;

  // Fails every waiting and every later call with `status` (which must not
  // be OK) until Reset(), and makes Cancelled() return it. Used when one
  // device of a run fails, so that its peers do not wait for it (nor loop
  // on, see Collectives::Cancelled).
  void Cancel(absl::Status status);
  absl::Status Cancelled() const override;
  // Forgets the cancellation and any rendezvous a failed run left behind.
  // Call between runs only.
  void Reset();

  // Blocks until at least `count` callers are waiting for their peers, or
  // `timeout` passes; returns whether they are. For tests that need a
  // participant to be waiting before they act.
  bool AwaitWaiting(int64_t count, absl::Duration timeout);

 private:
  struct Rendezvous;
  struct RendezvousKey {
    CollectiveInstanceKey instance;
    int64_t group_leader = 0;
    friend bool operator==(const RendezvousKey&,
                           const RendezvousKey&) = default;
  };
  struct RendezvousKeyHash {
    size_t operator()(const RendezvousKey& key) const {
      uint64_t h = key.instance.run_id * 0x9E3779B97F4A7C15ull;
      h ^= static_cast<uint64_t>(key.instance.instruction_id) + (h << 6);
      h ^= static_cast<uint64_t>(key.instance.execution_count) *
           0xBF58476D1CE4E5B9ull;
      h ^= static_cast<uint64_t>(key.group_leader) + (h >> 3);
      return static_cast<size_t>(h);
    }
  };
  // Computes every member's result from every member's inputs (in group
  // order). Runs on the last member to arrive, without the lock held.
  using CombineFn = std::function<absl::StatusOr<std::vector<hlo::Literal>>(
      const std::vector<std::vector<hlo::Literal>>& inputs)>;

  // Deposits `inputs` for the caller and returns its result.
  absl::StatusOr<hlo::Literal> Exchange(const CollectiveOp& op,
                                        const std::vector<int64_t>& group,
                                        std::vector<hlo::Literal> inputs,
                                        const CombineFn& combine);

  const Options options_;
  mutable absl::Mutex mu_;
  absl::Status cancelled_ ABSL_GUARDED_BY(mu_);
  // Whether cancelled_ is set, read without the lock by Cancelled().
  std::atomic<bool> is_cancelled_{false};
  // Callers blocked in a wait for their peers now.
  int64_t waiting_ ABSL_GUARDED_BY(mu_) = 0;
  // absl's hash containers are not among the libraries this target links.
  std::unordered_map<RendezvousKey, std::shared_ptr<Rendezvous>,
                     RendezvousKeyHash>
      pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_IN_PROCESS_COLLECTIVES_H_
