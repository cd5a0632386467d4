// libFuzzer target for what reaches the collectives from the network
// (fuzz/README.md, gloo_mesh_fuzzer):
//
// * byte 0 % 2 == 0: the rest is what a stranger sends first to the port
//   rank 0 of a sealed Gloo context listens on while the context is set up,
//   before the real rank 1 dials (gloo_mesh.h). The stranger must never be
//   given a pair (at most a challenge and a refusal, then a closed
//   connection); ranks 0 and 1 must still connect and carry a message
//   whole.
// * byte 0 % 2 == 1: the rest is a script played at both ends of one
//   sealed relay's pair (sealed_relay.h): records sealed with the pair's key
//   from the peer, raw bytes and tampered records from a man in the middle,
//   and bytes Gloo writes. Gloo must receive exactly the plaintext of the
//   records before the first bad one (a prefix of it once the pair was
//   closed under it), the peer only records that open, in order, to what
//   Gloo wrote; the relay must end once both ends are closed.
//
// Any crash, sanitizer report, hang or check failure is a bug.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "causeway/base/logging.h"
#include "causeway/transport/gloo_mesh.h"
#include "causeway/transport/gloo_store.h"
#include "causeway/transport/in_process_key_value_store.h"
#include "causeway/transport/sealed_records.h"
#include "causeway/transport/sealed_relay.h"
#include "causeway/transport/testing/interceptor.h"
#include "gloo/common/error.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"

namespace causeway::transport {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(30);
constexpr int kPollMs = 30000;

using Bytes = std::vector<uint8_t>;

// Sends what the socket takes now of `data` (never waits).
void SendWhatFits(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Reads `fd` until its end (or an error: a reset), failing if it hangs.
Bytes ReadToEnd(int fd, absl::string_view what) {
  Bytes got;
  uint8_t scratch[4096];
  while (true) {
    pollfd ready{fd, POLLIN, 0};
    CW_CHECK(poll(&ready, 1, kPollMs) == 1) << what << " never ended";
    const ssize_t n = recv(fd, scratch, sizeof scratch, 0);
    if (n <= 0) return got;
    got.insert(got.end(), scratch, scratch + n);
  }
}

// Waits until the relays this input started have ended (a stopped relay
// lingers until its peer closes too), so that each input's threads and
// memory are gone when it ends; failing if one never does.
void AwaitRelaysEnded(int64_t running_before) {
  const absl::Time deadline = absl::Now() + kDeadline;
  while (SealedRelay::Running() > running_before) {
    CW_CHECK(absl::Now() < deadline) << "a stopped relay never ended";
    absl::SleepFor(absl::Milliseconds(1));
  }
}

std::shared_ptr<::gloo::transport::Device> Device() {
  static auto* device = new std::shared_ptr<::gloo::transport::Device>([] {
    ::gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    return ::gloo::transport::tcp::CreateDevice(attr);
  }());
  return *device;
}

GlooMeshOptions Options(int rank) {
  GlooMeshOptions options;
  options.rank = rank;
  options.size = 2;
  options.device = Device();
  options.token = "the fuzzer's cluster token";
  options.pair_timeout = std::chrono::seconds(30);
  options.deadline = absl::Now() + kDeadline;
  return options;
}

void RunStrangerToAMesh(const uint8_t* data, size_t size) {
  const std::string prefix = "fuzz/";
  InProcessKeyValueStore kv;
  GlooStore store0(kv, prefix, absl::Now() + kDeadline);
  GlooStore store1(kv, prefix, absl::Now() + kDeadline);
  absl::StatusOr<std::shared_ptr<::gloo::Context>> rank0 =
      absl::UnknownError("not connected");
  absl::StatusOr<std::shared_ptr<::gloo::Context>> rank1 = rank0;
  std::thread listener([&] { rank0 = ConnectGlooMesh(Options(0), store0); });
  absl::StatusOr<std::string> published =
      kv.Get(prefix + "mesh/0", absl::Now() + kDeadline).Await();
  CW_CHECK(published.ok()) << published.status();
  // The stranger is first in line at rank 0's port.
  const int stranger =
      testing::DialTcp(published->substr(0, published->find('\n')));
  SendWhatFits(stranger, data, size);
  std::thread dialler([&] { rank1 = ConnectGlooMesh(Options(1), store1); });
  listener.join();
  dialler.join();
  CW_CHECK(rank0.ok()) << "a stranger kept rank 0 from connecting: "
                       << rank0.status();
  CW_CHECK(rank1.ok()) << "a stranger kept rank 1 from connecting: "
                       << rank1.status();
  // The stranger got at most a challenge (64 bytes) and a refusal.
  shutdown(stranger, SHUT_WR);
  const Bytes answer = ReadToEnd(stranger, "the stranger's connection");
  close(stranger);
  CW_CHECK(answer.size() == 0 || answer.size() == 64 ||
           (answer.size() == 65 && answer[64] != 0))
      << "a stranger was answered " << answer.size() << " bytes"
      << (answer.size() == 65 ? ", accepted" : "");
  // The real ranks' pair carries a message whole.
  Bytes message(1024);
  for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<uint8_t>(i * 7);
  Bytes received(message.size());
  auto send_buffer =
      (*rank1)->createUnboundBuffer(message.data(), message.size());
  auto recv_buffer =
      (*rank0)->createUnboundBuffer(received.data(), received.size());
  try {
    send_buffer->send(0, 1);
    recv_buffer->recv(1, 1);
    recv_buffer->waitRecv(std::chrono::milliseconds(kPollMs));
    send_buffer->waitSend(std::chrono::milliseconds(kPollMs));
  } catch (const ::gloo::Exception& e) {
    CW_LOG(FATAL) << "the ranks' pair failed after a stranger came: "
                  << e.what();
  }
  CW_CHECK(received == message) << "the ranks' pair changed a message";
}

// Reads a u16 from the script, or 0 at its end.
size_t NextLength(const uint8_t*& data, size_t& size) {
  size_t length = 0;
  for (int i = 0; i < 2 && size > 0; ++i, ++data, --size) {
    length |= size_t{*data} << (8 * i);
  }
  return length;
}

// One sealed pair's relay, played from both ends.
class RelayScript {
 public:
  RelayScript() {
    int sockets[2];
    CW_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) == 0);
    peer_ = sockets[0];
    std::map<int, int> gloo_fds;
    absl::StatusOr<std::unique_ptr<SealedRelay>> started = SealedRelay::Start(
        "fuzz", {SealedRelay::Link{1, sockets[1], from_relay_key_, to_relay_key_}},
        &gloo_fds);
    CW_CHECK(started.ok()) << started.status();
    relay_ = *std::move(started);
    gloo_ = gloo_fds.at(1);
  }

