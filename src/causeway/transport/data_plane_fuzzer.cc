// libFuzzer target for what peers send over the network outside the head's
// session protocol (fuzz/README.md):
//
// * byte 0 % 5 == 0: the rest goes, as a peer's frames after a valid
//   handshake, to a live TcpDataPlane whose receiver announces array 7 (a
//   piece for it is read straight into a buffer; any other is early, held
//   within a 1 MiB bound, or refused at once). The plane must answer or
//   close, never crash, allocate past its bounds or hang; a second
//   connection's handshake must still succeed afterwards.
// * byte 0 % 5 == 1: the rest is a worker's stream as the head reads it,
//   WorkerToHead messages (u16 length, bytes) converted as the head
//   converts each notice (wire_convert.h, one NameDecoder for the stream).
// * byte 0 % 5 == 2: the head's stream as a worker reads it, HeadToWorker
//   messages converted as the worker converts each command.
// * byte 0 % 5 == 3: the rest is what a stranger sends first to a plane
//   that has a token (and seals): its hello and proof, unauthenticated.
//   The plane must refuse and close, and admit the next real peer.
// * byte 0 % 5 == 4: the rest follows a valid handshake with that plane's
//   token, as the sealed record layer reads it (clear lengths, ciphertext,
//   tags): whatever does not open must close the connection without
//   allocating past the bounds the clear lengths claim.
//
// Any crash, sanitizer report or unbounded allocation is a bug.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "causeway/base/logging.h"
#include "causeway/transport/proto/worker.pb.h"
#include "causeway/transport/tcp_data_plane.h"
#include "causeway/transport/tcp_wire.h"
#include "causeway/transport/testing/interceptor.h"
#include "causeway/transport/wire_convert.h"
#include "causeway/transport/wire_names.h"

namespace causeway::transport {
namespace {

constexpr int64_t kBufferBytes = int64_t{1} << 20;
constexpr uint64_t kAnnouncedArray = 7;

// Array 7 is announced (written in place when its box fits a 1 MiB
// buffer); every other piece is early.
class Receiver final : public PieceReceiver {
 public:
  void ReceivePiece(PieceMessage piece) override {}
  absl::StatusOr<std::unique_ptr<PieceWriter>> BeginPiece(
      const PieceHeader& header) override {
    if (header.destination.array.value() != kAnnouncedArray) return nullptr;
    // The buffer: the piece's box at its offsets, row-major.
    std::vector<int64_t> dims;
    int64_t elements = 1;
    for (size_t i = 0; i < header.offsets.size(); ++i) {
      const int64_t dim = header.offsets[i] + header.shape.dims()[i];
      if (dim > kBufferBytes) return absl::OutOfRangeError("too big");
      dims.push_back(dim);
      if (dim != 0 && elements > kBufferBytes / dim) {
        return absl::OutOfRangeError("too big");
      }
      elements *= dim;
    }
    if (elements * hlo::ByteWidth(header.shape.type()) > kBufferBytes) {
      return absl::OutOfRangeError("too big");
    }
    return std::make_unique<PieceWriter>(
        buffer_.data(),
        BoxRuns(dims, header.offsets, header.shape.dims(),
                hlo::ByteWidth(header.shape.type())),
        [](absl::Status) {});
  }
  void ConnectionLost(HostId peer, absl::Status status) override {}

