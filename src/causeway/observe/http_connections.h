// How our HTTP endpoints (the head's, http_server.h; a worker's probes,
// health_server.h) run cpp-httplib so that a flood of connections does not
// stall them (docs/security.md, "Limits").
//
// cpp-httplib gives every accepted connection a thread of its pool until
// its request has been read (up to the read timeout per read) and, with
// keep-alive, until the next one comes: 40 idle connections held the head's
// 4 threads for 50 s. Here:
//
// * Both: a listen backlog of 1024, not httplib's 5 (WidenListenBacklog),
//   so that a burst of connections is accepted, not dropped by the kernel
//   (its clients, a flood's and everyone else's, retried after 1 s).
// * Plain HTTP (MakeAdmittingServer): an accepted connection first waits,
//   with no thread of its own, in a waiting room (one epoll thread) until
//   its request head has come whole (a blank line, seen with MSG_PEEK, or
//   64 KiB); only then does a thread read and answer it, and close it (no
//   keep-alive). A connection whose head has not come within 5 s is closed
//   there, as is the oldest when 4096 wait. So idle connections and slow
//   senders cost a socket each, never a thread.
// * HTTPS (MakeAdmittingTlsServer): the same waiting room makes the TLS
//   handshake too, a step each time its bytes come (non-blocking OpenSSL),
//   and reads the request's first bytes; the 5 s deadline covers the
//   handshake and the head together. A handshake held open, stalled
//   half-way or refused (no client certificate of the CA) costs a socket
//   and a TLS session object, never a thread.
#ifndef CAUSEWAY_OBSERVE_HTTP_CONNECTIONS_H_
#define CAUSEWAY_OBSERVE_HTTP_CONNECTIONS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace causeway::observe {

// A plain-HTTP server with the waiting room, `max_threads` at most to
// answer requests whose head has come. Configured (timeouts, socket
// options); bind and listen as any httplib::Server.
std::unique_ptr<httplib::Server> MakeAdmittingServer(int max_threads);

// After binding (before listen_after_bind): a listen backlog of 1024
// instead of httplib's 5, so that a burst of connections is not dropped
// by the kernel (its clients would wait a second or more to retry).
void WidenListenBacklog(httplib::Server& server);

struct TlsFiles {
  std::string cert_file;  // PEM, with its chain.
  std::string key_file;
  // Set: mutual TLS, a client certificate signed by this CA is required.
  std::string client_ca_file{};
};

// The same, serving HTTPS only (TLS 1.2 at least) with `tls`.
// InvalidArgument naming the files when they cannot be loaded (missing,
// not PEM, a key that does not match the certificate).
absl::StatusOr<std::unique_ptr<httplib::Server>> MakeAdmittingTlsServer(
    int max_threads, const TlsFiles& tls);

}  // namespace causeway::observe

#endif  // CAUSEWAY_OBSERVE_HTTP_CONNECTIONS_H_
