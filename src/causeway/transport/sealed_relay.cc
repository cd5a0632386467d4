#include "causeway/transport/sealed_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "causeway/base/logging.h"

namespace causeway::transport {

namespace {

constexpr size_t kLengthBytes = 4;
constexpr size_t kRecordBufferBytes =
    kLengthBytes + kRelayRecordBytes + kSealTagBytes;

std::atomic<int64_t> records_refused{0};
std::atomic<int64_t> relays_running{0};

// How long a stopped relay lingers for its pairs to send on what Gloo wrote
// last and for their peers to close.
constexpr absl::Duration kStopGrace = absl::Seconds(5);

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

bool NonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

// A loopback TCP connection inside this process: {Gloo's end, the relay's
// end}. Only the connection made here is accepted.
absl::StatusOr<std::pair<int, int>> LoopbackConnection() {
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listener < 0 ||
      bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) !=
          0 ||
      listen(listener, 16) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) !=
          0) {
    absl::Status status = Errno("a loopback socket for a sealed Gloo pair");
    CloseFd(listener);
    return status;
  }
  int gloo = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in mine{};
  length = sizeof mine;
  if (gloo < 0 ||
      connect(gloo, reinterpret_cast<sockaddr*>(&address), sizeof address) !=
          0 ||
      getsockname(gloo, reinterpret_cast<sockaddr*>(&mine), &length) != 0) {
    absl::Status status = Errno("connecting a sealed Gloo pair's loopback");
    CloseFd(gloo);
    CloseFd(listener);
    return status;
  }
  // Ours is queued (connect returned); anything before it is someone
  // else's, closed unread.
  while (true) {
    sockaddr_in from{};
    length = sizeof from;
    int accepted = accept4(listener, reinterpret_cast<sockaddr*>(&from),
                           &length, SOCK_CLOEXEC);
    if (accepted < 0) {
      if (errno == EINTR) continue;
      absl::Status status = Errno("accepting a sealed Gloo pair's loopback");
      CloseFd(gloo);
      CloseFd(listener);
      return status;
    }
    if (from.sin_port == mine.sin_port &&
        from.sin_addr.s_addr == mine.sin_addr.s_addr) {
      CloseFd(listener);
      return std::make_pair(gloo, accepted);
    }
    CW_LOG(WARNING) << "sealed Gloo relay: dropped a connection from "
                    << inet_ntoa(from.sin_addr) << ":" << ntohs(from.sin_port)
                    << " that raced to a pair's loopback port";
    CloseFd(accepted);
  }
}

}  // namespace

// One pair: the proven socket to the peer (`remote`), the relay's end of
// the loopback to Gloo (`local`), a record each way. Relay thread only,
// after Start.
struct SealedRelay::Pair {
  Pair(int peer_rank, int remote, const SealKey& send, const SealKey& receive)
      : peer_rank(peer_rank),
        remote(remote),
        sealer(send),
        opener(receive),
        out(kRecordBufferBytes),
        in(kRecordBufferBytes) {}
  ~Pair() { Close(); }

  void Close() {
    CloseFd(remote);
    CloseFd(local);
  }
  bool open() const { return remote >= 0; }

  const int peer_rank;
  int remote = -1;
  int local = -1;
  RecordSealer sealer;
  RecordOpener opener;
  // Gloo -> peer: the sealed record being sent.
  std::vector<uint8_t> out;
  size_t out_size = 0;
  size_t out_sent = 0;
  // Peer -> Gloo: the record being read, then its plaintext being written.
  std::vector<uint8_t> in;
  size_t in_have = 0;
  size_t in_need = kLengthBytes;
  bool in_body = false;
  size_t plain_size = 0;
  size_t plain_sent = 0;
  bool delivering = false;
  // An end of stream is passed on as one, once what came before it is
  // through (a half close, as TCP does): Gloo closed its end (then the
  // peer is sent a FIN once its last record is out), the peer closed its
  // (then Gloo is, once it has the last plaintext). Both passed on: the
  // pair closes.
  bool gloo_closed = false;
  bool peer_closed = false;
  bool peer_told = false;
  bool gloo_told = false;
};

// What the relay thread works on; it owns it, with the SealedRelay while
// that lives, so that a stopped relay finishes sending on by itself.
struct SealedRelay::Relay {
  Relay(std::string name, std::vector<std::unique_ptr<Pair>> pairs,
        int wake_read)
      : name(std::move(name)), pairs(std::move(pairs)), wake_read(wake_read) {}
  ~Relay() { CloseFd(wake_read); }

  // Moves bytes until Stop (the wake pipe's write end closes) and then
  // until every pair has sent on what Gloo wrote last, or kStopGrace.
  void Run();

  const std::string name;
  std::vector<std::unique_ptr<Pair>> pairs;
  int wake_read = -1;
};

