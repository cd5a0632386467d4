// What every gRPC piece of the control plane shares (docs/distributed.md):
// the protocol version and its negotiation, status conversion at the
// service edge, credentials (TLS, the token), channel and server arguments
// (keepalive, message sizes), and the token check every handler starts
// with.
#ifndef CAUSEWAY_TRANSPORT_GRPC_COMMON_H_
#define CAUSEWAY_TRANSPORT_GRPC_COMMON_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/arena.h"
#include "causeway/transport/call_proof.h"
#include "grpcpp/grpcpp.h"

namespace causeway::transport {

// The protocol versions this build speaks, one range per protocol. A
// peer's GetVersion(min, max) gets the highest version both ranges
// contain; features added later are gated on the negotiated version.
struct ProtocolVersions {
  uint32_t min = 0;
  uint32_t max = 0;
  bool Contains(uint32_t version) const {
    return version >= min && version <= max;
  }
};
// Client <-> head (proto/session.proto).
inline constexpr ProtocolVersions kSessionProtocol{1, 1};
// Worker <-> head (proto/worker.proto). Version 2: names travel by number
// (wire_names.h) and releases inside dispatches. Version 3: so do a
// launch's peers (LaunchOp.peers). A worker or head of an older version is
// refused at GetVersion.
inline constexpr ProtocolVersions kWorkerProtocol{3, 3};

// The highest version in both [peer_min, peer_max] and `ours`;
// FailedPrecondition naming both ranges when they do not meet.
absl::StatusOr<uint32_t> ChooseProtocolVersion(const ProtocolVersions& ours,
                                               uint32_t peer_min,
                                               uint32_t peer_max);

// The deadline of a call that may take `timeout` from now.
inline std::chrono::system_clock::time_point GrpcDeadline(
    absl::Duration timeout) {
  return absl::ToChronoTime(absl::Now() + timeout);
}

// Status conversion at the service edge (codes are the same numbers).
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// How the processes of one cluster trust each other. Empty fields are off.
struct GrpcSecurity {
  // Every call carries it; a server with one refuses calls without it
  // (UNAUTHENTICATED) before any other work.
  std::string token;
  // TLS. A server needs its certificate and key (PEM files); a client
  // needs the certificate authority that signed the server's certificate
  // (`tls_ca_file`), or the server's self-signed certificate itself.
  // Mutual TLS: a server given `tls_ca_file` requires every client to
  // present a certificate signed by it (the client's `tls_cert_file` and
  // `tls_key_file`), and refuses the TLS handshake otherwise.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
  // A client with a token refuses to talk in clear text (no TLS) to a head
  // that is not on loopback (anyone on the network path could read its
  // session's keys, programs and arrays; the token itself is only proven),
  // unless this is set (`--insecure`, `insecure=True`).
  bool allow_clear_text = false;

  bool tls() const {
    return !tls_cert_file.empty() || !tls_key_file.empty() ||
           !tls_ca_file.empty();
  }
};

// True for loopback: 127.0.0.0/8, ::1 (bracketed or not), "localhost".
bool IsLoopbackHost(const std::string& host);

// A client about to dial `target` ("HOST:PORT") with `security`:
// FailedPrecondition, saying why, when it would talk in clear text to a
// head that is not on loopback (above).
absl::Status RefuseClearTextToRemoteHead(const std::string& target,
                                         const GrpcSecurity& security);

// The token in `path`, surrounding whitespace removed. InvalidArgument if
// the file cannot be read or holds no token.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// Credentials for a server (TLS when a certificate and key are given,
// both required together) and for a client (TLS when a CA file is given).
// InvalidArgument naming the file that cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const GrpcSecurity& security);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const GrpcSecurity& security);

// The largest message either side accepts: room for a big program's HLO
// text; array bytes never ride a message (they go in 1 MiB chunks).
inline constexpr int kMaxMessageBytes = 512 << 20;

// Keepalive, as reference/distributed.md §4 recommends: both ends ping an
// idle connection every `time` and drop it when a ping is not acknowledged
// within `timeout`, so a downed link or a stopped peer breaks its streams
// (a client's keepalive also sets TCP_USER_TIMEOUT). The server accepts
// pings as often as every 500 ms without data and never answers them with
// GOAWAY(too_many_pings).
struct KeepaliveOptions {
  absl::Duration time = absl::Seconds(1);
  absl::Duration timeout = absl::Seconds(2);

