// The data plane over TCP (standalone Asio): one object per worker process.
// See docs/data_plane.md for the protocol, the frames and the failure
// semantics.
//
// * It listens on an address (port 0 picks a free one; address() reports
//   the bound one) and accepts connections from the other workers.
// * Push(host, piece) writes the piece to a long-lived connection to that
//   host, dialled lazily from the peer table (SetPeer / RemovePeer: the
//   worker process keeps it current from the head's updates). One
//   connection per ordered pair of workers: pieces from A to B go on the
//   connection A dialled; B acknowledges each piece on it once its
//   receiver took it, which resolves the Push future.
// * It delivers received pieces to the attached PieceReceiver: an announced
//   receive is read straight into its destination buffer (BeginPiece); any
//   other piece is read into a literal of its own and handed over with
//   ReceivePiece.
//
// Failure: a piece that cannot be delivered resolves its Push future with
// Unavailable (the peer is unknown or was removed, refused or could not be
// reached, or the connection broke before the peer acknowledged the piece),
// so the sender can fail the destination through the head. A connection
// from peer P that breaks fails the piece it was carrying and tells the
// receiver (ConnectionLost), which fails every receive still waiting for
// data from P. A peer that sends anything malformed (bad handshake, a
// header field out of range, a size over the bounds) has its connection
// closed before anything is allocated for it, and the process goes on.
//
// Threads: one I/O thread per data plane runs every socket operation and
// every call into the receiver; Push futures resolve there too (or on the
// calling thread for errors known at once). Thread-safe.
#ifndef CAUSEWAY_TRANSPORT_TCP_DATA_PLANE_H_
#define CAUSEWAY_TRANSPORT_TCP_DATA_PLANE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "causeway/base/future.h"
#include "causeway/base/ids.h"
#include "causeway/transport/data_plane.h"

