// Every alive worker's status (its devices' running and queued ops and
// memory), for `causeway status` and the HTTP view. Each worker is asked
// after everything the dispatcher already sent, so that its answer shows
// it; the answers are awaited on a thread of this class's own, up to a
// deadline, so that a worker that does not answer holds up nobody else.
//
// Thread-safe.
#ifndef CAUSEWAY_HEAD_WORKER_STATUSES_H_
#define CAUSEWAY_HEAD_WORKER_STATUSES_H_

#include <map>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "causeway/base/executor.h"
#include "causeway/base/future.h"
#include "causeway/base/ids.h"
#include "causeway/head/dispatcher.h"
#include "causeway/head/membership.h"
#include "causeway/transport/control_channel.h"

namespace causeway::head {

using WorkerStatuses =
    std::map<HostId, absl::StatusOr<transport::WorkerStatus>>;

class WorkerStatusPoll {
 public:
  // Neither owned; both outlive this.
  WorkerStatusPoll(Membership* membership, Dispatcher* dispatcher)
      : membership_(membership), dispatcher_(dispatcher) {}

  WorkerStatusPoll(const WorkerStatusPoll&) = delete;
  WorkerStatusPoll& operator=(const WorkerStatusPoll&) = delete;

  // Asks every alive worker now (the question leaves when the outbox is
  // drained); a worker that has not answered within `timeout` gets
  // DeadlineExceeded in its place. Resolves on this class's thread.
  Future<WorkerStatuses> Ask(absl::Duration timeout);

 private:
  Membership* const membership_;
  Dispatcher* const dispatcher_;
  ThreadPool waiter_{"head-status", 1};
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_WORKER_STATUSES_H_
