#include "causeway/transport/tcp_wire.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::transport::tcp_wire {
namespace tcp_wire_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

FrameHeader APiece() {
  FrameHeader header;
  header.kind = FrameKind::kPiece;
  header.type = hlo::PrimitiveType::kF32;
  header.transfer_id = 7;
  header.source_device = DeviceId(1);
  header.destination_device = DeviceId(5);
  header.destination = BufferId{ArrayHandle(42), 3};
  header.dims = {4, 8};
  header.offsets = {2, 0};
  header.payload_bytes = 4 * 8 * 4;
  return header;
}

// The header without its length prefix, as a receiver reads it.
absl::StatusOr<FrameHeader> Decode(const std::vector<uint8_t>& frame,
                                   int64_t max_piece_bytes = 1 << 20) {
  absl::StatusOr<size_t> length = DecodeFrameLength(
      absl::MakeConstSpan(frame).subspan(0, kLengthBytes));
  if (!length.ok()) return length.status();
  EXPECT_EQ(*length + kLengthBytes, frame.size());
  return DecodeFrameHeader(absl::MakeConstSpan(frame).subspan(kLengthBytes),
                           max_piece_bytes);
}

// Overwrites the little-endian u64 at `at` (counted after the prefix).
void Patch64(std::vector<uint8_t>& frame, size_t at, uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    frame[kLengthBytes + at + i] = static_cast<uint8_t>(value >> (8 * i));
  }
}

TEST(TcpWireTest, AHelloRoundTripsItsIdsAndNonce) {
  Hello hello;
  hello.sender = HostId(3);
  hello.sender_incarnation = 0x1122334455667788;
  hello.receiver_incarnation = 99;
  hello.nonce = RandomNonce();
  std::vector<uint8_t> bytes = EncodeHello(hello);
  ASSERT_EQ(bytes.size(), kHelloBytes);
  absl::StatusOr<Hello> decoded = DecodeHello(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->version, kVersion);
  EXPECT_EQ(decoded->sender, HostId(3));
  EXPECT_EQ(decoded->sender_incarnation, 0x1122334455667788u);
  EXPECT_EQ(decoded->receiver_incarnation, 99u);
  EXPECT_EQ(decoded->nonce, hello.nonce);
  // The token is in no byte of it.
  EXPECT_NE(RandomNonce(), hello.nonce);
}

TEST(TcpWireTest, AHelloWithAWrongMagicOrANegativeSenderIsRefused) {
  Hello hello;
  hello.sender = HostId(0);
  std::vector<uint8_t> bytes = EncodeHello(hello);
  std::vector<uint8_t> garbage = bytes;
  garbage[0] ^= 0xff;
  EXPECT_THAT(DecodeHello(garbage).status().message(), HasSubstr("magic"));
  hello.sender = HostId(-4);
  absl::Status refused = DecodeHello(EncodeHello(hello)).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("from host -4"));
}

TEST(TcpWireTest, AProofHoldsOnlyForItsTokenHelloNonceAndSide) {
  Hello hello;
  hello.sender = HostId(1);
  hello.nonce = RandomNonce();
  const std::vector<uint8_t> bytes = EncodeHello(hello);
  const Nonce nonce = RandomNonce();
  const Proof proof = DiallerProof("token", bytes, nonce);
  EXPECT_TRUE(ProofsMatch(proof, DiallerProof("token", bytes, nonce)));
  EXPECT_FALSE(ProofsMatch(proof, DiallerProof("tokem", bytes, nonce)));
  EXPECT_FALSE(ProofsMatch(proof, DiallerProof("token", bytes, RandomNonce())));
  EXPECT_FALSE(ProofsMatch(proof, ListenerProof("token", bytes, nonce)));
  std::vector<uint8_t> other = bytes;
  other[8] ^= 1;  // Another sender.
  EXPECT_FALSE(ProofsMatch(proof, DiallerProof("token", other, nonce)));
}

