// OpDoneBatcher: a worker's OpDone notices for one launch leave together.
//
// Each device of a launch reports its op when it ends, and each report was
// a message of its own to the head: at 128 sim hosts of 4 devices, 4
// notices per host per program, each read and handled on the head's gRPC
// threads (BENCHMARKS.md, "The head at scale"). The devices of one launch on
// one host end within moments of each other (an SPMD launch meets in its
// collectives), and the head finishes a launch only once every device has
// reported (Dispatcher::OnOpDone), so holding the first reports until the
// last of the host's devices has ended costs the head nothing: this class
// holds them and sends the launch's reports in one OnOpsDone.
//
// * Expect(island, seq, n) before the launch's n ops of this host are
//   queued; a report of a launch not expected (or whose reports already
//   left) goes on at once.
// * A report with an error goes on at once, with those held before it: a
//   failure must reach the head without waiting for the devices still
//   running (they may be waiting on the failed one). Later reports of that
//   launch go on at once too.
// * Every other notice goes on untouched.
//
// Thread-safe: devices report on their own threads. `next` must outlive it.
#ifndef CAUSEWAY_WORKER_OP_DONE_BATCHER_H_
#define CAUSEWAY_WORKER_OP_DONE_BATCHER_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/ids.h"
#include "causeway/transport/control_channel.h"

namespace causeway::worker {

class OpDoneBatcher final : public transport::WorkerListener {
 public:
  explicit OpDoneBatcher(transport::WorkerListener* next) : next_(next) {}

  // `ops` more ops of launch (island, seq) run on this host.
  void Expect(IslandId island, uint64_t seq, int ops);

  void OnOpDone(const transport::OpDone& done) override;
  void OnPushFailed(const transport::UndeliveredPiece& piece) override {
    next_->OnPushFailed(piece);
  }
  void OnWorkerDisconnected(HostId host, absl::Status why) override {
    next_->OnWorkerDisconnected(host, std::move(why));
  }
  void OnTraceEvents(HostId host, std::vector<trace::EventRecord> events,
                     absl::Duration clock_offset) override {
    next_->OnTraceEvents(host, std::move(events), clock_offset);
  }

  // Launches with reports held or still expected (for tests).
  size_t pending() const;

 private:
  struct Launch {
    int expected = 0;   // Ops of this host not reported yet.
    bool open = false;  // An error went on: the rest go on at once.
    std::vector<transport::OpDone> held;
  };

  transport::WorkerListener* const next_;
  mutable absl::Mutex mu_;
  std::map<std::pair<int64_t, uint64_t>, Launch> launches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace causeway::worker

#endif  // CAUSEWAY_WORKER_OP_DONE_BATCHER_H_
