#include "causeway/transport/tcp_wire.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "causeway/base/logging.h"

namespace causeway::transport::tcp_wire {

namespace {

using hlo::PrimitiveType;

// The element types in wire order: code i + 1 is kWireTypes[i].
constexpr std::array<PrimitiveType, 13> kWireTypes = {
    PrimitiveType::kPred, PrimitiveType::kS8,   PrimitiveType::kS16,
    PrimitiveType::kS32,  PrimitiveType::kS64,  PrimitiveType::kU8,
    PrimitiveType::kU16,  PrimitiveType::kU32,  PrimitiveType::kU64,
    PrimitiveType::kF16,  PrimitiveType::kBF16, PrimitiveType::kF32,
    PrimitiveType::kF64,
};

class Encoder {
 public:
  void U8(uint8_t v) { bytes_.push_back(v); }
  void U16(uint16_t v) { Little(v, 2); }
  void U32(uint32_t v) { Little(v, 4); }
  void U64(uint64_t v) { Little(v, 8); }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void Bytes(const std::string& s) { bytes_.insert(bytes_.end(), s.begin(), s.end()); }
  template <size_t N>
  void Raw(const std::array<uint8_t, N>& a) {
    bytes_.insert(bytes_.end(), a.begin(), a.end());
  }
  std::vector<uint8_t> Take() { return std::move(bytes_); }
  size_t size() const { return bytes_.size(); }
  // Overwrites a u32 written earlier at `at`.
  void PatchU32(size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes_[at + i] = static_cast<uint8_t>(v >> (8 * i));
  }

