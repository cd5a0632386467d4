// ReactorWrites: what a stream on gRPC's server callback API (a
// ServerBidiReactor)
// shares with the StreamWriter that writes its messages.
//
// The writer may outlive the stream: answers complete on other threads
// after the stream ended, and their Send may start a write while the stream
// finishes. So the writer never touches the stream itself, only this:
//   - Start: the writer's `start`. Starts a write, or refuses (false) once
//     the stream is finishing or finished.
//   - WriteDone: the stream's OnWriteDone. Gives the writer its turn to
//     start the next write, or returns the Finish that waited for the write.
//   - FinishWhenIdle: the stream ends. Finish is due now, or once the
//     write in progress is over; no write starts after it.
// So the stream finishes only with no write in progress, and by its OnDone
// no write is in progress or can start.
//
// Writer: a StreamWriter<Written>, or a class that forwards WriteDone(bool)
// to one. Thread-safe.
#ifndef CAUSEWAY_TRANSPORT_GRPC_REACTOR_WRITES_H_
#define CAUSEWAY_TRANSPORT_GRPC_REACTOR_WRITES_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace causeway::transport {

template <typename Read, typename Written, typename Writer>
class ReactorWrites {
 public:
  explicit ReactorWrites(grpc::ServerBidiReactor<Read, Written>* stream)
      : stream_(stream) {}

  ReactorWrites(const ReactorWrites&) = delete;
  ReactorWrites& operator=(const ReactorWrites&) = delete;

  // The writer told when a write is over (set once, before its first).
  void set_writer(std::weak_ptr<Writer> writer) {
    absl::MutexLock lock(&mu_);
    writer_ = std::move(writer);
  }

  // Starts writing `message` (alive until the write is over); false once
  // the stream is finishing or finished. One write at a time: the writer
  // starts the next only after WriteDone.
  bool Start(const Written& message) {
    grpc::ServerBidiReactor<Read, Written>* stream = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (finish_.has_value() || finished_) return false;
      writing_ = true;
      stream = stream_;
    }
    stream->StartWrite(&message);
    return true;
  }

  // From OnWriteDone: the write is over. The Finish that waited for it,
  // for the reaction to call; otherwise the writer, if it still exists, is
  // told (on this thread, where it starts its next write).
  std::optional<grpc::Status> WriteDone(bool ok) {
    std::shared_ptr<Writer> writer;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (finish_.has_value()) {
        finished_ = true;
        std::optional<grpc::Status> finish = std::move(finish_);
        finish_.reset();
        return finish;
      }
      writer = writer_.lock();
    }
    if (writer != nullptr) writer->WriteDone(ok);
    return std::nullopt;
  }

  // Finishes with `status` now (true: the caller calls Finish), or once
  // the write in progress is over (false). No write starts after it.
  bool FinishWhenIdle(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    if (finished_ || finish_.has_value()) return false;
    if (writing_) {
      finish_ = std::move(status);
      return false;
    }
    finished_ = true;
    return true;
  }

 private:
  absl::Mutex mu_;
  // Used only while !finished_.
  grpc::ServerBidiReactor<Read, Written>* const stream_;
  std::weak_ptr<Writer> writer_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> finish_ ABSL_GUARDED_BY(mu_);
};

// ClientReactorWrites: the same guard for a stream on gRPC's client
// callback API (a ClientBidiReactor), whose writes a StreamWriter
// starts from any thread. The call is held open (AddHold) from
// before it starts until the reads are over and no write is starting, so
// gRPC never ends it (OnDone) while a StartWrite may still be made; after
// Stop, Start refuses.
//   - Hold: before StartCall.
//   - Start: the writer's `start`.
//   - Stop: the reads are over (from OnReadDone(false)), or the owner
//     gives up on the call: no write starts after it, and the hold goes once
//     none is starting.
// Thread-safe. No lock is held across StartWrite: a write may complete,
// and OnWriteDone start the next (another Start), inside it.
template <typename Written, typename Read>
class ClientReactorWrites {
 public:
  explicit ClientReactorWrites(grpc::ClientBidiReactor<Written, Read>* stream)
      : stream_(stream) {}

  ClientReactorWrites(const ClientReactorWrites&) = delete;
  ClientReactorWrites& operator=(const ClientReactorWrites&) = delete;

  void Hold() { stream_->AddHold(); }

  bool Start(const Written& message) {
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return false;
      ++starting_;
    }
    stream_->StartWrite(&message);
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      --starting_;
      release = ReleaseLocked();
    }
    if (release) stream_->RemoveHold();
    return true;
  }

  void Stop() {
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      stopped_ = true;
      release = ReleaseLocked();
    }
    if (release) stream_->RemoveHold();
  }

 private:
  // True once: the hold may go (stopped, no write starting).
  bool ReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!stopped_ || starting_ > 0 || released_) return false;
    released_ = true;
    return true;
  }

  grpc::ClientBidiReactor<Written, Read>* const stream_;
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int starting_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_GRPC_REACTOR_WRITES_H_