  // What `--keepalive-timeout` sets: pings every timeout / 2.
  static KeepaliveOptions WithTimeout(absl::Duration timeout) {
    return {.time = timeout / 2, .timeout = timeout};
  }
};

// Stops `server` (the head's, the proxy's), once its owner has ended its
// own streams, and waits for its handlers to return. Calls still in flight
// get 0.5 s before they are cancelled and every connection is closed.
// gRPC's shutdown also waits for each client's connection to close after
// its GOAWAY, and a client of gRPC's synchronous API reads its socket only
// while a call of its is active: a disconnected Python client that still
// holds an object of its session reads the GOAWAY only when keepalive
// breaks the connection (3 s). So the grace is short (bench/stop_bench.py).
void StopServer(grpc::Server& server);

// Arguments of a client channel to the head. `purpose` ("control",
// "bulk") keeps channels of different purposes on their own connections,
// so that bulk bytes never queue behind (or ahead of) the control stream.
grpc::ChannelArguments MakeChannelArguments(const KeepaliveOptions& keepalive,
                                            const std::string& purpose);
// Server arguments to match.
void ConfigureServerBuilder(const KeepaliveOptions& keepalive,
                            grpc::ServerBuilder* builder);

// Every call to the head carries a proof of the token (call_proof.h) under
// this metadata key.
inline constexpr char kProofMetadataKey[] = "causeway-proof";

// Adds the proof of the token (if any) to a call.
void AddCredentials(const GrpcSecurity& security, grpc::ClientContext* context);

// The first thing every handler does: OK when the server has no token or
// the call carries a proof of it that ProofCheck accepts; UNAUTHENTICATED
// (or RESOURCE_EXHAUSTED) otherwise, naming why. Thread-safe.
class TokenCheck {
 public:
  explicit TokenCheck(std::string token) : proofs_(std::move(token)) {}
  grpc::Status Check(const grpc::ServerContextBase& context) const;

 private:
  const ProofCheck proofs_;
};

// A fresh random 64-bit number (incarnations, session keys).
uint64_t RandomUint64();

// Messages read off a hot stream are parsed into a protobuf arena: the
// parse takes its sub-messages, repeated fields and strings from the
// arena's blocks instead of calling malloc for each, and they all go at
// once with the arena (docs/distributed.md, "The cost of a message").
//
// ArenaMessage owns its arena: for a message that is queued and outlives
// the read (the worker's commands). Its blocks start at 4 KiB and grow to
// 64 KiB, so a dispatch of many launches costs a handful of mallocs.
template <typename T>
class ArenaMessage {
 public:
  ArenaMessage()
      : arena_(std::make_unique<google::protobuf::Arena>(Options())),
        message_(google::protobuf::Arena::CreateMessage<T>(arena_.get())) {}
  ArenaMessage(ArenaMessage&&) = default;
  ArenaMessage& operator=(ArenaMessage&&) = default;

  T* get() const { return message_; }
  T& operator*() const { return *message_; }
  T* operator->() const { return message_; }

 private:
  static google::protobuf::ArenaOptions Options() {
    google::protobuf::ArenaOptions options;
    options.start_block_size = 4 << 10;
    options.max_block_size = 64 << 10;
    return options;
  }

  std::unique_ptr<google::protobuf::Arena> arena_;
  T* message_;
};

// For a loop that handles each message before it reads the next: Next()
// empties the arena and gives a new message, parsed into a first block
// that is kept from one message to the next, so a message that fits in it
// (most notices and requests) costs no malloc at all.
template <typename T>
class ReusedArenaMessage {
 public:
  explicit ReusedArenaMessage(size_t first_block_bytes = 64 << 10)
      : block_(new char[first_block_bytes]),
        arena_(Options(block_.get(), first_block_bytes)) {}
  ReusedArenaMessage(const ReusedArenaMessage&) = delete;
  ReusedArenaMessage& operator=(const ReusedArenaMessage&) = delete;

  // An empty message; the one Next gave before is gone.
  T* Next() {
    arena_.Reset();
    return google::protobuf::Arena::CreateMessage<T>(&arena_);
  }

 private:
  static google::protobuf::ArenaOptions Options(char* block, size_t bytes) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block;
    options.initial_block_size = bytes;
    options.max_block_size = 64 << 10;
    return options;
  }

  std::unique_ptr<char[]> block_;  // Before arena_: outlives it.
  google::protobuf::Arena arena_;
};

}  // namespace causeway::transport

#endif  // CAUSEWAY_TRANSPORT_GRPC_COMMON_H_
