// Health: which hosts still answer, which sessions are still there. See
// docs/failure.md and docs/membership.md.
//
// Hosts. Every heartbeat interval the monitor pings each alive host that
// has no ping in flight (ControlChannel::Heartbeat). A host is lost when it
// has not answered OK for `heartbeat_timeout`: a stopped process, a link
// taken down. One failed or slow ping is not a death; a broken connection
// is, but the transport reports that itself (WorkerListener), at once.
//
// Sessions. Each watched session holds a lease: any call on it (Touch)
// renews it; one silent for longer than its lease expires, and the session
// service closes it (its devices, arrays, executables and queued work go).
// A transport that holds a session open (in-process) does not lease it.
//
// Callbacks run on the thread of CheckNow (the monitor's own thread, or a
// test's), one at a time, with no lock held. Thread-safe.
#ifndef CAUSEWAY_HEAD_HEALTH_H_
#define CAUSEWAY_HEAD_HEALTH_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/base/ids.h"
#include "causeway/head/membership.h"

namespace causeway::head {

class HealthMonitor {
 public:
  struct Options {
    // Zero: no pings (the host side of CheckNow does nothing).
    absl::Duration heartbeat_interval = absl::Milliseconds(500);
    absl::Duration heartbeat_timeout = absl::Seconds(3);
    // For tests; absl::Now by default.
    std::function<absl::Time()> clock;
  };
  struct Callbacks {
    std::function<void(HostId host, const std::string& reason)> host_lost;
    std::function<void(SessionId session, const std::string& reason)>
        lease_expired;
  };

  // `membership` (not owned, outlives the monitor) gives the hosts' channels.
  HealthMonitor(Options options, Membership* membership, Callbacks callbacks);
  ~HealthMonitor();  // Stop().

  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // Runs CheckNow every heartbeat interval (or, without pings, often enough
  // for the shortest lease) on a thread of its own, until Stop. Idempotent.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Stops and joins the thread. Idempotent. Not from a callback.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // One round: declares lost the hosts silent for the timeout and expires
  // the leases that ran out (callbacks, on this thread), then pings the
  // hosts with no ping in flight.
  void CheckNow() ABSL_LOCKS_EXCLUDED(mu_);

  // Starts the clock of a host that became alive.
  void WatchHost(HostId host) ABSL_LOCKS_EXCLUDED(mu_);
  void ForgetHost(HostId host) ABSL_LOCKS_EXCLUDED(mu_);

  // The session expires unless touched within `lease` (positive).
  void WatchSession(SessionId session, absl::Duration lease)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Renews the lease of a watched session (others are ignored).
  void Touch(SessionId session) ABSL_LOCKS_EXCLUDED(mu_);
  void ForgetSession(SessionId session) ABSL_LOCKS_EXCLUDED(mu_);

  // For every watched host, how long ago it last answered a heartbeat OK
  // (or was first watched), by the monitor's clock.
  std::map<HostId, absl::Duration> HeartbeatAges() const;

 private:
  struct Host {
    absl::Time last_ok;  // Of its last OK answer, or of WatchHost.
    bool ping_in_flight = false;
    uint64_t watch = 0;  // Tells answers to an earlier watch apart.
  };
  // Shared with the answers of pings still in flight, which may come after
  // the monitor is gone.
  struct Hosts {
    std::function<absl::Time()> clock;
    absl::Mutex mu;
    std::map<HostId, Host> hosts ABSL_GUARDED_BY(mu);
    uint64_t next_watch ABSL_GUARDED_BY(mu) = 1;
  };
  struct Lease {
    absl::Duration lease;
    absl::Time expires;
  };

  void Loop();

  const Options options_;
  Membership* const membership_;
  const Callbacks callbacks_;

  const std::shared_ptr<Hosts> hosts_;

  mutable absl::Mutex mu_;  // The leases and the thread.
  std::map<SessionId, Lease> leases_ ABSL_GUARDED_BY(mu_);
  absl::Duration shortest_lease_ ABSL_GUARDED_BY(mu_) =
      absl::InfiniteDuration();
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace causeway::head

#endif  // CAUSEWAY_HEAD_HEALTH_H_
