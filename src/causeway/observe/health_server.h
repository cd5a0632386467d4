// A worker's probe endpoint (`causeway worker --health-listen HOST:PORT`,
// docs/deploy.md), for Kubernetes' liveness and readiness probes:
//
//   /healthz  200 "ok" while the process serves (liveness)
//   /readyz   200 "ready: ..." while the worker is alive in its head's
//             membership (its devices in the head's pool), 503 with why
//             not while it registers or re-registers (readiness)
//
// Served by cpp-httplib (a connection waits for its request without a
// thread: http_connections.h); says nothing about the work, so it asks for
// no token. Other paths get 404, other methods 405.
//
// Thread-safe.
#ifndef CAUSEWAY_OBSERVE_HEALTH_SERVER_H_
#define CAUSEWAY_OBSERVE_HEALTH_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace httplib {
class Server;
}

namespace causeway::observe {

class HealthServer {
 public:
  // Listening once it returns, not ready (`why`). InvalidArgument for a
  // malformed address, Unavailable if it cannot bind.
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(
      const std::string& listen, std::string why);
  ~HealthServer();  // Shutdown().

  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  // /readyz answers 200 with `what` / 503 with `why`.
  void SetReady(std::string what) ABSL_LOCKS_EXCLUDED(mu_);
  void SetNotReady(std::string why) ABSL_LOCKS_EXCLUDED(mu_);

  // HOST:PORT it listens on (the port chosen when it was 0).
  const std::string& address() const { return address_; }
  // Stops accepting and joins its thread. Idempotent.
  void Shutdown();

 private:
  HealthServer();

  mutable absl::Mutex mu_;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  std::string text_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<httplib::Server> server_;
  std::string address_;
  std::thread thread_;
};

}  // namespace causeway::observe

#endif  // CAUSEWAY_OBSERVE_HEALTH_SERVER_H_