namespace causeway::transport {

struct TcpDataPlaneOptions {
  // "IP:PORT" ("[IPv6]:PORT"); port 0 picks a free port. Numeric only.
  std::string listen_address = "127.0.0.1:0";
  // This worker process's incarnation (a fresh random id per process
  // start). Peers dial it expecting this value and are refused otherwise,
  // so a stale peer table never reaches a restarted worker on the same
  // port. Zero: one is drawn at random.
  uint64_t incarnation = 0;
  // The shared secret every connection proves in its handshake (an
  // HMAC-SHA256 challenge and response both ways over fresh nonces; the
  // token never crosses the wire). A peer that cannot prove it is refused
  // (and logged); a listener that cannot prove it is not sent anything.
  // Empty: the empty key, which anyone can compute (loopback only).
  std::string auth_token;
  // With a token set, everything after the handshake is sealed: encrypted
  // and authenticated with AES-256-GCM under keys derived from the token
  // and the handshake's fresh nonces, one per direction (docs/security.md,
  // "Encryption"). A record changed, dropped, repeated or replayed from
  // another connection fails to open: the connection closes and the piece
  // it carried fails, naming the peer. Both ends must agree; a dialler
  // whose choice differs is refused. Without a token there is no secret to
  // key it with, and nothing is sealed. Off only to measure its cost.
  bool encrypt = true;
  // The largest piece accepted from a peer, in bytes (its header is
  // refused before anything is allocated otherwise).
  int64_t max_piece_bytes = int64_t{4} << 30;
  // Dialling a peer (connect plus handshake), and a peer's handshake on an
  // accepted connection. A proven peer that is not in the peer table
  // (yet: the head's membership update may come a little after its first
  // piece) waits for it this long, then is refused.
  absl::Duration handshake_timeout = absl::Seconds(5);
  // Accepted connections still in their handshake: past this many, the
  // oldest is dropped, so a flood of idle connections costs no more.
  int max_pending_handshakes = 256;
  // Pieces that come before their receive is announced are read into
  // memory of their own until the worker takes them; all of them together
  // (counting 256 bytes more for each) stay within this bound. A piece
  // that would go over waits, unread, up to `early_piece_wait` for its
  // receive or for room, then is refused: its bytes are read and dropped
  // and its sender hears ResourceExhausted naming the limit.
  int64_t max_early_piece_bytes = int64_t{1} << 30;
  absl::Duration early_piece_wait = absl::Seconds(5);
  // TCP keepalive on every connection (an idle connection to a host that
  // vanished breaks within idle + interval * count) and TCP_USER_TIMEOUT
  // (sent data unacknowledged this long breaks the connection).
  absl::Duration keepalive_idle = absl::Seconds(1);
  absl::Duration keepalive_interval = absl::Seconds(1);
  int keepalive_count = 3;
  absl::Duration user_timeout = absl::Seconds(10);
  // Box pieces whose contiguous runs are at least this long are written
  // from their source runs and read into their destination runs straight
  // (writev/readv); narrower ones go through a staging block (measured:
  // staging wins up to 1 KiB runs; docs/data_plane.md).
  int64_t min_direct_run_bytes = 2048;
};

// Counters, for tests and the status view.
struct TcpDataPlaneStats {
  int64_t connections_accepted = 0;  // Handshakes that succeeded.
  int64_t connections_refused = 0;   // Handshakes refused (token, version,
                                     // incarnation, unknown host).
  int64_t protocol_errors = 0;       // Connections closed for bad frames.
  int64_t pieces_received = 0;
  int64_t pieces_in_place = 0;       // Of those, read straight into a buffer.
  int64_t bytes_received = 0;        // Payload bytes.
  int64_t pieces_sent = 0;           // Acknowledged by the peer.
  int64_t bytes_sent = 0;            // Payload bytes written.
  int64_t pieces_refused = 0;        // Early pieces over the bound.
  int64_t early_piece_bytes = 0;     // Held now for receives not announced.
  int64_t early_pieces_waiting = 0;  // Now waiting, unread, for room.
  int64_t records_refused = 0;       // Sealed records that failed to open
                                     // (connections closed for it).
};

class TcpDataPlane final : public DataPlane {
 public:
  // Binds and starts listening. InvalidArgument for a malformed address,
  // Unavailable if it cannot be bound.
  static absl::StatusOr<std::unique_ptr<TcpDataPlane>> Create(
      TcpDataPlaneOptions options);
  ~TcpDataPlane() override;  // Shutdown().

  TcpDataPlane(const TcpDataPlane&) = delete;
  TcpDataPlane& operator=(const TcpDataPlane&) = delete;

  // The bound address, "IP:PORT".
  const std::string& address() const;
  uint64_t incarnation() const;

  // Names this process (the host id the head assigned it: peers see it in
  // the handshake) and the receiver of incoming pieces. Connections
  // accepted before this wait for it (their handshake is answered; their
  // pieces are read once attached). Call once. `receiver` must stay valid
  // until Shutdown returns.
  void Attach(HostId self, PieceReceiver* receiver);

  // The peer table. SetPeer adds or updates `host`; a changed address or
  // incarnation closes the old connection (its pieces not yet acknowledged
  // fail). RemovePeer closes every connection to and from `host`: pieces
  // on their way there fail, pieces coming from it are lost (the receiver
  // is told). Unknown hosts are ignored.
  void SetPeer(HostId host, std::string address, uint64_t incarnation);
  void RemovePeer(HostId host);

  // See DataPlane. FailedPrecondition before Attach.
  Future<> Push(HostId destination, PieceMessage piece) override;

  TcpDataPlaneStats Stats() const;

  // Waits until every push made so far has resolved (acknowledged or
  // failed), for a clean stop; false if some are still pending by
  // `deadline`.
  bool AwaitIdle(absl::Time deadline);

  // Closes the listener and every connection, fails pushes still pending
  // with Unavailable, and joins the I/O thread: after it returns, no call
  // into the receiver is in progress or will start. Idempotent; do not call
  // from a receiver callback.
  void Shutdown();

 private:
  class Impl;
  explicit TcpDataPlane(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_TCP_DATA_PLANE_H_
