// The wire format of the TCP data plane (docs/data_plane.md): the
// connection handshake and the frames. Pure encoding and decoding (and a
// blocking handshake over a socket, for tests and tools); every decoder
// validates every field and bounds every size before the caller allocates
// anything for what follows. All integers are little-endian.
//
// The handshake proves the shared token without sending it (an HMAC-SHA256
// challenge and response, both ways, over a fresh nonce from each side:
// a recorded handshake replayed on a new connection meets a new nonce and
// fails). With no token configured the key is empty: anyone may connect,
// which only a loopback listener allows (docs/security.md).
//
//   hello (dialler -> listener), 64 bytes:
//     u32 magic "CWDP" | u16 version | u16 flags (bit 0: sealed)
//     i64 sender host | u64 sender incarnation
//     u64 incarnation the dialler expects to reach | dialler nonce[32]
//   challenge (listener -> dialler), 76 bytes + message:
//     u32 magic | u16 version | u16 status code (0: go on)
//     u32 message bytes (<= 4096) | listener nonce[32]
//     listener proof[32] = HMAC(token, "causeway data plane: listener" |
//                               hello | listener nonce) | message
//   proof (dialler -> listener), 32 bytes:
//     HMAC(token, "causeway data plane: dialler" | hello | listener nonce)
//   reply (listener -> dialler), 12 bytes + message:
//     u32 magic | u16 version | u16 status code (0: accepted)
//     u32 message bytes (<= 4096) | message
//   frame (either way): u32 header bytes | header | payload
//     header, 56 bytes + 16 per dimension (rank <= 32):
//       u8 kind (1 piece, 2 error in place of a piece, 3 acknowledgement)
//       u8 flags (bit 0: whole) | u8 element type | u8 rank
//       u32 status code (error frames; an acknowledgement that refuses
//           the piece)
//       u64 transfer id | i64 source device | i64 destination device
//       u64 destination array | i64 destination shard
//       u64 payload bytes (piece: the elements, row-major; error: the
//           message, <= 64 KiB; acknowledgement: 0, or the refusal's
//           message, <= 4096)
//       i64 dims[rank] | i64 offsets[rank]
//
// Sealed connections (a token is set; the hello's flag says so, and the
// listener refuses a dialler whose choice differs): after the reply, every
// frame's header and payload are AES-256-GCM records (sealed_records.h)
// under keys derived from the token and this handshake (SealKeys):
//   frame: u32 header bytes (clear, authenticated with the header) |
//          sealed(header) | tag[16] |
//          the payload in records of kSealedRecordBytes (the last
//          shorter), each sealed(record) | tag[16]
// The record sizes follow from the header, so nothing else is sent in
// clear. The handshake itself is not sealed (it carries no secret).
#ifndef CAUSEWAY_TRANSPORT_TCP_WIRE_H_
#define CAUSEWAY_TRANSPORT_TCP_WIRE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "causeway/base/ids.h"
#include "causeway/hlo/shape.h"
#include "causeway/transport/sealed_records.h"

