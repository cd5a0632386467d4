#include "causeway/base/executor.h"

#include <pthread.h>

#include <utility>

#include "causeway/base/logging.h"

namespace causeway {
namespace {

// The pool whose worker is the current thread, or null.
thread_local const ThreadPool* current_pool = nullptr;

}  // namespace

InlineExecutor& InlineExecutor::Instance() {
  static InlineExecutor* const instance = new InlineExecutor();
  return *instance;
}

ThreadPool::ThreadPool(std::string name, int num_threads)
    : name_(std::move(name)) {
  CW_CHECK(num_threads >= 1)
      << "ThreadPool '" << name_ << "' needs at least one thread, got "
      << num_threads;
  threads_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) {
    threads_.emplace_back([this] { WorkerLoop(); });
    // Linux limits thread names to 15 characters plus the terminator.
    std::string thread_name = name_.substr(0, 15);
    pthread_setname_np(threads_.back().native_handle(), thread_name.c_str());
  }
}

ThreadPool::~ThreadPool() {
  CW_CHECK(!IsPoolThread())
      << "ThreadPool '" << name_ << "' destroyed from one of its own threads";
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    work_available_.SignalAll();
  }
  for (std::thread& thread : threads_) thread.join();
}

void ThreadPool::Execute(absl::AnyInvocable<void()> task) {
  absl::MutexLock lock(&mu_);
  CW_CHECK(!stopping_ || IsPoolThread())
      << "Execute called on ThreadPool '" << name_
      << "' while it is being destroyed";
  queue_.push_back(std::move(task));
  work_available_.Signal();
}

bool ThreadPool::IsPoolThread() const { return current_pool == this; }

void ThreadPool::WorkerLoop() {
  current_pool = this;
  while (true) {
    absl::AnyInvocable<void()> task;
    {
      absl::MutexLock lock(&mu_);
      while (queue_.empty() && !stopping_) work_available_.Wait(&mu_);
      // Drain before stopping: a worker leaves only when nothing is queued.
      // Tasks queued by a running task are seen because that task's worker
      // comes back here before it can leave.
      if (queue_.empty()) break;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // Run without the lock, so the task may call Execute.
  }
  current_pool = nullptr;
}

}  // namespace causeway