 private:
  void Little(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> bytes_;
};

// Reads a span the caller sized; reading past the end is a bug (CHECK).
class Decoder {
 public:
  explicit Decoder(absl::Span<const uint8_t> bytes) : bytes_(bytes) {}
  uint8_t U8() { return static_cast<uint8_t>(Little(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Little(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Little(4)); }
  uint64_t U64() { return Little(8); }
  int64_t I64() { return static_cast<int64_t>(U64()); }
  template <size_t N>
  void Raw(std::array<uint8_t, N>& a) {
    CW_CHECK(at_ + N <= bytes_.size()) << "decoding past the end";
    std::copy(bytes_.begin() + at_, bytes_.begin() + at_ + N, a.begin());
    at_ += N;
  }

 private:
  uint64_t Little(int n) {
    CW_CHECK(at_ + n <= bytes_.size()) << "decoding past the end";
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{bytes_[at_ + i]} << (8 * i);
    at_ += n;
    return v;
  }
  absl::Span<const uint8_t> bytes_;
  size_t at_ = 0;
};

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("data plane: ", what));
}

bool KnownCode(uint32_t code) {
  return code <= static_cast<uint32_t>(absl::StatusCode::kUnauthenticated);
}

}  // namespace

uint8_t WireType(PrimitiveType type) {
  for (size_t i = 0; i < kWireTypes.size(); ++i) {
    if (kWireTypes[i] == type) return static_cast<uint8_t>(i + 1);
  }
  return 0;
}

Nonce RandomNonce() {
  Nonce nonce;
  FillRandom(absl::MakeSpan(nonce), "a data-plane nonce");
  return nonce;
}

std::vector<uint8_t> EncodeHello(const Hello& hello) {
  Encoder e;
  e.U32(kMagic);
  e.U16(hello.version);
  e.U16(hello.sealed ? 1 : 0);
  e.I64(hello.sender.value());
  e.U64(hello.sender_incarnation);
  e.U64(hello.receiver_incarnation);
  e.Raw(hello.nonce);
  return e.Take();
}

absl::StatusOr<Hello> DecodeHello(absl::Span<const uint8_t> bytes) {
  CW_CHECK(bytes.size() == kHelloBytes);
  Decoder d(bytes);
  if (d.U32() != kMagic) return Invalid("not a data-plane handshake (magic)");
  Hello hello;
  hello.version = d.U16();
  const uint16_t flags = d.U16();
  hello.sender = HostId(d.I64());
  hello.sender_incarnation = d.U64();
  hello.receiver_incarnation = d.U64();
  d.Raw(hello.nonce);
  if (hello.sender.value() < 0) {
    return Invalid(absl::StrCat("handshake from host ", hello.sender.value()));
  }
  if (flags > 1) return Invalid(absl::StrCat("handshake flags ", flags));
  hello.sealed = flags == 1;
  return hello;
}

SealKeys DeriveSealKeys(absl::string_view token,
                        absl::Span<const uint8_t> hello_bytes,
                        const Nonce& listener_nonce) {
  std::vector<uint8_t> salt(hello_bytes.begin(), hello_bytes.end());
  salt.insert(salt.end(), listener_nonce.begin(), listener_nonce.end());
  const absl::Span<const uint8_t> secret(
      reinterpret_cast<const uint8_t*>(token.data()), token.size());
  return SealKeys{
      DeriveSealKey(secret, salt, "causeway data plane v3: dialler to listener"),
      DeriveSealKey(secret, salt, "causeway data plane v3: listener to dialler")};
}

namespace {

Proof Hmac(absl::string_view token, absl::string_view label,
           absl::Span<const uint8_t> hello_bytes, const Nonce& nonce) {
  std::vector<uint8_t> message(label.begin(), label.end());
  message.insert(message.end(), hello_bytes.begin(), hello_bytes.end());
  message.insert(message.end(), nonce.begin(), nonce.end());
  return HmacSha256(absl::MakeConstSpan(
                        reinterpret_cast<const uint8_t*>(token.data()),
                        token.size()),
                    message);
}

}  // namespace

Proof ListenerProof(absl::string_view token,
                    absl::Span<const uint8_t> hello_bytes,
                    const Nonce& listener_nonce) {
  return Hmac(token, "causeway data plane: listener", hello_bytes,
              listener_nonce);
}

Proof DiallerProof(absl::string_view token,
                   absl::Span<const uint8_t> hello_bytes,
                   const Nonce& listener_nonce) {
  return Hmac(token, "causeway data plane: dialler", hello_bytes,
              listener_nonce);
}

bool ProofsMatch(const Proof& a, const Proof& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::vector<uint8_t> EncodeChallenge(const absl::Status& status,
                                     const Nonce& nonce, const Proof& proof) {
  std::string message(status.message().substr(
      0, std::min(status.message().size(), kMaxReplyMessageBytes)));
  Encoder e;
  e.U32(kMagic);
  e.U16(kVersion);
  e.U16(static_cast<uint16_t>(status.code()));
  e.U32(static_cast<uint32_t>(message.size()));
  if (status.ok()) {
    e.Raw(nonce);
    e.Raw(proof);
  } else {
    e.Raw(Nonce{});
    e.Raw(Proof{});
  }
  e.Bytes(message);
  return e.Take();
}

absl::StatusOr<Challenge> DecodeChallenge(absl::Span<const uint8_t> fixed,
                                          size_t* message_bytes) {
  CW_CHECK(fixed.size() == kChallengeBytes);
  Decoder d(fixed);
  if (d.U32() != kMagic) return Invalid("not a data-plane handshake challenge");
  const uint16_t version = d.U16();
  const uint16_t code = d.U16();
  *message_bytes = d.U32();
  Challenge challenge;
  d.Raw(challenge.nonce);
  d.Raw(challenge.proof);
  if (version != kVersion) {
    return Invalid(absl::StrCat("handshake challenge of version ", version,
                                "; this worker speaks ", kVersion));
  }
  if (!KnownCode(code)) return Invalid(absl::StrCat("challenge code ", code));
  if (*message_bytes > kMaxReplyMessageBytes) {
    return Invalid(
        absl::StrCat("challenge message of ", *message_bytes, " bytes"));
  }
  challenge.code = static_cast<absl::StatusCode>(code);
  return challenge;
}

std::vector<uint8_t> EncodeReply(const absl::Status& status) {
  std::string message(status.message().substr(
      0, std::min(status.message().size(), kMaxReplyMessageBytes)));
  Encoder e;
  e.U32(kMagic);
  e.U16(kVersion);
  e.U16(static_cast<uint16_t>(status.code()));
  e.U32(static_cast<uint32_t>(message.size()));
  e.Bytes(message);
  return e.Take();
}

absl::StatusOr<absl::StatusCode> DecodeReply(absl::Span<const uint8_t> fixed,
                                             size_t* message_bytes) {
  CW_CHECK(fixed.size() == kReplyBytes);
  Decoder d(fixed);
  if (d.U32() != kMagic) return Invalid("not a data-plane handshake reply");
  const uint16_t version = d.U16();
  const uint16_t code = d.U16();
  *message_bytes = d.U32();
  if (version != kVersion) {
    return Invalid(absl::StrCat("handshake reply of version ", version,
                                "; this worker speaks ", kVersion));
  }
  if (!KnownCode(code)) return Invalid(absl::StrCat("reply code ", code));
  if (*message_bytes > kMaxReplyMessageBytes) {
    return Invalid(absl::StrCat("reply message of ", *message_bytes, " bytes"));
  }
  return static_cast<absl::StatusCode>(code);
}

std::vector<uint8_t> EncodeFrameHeader(const FrameHeader& header) {
  const bool piece = header.kind == FrameKind::kPiece;
  CW_CHECK(header.dims.size() == header.offsets.size());
  CW_CHECK(static_cast<int64_t>(header.dims.size()) <= kMaxRank);
  CW_CHECK(!piece || WireType(header.type) != 0) << "no wire type";
  Encoder e;
  e.U32(0);  // The length, patched below.
  e.U8(static_cast<uint8_t>(header.kind));
  e.U8(header.whole ? 1 : 0);
  e.U8(piece ? WireType(header.type) : 0);
  e.U8(static_cast<uint8_t>(header.dims.size()));
  e.U32(static_cast<uint32_t>(header.code));
  e.U64(header.transfer_id);
  e.I64(header.source_device.value());
  e.I64(header.destination_device.value());
  e.U64(header.destination.array.value());
  e.I64(header.destination.shard);
  e.U64(header.payload_bytes);
  for (int64_t d : header.dims) e.I64(d);
  for (int64_t o : header.offsets) e.I64(o);
  e.PatchU32(0, static_cast<uint32_t>(e.size() - kLengthBytes));
  return e.Take();
}

absl::StatusOr<size_t> DecodeFrameLength(absl::Span<const uint8_t> prefix) {
  CW_CHECK(prefix.size() == kLengthBytes);
  const uint32_t length = Decoder(prefix).U32();
  if (length < kFrameFixedBytes || length > kMaxFrameHeaderBytes ||
      (length - kFrameFixedBytes) % 16 != 0) {
    return Invalid(absl::StrCat("frame header of ", length,
                                " bytes (", kFrameFixedBytes, " + 16 per "
                                "dimension, rank at most ", kMaxRank, ")"));
  }
  return length;
}

absl::StatusOr<FrameHeader> DecodeFrameHeader(absl::Span<const uint8_t> bytes,
                                              int64_t max_piece_bytes) {
  CW_CHECK(bytes.size() >= kFrameFixedBytes &&
           bytes.size() <= kMaxFrameHeaderBytes);
  Decoder d(bytes);
  FrameHeader h;
  const uint8_t kind = d.U8();
  const uint8_t flags = d.U8();
  const uint8_t wire_type = d.U8();
  const uint8_t rank = d.U8();
  const uint32_t code = d.U32();
  h.transfer_id = d.U64();
  h.source_device = DeviceId(d.I64());
  h.destination_device = DeviceId(d.I64());
  h.destination.array = ArrayHandle(d.U64());
  h.destination.shard = d.I64();
  h.payload_bytes = d.U64();
  if (kind < 1 || kind > 3) return Invalid(absl::StrCat("frame kind ", kind));
  h.kind = static_cast<FrameKind>(kind);
  if (flags > 1) return Invalid(absl::StrCat("frame flags ", flags));
  h.whole = flags == 1;
  if (bytes.size() != kFrameFixedBytes + 16 * size_t{rank}) {
    return Invalid(absl::StrCat("frame header of ", bytes.size(),
                                " bytes for rank ", rank));
  }
  for (int i = 0; i < rank; ++i) h.dims.push_back(d.I64());
  for (int i = 0; i < rank; ++i) h.offsets.push_back(d.I64());
  if (h.transfer_id == 0) return Invalid("transfer id 0");
  if (h.kind == FrameKind::kAck) {
    if (rank != 0 || wire_type != 0 || h.whole || !KnownCode(code) ||
        (code == 0 ? h.payload_bytes != 0
                   : h.payload_bytes > kMaxReplyMessageBytes)) {
      return Invalid(absl::StrCat("acknowledgement of transfer ",
                                  h.transfer_id, " with fields set"));
    }
    h.code = static_cast<absl::StatusCode>(code);
    return h;
  }
  const std::string where = absl::StrCat("transfer ", h.transfer_id, ": ");
  if (h.source_device.value() < 0 || h.destination_device.value() < 0 ||
      h.destination.shard < 0) {
    return Invalid(absl::StrCat(where, "negative device or shard"));
  }
  if (h.kind == FrameKind::kError) {
    if (code == 0 || !KnownCode(code)) {
      return Invalid(absl::StrCat(where, "error frame with status code ", code));
    }
    if (rank != 0 || wire_type != 0) {
      return Invalid(absl::StrCat(where, "error frame with a shape"));
    }
    if (h.payload_bytes > kMaxErrorMessageBytes) {
      return Invalid(absl::StrCat(where, "error message of ", h.payload_bytes,
                                  " bytes (at most ", kMaxErrorMessageBytes,
                                  ")"));
    }
    h.code = static_cast<absl::StatusCode>(code);
    return h;
  }
  if (code != 0) return Invalid(absl::StrCat(where, "piece with a status code"));
  if (wire_type < 1 || wire_type > kWireTypes.size()) {
    return Invalid(absl::StrCat(where, "element type ", wire_type));
  }
  h.type = kWireTypes[wire_type - 1];
  // Elements, without overflow: every dim is bounded by max_piece_bytes.
  int64_t elements = 1;
  for (int i = 0; i < rank; ++i) {
    const int64_t dim = h.dims[i];
    const int64_t offset = h.offsets[i];
    if (dim < 0 || offset < 0) {
      return Invalid(absl::StrCat(where, "dimension ", i, " of size ", dim,
                                  " at offset ", offset));
    }
    if (dim > max_piece_bytes || offset > std::numeric_limits<int64_t>::max() - dim) {
      return Invalid(absl::StrCat(where, "dimension ", i, " of size ", dim,
                                  " at offset ", offset, " is out of range"));
    }
    if (h.whole && offset != 0) {
      return Invalid(absl::StrCat(where, "a whole piece at offset ", offset));
    }
    if (dim != 0 && elements > max_piece_bytes / dim) {
      return Invalid(absl::StrCat(where, "more than ", max_piece_bytes,
                                  " bytes of elements"));
    }
    elements *= dim;
  }
  const int64_t width = hlo::ByteWidth(h.type);
  if (elements > max_piece_bytes / width) {
    return Invalid(absl::StrCat(where, "piece of ", elements, " elements is "
                                "over the limit of ", max_piece_bytes,
                                " bytes"));
  }
  if (h.payload_bytes != static_cast<uint64_t>(elements * width)) {
    return Invalid(absl::StrCat(where, "payload of ", h.payload_bytes,
                                " bytes for ", elements, " elements of ",
                                std::string(hlo::PrimitiveTypeName(h.type))));
  }
  return h;
}

namespace {

// Blocking I/O with one deadline for a whole handshake.
class Deadline {
 public:
  explicit Deadline(absl::Duration timeout) : end_(absl::Now() + timeout) {}

  absl::Status Read(int fd, void* data, size_t size) {
    auto* at = static_cast<uint8_t*>(data);
    while (size > 0) {
      absl::Status ready = Wait(fd, POLLIN);
      if (!ready.ok()) return ready;
      const ssize_t n = recv(fd, at, size, 0);
      if (n == 0) return absl::UnavailableError("the peer closed the connection");
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return absl::UnavailableError(std::strerror(errno));
      }
      at += n;
      size -= static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  absl::Status Write(int fd, const std::vector<uint8_t>& bytes) {
    const uint8_t* at = bytes.data();
    size_t size = bytes.size();
    while (size > 0) {
      absl::Status ready = Wait(fd, POLLOUT);
      if (!ready.ok()) return ready;
      const ssize_t n = send(fd, at, size, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return absl::UnavailableError(std::strerror(errno));
      }
      at += n;
      size -= static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Wait(int fd, short events) {
    while (true) {
      const int64_t left = absl::ToInt64Milliseconds(end_ - absl::Now());
      if (left <= 0) return absl::UnavailableError("no handshake in time");
      pollfd wait{fd, events, 0};
      const int r = poll(&wait, 1, static_cast<int>(left));
      if (r > 0) return absl::OkStatus();
      if (r < 0 && errno != EINTR) {
        return absl::UnavailableError(std::strerror(errno));
      }
    }
  }

  absl::Time end_;
};

}  // namespace

absl::Status DialHandshake(int fd, Hello hello, absl::string_view token,
                           absl::Duration timeout) {
  Deadline io(timeout);
  hello.nonce = RandomNonce();
  const std::vector<uint8_t> hello_bytes = EncodeHello(hello);
  absl::Status status = io.Write(fd, hello_bytes);
  std::vector<uint8_t> fixed(kChallengeBytes);
  if (status.ok()) status = io.Read(fd, fixed.data(), fixed.size());
  if (!status.ok()) return status;
  size_t message_bytes = 0;
  absl::StatusOr<Challenge> challenge = DecodeChallenge(fixed, &message_bytes);
  if (!challenge.ok()) return challenge.status();
  std::string message(message_bytes, '\0');
  status = io.Read(fd, message.data(), message.size());
  if (!status.ok()) return status;
  if (challenge->code != absl::StatusCode::kOk) {
    return absl::Status(challenge->code, message);
  }
  if (!ProofsMatch(challenge->proof,
                   ListenerProof(token, hello_bytes, challenge->nonce))) {
    return absl::UnauthenticatedError(
        "the listener could not prove it holds the token");
  }
  const Proof proof = DiallerProof(token, hello_bytes, challenge->nonce);
  status = io.Write(fd, std::vector<uint8_t>(proof.begin(), proof.end()));
  std::vector<uint8_t> reply(kReplyBytes);
  if (status.ok()) status = io.Read(fd, reply.data(), reply.size());
  if (!status.ok()) return status;
  absl::StatusOr<absl::StatusCode> code = DecodeReply(reply, &message_bytes);
  if (!code.ok()) return code.status();
  message.assign(message_bytes, '\0');
  status = io.Read(fd, message.data(), message.size());
  if (!status.ok()) return status;
  return absl::Status(*code, message);
}

absl::StatusOr<Hello> AnswerHandshake(int fd, absl::string_view token,
                                      absl::Duration timeout) {
  Deadline io(timeout);
  std::vector<uint8_t> hello_bytes(kHelloBytes);
  absl::Status status = io.Read(fd, hello_bytes.data(), hello_bytes.size());
  if (!status.ok()) return status;
  absl::StatusOr<Hello> hello = DecodeHello(hello_bytes);
  if (!hello.ok()) return hello.status();
  const Nonce nonce = RandomNonce();
  status = io.Write(fd, EncodeChallenge(absl::OkStatus(), nonce,
                                        ListenerProof(token, hello_bytes, nonce)));
  Proof proof{};
  if (status.ok()) status = io.Read(fd, proof.data(), proof.size());
  if (!status.ok()) return status;
  if (!ProofsMatch(proof, DiallerProof(token, hello_bytes, nonce))) {
    const absl::Status refused = absl::UnauthenticatedError("wrong auth token");
    io.Write(fd, EncodeReply(refused)).IgnoreError();
    return refused;
  }
  status = io.Write(fd, EncodeReply(absl::OkStatus()));
  if (!status.ok()) return status;
  return hello;
}

}  // namespace causeway::transport::tcp_wire
