#include "causeway/transport/gloo_mesh.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"
#include "causeway/base/socket_address.h"
#include "causeway/transport/sealed_relay.h"
#include "gloo/common/error.h"
#include "gloo/transport/tcp/context.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/tcp/pair.h"

namespace causeway::transport {
namespace {

namespace tcp = ::gloo::transport::tcp;

constexpr uint32_t kMagic = 0x4c475743;  // "CWGL" on the wire.
constexpr uint16_t kVersion = 2;
constexpr size_t kNonceBytes = 32;
constexpr size_t kSecretBytes = 32;
// hello: u32 magic | u16 version | u16 flags (bit 0: sealed) | u32 from
// rank | u32 to rank | dialler nonce[32]. challenge: listener nonce[32] |
// listener proof[32]. proof: dialler proof[32]. verdict: u8 (0: accepted,
// 1: the proof did not match, 2: the ranks differ on sealing).
constexpr size_t kHelloBytes = 16 + kNonceBytes;
constexpr size_t kChallengeBytes = 64;
constexpr size_t kProofBytes = 32;
// How often a wait looks at the rendezvous (an abort, the deadline).
constexpr absl::Duration kSlice = absl::Milliseconds(20);

std::atomic<int64_t> connections_refused{0};

using Bytes = std::vector<uint8_t>;

Bytes RandomBytes(size_t n) {
  Bytes bytes(n);
  FillRandom(absl::MakeSpan(bytes), "a Gloo handshake");
  return bytes;
}

void AppendU32(Bytes& bytes, uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint32_t ReadU32(const uint8_t* at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{at[i]} << (8 * i);
  return v;
}

Bytes Concat(absl::string_view label, const Bytes& a, const Bytes& b) {
  Bytes out(label.begin(), label.end());
  out.insert(out.end(), a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// The key of the pair (lo, hi) of the context under `prefix`.
Mac PairKey(absl::string_view token, absl::string_view prefix, int lo,
               int hi, const Bytes& secret_lo, const Bytes& secret_hi) {
  Bytes message;
  const absl::string_view label = "causeway gloo pair";
  message.insert(message.end(), label.begin(), label.end());
  AppendU32(message, static_cast<uint32_t>(prefix.size()));
  message.insert(message.end(), prefix.begin(), prefix.end());
  AppendU32(message, static_cast<uint32_t>(lo));
  AppendU32(message, static_cast<uint32_t>(hi));
  message.insert(message.end(), secret_lo.begin(), secret_lo.end());
  message.insert(message.end(), secret_hi.begin(), secret_hi.end());
  return HmacSha256(absl::MakeConstSpan(
                        reinterpret_cast<const uint8_t*>(token.data()),
                        token.size()),
                    message);
}

Mac Proof(const Mac& key, absl::string_view side, const Bytes& hello,
             const Bytes& listener_nonce) {
  return HmacSha256(key, Concat(side, hello, listener_nonce));
}

// The keys of a sealed pair: HKDF of its key, salted with the hello (the
// dialler's nonce) and the listener's nonce.
struct PairSealKeys {
  SealKey dialler_to_listener;
  SealKey listener_to_dialler;
};
PairSealKeys DerivePairSealKeys(const Mac& key, const Bytes& hello,
                                const Bytes& listener_nonce) {
  Bytes salt = hello;
  salt.insert(salt.end(), listener_nonce.begin(), listener_nonce.end());
  return PairSealKeys{
      DeriveSealKey(key, salt, "causeway gloo pair v2: dialler to listener"),
      DeriveSealKey(key, salt, "causeway gloo pair v2: listener to dialler")};
}

bool Matches(const uint8_t* given, const Mac& expected) {
  return CRYPTO_memcmp(given, expected.data(), expected.size()) == 0;
}

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string ErrnoText() { return std::strerror(errno); }

// A Gloo TCP pair over a socket that is connected and proven already.
class AdoptedPair final : public tcp::Pair {
 public:
  AdoptedPair(tcp::Context* context, tcp::Device* device, int rank,
              std::chrono::milliseconds timeout)
      : tcp::Pair(context, device, rank, timeout) {
    // The base opened a listening socket and gave it to the device's
    // loop: closed unused (a connection that came in meanwhile with it).
    std::lock_guard<std::mutex> lock(m_);
    if (fd_ != -1) {
      device_->unregisterDescriptor(fd_, this);
      ::close(fd_);
      fd_ = -1;
    }
    state_ = INITIALIZING;
    ex_ = nullptr;
  }

  void Adopt(int fd) {
    std::lock_guard<std::mutex> lock(m_);
    fd_ = fd;
    handleConnected();  // Non-blocking, TCP_NODELAY, timeouts, the loop.
  }

  void connect(const std::vector<char>&) override {
    GLOO_THROW_INVALID_OPERATION_EXCEPTION(
        "an adopted pair is connected already");
  }
};

class AdoptingContext final : public tcp::Context {
 public:
  AdoptingContext(std::shared_ptr<tcp::Device> device, int rank, int size)
      : tcp::Context(std::move(device), rank, size) {}

  void Adopt(int peer, Fd fd) {
    auto pair = std::make_unique<AdoptedPair>(this, device_.get(), peer,
                                              getTimeout());
    pair->Adopt(fd.Release());
    pairs_[peer] = std::move(pair);
  }
};

class MeshContext final : public ::gloo::Context {
 public:
  MeshContext(int rank, int size) : ::gloo::Context(rank, size) {}
  void Connected(std::shared_ptr<::gloo::transport::Device> device,
                 std::shared_ptr<::gloo::transport::Context> context) {
    device_ = std::move(device);
    transportContext_ = std::move(context);
  }
};

struct Peer {
  std::string address;
  Bytes secret;
  Mac key{};
};

class Mesh {
 public:
  Mesh(const GlooMeshOptions& options, GlooStore& store)
      : options_(options), store_(store) {}

  absl::StatusOr<std::shared_ptr<::gloo::Context>> Connect() {
    absl::Status status = Listen();
    if (status.ok()) status = Rendezvous();
    for (int peer = 0; status.ok() && peer < options_.rank; ++peer) {
      status = Dial(peer);
    }
    if (status.ok()) status = AcceptAll();
    if (!status.ok()) return status;
    auto device = std::dynamic_pointer_cast<tcp::Device>(options_.device);
    CW_CHECK(device != nullptr) << "a Gloo mesh needs Gloo's TCP device";
    std::shared_ptr<SealedRelay> relay;
    if (Sealed()) {
      std::vector<SealedRelay::Link> links;
      for (auto& [peer, fd] : connected_) {
        const PairSealKeys& keys = seal_keys_.at(peer);
        const bool dialled = peer < options_.rank;
        links.push_back(SealedRelay::Link{
            peer, fd.Release(),
            dialled ? keys.dialler_to_listener : keys.listener_to_dialler,
            dialled ? keys.listener_to_dialler : keys.dialler_to_listener});
      }
      std::map<int, int> gloo_fds;
      absl::StatusOr<std::unique_ptr<SealedRelay>> started =
          SealedRelay::Start(Where(), std::move(links), &gloo_fds);
      if (!started.ok()) return started.status();
      relay = *std::move(started);
      connected_.clear();
      for (auto& [peer, fd] : gloo_fds) connected_.emplace(peer, Fd(fd));
    }
    auto context = std::make_shared<AdoptingContext>(device, options_.rank,
                                                     options_.size);
    context->setTimeout(options_.pair_timeout);
    for (auto& [peer, fd] : connected_) context->Adopt(peer, std::move(fd));
    auto* mesh = new MeshContext(options_.rank, options_.size);
    mesh->setTimeout(options_.pair_timeout);
    mesh->Connected(options_.device, std::move(context));
    // The relay outlives Gloo's pairs: stopped after the context (and its
    // pairs) are gone, so that Gloo never sees its sockets close under it.
    return std::shared_ptr<::gloo::Context>(
        mesh, [relay = std::move(relay)](::gloo::Context* context) {
          delete context;
          if (relay != nullptr) relay->Stop();
        });
  }

 private:
  bool Sealed() const { return options_.encrypt && !options_.token.empty(); }

  std::string Where() const {
    return absl::StrCat("rank ", options_.rank, " of the Gloo context '",
                        store_.prefix(), "'");
  }

  // The rendezvous ended (aborted) or its deadline passed.
  absl::Status Over() const {
    absl::Status aborted = store_.aborted();
    if (!aborted.ok()) return aborted;
    if (absl::Now() >= options_.deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(Where(), ": the peers did not connect in time"));
    }
    return absl::OkStatus();
  }

  absl::Status Listen() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const int rc =
        getaddrinfo(options_.hostname.c_str(), "0", &hints, &found);
    if (rc != 0 || found == nullptr) {
      return absl::UnavailableError(absl::StrCat(
          Where(), ": cannot resolve '", options_.hostname, "': ",
          gai_strerror(rc)));
    }
    Fd fd(::socket(found->ai_family,
                   SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    const bool bound = fd.get() >= 0 &&
                       ::bind(fd.get(), found->ai_addr, found->ai_addrlen) == 0 &&
                       ::listen(fd.get(), 128) == 0;
    freeaddrinfo(found);
    if (!bound) {
      return absl::UnavailableError(absl::StrCat(
          Where(), ": cannot listen on ", options_.hostname, ": ", ErrnoText()));
    }
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &length);
    address_ = IpAndPort(local).ToString();
    listener_ = std::move(fd);
    return absl::OkStatus();
  }

  // Publishes our address and secret, reads every peer's, makes the keys.
  absl::Status Rendezvous() {
    const Bytes secret = RandomBytes(kSecretBytes);
    std::vector<char> value(address_.begin(), address_.end());
    value.push_back('\n');
    value.insert(value.end(), secret.begin(), secret.end());
    try {
      store_.set(absl::StrCat("mesh/", options_.rank), value);
      for (int peer = 0; peer < options_.size; ++peer) {
        if (peer == options_.rank) continue;
        const std::string key = absl::StrCat("mesh/", peer);
        store_.wait({key});
        const std::vector<char> published = store_.get(key);
        const auto newline =
            std::find(published.begin(), published.end(), '\n');
        if (newline == published.end() ||
            published.end() - newline - 1 != static_cast<long>(kSecretBytes)) {
          return absl::InternalError(absl::StrCat(
              Where(), ": rank ", peer, "'s rendezvous entry is malformed"));
        }
        Peer& entry = peers_[peer];
        entry.address.assign(published.begin(), newline);
        entry.secret.assign(newline + 1, published.end());
        const int lo = std::min(peer, options_.rank);
        const int hi = std::max(peer, options_.rank);
        entry.key = PairKey(options_.token, store_.prefix(), lo, hi,
                            lo == peer ? entry.secret : secret,
                            lo == peer ? secret : entry.secret);
      }
    } catch (const std::exception& e) {
      absl::Status failure = store_.failure();
      if (failure.ok()) {
        failure = absl::UnavailableError(
            absl::StrCat(Where(), ": the rendezvous failed: ", e.what()));
      }
      return failure;
    }
    return absl::OkStatus();
  }

  // Waits until `fd` is ready for `events`, the rendezvous is over or
  // `until` passes.
  absl::Status Await(int fd, short events, absl::Time until) {
    while (true) {
      absl::Status over = Over();
      if (!over.ok()) return over;
      const absl::Time now = absl::Now();
      if (now >= until) return absl::DeadlineExceededError("no answer in time");
      pollfd wait{fd, events, 0};
      const int r = poll(&wait, 1, static_cast<int>(absl::ToInt64Milliseconds(
                                       std::min(kSlice, until - now)) + 1));
      if (r > 0) return absl::OkStatus();
      if (r < 0 && errno != EINTR) return absl::UnavailableError(ErrnoText());
    }
  }

  absl::Status ReadFull(int fd, uint8_t* data, size_t size, absl::Time until) {
    while (size > 0) {
      absl::Status ready = Await(fd, POLLIN, until);
      if (!ready.ok()) return ready;
      const ssize_t n = ::recv(fd, data, size, 0);
      if (n == 0) return absl::UnavailableError("the peer closed the connection");
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return absl::UnavailableError(ErrnoText());
      }
      data += n;
      size -= static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  absl::Status WriteFull(int fd, const uint8_t* data, size_t size,
                         absl::Time until) {
    while (size > 0) {
      absl::Status ready = Await(fd, POLLOUT, until);
      if (!ready.ok()) return ready;
      const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return absl::UnavailableError(ErrnoText());
      }
      data += n;
      size -= static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  // Dials the lower rank `peer` and proves the pair's key; tries again
  // (a listener busy with a flood may drop us) until the deadline.
  absl::Status Dial(int peer) {
    absl::Status last;
    while (true) {
      absl::Status over = Over();
      if (!over.ok()) {
        return absl::Status(
            over.code(), absl::StrCat(over.message(), " (dialling rank ", peer,
                                      " at ", peers_[peer].address, ": ",
                                      last.message(), ")"));
      }
      absl::StatusOr<Fd> fd = DialOnce(peer);
      if (fd.ok()) {
        connected_.emplace(peer, *std::move(fd));
        return absl::OkStatus();
      }
      last = fd.status();
      if (absl::IsUnauthenticated(last) || absl::IsFailedPrecondition(last)) {
        return last;
      }
      absl::SleepFor(kSlice);
    }
  }

  absl::StatusOr<Fd> DialOnce(int peer) {
    const Peer& entry = peers_[peer];
    const std::string& address = entry.address;
    const size_t colon = address.rfind(':');
    std::string host = address.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (colon == std::string::npos ||
        getaddrinfo(host.c_str(), address.substr(colon + 1).c_str(), &hints,
                    &found) != 0 ||
        found == nullptr) {
      return absl::InternalError(absl::StrCat(
          Where(), ": rank ", peer, " published the address '", address, "'"));
    }
    Fd fd(::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                   0));
    const int rc = fd.get() < 0 ? -1
                                : ::connect(fd.get(), found->ai_addr,
                                            found->ai_addrlen);
    freeaddrinfo(found);
    if (fd.get() < 0 || (rc != 0 && errno != EINPROGRESS)) {
      return absl::UnavailableError(ErrnoText());
    }
    const absl::Time until = std::min(
        options_.deadline, absl::Now() + options_.handshake_timeout);
    absl::Status status = Await(fd.get(), POLLOUT, until);
    if (!status.ok()) return status;
    int error = 0;
    socklen_t length = sizeof error;
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) return absl::UnavailableError(std::strerror(error));
    Bytes hello;
    AppendU32(hello, kMagic);
    hello.push_back(static_cast<uint8_t>(kVersion));
    hello.push_back(static_cast<uint8_t>(kVersion >> 8));
    hello.push_back(Sealed() ? 1 : 0);
    hello.push_back(0);
    AppendU32(hello, static_cast<uint32_t>(options_.rank));
    AppendU32(hello, static_cast<uint32_t>(peer));
    const Bytes nonce = RandomBytes(kNonceBytes);
    hello.insert(hello.end(), nonce.begin(), nonce.end());
    status = WriteFull(fd.get(), hello.data(), hello.size(), until);
    uint8_t challenge[kChallengeBytes];
    if (status.ok()) status = ReadFull(fd.get(), challenge, sizeof challenge, until);
    if (!status.ok()) return status;
    const Bytes listener_nonce(challenge, challenge + kNonceBytes);
    if (!Matches(challenge + kNonceBytes,
                 Proof(entry.key, "listener", hello, listener_nonce))) {
      ++connections_refused;
      return absl::UnauthenticatedError(absl::StrCat(
          Where(), ": the listener at ", address, " (rank ", peer,
          ") could not prove the pair's key"));
    }
    const Mac proof = Proof(entry.key, "dialler", hello, listener_nonce);
    status = WriteFull(fd.get(), proof.data(), proof.size(), until);
    uint8_t verdict = 1;
    if (status.ok()) status = ReadFull(fd.get(), &verdict, 1, until);
    if (!status.ok()) return status;
    if (verdict == 2) {
      return absl::FailedPreconditionError(absl::StrCat(
          Where(), ": rank ", peer, " refused the pair: this rank has "
          "encryption ", Sealed() ? "on" : "off", " and it does not (every "
          "worker of a cluster must be configured alike)"));
    }
    if (verdict != 0) {
      return absl::UnavailableError(absl::StrCat("rank ", peer, " refused us"));
    }
    if (Sealed()) {
      seal_keys_[peer] = DerivePairSealKeys(entry.key, hello, listener_nonce);
    }
    return fd;
  }

  // A connection accepted and not proven yet.
  struct Pending {
    Fd fd;
    absl::Time since;
    Bytes in;            // What came so far of the current message.
    Bytes hello;         // Complete once the challenge is out.
    Bytes nonce;         // Ours, in the challenge.
    int from = -1;
  };

  void Refuse(Pending& pending, absl::string_view why) {
    CW_LOG(WARNING) << Where() << ": dropping a connection: " << why;
    ++connections_refused;
    pending.fd.Reset();
  }

  // Accepts, until every higher rank has connected and proven the key.
  absl::Status AcceptAll() {
    const int expected = options_.size - 1 - options_.rank;
    std::vector<Pending> pending;
    while (static_cast<int>(connected_.size()) < options_.size - 1) {
      absl::Status over = Over();
      if (!over.ok()) {
        std::string missing;
        for (int r = options_.rank + 1; r < options_.size; ++r) {
          if (!connected_.count(r)) absl::StrAppend(&missing, missing.empty() ? "" : ",", r);
        }
        return absl::Status(over.code(),
                            absl::StrCat(over.message(), " (waiting for ranks ",
                                         missing, " of ", expected,
                                         " to connect and prove the key)"));
      }
      const absl::Time now = absl::Now();
      for (Pending& p : pending) {
        if (p.fd.get() >= 0 && now - p.since >= options_.handshake_timeout) {
          Refuse(p, "no handshake in time");
        }
      }
      pending.erase(std::remove_if(pending.begin(), pending.end(),
                                   [](const Pending& p) { return p.fd.get() < 0; }),
                    pending.end());
      std::vector<pollfd> fds;
      fds.push_back({listener_.get(), POLLIN, 0});
      for (const Pending& p : pending) fds.push_back({p.fd.get(), POLLIN, 0});
      const int r = poll(fds.data(), fds.size(),
                         static_cast<int>(absl::ToInt64Milliseconds(kSlice)));
      if (r < 0 && errno != EINTR) return absl::UnavailableError(ErrnoText());
      if (r <= 0) continue;
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents != 0) Advance(pending[i - 1]);
      }
      pending.erase(std::remove_if(pending.begin(), pending.end(),
                                   [](const Pending& p) { return p.fd.get() < 0; }),
                    pending.end());
      if (fds[0].revents != 0) {
        while (true) {
          Fd fd(::accept4(listener_.get(), nullptr, nullptr,
                          SOCK_NONBLOCK | SOCK_CLOEXEC));
          if (fd.get() < 0) break;
          if (static_cast<int>(pending.size()) >= options_.max_pending_handshakes) {
            auto oldest = std::min_element(
                pending.begin(), pending.end(),
                [](const Pending& a, const Pending& b) { return a.since < b.since; });
            Refuse(*oldest, "too many connections in their handshake");
            pending.erase(oldest);
          }
          pending.push_back(Pending{std::move(fd), absl::Now(), {}, {}, {}, -1});
        }
      }
      pending.erase(std::remove_if(pending.begin(), pending.end(),
                                   [](const Pending& p) { return p.fd.get() < 0; }),
                    pending.end());
    }
    for (Pending& p : pending) {
      if (p.fd.get() >= 0) {
        Refuse(p, "still in its handshake when every rank had connected");
      }
    }
    return absl::OkStatus();
  }

  // Reads what came on `p` and moves its handshake on.
  void Advance(Pending& p) {
    const size_t want = p.hello.empty() ? kHelloBytes : kProofBytes;
    uint8_t buffer[kHelloBytes];
    const ssize_t n = ::recv(p.fd.get(), buffer, want - p.in.size(), 0);
    if (n == 0) return Refuse(p, "closed before its handshake ended");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) return;
      return Refuse(p, ErrnoText());
    }
    p.in.insert(p.in.end(), buffer, buffer + n);
    if (p.in.size() < want) return;
    if (p.hello.empty()) {
      const uint8_t* h = p.in.data();
      const uint32_t magic = ReadU32(h);
      const uint16_t version = static_cast<uint16_t>(h[4] | (h[5] << 8));
      const uint32_t from = ReadU32(h + 8);
      const uint32_t to = ReadU32(h + 12);
      if (magic != kMagic || version != kVersion || h[6] > 1 || h[7] != 0) {
        return Refuse(p, "not a Causeway Gloo handshake");
      }
      if (to != static_cast<uint32_t>(options_.rank) ||
          from <= static_cast<uint32_t>(options_.rank) ||
          from >= static_cast<uint32_t>(options_.size) ||
          connected_.count(static_cast<int>(from))) {
        return Refuse(p, absl::StrCat("a hello from rank ", from, " to rank ", to));
      }
      p.from = static_cast<int>(from);
      p.hello = std::move(p.in);
      p.in.clear();
      p.nonce = RandomBytes(kNonceBytes);
      Bytes challenge = p.nonce;
      const Mac proof = Proof(peers_[p.from].key, "listener", p.hello, p.nonce);
      challenge.insert(challenge.end(), proof.begin(), proof.end());
      // 64 bytes on a fresh connection: the socket buffer takes them.
      if (::send(p.fd.get(), challenge.data(), challenge.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(challenge.size())) {
        return Refuse(p, "could not send the challenge");
      }
      return;
    }
    if (!Matches(p.in.data(),
                 Proof(peers_[p.from].key, "dialler", p.hello, p.nonce))) {
      const uint8_t no = 1;
      ::send(p.fd.get(), &no, 1, MSG_NOSIGNAL);
      return Refuse(p, absl::StrCat("rank ", p.from,
                                    "'s proof of the pair's key does not match"));
    }
    const bool sealed = p.hello[6] == 1;
    if (sealed != Sealed()) {
      const uint8_t differs = 2;
      ::send(p.fd.get(), &differs, 1, MSG_NOSIGNAL);
      return Refuse(p, absl::StrCat("rank ", p.from, " has encryption ",
                                    sealed ? "on" : "off", ", this rank ",
                                    Sealed() ? "on" : "off"));
    }
    const uint8_t yes = 0;
    if (::send(p.fd.get(), &yes, 1, MSG_NOSIGNAL) != 1) {
      return Refuse(p, "could not send the verdict");
    }
    if (Sealed()) {
      seal_keys_[p.from] =
          DerivePairSealKeys(peers_[p.from].key, p.hello, p.nonce);
    }
    connected_.emplace(p.from, std::move(p.fd));
  }

  const GlooMeshOptions& options_;
  GlooStore& store_;
  Fd listener_;
  std::string address_;
  std::map<int, Peer> peers_;
  std::map<int, Fd> connected_;
  std::map<int, PairSealKeys> seal_keys_;  // Sealed: per peer rank.
};

}  // namespace

absl::StatusOr<std::shared_ptr<::gloo::Context>> ConnectGlooMesh(
    const GlooMeshOptions& options, GlooStore& store) {
  try {
    return Mesh(options, store).Connect();
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("connecting the Gloo context: ", e.what()));
  }
}

int64_t GlooMeshConnectionsRefused() { return connections_refused.load(); }

}  // namespace causeway::transport