 private:
  std::vector<std::byte> buffer_ = std::vector<std::byte>(kBufferBytes);
};

constexpr char kToken[] = "the fuzzer's cluster token";

struct Plane {
  explicit Plane(std::string token = "") : token(token) {
    TcpDataPlaneOptions options;
    options.auth_token = token;
    options.max_piece_bytes = kBufferBytes;
    options.max_early_piece_bytes = kBufferBytes;
    options.early_piece_wait = absl::ZeroDuration();
    options.handshake_timeout = absl::Seconds(2);
    absl::StatusOr<std::unique_ptr<TcpDataPlane>> made =
        TcpDataPlane::Create(options);
    CW_CHECK(made.ok()) << made.status();
    plane = *std::move(made);
    plane->Attach(HostId(0), &receiver);
    plane->SetPeer(HostId(1), "127.0.0.1:1", 0);
  }
  const std::string token;
  Receiver receiver;
  std::unique_ptr<TcpDataPlane> plane;
};

int Handshake(Plane& plane) {
  const int fd = testing::DialTcp(plane.plane->address());
  tcp_wire::Hello hello;
  hello.sender = HostId(1);
  hello.sender_incarnation = 5;
  hello.sealed = !plane.token.empty();
  absl::Status status =
      tcp_wire::DialHandshake(fd, hello, plane.token, absl::Seconds(30));
  CW_CHECK(status.ok()) << "the data plane stopped admitting peers: " << status;
  return fd;
}

// Sends `data` on `fd` (as much as the plane reads before it closes),
// ends our side, and waits for the plane to close its own.
void SendAndAwaitClose(int fd, const uint8_t* data, size_t size) {
  // Whatever the plane does not read (it closed the connection) is lost.
  size_t sent = 0;
  while (sent < size) {
    pollfd ready{fd, POLLOUT, 0};
    if (poll(&ready, 1, 10000) <= 0) break;
    const ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  // Until the plane closes its end (its acknowledgements in between).
  char scratch[4096];
  while (true) {
    pollfd ready{fd, POLLIN, 0};
    CW_CHECK(poll(&ready, 1, 30000) == 1) << "the data plane hung";
    if (recv(fd, scratch, sizeof scratch, 0) <= 0) break;
  }
  close(fd);
}

void FuzzDataPlane(const uint8_t* data, size_t size) {
  static Plane* plane = new Plane();
  SendAndAwaitClose(Handshake(*plane), data, size);
}

Plane& SealedPlane() {
  static Plane* plane = new Plane(kToken);
  return *plane;
}

void FuzzStrangerToASealedPlane(const uint8_t* data, size_t size) {
  Plane& plane = SealedPlane();
  SendAndAwaitClose(testing::DialTcp(plane.plane->address()), data, size);
  // A real peer is still admitted (Handshake checks it).
  close(Handshake(plane));
}

void FuzzSealedRecords(const uint8_t* data, size_t size) {
  SendAndAwaitClose(Handshake(SealedPlane()), data, size);
}

// The next (u16 length, bytes) message of the stream, or false at its end.
bool NextMessage(const uint8_t*& data, size_t& size, std::string* message) {
  if (size < 2) return false;
  const size_t length = std::min<size_t>(data[0] | (data[1] << 8), size - 2);
  message->assign(reinterpret_cast<const char*>(data + 2), length);
  data += 2 + length;
  size -= 2 + length;
  return true;
}

void FuzzHeadReadingAWorker(const uint8_t* data, size_t size) {
  const WireLimits limits;
  NameDecoder trace_names;
  std::string bytes;
  while (NextMessage(data, size, &bytes)) {
    wire::WorkerToHead notice;
    if (!notice.ParseFromString(bytes)) continue;
    const FieldPath root("WorkerToHead");
    switch (notice.notice_case()) {
      case wire::WorkerToHead::kOpDone:
        for (const wire::OpDone& done : notice.op_done().done()) {
          FromWire(done, HostId(1), limits, root.Field("op_done")).IgnoreError();
        }
        break;
      case wire::WorkerToHead::kPushFailed:
        FromWire(notice.push_failed(), limits, root.Field("push_failed"))
            .IgnoreError();
        break;
      case wire::WorkerToHead::kTrace: {
        int64_t unnamed = 0;
        FromWire(notice.trace(), trace_names, limits, root.Field("trace"),
                 &unnamed)
            .IgnoreError();
        break;
      }
      case wire::WorkerToHead::kReply:
        if (notice.reply().has_status()) {
          absl::Status status;
          StatusFromWire(notice.reply().status(), limits,
                         root.Field("reply").Field("status"), &status)
              .IgnoreError();
        }
        if (notice.reply().has_worker_status()) {
          FromWire(notice.reply().worker_status(), limits,
                   root.Field("reply").Field("worker_status"))
              .IgnoreError();
        }
        if (notice.reply().has_value()) {
          FromWire(notice.reply().value(), limits,
                   root.Field("reply").Field("value"))
              .IgnoreError();
        }
        break;
      default:
        break;
    }
  }
}

void FuzzWorkerReadingTheHead(const uint8_t* data, size_t size) {
  const WireLimits limits;
  NameDecoder names;
  std::string bytes;
  while (NextMessage(data, size, &bytes)) {
    wire::HeadToWorker command;
    if (!command.ParseFromString(bytes)) continue;
    const FieldPath root("HeadToWorker");
    switch (command.command_case()) {
      case wire::HeadToWorker::kDispatch:
        FromWire(command.dispatch(), names, limits, root.Field("dispatch"))
            .IgnoreError();
        break;
      case wire::HeadToWorker::kLoadProgram:
        FromWire(command.load_program(), limits, root.Field("load_program"))
            .IgnoreError();
        break;
      case wire::HeadToWorker::kMembership:
        FromWire(command.membership(), limits, root.Field("membership"))
            .IgnoreError();
        break;
      case wire::HeadToWorker::kFetchBuffer:
        FromWire(command.fetch_buffer(), limits, root.Field("fetch_buffer"))
            .IgnoreError();
        break;
      default:
        break;
    }
  }
}

}  // namespace
}  // namespace causeway::transport

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 5) {
    case 0:
      causeway::transport::FuzzDataPlane(data + 1, size - 1);
      break;
    case 1:
      causeway::transport::FuzzHeadReadingAWorker(data + 1, size - 1);
      break;
    case 2:
      causeway::transport::FuzzWorkerReadingTheHead(data + 1, size - 1);
      break;
    case 3:
      causeway::transport::FuzzStrangerToASealedPlane(data + 1, size - 1);
      break;
    case 4:
      causeway::transport::FuzzSealedRecords(data + 1, size - 1);
      break;
  }
  return 0;
}
