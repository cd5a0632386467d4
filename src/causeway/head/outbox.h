// The outbox: what the head decided under its locks and must do outside
// them, in the order it decided. Every call through a control channel
// (over a network any of them can block for a round trip), every promise
// the head resolves (its continuations may run inline) and every
// notification goes through it: the head posts an action while it holds
// its locks and runs it after releasing them.
//
// Order: actions run one at a time, in the order they were posted, so
// messages to a worker leave in the order the head produced them (the
// gang order of launches, a LoadProgram before the launches that need it).
//
// Who runs them: Drain, called with no lock held, runs every posted action
// until none is left, unless another thread is draining already; then it
// returns at once and that thread runs them too. An action may post more
// actions (they run in the same drain) and may call into the head, which
// posts and drains in turn (that drain returns at once). So every entry
// point of the head drains before it returns (Outbox::Flush, a scope), and
// an action never runs under one of the head's locks.
//
// Thread-safe.
#ifndef CAUSEWAY_HEAD_OUTBOX_H_
#define CAUSEWAY_HEAD_OUTBOX_H_

#include <atomic>
#include <cstdint>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace causeway::head {

class Outbox {
 public:
  using Action = absl::AnyInvocable<void() &&>;

  Outbox() = default;
  // Runs what is left (CHECK that nobody is draining).
  ~Outbox();

  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  // Queues `action` behind everything posted before. Any thread, any lock.
  void Post(Action action);

  // Runs posted actions in order until none is left, unless another thread
  // is doing so (see the header comment). Call with none of the head's
  // locks held.
  void Drain() ABSL_LOCKS_EXCLUDED(mu_);

  // Actions posted and not yet run (for tests).
  int64_t pending() const;

  // Drains when it goes out of scope: declare it before taking a lock, so
  // that it runs after the lock is released.
  class Flush {
   public:
    explicit Flush(Outbox& outbox) : outbox_(outbox) {}
    ~Flush() { outbox_.Drain(); }
    Flush(const Flush&) = delete;
    Flush& operator=(const Flush&) = delete;

   private:
    Outbox& outbox_;
  };

 private:
  mutable absl::Mutex mu_;
  std::deque<Action> actions_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  // Actions posted and not yet taken by a drain: lets Drain return without
  // the lock when there is nothing to do (most entry points).
  std::atomic<int64_t> posted_{0};
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_OUTBOX_H_
