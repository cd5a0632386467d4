// Sealed Gloo pairs (docs/security.md, "Collectives").
//
// Debian's Gloo has no TLS transport, and its TCP pair writes and reads
// its socket itself. So a sealed pair's Gloo socket is one end of a
// loopback connection inside this process; the relay holds the other end
// and the proven socket to the peer, and moves bytes between them:
//
//   Gloo --loopback-- relay ==sealed records== relay --loopback-- Gloo
//
// What Gloo sends is sealed into records (sealed_records.h) of at most
// kRelayRecordBytes: u32 length (clear, authenticated) | ciphertext |
// tag; what comes from the peer is opened, and only then written to Gloo.
// A record that fails to open (changed, dropped, repeated, replayed from
// another connection, or a length over the bound) closes the pair's both
// connections: Gloo sees its pair closed and fails the collective; the
// relay logs which rank of which context sent it.
//
// The loopback connection is made by this process (listen on an ephemeral
// loopback port, connect, and accept only the connection whose address is
// the one we connected from): another local process that races to the
// port is closed unread.
//
// Threads: one relay thread per context, for all of its pairs; Stop (or
// the destructor) tells it to finish, and it closes every socket and ends
// on its own. Thread-safe.
#ifndef CAUSEWAY_TRANSPORT_SEALED_RELAY_H_
#define CAUSEWAY_TRANSPORT_SEALED_RELAY_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "causeway/transport/sealed_records.h"

namespace causeway::transport {

inline constexpr uint32_t kRelayRecordBytes = uint32_t{1} << 20;

class SealedRelay {
 public:
  struct Link {
    int peer_rank = -1;
    int remote_fd = -1;  // The proven connection to the peer; owned.
    SealKey send_key{};
    SealKey receive_key{};
  };

  // Starts relaying `links` (the relay owns their sockets from here on,
  // also on failure). `*gloo_fds` gets, per peer rank, the socket Gloo's
  // pair adopts. `name` says which context, in logs.
  static absl::StatusOr<std::unique_ptr<SealedRelay>> Start(
      std::string name, std::vector<Link> links, std::map<int, int>* gloo_fds);

  ~SealedRelay();  // Stop().
  SealedRelay(const SealedRelay&) = delete;
  SealedRelay& operator=(const SealedRelay&) = delete;

  // Stops relaying, without waiting: call once Gloo's pairs are closed.
  // The relay's thread then sends on what they wrote last and closes each
  // pair once its peer has closed too (a lingering close, as a plain
  // socket's: closing with the peer's bytes unread would reset the
  // connection and lose what the peer has not read yet), or after 5 s,
  // and ends by itself. Idempotent.
  void Stop();

  // Records from peers that failed to open, in this process (for tests).
  static int64_t RecordsRefused();
  // Relay threads not yet ended in this process, stopped or not (tests).
  static int64_t Running();

 private:
  struct Pair;
  struct Relay;
  SealedRelay(std::shared_ptr<Relay> relay, int wake_write);

  int wake_write_ = -1;  // Closed by Stop: wakes the thread.
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_SEALED_RELAY_H_