  void Play(const uint8_t* data, size_t size) {
    const int64_t refused_before = SealedRelay::RecordsRefused();
    while (size > 0) {
      const uint8_t op = *data++;
      --size;
      const size_t length = std::min(NextLength(data, size), size);
      const Bytes chunk(data, data + length);
      data += length;
      size -= length;
      switch (op % 4) {
        case 0:  // A record sealed with the pair's key.
          if (chunk.empty()) break;
          SendRecord(chunk, /*flip=*/-1);
          break;
        case 1:  // Bytes from a man in the middle.
          if (chunk.empty()) break;
          broken_ = true;
          SendToRelay(peer_, chunk);
          break;
        case 2:  // A sealed record with one bit changed on the way: which
                 // byte from the chunk's first, which bit from the op.
          if (chunk.empty()) break;
          SendRecord(chunk, (chunk[0] | chunk.size() << 8) * 8 + (op >> 2) % 8);
          break;
        case 3:  // Gloo writes.
          gloo_wrote_.insert(gloo_wrote_.end(), chunk.begin(), chunk.end());
          SendToRelay(gloo_, chunk);
          break;
      }
      Drain();
    }
    // The peer ends first: Gloo gets every record, then the end. (Gloo
    // ending its side means Gloo is gone: the relay drops what comes
    // after, as nobody would read it.)
    shutdown(peer_, SHUT_WR);
    const Bytes more_gloo = ReadToEnd(gloo_, "the relay's Gloo side");
    gloo_got_.insert(gloo_got_.end(), more_gloo.begin(), more_gloo.end());
    shutdown(gloo_, SHUT_WR);
    const Bytes more_peer = ReadToEnd(peer_, "the relay's peer side");
    peer_got_.insert(peer_got_.end(), more_peer.begin(), more_peer.end());
    Check(SealedRelay::RecordsRefused() - refused_before);
  }

  ~RelayScript() {
    close(peer_);
    close(gloo_);
    relay_->Stop();
  }

 private:
  // Seals `plain` as the peer would; `flip` (when not negative) names a
  // bit of the record (length, ciphertext or tag) to change.
  void SendRecord(const Bytes& plain, int64_t flip) {
    Bytes record(4 + plain.size() + kSealTagBytes);
    const uint32_t length = static_cast<uint32_t>(plain.size());
    for (int i = 0; i < 4; ++i) record[i] = static_cast<uint8_t>(length >> (8 * i));
    std::copy(plain.begin(), plain.end(), record.begin() + 4);
    sealer_.SealInPlace(record.data() + 4, plain.size(),
                        record.data() + 4 + plain.size(),
                        absl::MakeConstSpan(record.data(), 4));
    if (flip >= 0) {
      record[(flip / 8) % record.size()] ^= static_cast<uint8_t>(1u << (flip % 8));
      broken_ = true;
    } else if (!broken_) {
      to_gloo_.insert(to_gloo_.end(), plain.begin(), plain.end());
    }
    SendToRelay(peer_, record);
  }

