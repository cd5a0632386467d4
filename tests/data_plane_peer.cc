// A peer of the TCP data plane that stops half way, for the tests that kill
// a peer process mid-transfer (src/causeway/worker/
// data_plane_conformance_test.cc). It speaks the wire format itself
// (tcp_wire.h), so where it stops is exact, and prints one line when it
// got there; then it waits to be killed.
//
//   data_plane_peer send ADDRESS INCARNATION HOST TRANSFER DEVICE ARRAY BYTES
//     dials ADDRESS as host HOST (expecting INCARNATION; no token), sends the header
//     of a whole f32 piece of BYTES bytes for array ARRAY shard 0 on DEVICE
//     and half of its bytes, prints "sent N of BYTES".
//   data_plane_peer receive
//     listens on 127.0.0.1 (port 0), prints "listening IP:PORT", accepts one
//     connection, answers its handshake, reads a frame header and 1 MiB of
//     its bytes (never acknowledging), prints "received transfer T".
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "causeway/transport/tcp_wire.h"

namespace {

namespace wire = causeway::transport::tcp_wire;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "data_plane_peer: %s: %s\n", what.c_str(),
               std::strerror(errno));
  std::exit(1);
}

void WriteAll(int fd, const void* data, size_t size) {
  const char* at = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, at, size);
    if (n <= 0) Die("write");
    at += n;
    size -= static_cast<size_t>(n);
  }
}

void ReadAll(int fd, void* data, size_t size) {
  char* at = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = read(fd, at, size);
    if (n <= 0) Die("read");
    at += n;
    size -= static_cast<size_t>(n);
  }
}

uint64_t Number(const char* text) {
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    std::fprintf(stderr, "data_plane_peer: '%s' is not a number\n", text);
    std::exit(2);
  }
  return value;
}

[[noreturn]] void WaitToBeKilled() {
  while (true) pause();
}

int Send(char** argv) {
  const std::string address = argv[2];
  const size_t colon = address.rfind(':');
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(Number(argv[2] + colon + 1)));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &peer.sin_addr) != 1) {
    Die("address");
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof peer) != 0) {
    Die("connect");
  }
  wire::Hello hello;
  hello.sender = causeway::HostId(static_cast<int64_t>(Number(argv[4])));
  hello.sender_incarnation = 77;
  hello.receiver_incarnation = Number(argv[3]);
  if (!wire::DialHandshake(fd, hello, "", absl::Seconds(30)).ok()) {
    Die("handshake refused");
  }
  const uint64_t bytes = Number(argv[8]);
  wire::FrameHeader header;
  header.kind = wire::FrameKind::kPiece;
  header.whole = true;
  header.type = causeway::hlo::PrimitiveType::kF32;
  header.transfer_id = Number(argv[5]);
  header.source_device = causeway::DeviceId(0);
  header.destination_device =
      causeway::DeviceId(static_cast<int64_t>(Number(argv[6])));
  header.destination =
      causeway::BufferId{causeway::ArrayHandle(Number(argv[7])), 0};
  header.payload_bytes = bytes;
  header.dims = {static_cast<int64_t>(bytes / 4)};
  header.offsets = {0};
  const std::vector<uint8_t> frame = wire::EncodeFrameHeader(header);
  WriteAll(fd, frame.data(), frame.size());
  const std::vector<char> half(bytes / 2, 1);
  WriteAll(fd, half.data(), half.size());
  std::printf("sent %zu of %llu\n", half.size(),
              static_cast<unsigned long long>(bytes));
  std::fflush(stdout);
  WaitToBeKilled();
}

int Receive() {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      listen(listener, 1) != 0) {
    Die("listen");
  }
  socklen_t size = sizeof local;
  getsockname(listener, reinterpret_cast<sockaddr*>(&local), &size);
  std::printf("listening 127.0.0.1:%d\n", ntohs(local.sin_port));
  std::fflush(stdout);
  const int fd = accept(listener, nullptr, nullptr);
  if (fd < 0) Die("accept");
  if (!wire::AnswerHandshake(fd, "", absl::Seconds(30)).ok()) Die("hello");
  std::vector<uint8_t> prefix(wire::kLengthBytes);
  ReadAll(fd, prefix.data(), prefix.size());
  auto length = wire::DecodeFrameLength(prefix);
  if (!length.ok()) Die("frame length");
  std::vector<uint8_t> header_bytes(*length);
  ReadAll(fd, header_bytes.data(), header_bytes.size());
  auto header = wire::DecodeFrameHeader(header_bytes, int64_t{1} << 40);
  if (!header.ok()) Die("frame header");
  std::vector<char> some(std::min<uint64_t>(header->payload_bytes, 1 << 20));
  ReadAll(fd, some.data(), some.size());
  std::printf("received transfer %llu\n",
              static_cast<unsigned long long>(header->transfer_id));
  std::fflush(stdout);
  WaitToBeKilled();
}

}  // namespace

int main(int argc, char** argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // Never outlive the test.
  if (argc == 9 && std::string(argv[1]) == "send") return Send(argv);
  if (argc == 2 && std::string(argv[1]) == "receive") return Receive();
  std::fprintf(stderr,
               "usage: data_plane_peer send ADDRESS INCARNATION HOST TRANSFER "
               "DEVICE ARRAY BYTES | receive\n");
  return 2;
}