TEST(TcpWireTest, AChallengeCarriesItsNonceAndProofOrARefusal) {
  const Nonce nonce = RandomNonce();
  Proof proof{};
  proof[0] = 7;
  std::vector<uint8_t> bytes = EncodeChallenge(absl::OkStatus(), nonce, proof);
  ASSERT_EQ(bytes.size(), kChallengeBytes);
  size_t message_bytes = 1;
  absl::StatusOr<Challenge> challenge = DecodeChallenge(bytes, &message_bytes);
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  EXPECT_EQ(challenge->code, absl::StatusCode::kOk);
  EXPECT_EQ(challenge->nonce, nonce);
  EXPECT_EQ(challenge->proof, proof);
  EXPECT_EQ(message_bytes, 0u);
  bytes = EncodeChallenge(absl::FailedPreconditionError("version 1"), nonce,
                          proof);
  challenge = DecodeChallenge(
      absl::MakeConstSpan(bytes).subspan(0, kChallengeBytes), &message_bytes);
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  EXPECT_EQ(challenge->code, absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(challenge->proof, Proof{});
  EXPECT_EQ(message_bytes, 9u);
  bytes[12 + 2 * 32 - 1] = 0;
  bytes[8] = 0xff;  // A message of more than 4096 bytes.
  bytes[9] = 0xff;
  EXPECT_EQ(DecodeChallenge(
                absl::MakeConstSpan(bytes).subspan(0, kChallengeBytes),
                &message_bytes)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TcpWireTest, AReplyCarriesItsCodeAndMessageLength) {
  std::vector<uint8_t> bytes =
      EncodeReply(absl::UnauthenticatedError("wrong auth token"));
  ASSERT_EQ(bytes.size(), kReplyBytes + 16);
  size_t message_bytes = 0;
  absl::StatusOr<absl::StatusCode> code = DecodeReply(
      absl::MakeConstSpan(bytes).subspan(0, kReplyBytes), &message_bytes);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(message_bytes, 16u);
}

TEST(TcpWireTest, APieceHeaderRoundTripsEveryField) {
  FrameHeader header = APiece();
  absl::StatusOr<FrameHeader> decoded = Decode(EncodeFrameHeader(header));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->kind, FrameKind::kPiece);
  EXPECT_EQ(decoded->type, hlo::PrimitiveType::kF32);
  EXPECT_EQ(decoded->transfer_id, 7u);
  EXPECT_EQ(decoded->source_device, DeviceId(1));
  EXPECT_EQ(decoded->destination_device, DeviceId(5));
  EXPECT_EQ(decoded->destination, (BufferId{ArrayHandle(42), 3}));
  EXPECT_THAT(decoded->dims, ElementsAre(4, 8));
  EXPECT_THAT(decoded->offsets, ElementsAre(2, 0));
  EXPECT_EQ(decoded->payload_bytes, 128u);
  EXPECT_FALSE(decoded->whole);
}

TEST(TcpWireTest, EveryElementTypeHasAWireCodeThatRoundTrips) {
  for (hlo::PrimitiveType type :
       {hlo::PrimitiveType::kPred, hlo::PrimitiveType::kS8,
        hlo::PrimitiveType::kS16, hlo::PrimitiveType::kS32,
        hlo::PrimitiveType::kS64, hlo::PrimitiveType::kU8,
        hlo::PrimitiveType::kU16, hlo::PrimitiveType::kU32,
        hlo::PrimitiveType::kU64, hlo::PrimitiveType::kF16,
        hlo::PrimitiveType::kBF16, hlo::PrimitiveType::kF32,
        hlo::PrimitiveType::kF64}) {
    FrameHeader header = APiece();
    header.type = type;
    header.payload_bytes = 32 * hlo::ByteWidth(type);
    absl::StatusOr<FrameHeader> decoded = Decode(EncodeFrameHeader(header));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->type, type) << std::string(hlo::PrimitiveTypeName(type));
  }
  EXPECT_EQ(WireType(hlo::PrimitiveType::kTuple), 0);
}

TEST(TcpWireTest, ErrorFramesAndAcknowledgementsRoundTrip) {
  FrameHeader error;
  error.kind = FrameKind::kError;
  error.code = absl::StatusCode::kDataLoss;
  error.transfer_id = 9;
  error.destination = BufferId{ArrayHandle(1), 0};
  error.source_device = DeviceId(0);
  error.destination_device = DeviceId(0);
  error.payload_bytes = 12;
  absl::StatusOr<FrameHeader> decoded = Decode(EncodeFrameHeader(error));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->code, absl::StatusCode::kDataLoss);
  FrameHeader ack;
  ack.kind = FrameKind::kAck;
  ack.transfer_id = 9;
  decoded = Decode(EncodeFrameHeader(ack));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->kind, FrameKind::kAck);
  EXPECT_EQ(decoded->code, absl::StatusCode::kOk);
  // A refusal: its code and message.
  ack.code = absl::StatusCode::kResourceExhausted;
  ack.payload_bytes = 100;
  decoded = Decode(EncodeFrameHeader(ack));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->code, absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(decoded->payload_bytes, 100u);
  ack.payload_bytes = kMaxReplyMessageBytes + 1;
  EXPECT_FALSE(Decode(EncodeFrameHeader(ack)).ok());
  ack.code = absl::StatusCode::kOk;
  ack.payload_bytes = 1;  // An acceptance carries nothing.
  EXPECT_FALSE(Decode(EncodeFrameHeader(ack)).ok());
}

TEST(TcpWireTest, AFrameLengthOutsideItsBoundsIsRefused) {
  for (uint32_t length : {0u, 55u, 57u, 56u + 16u * 33u, 0xffffffffu}) {
    std::vector<uint8_t> prefix = {
        static_cast<uint8_t>(length), static_cast<uint8_t>(length >> 8),
        static_cast<uint8_t>(length >> 16), static_cast<uint8_t>(length >> 24)};
    EXPECT_EQ(DecodeFrameLength(prefix).status().code(),
              absl::StatusCode::kInvalidArgument)
        << length;
  }
}

