// The head's HTTP endpoint (`causeway head --http-listen`, docs/operate.md),
// served by cpp-httplib on threads of its own:
//
//   /             the live web page (static: it fetches /api/status)
//   /api/status   the cluster as JSON (status_json.h)
//   /api/history  finished sessions and host deaths as JSON (history.h)
//   /metrics      Prometheus text exposition
//   /trace        ?seconds=N: the recent trace of every worker (Perfetto)
//   /healthz      "ok" while the head serves (for probes)
//
// Never on the dispatch path: a request formats what the ClusterObserver
// gathered and the head's View (its locks taken briefly); it never waits
// for a worker. With a token, every endpoint but the page's static HTML and
// /healthz (which say nothing about the cluster) needs the header
// `Authorization: Causeway-Proof PROOF`, a fresh proof of the token
// (transport/call_proof.h: the token is proven, never sent), and answers
// 401 naming what is wrong without one. A bearer token
// (`Authorization: Bearer TOKEN`, compared in constant time: what
// Prometheus and curl send) is accepted only where it cannot be read on
// the way: over HTTPS, or where the head was told --insecure. With a TLS
// certificate it serves HTTPS only, and with a CA too it
// requires every client's certificate signed by it (mutual TLS), refusing
// the TLS handshake otherwise. Unknown paths get 404, other methods 405, a malformed
// query 400, each with a JSON {"error": "..."}.
//
// Thread-safe.
#ifndef CAUSEWAY_OBSERVE_HTTP_SERVER_H_
#define CAUSEWAY_OBSERVE_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "causeway/observe/cluster_observer.h"
#include "causeway/observe/history.h"
#include "causeway/transport/call_proof.h"

namespace httplib {
class Server;
}

namespace causeway::observe {

struct HttpServerOptions {
  std::string listen = "127.0.0.1:0";  // HOST:PORT; port 0 picks one.
  std::string token;                   // Empty: no token asked.
  // Over plain HTTP, accept the bearer token itself too (`--insecure`: the
  // operator trusts the network not to read it).
  bool accept_bearer_in_clear_text = false;
  // HTTPS with this certificate and key (PEM files; the head's own
  // --tls-cert/--tls-key). Empty: plain HTTP.
  std::string tls_cert_file{};
  std::string tls_key_file{};
  // With TLS: clients must present a certificate signed by this CA.
  std::string tls_ca_file{};
  ClusterObserver* observer = nullptr;  // Required; not owned.
  // Null: /api/history answers 501. Not owned.
  const HistoryRecorder* history = nullptr;
  // The trace of what was recorded since a time, as Chrome trace-event
  // JSON (/trace); null: /trace answers 501.
  std::function<absl::StatusOr<std::string>(absl::Time since)> trace;
};

class HttpServer {
 public:
  // Listening once it returns. InvalidArgument for a malformed address or
  // TLS files that cannot be loaded, Unavailable if it cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      HttpServerOptions options);
  ~HttpServer();  // Shutdown().

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // HOST:PORT it listens on (the port chosen when it was 0).
  const std::string& address() const { return address_; }
  // Stops accepting and joins its threads. Idempotent.
  void Shutdown();

 private:
  HttpServer(HttpServerOptions options,
             std::unique_ptr<httplib::Server> server);

  const HttpServerOptions options_;
  const transport::ProofCheck proofs_;  // Of options_.token.
  std::unique_ptr<httplib::Server> server_;
  std::string address_;
  std::thread thread_;
};

// HOST:PORT split ("[::1]:80" too); InvalidArgument when malformed.
absl::StatusOr<std::pair<std::string, int>> SplitHostPort(
    const std::string& address);

}  // namespace causeway::observe

#endif  // CAUSEWAY_OBSERVE_HTTP_SERVER_H_
