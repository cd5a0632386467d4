// StreamWriter: the one writer of a gRPC stream, on a thread of its own.
//
// A synchronous gRPC stream takes one Write at a time and a Write blocks
// until gRPC has taken the message (longer when the peer's flow-control
// window is full). Callers of the channels (head threads, device threads,
// user threads) must never block on the network, so they Send into a queue
// that this writer drains in order. Messages queued behind a slow write may
// be merged (`merge`: e.g. several OpDone notices into one message), which
// is how a busy stream sends fewer, larger messages.
//
// Idle: when nothing was sent for the idle interval, the writer sends
// `idle_message()` (a session's keepalive; built under the writer's lock,
// so it must not take locks of its own).
//
// Bounded (`max_queued_bytes`, by `size`): a peer that does not read lets
// the queue grow only so far. The Send that would pass the bound is
// refused, every later one too, and `on_overflow` runs once, on that
// Send's thread, outside the writer's lock: it should cancel the call (the
// writer's thread may be stuck in a write the peer never takes).
//
// Thread-safe. The write function runs on the writer's thread only.
// Close(false) does not interrupt a write in progress: cancel the call
// (ClientContext::TryCancel / ServerContext::TryCancel) first if the peer
// may be stuck.
#ifndef CAUSEWAY_TRANSPORT_GRPC_STREAM_WRITER_H_
#define CAUSEWAY_TRANSPORT_GRPC_STREAM_WRITER_H_

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace causeway::transport {

template <typename Message>
class StreamWriter {
 public:
  struct Options {
    // Writes one message; false when the stream is broken (nothing more
    // is written after that).
    std::function<bool(const Message&)> write;
    // Merges `next` into `into` when both are queued; false to keep them
    // apart. Null: never merge.
    std::function<bool(Message& into, Message& next)> merge;
    absl::Duration idle_interval = absl::InfiniteDuration();
    std::function<Message()> idle_message;
    // Bytes of messages queued and being written at most; 0: no bound.
    int64_t max_queued_bytes = 0;
    std::function<int64_t(const Message&)> size;  // Required with a bound.
    std::function<void()> on_overflow;            // Optional.
  };

  explicit StreamWriter(Options options)
      : options_(std::move(options)),
        idle_interval_(options_.idle_interval),
        thread_([this] {
          pthread_setname_np(pthread_self(), "stream-writer");
          Loop();
        }) {}
  ~StreamWriter() { Close(/*drain=*/false); }

  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Queues `message`; false (and the message dropped) once the writer is
  // closed, its stream broke or its queue overflowed.
  bool Send(Message message) {
    const int64_t bytes =
        options_.max_queued_bytes > 0 ? options_.size(message) : 0;
    {
      absl::MutexLock lock(&mu_);
      if (closing_ || broken_ || overflowed_) return false;
      if (options_.max_queued_bytes == 0 ||
          queued_bytes_ + writing_bytes_ + bytes <= options_.max_queued_bytes) {
        queued_bytes_ += bytes;
        queue_.push_back(std::move(message));
        return true;
      }
      overflowed_ = true;
      queue_.clear();
      queued_bytes_ = 0;
    }
    if (options_.on_overflow) options_.on_overflow();
    return false;
  }

  // Stops the writer: after every queued message was written (`drain`) or
  // at once (queued messages are dropped). Idempotent; after it returns the
  // write function is never called again.
  void Close(bool drain) {
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      if (!drain) {
        queue_.clear();
        abandoned_.store(true, std::memory_order_relaxed);
      }
    }
    if (thread_.joinable()) thread_.join();
  }

  // How long the stream may stay silent before `idle_message` is sent.
  void SetIdleInterval(absl::Duration interval) {
    absl::MutexLock lock(&mu_);
    idle_interval_ = interval;
    interval_changed_ = true;
  }

  // The stream broke under a write.
  bool broken() const {
    absl::MutexLock lock(&mu_);
    return broken_;
  }
  // A Send was refused over `max_queued_bytes`.
  bool overflowed() const {
    absl::MutexLock lock(&mu_);
    return overflowed_;
  }

 private:
  void Loop() {
    std::deque<Message> batch;
    absl::Time last_write = absl::Now();
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        while (true) {
          interval_changed_ = false;
          const auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return closing_ || !queue_.empty() || interval_changed_;
          };
          const bool woken = mu_.AwaitWithDeadline(absl::Condition(&wake),
                                                   last_write + idle_interval_);
          if (closing_ || !queue_.empty()) break;
          if (woken) continue;  // The interval changed: wait anew.
          if (options_.idle_message) queue_.push_back(options_.idle_message());
          last_write = absl::Now();  // Also when there is no idle message.
          if (!queue_.empty()) break;
        }
        if (queue_.empty()) return;  // Closing, drained.
        batch.swap(queue_);
        writing_bytes_ = queued_bytes_;
        queued_bytes_ = 0;
      }
      while (!batch.empty()) {
        // Closed without draining: what it took from the queue goes too.
        if (abandoned_.load(std::memory_order_relaxed)) return;
        Message message = std::move(batch.front());
        batch.pop_front();
        while (options_.merge && !batch.empty() &&
               options_.merge(message, batch.front())) {
          batch.pop_front();
        }
        if (!options_.write(message)) {
          absl::MutexLock lock(&mu_);
          broken_ = true;
          queue_.clear();
          return;
        }
      }
      last_write = absl::Now();
      absl::MutexLock lock(&mu_);
      writing_bytes_ = 0;
    }
  }

  const Options options_;
  mutable absl::Mutex mu_;
  std::deque<Message> queue_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool overflowed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;   // In queue_.
  int64_t writing_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // In the batch.
  absl::Duration idle_interval_ ABSL_GUARDED_BY(mu_);
  bool interval_changed_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> abandoned_{false};
  std::thread thread_;  // Last: starts after everything above exists.
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_GRPC_STREAM_WRITER_H_