TEST(TcpWireTest, APayloadThatDoesNotMatchTheElementsIsRefused) {
  std::vector<uint8_t> frame = EncodeFrameHeader(APiece());
  Patch64(frame, 48, 129);  // payload bytes
  EXPECT_THAT(Decode(frame).status().message(),
              HasSubstr("payload of 129 bytes for 32 elements of f32"));
}

TEST(TcpWireTest, HugeDimensionsAreRefusedWithoutOverflowing) {
  FrameHeader header = APiece();
  header.dims = {int64_t{1} << 40, int64_t{1} << 40};
  header.payload_bytes = 0;  // What a wrapped product might give.
  EXPECT_EQ(Decode(EncodeFrameHeader(header)).status().code(),
            absl::StatusCode::kInvalidArgument);
  header = APiece();
  header.dims = {1 << 20, 1 << 20};
  header.payload_bytes = uint64_t{1} << 42;
  absl::Status huge = Decode(EncodeFrameHeader(header), int64_t{1} << 30).status();
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.message(), HasSubstr("bytes"));
  header = APiece();
  header.offsets = {std::numeric_limits<int64_t>::max(), 0};
  EXPECT_EQ(Decode(EncodeFrameHeader(header)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TcpWireTest, BadKindsTypesCodesAndIdsAreRefused) {
  std::vector<uint8_t> frame = EncodeFrameHeader(APiece());
  std::vector<uint8_t> kind = frame;
  kind[kLengthBytes + 0] = 9;
  EXPECT_THAT(Decode(kind).status().message(), HasSubstr("frame kind 9"));
  std::vector<uint8_t> type = frame;
  type[kLengthBytes + 2] = 200;
  EXPECT_THAT(Decode(type).status().message(), HasSubstr("element type 200"));
  std::vector<uint8_t> transfer = frame;
  Patch64(transfer, 8, 0);
  EXPECT_THAT(Decode(transfer).status().message(), HasSubstr("transfer id 0"));
  std::vector<uint8_t> device = frame;
  Patch64(device, 24, static_cast<uint64_t>(-4));
  EXPECT_THAT(Decode(device).status().message(), HasSubstr("negative"));
  FrameHeader whole = APiece();
  whole.whole = true;  // At offsets {2, 0}.
  EXPECT_THAT(Decode(EncodeFrameHeader(whole)).status().message(),
              HasSubstr("whole piece at offset 2"));
  FrameHeader error;
  error.kind = FrameKind::kError;
  error.code = absl::StatusCode::kInternal;
  error.transfer_id = 1;
  error.destination = BufferId{ArrayHandle(1), 0};
  error.source_device = DeviceId(0);
  error.destination_device = DeviceId(0);
  error.payload_bytes = kMaxErrorMessageBytes + 1;
  EXPECT_THAT(Decode(EncodeFrameHeader(error)).status().message(),
              HasSubstr("error message of"));
}

// Random headers of every length: any that decodes as a piece claims no
// more than the bound, so nothing oversized is ever allocated for it.
TEST(TcpWireTest, RandomHeadersNeverDecodeIntoAnOversizedPiece) {
  std::mt19937_64 random(1234);
  const int64_t bound = 1 << 16;
  int decoded = 0;
  for (int i = 0; i < 100000; ++i) {
    const size_t rank = random() % 3;
    std::vector<uint8_t> header(kFrameFixedBytes + 16 * rank);
    for (uint8_t& byte : header) byte = static_cast<uint8_t>(random());
    // Make the early fields plausible often enough to reach the checks.
    header[0] = static_cast<uint8_t>(1 + random() % 3);
    header[1] = static_cast<uint8_t>(random() % 2);
    header[2] = static_cast<uint8_t>(random() % 15);
    header[3] = static_cast<uint8_t>(rank);
    if (random() % 2) {
      header[4] = static_cast<uint8_t>(random() % 17);
      header[5] = header[6] = header[7] = 0;
    }
    for (size_t b = 8; b < header.size(); b += 8) {
      if (random() % 2) {
        for (size_t k = 1; k < 8 && b + k < header.size(); ++k) header[b + k] = 0;
      }
    }
    absl::StatusOr<FrameHeader> result = DecodeFrameHeader(header, bound);
    if (!result.ok()) continue;
    ++decoded;
    if (result->kind == FrameKind::kPiece) {
      EXPECT_LE(result->payload_bytes, static_cast<uint64_t>(bound));
    } else if (result->kind == FrameKind::kError) {
      EXPECT_LE(result->payload_bytes, kMaxErrorMessageBytes);
    } else {
      EXPECT_LE(result->payload_bytes, kMaxReplyMessageBytes);
      if (result->code == absl::StatusCode::kOk) {
        EXPECT_EQ(result->payload_bytes, 0u);
      }
    }
  }
  EXPECT_GT(decoded, 0);  // The checks above were reached.
}

}  // namespace tcp_wire_test
}  // namespace causeway::transport::tcp_wire
