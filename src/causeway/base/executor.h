// Executors: where a continuation or a task runs.
//
// Every Causeway API that takes a callback also takes an `Executor&` and runs
// the callback there, so the caller always knows which thread runs its code.
//
//   InlineExecutor::Instance()  runs the task at once, on the calling thread.
//   ThreadPool                  runs tasks on N threads it owns, FIFO.
#ifndef CAUSEWAY_BASE_EXECUTOR_H_
#define CAUSEWAY_BASE_EXECUTOR_H_

#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace causeway {

// Runs tasks. Implementations are thread-safe: `Execute` may be called from
// any thread. An executor must outlive every task and every future
// continuation handed to it.
class Executor {
 public:
  virtual ~Executor() = default;

  // Runs `task` exactly once, now or later, on a thread the implementation
  // chooses and documents.
  virtual void Execute(absl::AnyInvocable<void()> task) = 0;
};

// Runs each task immediately on the thread that calls `Execute`. For a future
// continuation this means: on the thread that sets the promise, or on the
// thread that registers the continuation if the future is already ready.
// Use it only for short, non-blocking callbacks.
class InlineExecutor final : public Executor {
 public:
  // The process-wide instance (stateless, never destroyed).
  static InlineExecutor& Instance();

  void Execute(absl::AnyInvocable<void()> task) override { task(); }
};

// A fixed number of threads taking tasks from one FIFO queue. Thread-safe.
//
// Tasks start in the order they were queued (with more than one thread they
// may finish in any order). Destruction drains: the destructor waits until
// every queued task, including tasks queued by running tasks, has finished,
// then joins the threads. Calling `Execute` from outside the pool once the
// destructor has started is a programmer error (CHECK); destroying the pool
// from one of its own threads is too.
class ThreadPool final : public Executor {
 public:
  // `name` labels the threads (visible in debuggers and `top -H`; truncated
  // to 15 characters). `num_threads` must be at least 1.
  ThreadPool(std::string name, int num_threads);
  ~ThreadPool() override;

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Execute(absl::AnyInvocable<void()> task) override;

  int num_threads() const { return static_cast<int>(threads_.size()); }

  // True when the caller runs on one of this pool's threads.
  bool IsPoolThread() const;

 private:
  void WorkerLoop();

  const std::string name_;
  absl::Mutex mu_;
  absl::CondVar work_available_;
  std::deque<absl::AnyInvocable<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // Written only by the constructor.
};

}  // namespace causeway

#endif  // CAUSEWAY_BASE_EXECUTOR_H_