namespace causeway::transport::tcp_wire {

inline constexpr uint32_t kMagic = 0x50445743;  // "CWDP" on the wire.
inline constexpr uint16_t kVersion = 3;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;  // HMAC-SHA256.
inline constexpr size_t kHelloBytes = 32 + kNonceBytes;
inline constexpr size_t kChallengeBytes = 12 + kNonceBytes + kProofBytes;
inline constexpr size_t kReplyBytes = 12;
inline constexpr size_t kMaxReplyMessageBytes = 4096;
inline constexpr size_t kLengthBytes = 4;
inline constexpr size_t kFrameFixedBytes = 56;
inline constexpr int64_t kMaxRank = 32;
inline constexpr size_t kMaxFrameHeaderBytes = kFrameFixedBytes + 16 * kMaxRank;
inline constexpr size_t kMaxErrorMessageBytes = size_t{64} << 10;

using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

// A fresh random nonce (the system's CSPRNG).
Nonce RandomNonce();

struct Hello {
  uint16_t version = kVersion;
  HostId sender;
  uint64_t sender_incarnation = 0;
  uint64_t receiver_incarnation = 0;
  // The dialler seals what follows the handshake.
  bool sealed = false;
  Nonce nonce{};
};

std::vector<uint8_t> EncodeHello(const Hello& hello);
// A hello (kHelloBytes). InvalidArgument for a wrong magic or a negative
// sender. The version is returned as sent (the caller decides whether it
// speaks it).
absl::StatusOr<Hello> DecodeHello(absl::Span<const uint8_t> bytes);

// The two proofs of the token, bound to this connection's hello (with the
// dialler's nonce) and the listener's nonce.
Proof ListenerProof(absl::string_view token,
                    absl::Span<const uint8_t> hello_bytes,
                    const Nonce& listener_nonce);
Proof DiallerProof(absl::string_view token,
                   absl::Span<const uint8_t> hello_bytes,
                   const Nonce& listener_nonce);
// Compares in constant time.
bool ProofsMatch(const Proof& a, const Proof& b);

// A sealed payload goes in records of this many bytes (the last shorter):
// large enough that the per-record cost (a tag, a nonce, one more read)
// is small, small enough that a record is opened while it is in cache.
inline constexpr uint64_t kSealedRecordBytes = uint64_t{1} << 20;

// The keys of a sealed connection, one per direction: HKDF-SHA256 of the
// token, salted with the hello (the dialler's nonce) and the listener's
// nonce, so each connection has its own.
struct SealKeys {
  SealKey dialler_to_listener;
  SealKey listener_to_dialler;
};
SealKeys DeriveSealKeys(absl::string_view token,
                        absl::Span<const uint8_t> hello_bytes,
                        const Nonce& listener_nonce);

struct Challenge {
  absl::StatusCode code = absl::StatusCode::kOk;  // Not OK: refused.
  Nonce nonce{};
  Proof proof{};
};
// `status` OK: the challenge; otherwise a refusal (code and truncated
// message; nonce and proof zero).
std::vector<uint8_t> EncodeChallenge(const absl::Status& status,
                                     const Nonce& nonce, const Proof& proof);
// The fixed part (kChallengeBytes); `*message_bytes` of message follow.
// InvalidArgument for a wrong magic or version, an unknown code or an
// oversized message.
absl::StatusOr<Challenge> DecodeChallenge(absl::Span<const uint8_t> fixed,
                                          size_t* message_bytes);

// `status` OK: accepted; otherwise its code and (truncated) message.
std::vector<uint8_t> EncodeReply(const absl::Status& status);
// The fixed part of a reply (kReplyBytes): the code (OK for accepted) with
// an empty message, and the message length that follows. InvalidArgument
// for a wrong magic or version, an unknown code or an oversized message.
absl::StatusOr<absl::StatusCode> DecodeReply(absl::Span<const uint8_t> fixed,
                                             size_t* message_bytes);

enum class FrameKind : uint8_t { kPiece = 1, kError = 2, kAck = 3 };

struct FrameHeader {
  FrameKind kind = FrameKind::kPiece;
  bool whole = false;
  hlo::PrimitiveType type = hlo::PrimitiveType::kInvalid;  // kPiece.
  absl::StatusCode code = absl::StatusCode::kOk;  // kError, kAck.
  uint64_t transfer_id = 0;
  DeviceId source_device;
  DeviceId destination_device;
  BufferId destination;
  uint64_t payload_bytes = 0;
  std::vector<int64_t> dims;     // kPiece: the piece's shape.
  std::vector<int64_t> offsets;  // kPiece: where it lands.
};

// The length prefix and the header. CHECKs that the header is well formed
// (callers build it from validated values).
std::vector<uint8_t> EncodeFrameHeader(const FrameHeader& header);
// The length prefix (kLengthBytes): the header's size. InvalidArgument
// unless it is within [kFrameFixedBytes, kMaxFrameHeaderBytes].
absl::StatusOr<size_t> DecodeFrameLength(absl::Span<const uint8_t> prefix);
// A header of the size DecodeFrameLength returned. Validates everything:
// the kind, the rank against the size, the element type, non-negative
// dims and offsets whose sums do not overflow, the payload against the
// element count (and `max_piece_bytes`) or the message bound, an error
// code, ids, whole pieces at offset zero, acknowledgements without data.
// An acknowledgement carries a status code (not OK: the receiver refused
// the piece, `payload_bytes` of message follow).
// InvalidArgument naming the field otherwise.
absl::StatusOr<FrameHeader> DecodeFrameHeader(absl::Span<const uint8_t> header,
                                              int64_t max_piece_bytes);

// Element types on the wire (a stable table, not the enum's values); 0 for
// a type that has none.
uint8_t WireType(hlo::PrimitiveType type);

// The whole handshake over a connected, blocking socket, for tests, tools
// and the fuzzer (TcpDataPlane does the same asynchronously). Dial: sends
// `hello` (its nonce drawn here), checks the listener's proof, answers,
// and returns the reply's status (Unauthenticated if the listener could
// not prove `token`; Unavailable if the connection ends or `timeout`
// passes). Answer: the listener's side, accepting any sender: the hello,
// or why it was refused.
absl::Status DialHandshake(int fd, Hello hello, absl::string_view token,
                           absl::Duration timeout);
absl::StatusOr<Hello> AnswerHandshake(int fd, absl::string_view token,
                                      absl::Duration timeout);

}  // namespace causeway::transport::tcp_wire

#endif  // CAUSEWAY_TRANSPORT_TCP_WIRE_H_