  // Sends all of `bytes` (reading both ends meanwhile, so the relay never
  // waits on us); once the pair is broken the relay may have closed it.
  void SendToRelay(int fd, const Bytes& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        CW_CHECK(broken_) << "the relay closed a pair nobody broke: "
                          << std::strerror(errno);
        return;
      }
      pollfd wait[3] = {{fd, POLLOUT, 0}, {gloo_, POLLIN, 0}, {peer_, POLLIN, 0}};
      CW_CHECK(poll(wait, 3, kPollMs) > 0) << "the relay stopped moving bytes";
      Drain();
    }
  }

  // Reads what is there on both ends, without waiting.
  void Drain() {
    for (auto [fd, got] : {std::pair{gloo_, &gloo_got_}, std::pair{peer_, &peer_got_}}) {
      uint8_t scratch[4096];
      while (true) {
        const ssize_t n = recv(fd, scratch, sizeof scratch, MSG_DONTWAIT);
        if (n <= 0) break;
        got->insert(got->end(), scratch, scratch + n);
      }
    }
  }

  // `who` got all of `sent` or, once the pair was broken, a prefix of it;
  // never anything else.
  void CheckDelivered(const Bytes& got, const Bytes& sent, absl::string_view who,
                      absl::string_view what) const {
    CW_CHECK(got.size() <= sent.size() &&
             std::equal(got.begin(), got.end(), sent.begin()))
        << who << " got bytes that are not " << what;
    CW_CHECK(broken_ || got == sent)
        << who << " lost bytes of " << what << ": got " << got.size()
        << " of " << sent.size();
  }

  void Check(int64_t refused) {
    // Gloo got the plaintext of the good records before the first bad
    // one: all of it, or (the pair closed under it) a prefix.
    CheckDelivered(gloo_got_, to_gloo_, "Gloo", "good records");
    // The peer got records that open, in order, to what Gloo wrote.
    RecordOpener opener(from_relay_key_);
    Bytes plain;
    size_t at = 0;
    while (peer_got_.size() - at >= 4) {
      uint32_t length = 0;
      for (int i = 0; i < 4; ++i) length |= uint32_t{peer_got_[at + i]} << (8 * i);
      CW_CHECK(length > 0 && length <= kRelayRecordBytes)
          << "the relay sent a record of " << length << " bytes";
      if (peer_got_.size() - at < 4 + length + kSealTagBytes) break;
      uint8_t* body = peer_got_.data() + at + 4;
      const absl::Status opened = opener.OpenInPlace(
          body, length, body + length,
          absl::MakeConstSpan(peer_got_.data() + at, 4));
      CW_CHECK(opened.ok()) << "a record from the relay does not open: "
                            << opened;
      plain.insert(plain.end(), body, body + length);
      at += 4 + length + kSealTagBytes;
    }
    CW_CHECK(broken_ || at == peer_got_.size())
        << "the relay's last record to the peer was cut off";
    CheckDelivered(plain, gloo_wrote_, "the peer", "what Gloo wrote");
    // A bad record is refused once (or the stream ended inside it).
    CW_CHECK(refused == 0 || (broken_ && refused == 1))
        << refused << " records refused, the pair "
        << (broken_ ? "broken" : "never broken");
  }

  static SealKey Key(uint8_t fill) {
    SealKey key;
    key.fill(fill);
    return key;
  }

  const SealKey to_relay_key_ = Key(0x5a);
  const SealKey from_relay_key_ = Key(0xa5);
  RecordSealer sealer_{to_relay_key_};  // The peer's.
  int peer_ = -1;
  int gloo_ = -1;
  std::unique_ptr<SealedRelay> relay_;
  bool broken_ = false;
  Bytes to_gloo_;     // Good records' plaintext, before the first bad one.
  Bytes gloo_wrote_;  // All Gloo wrote (the end may be lost once broken).
  Bytes gloo_got_;
  Bytes peer_got_;
};

void FuzzStrangerToAMesh(const uint8_t* data, size_t size) {
  const int64_t relays_before = SealedRelay::Running();
  RunStrangerToAMesh(data, size);
  AwaitRelaysEnded(relays_before);
}

void FuzzRelay(const uint8_t* data, size_t size) {
  const int64_t relays_before = SealedRelay::Running();
  {
    RelayScript script;
    script.Play(data, size);
  }
  AwaitRelaysEnded(relays_before);
}

}  // namespace
}  // namespace causeway::transport

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    causeway::transport::FuzzStrangerToAMesh(data + 1, size - 1);
  } else {
    causeway::transport::FuzzRelay(data + 1, size - 1);
  }
  return 0;
}
