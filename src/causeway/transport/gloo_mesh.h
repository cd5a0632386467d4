// Gloo contexts whose TCP connections we make and authenticate ourselves
// (docs/security.md, "Collectives").
//
// Debian's Gloo (2022) connects a context's pairs itself: every pair opens
// a listening socket on a port the kernel picks and takes the first
// connection that comes, whoever makes it. Anyone who can reach the port
// while a context is set up can connect first, and read or inject the
// collective's data, or break it. So no Gloo socket ever accepts here:
//
// * each rank of a context opens one listening socket of its own and
//   publishes its address and a fresh random 32-byte secret in the
//   rendezvous store (the head's key-value store, reached over the
//   worker's authenticated stream);
// * the key of the pair (i, j) is HMAC-SHA256(token, the context's prefix,
//   i, j, both ranks' secrets): only the members of this context (who read
//   the store) and the cluster's token holders (who have the token) can
//   compute it;
// * the higher rank dials the lower; both prove the pair's key, each over
//   the other's fresh nonce (an HMAC challenge and response, as the data
//   plane's handshake), so a replayed handshake fails, a connection that
//   proves nothing is dropped, and the listener keeps accepting until its
//   real peer comes;
// * the proven socket is handed to a Gloo TCP pair (a subclass that closes
//   the listening socket Gloo opened for it unused and adopts ours), and
//   Gloo runs its collectives over it as before.
//
// With a token (and `encrypt`), every pair is sealed: Gloo's pair talks to
// a relay of this process over loopback, and the relay carries its bytes
// to the peer's relay in AES-256-GCM records under keys derived from the
// pair's key and this handshake's nonces (sealed_relay.h; the installed
// Gloo has no TLS transport).
#ifndef CAUSEWAY_TRANSPORT_GLOO_MESH_H_
#define CAUSEWAY_TRANSPORT_GLOO_MESH_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "causeway/transport/gloo_store.h"
#include "gloo/context.h"
#include "gloo/transport/device.h"

namespace causeway::transport {

struct GlooMeshOptions {
  int rank = 0;
  int size = 1;
  // Gloo's TCP device (its I/O thread runs the pairs).
  std::shared_ptr<::gloo::transport::Device> device;
  // Where this rank listens, as its peers reach it (numeric).
  std::string hostname = "127.0.0.1";
  // The cluster's token (may be empty: the store's secrets still bind the
  // pairs to this context's members).
  std::string token;
  // With a token: seal every pair (above). Ranks that differ refuse each
  // other (FailedPrecondition). Off only to measure its cost.
  bool encrypt = true;
  // Each pair's own timeout (Gloo's SO_RCVTIMEO/SO_SNDTIMEO).
  std::chrono::milliseconds pair_timeout{30000};
  // The whole rendezvous.
  absl::Time deadline = absl::InfiniteFuture();
  // A connection that has not finished its handshake this long is dropped.
  absl::Duration handshake_timeout = absl::Seconds(5);
  // Connections in their handshake at once; past it the oldest is dropped.
  int max_pending_handshakes = 64;
};

// Connects rank `options.rank` of a context through `store` (its
// rendezvous, under the store's prefix): every pair authenticated as above.
// The store's failure (an abort, a key not set in time) when it throws;
// DeadlineExceeded when a peer never connects or never proves the key;
// Unavailable for a socket error; Unauthenticated when a peer we dial
// cannot prove it.
absl::StatusOr<std::shared_ptr<::gloo::Context>> ConnectGlooMesh(
    const GlooMeshOptions& options, GlooStore& store);

// For tests: connections refused or dropped by this process's meshes
// (proofs that did not match, garbage, handshakes that never finished).
int64_t GlooMeshConnectionsRefused();

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_GLOO_MESH_H_