absl::StatusOr<std::unique_ptr<SealedRelay>> SealedRelay::Start(
    std::string name, std::vector<Link> links, std::map<int, int>* gloo_fds) {
  std::vector<std::unique_ptr<Pair>> pairs;
  for (Link& link : links) {
    pairs.push_back(std::make_unique<Pair>(link.peer_rank, link.remote_fd,
                                           link.send_key, link.receive_key));
  }
  for (auto& pair : pairs) {
    absl::StatusOr<std::pair<int, int>> loopback = LoopbackConnection();
    if (!loopback.ok()) {
      for (auto& [rank, fd] : *gloo_fds) ::close(fd);
      gloo_fds->clear();
      return loopback.status();
    }
    (*gloo_fds)[pair->peer_rank] = loopback->first;
    pair->local = loopback->second;
    if (!NonBlocking(pair->local) || !NonBlocking(pair->remote)) {
      return Errno("a sealed Gloo pair's sockets");
    }
  }
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Errno("a sealed Gloo relay's wake pipe");
  }
  auto relay = std::make_shared<Relay>(std::move(name), std::move(pairs),
                                       wake[0]);
  return std::unique_ptr<SealedRelay>(new SealedRelay(relay, wake[1]));
}

SealedRelay::SealedRelay(std::shared_ptr<Relay> relay, int wake_write)
    : wake_write_(wake_write) {
  relays_running.fetch_add(1);
  thread_ = std::thread([relay = std::move(relay)] {
    pthread_setname_np(pthread_self(), "gloo-seal");
    relay->Run();
    relays_running.fetch_sub(1);
  });
}

SealedRelay::~SealedRelay() { Stop(); }

void SealedRelay::Stop() {
  if (stopped_.exchange(true)) return;
  // The closed pipe wakes the thread; it finishes on its own (detached):
  // whoever stops a relay never waits for a slow peer.
  CloseFd(wake_write_);
  thread_.detach();
}

int64_t SealedRelay::RecordsRefused() { return records_refused.load(); }

int64_t SealedRelay::Running() { return relays_running.load(); }

namespace {

// Writes what `pair` has for Gloo; false if Gloo's side is gone.
template <typename P>
bool ToGloo(P& p) {
  if (p.gloo_closed) {
    // Gloo is gone: what still comes is read (so that closing the socket
    // does not reset the connection and lose what the peer has not read
    // of ours yet) and dropped.
    p.plain_size = p.plain_sent = 0;
    p.delivering = false;
    return true;
  }
  while (p.plain_sent < p.plain_size) {
    const ssize_t n =
        send(p.local, p.in.data() + kLengthBytes + p.plain_sent,
             p.plain_size - p.plain_sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    p.plain_sent += static_cast<size_t>(n);
  }
  p.delivering = false;
  return true;
}

// Sends the sealed record `pair` holds; false if the peer is gone.
template <typename P>
bool ToPeer(P& p) {
  while (p.out_sent < p.out_size) {
    const ssize_t n = send(p.remote, p.out.data() + p.out_sent,
                           p.out_size - p.out_sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    p.out_sent += static_cast<size_t>(n);
  }
  p.out_size = p.out_sent = 0;
  return true;
}

}  // namespace

void SealedRelay::Relay::Run() {
  // What Gloo sent: sealed into one record and sent on.
  auto from_gloo = [](Pair& p) {
    while (true) {
      const ssize_t n = read(p.local, p.out.data() + kLengthBytes,
                             kRelayRecordBytes);
      if (n == 0) {
        p.gloo_closed = true;
        return true;
      }
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK;
      }
      const uint32_t size = static_cast<uint32_t>(n);
      for (size_t i = 0; i < kLengthBytes; ++i) {
        p.out[i] = static_cast<uint8_t>(size >> (8 * i));
      }
      p.sealer.SealInPlace(p.out.data() + kLengthBytes, size,
                           p.out.data() + kLengthBytes + size,
                           absl::MakeConstSpan(p.out.data(), kLengthBytes));
      p.out_size = kLengthBytes + size + kSealTagBytes;
      p.out_sent = 0;
      return ToPeer(p);
    }
  };
  // What the peer sent: a record read whole, opened, then given to Gloo.
  auto from_peer = [this](Pair& p) {
    while (true) {
      const ssize_t n =
          read(p.remote, p.in.data() + p.in_have, p.in_need - p.in_have);
      if (n == 0) {
        if (p.in_have > 0) return false;  // Mid-record: cut off.
        p.peer_closed = true;
        return true;
      }
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK;
      }
      p.in_have += static_cast<size_t>(n);
      if (p.in_have < p.in_need) continue;
      uint32_t size = 0;
      for (size_t i = 0; i < kLengthBytes; ++i) {
        size |= uint32_t{p.in[i]} << (8 * i);
      }
      if (!p.in_body) {
        if (size == 0 || size > kRelayRecordBytes) {
          ++records_refused;
          CW_LOG(WARNING) << "sealed Gloo relay of " << name
                          << ": closing the pair with rank " << p.peer_rank
                          << ", which sent a record of " << size
                          << " bytes (at most " << kRelayRecordBytes << ")";
          return false;
        }
        p.in_body = true;
        p.in_need = kLengthBytes + size + kSealTagBytes;
        continue;
      }
      absl::Status opened = p.opener.OpenInPlace(
          p.in.data() + kLengthBytes, size,
          p.in.data() + kLengthBytes + size,
          absl::MakeConstSpan(p.in.data(), kLengthBytes));
      if (!opened.ok()) {
        ++records_refused;
        CW_LOG(WARNING) << "sealed Gloo relay of " << name
                        << ": closing the pair with rank " << p.peer_rank
                        << ": " << opened.message();
        return false;
      }
      p.in_have = 0;
      p.in_need = kLengthBytes;
      p.in_body = false;
      p.plain_size = size;
      p.plain_sent = 0;
      p.delivering = true;
      return ToGloo(p);
    }
  };

