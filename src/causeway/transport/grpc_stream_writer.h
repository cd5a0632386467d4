// StreamWriter: the one writer of a gRPC stream on the callback API.
//
// Callers of the channels (head threads, device threads, user threads) must
// never block on the network, so they Send into a queue that this writer
// drains in order. Messages queued behind a write in progress may be merged
// (`merge`: e.g. several OpDone notices into one message), which is how a
// busy stream sends fewer, larger messages.
//
// No thread of its own: the stream's StartWrite returns at once and its
// OnWriteDone reports the write over. A Send with nothing being written
// starts the write (`start`) on the sender's thread, and WriteDone (the
// stream's owner calls it from OnWriteDone) starts the next. A message goes
// out with no hand-off between threads. (A writer thread, which the
// synchronous streams needed because their Write blocks, took two per
// message: the sender's to the writer's, and gRPC's to the writer's.)
//
// Bounded (`max_queued_bytes`, by `size`; a protobuf's own size by
// default): a peer that does not read lets the queue grow only so far. The
// Send that would pass the bound is refused, every later one too, and
// `on_overflow` runs once, on that Send's thread, outside the writer's
// lock: it should cancel the call (the write in progress may be one the
// peer never takes).
//
// Thread-safe. `start` runs on one thread at a time, with no lock of the
// writer's held (a stream may report the write over before StartWrite
// returns). Close(false) does not interrupt a write in progress: cancel the
// call (ClientContext::TryCancel / ServerContext::TryCancel) first if the
// peer may be stuck.
#ifndef CAUSEWAY_TRANSPORT_GRPC_STREAM_WRITER_H_
#define CAUSEWAY_TRANSPORT_GRPC_STREAM_WRITER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace causeway::transport {

template <typename Message>
class StreamWriter {
 public:
  struct Options {
    // Starts writing one message, which the writer keeps alive until
    // WriteDone; false when the stream is finishing or broke (nothing was
    // started, nothing more is).
    std::function<bool(const Message&)> start;
    // Merges `next` into `into` when both are queued; false to keep them
    // apart. Null: never merge.
    std::function<bool(Message& into, Message& next)> merge;
    // Bytes of messages queued and being written at most; 0: no bound.
    int64_t max_queued_bytes = 0;
    // A message's bytes, for the bound. Unset: a protobuf message's
    // ByteSizeLong(); any other message needs it with a bound.
    std::function<int64_t(const Message&)> size;
    std::function<void()> on_overflow;            // Optional.
  };

  explicit StreamWriter(Options options) : options_(std::move(options)) {}

  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Queues `message`; false (and the message dropped) once the writer is
  // closed, its stream broke or its queue overflowed.
  bool Send(Message message) {
    const int64_t bytes = options_.max_queued_bytes > 0 ? SizeOf(message) : 0;
    bool start_now = false;
    bool overflowed_now = false;
    {
      absl::MutexLock lock(&mu_);
      if (closing_ || broken_ || overflowed_) return false;
      if (options_.max_queued_bytes == 0 ||
          queued_bytes_ + writing_bytes_ + bytes <= options_.max_queued_bytes) {
        queued_bytes_ += bytes;
        queue_.push_back(std::move(message));
        // Nothing being written: this thread starts it.
        start_now = !writing_;
        writing_ = true;
      } else {
        overflowed_ = true;
        queue_.clear();
        queued_bytes_ = 0;
        overflowed_now = true;
      }
    }
    if (overflowed_now) {
      if (options_.on_overflow) options_.on_overflow();
      return false;
    }
    if (start_now) StartNext();
    return true;
  }

  // The write it started is over (`ok`: the stream took the message).
  // Starts the next, if any, on this thread.
  void WriteDone(bool ok) {
    if (!ok) {
      Break();
      return;
    }
    StartNext();
  }

  // Stops the writer: Sends are refused from now on, and what is queued
  // is written (`drain`) or dropped. Idempotent. Without `drain` no write
  // starts after it returns, but one may be starting on another thread
  // meanwhile (the stream's StartWrite must refuse once it is finishing);
  // draining ends with the last queued write started (WhenDrained).
  void Close(bool drain) {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    if (!drain) {
      queue_.clear();
      batch_.clear();
      queued_bytes_ = 0;
    }
  }

  // Runs `drained` once no write is in progress and none is
  // queued (or the stream broke): at once, on this thread, if so now;
  // otherwise on the thread whose write's WriteDone gives back the turn.
  // After Close(/*drain=*/true), that is when the last queued message was
  // written, so the stream may finish. One at a time.
  void WhenDrained(absl::AnyInvocable<void()> drained) {
    {
      absl::MutexLock lock(&mu_);
      if (writing_) {
        drained_ = std::move(drained);
        return;
      }
    }
    drained();
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
  int64_t SizeOf(const Message& message) const {
    if constexpr (requires { message.ByteSizeLong(); }) {
      if (!options_.size) return static_cast<int64_t>(message.ByteSizeLong());
    }
    return options_.size(message);
  }

  // By the thread that holds the turn to write (writing_):
  // starts the next message, or gives the turn back when there is none.
  void StartNext() {
    absl::AnyInvocable<void()> drained;
    bool start = false;
    {
      absl::MutexLock lock(&mu_);
      if (batch_.empty()) {
        writing_bytes_ = 0;
        if (broken_ || queue_.empty()) {
          writing_ = false;
          drained = std::move(drained_);
        } else {
          batch_.swap(queue_);
          writing_bytes_ = queued_bytes_;
          queued_bytes_ = 0;
        }
      }
      if (writing_) {
        start = true;
        in_flight_ = std::move(batch_.front());
        batch_.pop_front();
        while (options_.merge && !batch_.empty() &&
               options_.merge(in_flight_, batch_.front())) {
          batch_.pop_front();
        }
      }
    }
    if (drained) drained();
    if (!start || options_.start(in_flight_)) return;
    Break();
  }

  // The stream broke (a failed write, a refused start): nothing more is
  // written, and a WhenDrained waiting is told.
  void Break() {
    absl::AnyInvocable<void()> drained;
    {
      absl::MutexLock lock(&mu_);
      BreakLocked();
      drained = std::move(drained_);
    }
    if (drained) drained();
  }

  void BreakLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    broken_ = true;
    writing_ = false;
    queue_.clear();
    batch_.clear();
    queued_bytes_ = 0;
    writing_bytes_ = 0;
  }

  const Options options_;
  mutable absl::Mutex mu_;
  std::deque<Message> queue_ ABSL_GUARDED_BY(mu_);
  // Taken from the queue, being written one by one.
  std::deque<Message> batch_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // A thread holds the turn.
  // The message being written, kept alive for the stream; touched only by
  // the thread holding the turn.
  Message in_flight_;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool overflowed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;   // In queue_.
  int64_t writing_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // In the batch.
  // WhenDrained's, until the turn is given back.
  absl::AnyInvocable<void()> drained_ ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_GRPC_STREAM_WRITER_H_