  std::vector<pollfd> fds;
  bool stopping = false;
  absl::Time stop_deadline;
  while (true) {
    fds.clear();
    fds.push_back({stopping ? -1 : wake_read, POLLIN, 0});
    for (const auto& pair : pairs) {
      const Pair& p = *pair;
      const short remote = static_cast<short>(
          (p.delivering || p.peer_closed ? 0 : POLLIN) |
          (p.out_size > 0 ? POLLOUT : 0));
      const short local = static_cast<short>(
          (p.out_size > 0 || p.gloo_closed ? 0 : POLLIN) |
          (p.delivering ? POLLOUT : 0));
      // A closed pair, or a side with nothing to wait for, is left out
      // (a negative descriptor), so that a hang-up it cannot act on yet
      // does not wake the loop again and again.
      fds.push_back({p.open() && remote != 0 ? p.remote : -1, remote, 0});
      fds.push_back({p.open() && local != 0 ? p.local : -1, local, 0});
    }
    if (stopping) {
      // Gloo's pairs are gone: done once every pair has sent on what
      // Gloo wrote, or when the grace period ends.
      bool drained = true;
      for (const auto& pair : pairs) {
        // Closed only once the peer closed too (a lingering close): a
        // socket closed with unread data resets the connection, and the
        // peer would lose what it has not read yet.
        drained = drained &&
                  (!pair->open() || (pair->peer_told && pair->peer_closed));
      }
      if (drained || absl::Now() >= stop_deadline) return;
    }
    const int timeout_ms = stopping ? 50 : -1;
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      CW_LOG(ERROR) << "sealed Gloo relay of " << name
                    << ": poll failed: " << std::strerror(errno);
      return;
    }
    if (fds[0].revents != 0 && !stopping) {
      stopping = true;
      stop_deadline = absl::Now() + kStopGrace;
    }
    for (size_t i = 0; i < pairs.size(); ++i) {
      Pair& p = *pairs[i];
      errno = 0;
      const short remote = fds[1 + 2 * i].revents;
      const short local = fds[2 + 2 * i].revents;
      const char* cause = nullptr;
      if ((remote & POLLOUT) && !ToPeer(p)) cause = "sending to the peer";
      if (!cause && (local & POLLOUT) && !ToGloo(p)) cause = "writing to Gloo";
      if (!cause && !p.delivering && !p.peer_closed &&
          (remote & (POLLIN | POLLHUP | POLLERR)) && !from_peer(p)) {
        cause = "reading from the peer";
      }
      if (!cause && p.out_size == 0 && !p.gloo_closed &&
          (local & (POLLIN | POLLHUP | POLLERR)) && !from_gloo(p)) {
        cause = "reading from Gloo";
      }
      if (cause == nullptr && p.open()) {
        if (p.gloo_closed && p.out_size == 0 && !p.peer_told) {
          shutdown(p.remote, SHUT_WR);
          p.peer_told = true;
        }
        if (p.peer_closed && !p.delivering && !p.gloo_told) {
          shutdown(p.local, SHUT_WR);
          p.gloo_told = true;
        }
        if (p.peer_told && p.gloo_told) p.Close();
        continue;
      }
      if (cause != nullptr && p.open()) {
        CW_LOG(INFO) << "sealed Gloo relay of " << name
                     << ": the pair with rank " << p.peer_rank
                     << " closed while " << cause << ": "
                     << (errno == 0 ? "end of stream" : std::strerror(errno));
        p.Close();
      }
    }
  }
}

}  // namespace causeway::transport
