#include "causeway/transport/tcp_data_plane.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <asio.hpp>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "causeway/base/logging.h"
#include "causeway/transport/sealed_records.h"
#include "causeway/transport/tcp_wire.h"

namespace causeway::transport {

namespace {

using asio::ip::tcp;
namespace wire = tcp_wire;

// Staging block for narrow box pieces and for discarded payloads.
constexpr size_t kStagingBytes = size_t{1} << 20;
// Destination runs per readv(2) when reading a piece straight in (the
// system's IOV_MAX), and the bytes one connection reads before letting the
// others have the I/O thread.
constexpr size_t kMaxDirectRuns = 1024;
constexpr uint64_t kDirectBytesPerTurn = uint64_t{16} << 20;

// Asio's transfer_all() moves at most 64 KiB per system call; a piece moves
// as much per call as the socket has.
struct LargeSteps {
  size_t operator()(const asio::error_code& ec, size_t /*done*/) const {
    return ec ? 0 : size_t{1} << 30;
  }
};

absl::StatusOr<tcp::endpoint> ParseAddress(absl::string_view address) {
  const size_t colon = address.rfind(':');
  auto invalid = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "data plane address '", address, "' is not IP:PORT ([IPv6]:PORT)"));
  };
  if (colon == absl::string_view::npos) return invalid();
  std::string host(address.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return invalid();
  }
  asio::error_code ec;
  const asio::ip::address ip = asio::ip::make_address(host, ec);
  if (ec) return invalid();
  return tcp::endpoint(ip, static_cast<uint16_t>(port));
}

std::string FormatEndpoint(const tcp::endpoint& endpoint) {
  if (endpoint.address().is_v6()) {
    return absl::StrCat("[", endpoint.address().to_string(),
                        "]:", endpoint.port());
  }
  return absl::StrCat(endpoint.address().to_string(), ":", endpoint.port());
}

int Seconds(absl::Duration d) {
  return static_cast<int>(std::max<int64_t>(1, absl::ToInt64Seconds(d)));
}

// TCP_NODELAY, keepalive and TCP_USER_TIMEOUT (docs/data_plane.md).
void TuneSocket(tcp::socket& socket, const TcpDataPlaneOptions& options) {
  asio::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  socket.set_option(asio::socket_base::keep_alive(true), ec);
  const int fd = socket.native_handle();
  const int idle = Seconds(options.keepalive_idle);
  const int interval = Seconds(options.keepalive_interval);
  const int count = std::max(1, options.keepalive_count);
  const unsigned int user_timeout = static_cast<unsigned int>(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(options.user_timeout)));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout,
             sizeof user_timeout);
}

std::string TransferText(uint64_t transfer_id, const BufferId& destination,
                         DeviceId device) {
  return absl::StrCat("transfer ", transfer_id, " (", destination.ToString(),
                      " on device ", device.value(), ")");
}

// Walks the runs of a box a byte count at a time, a record's worth of
// which may end inside a run: calls `f(offset in the array, bytes)` for
// each contiguous stretch.
class RunWalk {
 public:
  explicit RunWalk(const BoxRuns& runs)
      : cursor_(runs), run_bytes_(static_cast<uint64_t>(runs.run_bytes())) {}

  template <typename F>
  void Take(uint64_t bytes, F&& f) {
    while (bytes > 0) {
      CW_CHECK(!cursor_.done()) << "walking past the end of a box";
      const uint64_t take = std::min(bytes, run_bytes_ - in_run_);
      f(static_cast<uint64_t>(cursor_.offset()) + in_run_,
        static_cast<size_t>(take));
      in_run_ += take;
      bytes -= take;
      if (in_run_ == run_bytes_) {
        cursor_.Next();
        in_run_ = 0;
      }
    }
  }

 private:
  BoxRuns::Cursor cursor_;
  const uint64_t run_bytes_;
  uint64_t in_run_ = 0;
};

// `frame` (the length prefix and a header) with its header sealed, then
// `payload` (at most one record) sealed after it.
std::vector<uint8_t> SealSmallFrame(RecordSealer& sealer,
                                    std::vector<uint8_t> frame,
                                    absl::string_view payload) {
  const size_t header = frame.size() - wire::kLengthBytes;
  frame.resize(frame.size() + kSealTagBytes);
  sealer.SealInPlace(frame.data() + wire::kLengthBytes, header,
                     frame.data() + wire::kLengthBytes + header,
                     absl::MakeConstSpan(frame.data(), wire::kLengthBytes));
  if (!payload.empty()) {
    CW_CHECK(payload.size() <= wire::kSealedRecordBytes);
    const size_t at = frame.size();
    frame.insert(frame.end(), payload.begin(), payload.end());
    frame.resize(frame.size() + kSealTagBytes);
    sealer.SealInPlace(frame.data() + at, payload.size(),
                       frame.data() + at + payload.size());
  }
  return frame;
}

uint64_t RandomIncarnation() {
  std::random_device random;
  uint64_t value = 0;
  while (value == 0) {
    value = (uint64_t{random()} << 32) ^ uint64_t{random()};
  }
  return value;
}

}  // namespace

// ---------------------------------------------------------------------------
// The shared state. Everything below `io thread only` is touched only by the
// I/O thread; the rest is guarded by mu_ or atomic.

class TcpDataPlane::Impl {
 public:
  class Outgoing;
  class Incoming;

  explicit Impl(TcpDataPlaneOptions options)
      : options_(std::move(options)),
        work_(asio::make_work_guard(io_)),
        acceptor_(io_),
        accept_retry_(io_) {
    if (options_.incarnation == 0) options_.incarnation = RandomIncarnation();
  }

  absl::Status Listen();
  void Attach(HostId self, PieceReceiver* receiver);
  void SetPeer(HostId host, std::string address, uint64_t incarnation);
  void RemovePeer(HostId host);
  Future<> Push(HostId destination, PieceMessage piece);
  void Shutdown();

  const TcpDataPlaneOptions& options() const { return options_; }
  // Connections seal what follows their handshake.
  bool sealed() const {
    return options_.encrypt && !options_.auth_token.empty();
  }
  const std::string& address() const { return address_; }
  asio::io_context& io() { return io_; }
  PieceReceiver* receiver() const {
    return receiver_.load(std::memory_order_acquire);
  }
  HostId self() const {
    return HostId(self_.load(std::memory_order_acquire));
  }
  // The incarnation the peer table has for `host` (0: any), or none if
  // the host is not in it.
  std::optional<uint64_t> PeerIncarnation(HostId host) {
    absl::MutexLock lock(&mu_);
    auto it = peers_.find(host);
    if (it == peers_.end()) return std::nullopt;
    return it->second.incarnation;
  }

  // The bound on early pieces: takes `bytes` of it (and 256 more), or
  // false if that would go over. The hold gives them back when dropped.
  std::shared_ptr<const void> HoldEarly(uint64_t bytes) {
    const int64_t take = static_cast<int64_t>(bytes) + kEarlyPieceOverhead;
    int64_t held = early_bytes_->load();
    do {
      if (take > options_.max_early_piece_bytes - held) return nullptr;
    } while (!early_bytes_->compare_exchange_weak(held, held + take));
    // Points at the counter (never null), which the deleter keeps alive.
    return std::shared_ptr<const void>(
        early_bytes_.get(), [early = early_bytes_, take](const void*) {
          early->fetch_sub(take);
        });
  }
  int64_t early_bytes() const { return early_bytes_->load(); }

  // Resolves a push (on the I/O thread) and counts it as no longer pending.
  void Settle(Promise<>& promise, absl::Status status) {
    promise.Set(std::move(status));
    absl::MutexLock lock(&mu_);
    --pending_pushes_;
  }
  bool AwaitIdle(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return pending_pushes_ == 0;
    };
    return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
  }

  // I/O thread: connections accepted from peers.
  void Established(const std::shared_ptr<Incoming>& connection);
  void Forget(Incoming* connection);
  // A host joined the peer table: handshakes waiting for it go on.
  void PeersChanged();

  struct Counters {
    std::atomic<int64_t> connections_accepted{0};
    std::atomic<int64_t> connections_refused{0};
    std::atomic<int64_t> protocol_errors{0};
    std::atomic<int64_t> pieces_received{0};
    std::atomic<int64_t> pieces_in_place{0};
    std::atomic<int64_t> bytes_received{0};
    std::atomic<int64_t> pieces_sent{0};
    std::atomic<int64_t> bytes_sent{0};
    std::atomic<int64_t> pieces_refused{0};
    std::atomic<int64_t> early_pieces_waiting{0};
    std::atomic<int64_t> records_refused{0};
  };
  Counters counters;
  static constexpr int64_t kEarlyPieceOverhead = 256;

 private:
  struct Peer {
    std::string address;
    uint64_t incarnation = 0;
    std::shared_ptr<Outgoing> outgoing;  // Made on the first push.
  };

  void Accept();
  std::shared_ptr<Outgoing> OutgoingLocked(HostId destination)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  TcpDataPlaneOptions options_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_;
  std::string address_;
  std::thread thread_;

  std::atomic<PieceReceiver*> receiver_{nullptr};
  std::atomic<int64_t> self_{-1};
  // Bytes of early pieces held (shared with the holds, which may outlive
  // this object inside the worker).
  std::shared_ptr<std::atomic<int64_t>> early_bytes_ =
      std::make_shared<std::atomic<int64_t>>(0);

  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool joined_ ABSL_GUARDED_BY(mu_) = false;
  std::map<HostId, Peer> peers_ ABSL_GUARDED_BY(mu_);
  // Pushes to this worker itself inside the receiver now.
  int64_t local_calls_ ABSL_GUARDED_BY(mu_) = 0;
  // Pushes to peers not resolved yet.
  int64_t pending_pushes_ ABSL_GUARDED_BY(mu_) = 0;

  // io thread only.
  std::set<std::shared_ptr<Incoming>> incoming_;
  uint64_t accepted_ = 0;  // Connections accepted, for their order.
  std::vector<std::shared_ptr<Incoming>> parked_;  // Waiting for Attach.
};

// ---------------------------------------------------------------------------
// One piece on its way out.

namespace {

struct OutgoingPiece {
  PieceMessage piece;
  Promise<> promise;
  std::vector<uint8_t> header;  // Length prefix and frame header.
  std::string message;          // The payload of an error frame.
  // Where the payload is in the source literal (data pieces).
  std::optional<BoxRuns> runs;
};

}  // namespace

// The connection this worker dials to one peer, and the pieces queued for
// it. I/O thread only, except construction.
class TcpDataPlane::Impl::Outgoing
    : public std::enable_shared_from_this<Outgoing> {
 public:
  Outgoing(Impl* impl, HostId peer, std::string address, uint64_t incarnation)
      : impl_(impl),
        peer_(peer),
        address_(std::move(address)),
        incarnation_(incarnation),
        socket_(impl->io()),
        timer_(impl->io()) {}

  void Enqueue(OutgoingPiece piece) {
    if (state_ == State::kClosed) {
      impl_->Settle(piece.promise, closed_);
      return;
    }
    queue_.push_back(std::move(piece));
    if (state_ == State::kIdle) {
      Dial();
    } else {
      WriteNext();
    }
  }

  // For good: every piece queued or unacknowledged fails with `status`.
  void Close(absl::Status status) {
    if (state_ == State::kClosed) return;
    closed_ = status;
    Disconnect();
    state_ = State::kClosed;
    FailAll(in_flight_, status);
    FailAll(queue_, status);
  }

 private:
  enum class State { kIdle, kConnecting, kReady, kClosed };

  std::string Describe() const {
    return absl::StrCat("host ", peer_.value(), " at ", address_);
  }

  void FailAll(std::deque<OutgoingPiece>& pieces, const absl::Status& status) {
    std::deque<OutgoingPiece> failed = std::move(pieces);
    pieces.clear();
    for (OutgoingPiece& piece : failed) impl_->Settle(piece.promise, status);
  }

  void Disconnect() {
    ++generation_;  // Handlers of the old connection see they are stale.
    asio::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    timer_.cancel();
    writing_ = false;
    being_written_.reset();
    write_cursor_.reset();
    write_runs_.reset();
    seal_walk_.reset();
    sealer_.reset();
    opener_.reset();
    window_.clear();
    window_start_ = 0;
  }

  void Dial() {
    absl::StatusOr<tcp::endpoint> endpoint = ParseAddress(address_);
    if (!endpoint.ok()) {
      FailAll(queue_, absl::UnavailableError(absl::StrCat(
                          "data plane: cannot reach host ", peer_.value(), ": ",
                          endpoint.status().message())));
      return;
    }
    state_ = State::kConnecting;
    const uint64_t generation = ++generation_;
    auto self = shared_from_this();
    timer_.expires_after(std::chrono::microseconds(
        absl::ToInt64Microseconds(impl_->options().handshake_timeout)));
    timer_.async_wait([self, generation](const asio::error_code& ec) {
      if (ec || generation != self->generation_ ||
          self->state_ != State::kConnecting) {
        return;
      }
      self->DialFailed(absl::StrCat(
          "no handshake within ",
          absl::FormatDuration(self->impl_->options().handshake_timeout)));
    });
    socket_.async_connect(*endpoint, [self, generation](
                                         const asio::error_code& ec) {
      if (generation != self->generation_) return;
      if (ec) return self->DialFailed(ec.message());
      self->Connected(generation);
    });
  }

  void Connected(uint64_t generation) {
    TuneSocket(socket_, impl_->options());
    asio::error_code ignored;
    socket_.native_non_blocking(true, ignored);  // WriteRunsNow's writev.
    wire::Hello hello;
    hello.sender = impl_->self();
    hello.sender_incarnation = impl_->options().incarnation;
    hello.receiver_incarnation = incarnation_;
    hello.sealed = impl_->sealed();
    hello.nonce = wire::RandomNonce();
    hello_ = wire::EncodeHello(hello);
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(hello_),
                      [self, generation](const asio::error_code& ec, size_t) {
                        if (generation != self->generation_) return;
                        if (ec) return self->DialFailed(ec.message());
                        self->ReadChallenge(generation);
                      });
  }

  // The listener proves the token over our hello and its nonce; we answer
  // with our proof (docs/data_plane.md, "Handshake").
  void ReadChallenge(uint64_t generation) {
    auto self = shared_from_this();
    asio::async_read(
        socket_, asio::buffer(challenge_),
        [self, generation](const asio::error_code& ec, size_t) {
          if (generation != self->generation_) return;
          if (ec) return self->DialFailed(ec.message());
          size_t message_bytes = 0;
          absl::StatusOr<wire::Challenge> challenge =
              wire::DecodeChallenge(self->challenge_, &message_bytes);
          if (!challenge.ok()) {
            return self->DialFailed(challenge.status().message());
          }
          self->reply_message_.resize(message_bytes);
          asio::async_read(
              self->socket_, asio::buffer(self->reply_message_),
              [self, generation, challenge = *challenge](
                  const asio::error_code& ec, size_t) {
                if (generation != self->generation_) return;
                if (ec) return self->DialFailed(ec.message());
                self->Answer(generation, challenge);
              });
        });
  }

  void Answer(uint64_t generation, const wire::Challenge& challenge) {
    if (challenge.code != absl::StatusCode::kOk) {
      return DialFailed(absl::StrCat("refused: ", reply_message_));
    }
    const std::string& token = impl_->options().auth_token;
    if (!wire::ProofsMatch(challenge.proof,
                           wire::ListenerProof(token, hello_, challenge.nonce))) {
      return DialFailed(
          "it could not prove it holds this cluster's token (another "
          "--token-file, or not a worker of this cluster)");
    }
    const wire::Proof proof = wire::DiallerProof(token, hello_, challenge.nonce);
    proof_.assign(proof.begin(), proof.end());
    if (impl_->sealed()) {
      const wire::SealKeys keys =
          wire::DeriveSealKeys(token, hello_, challenge.nonce);
      sealer_ = std::make_unique<RecordSealer>(keys.dialler_to_listener);
      opener_ = std::make_unique<RecordOpener>(keys.listener_to_dialler);
    }
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(proof_),
                      [self, generation](const asio::error_code& ec, size_t) {
                        if (generation != self->generation_) return;
                        if (ec) return self->DialFailed(ec.message());
                        self->ReadReply(generation);
                      });
  }

  void ReadReply(uint64_t generation) {
    auto self = shared_from_this();
    asio::async_read(
        socket_, asio::buffer(reply_),
        [self, generation](const asio::error_code& ec, size_t) {
          if (generation != self->generation_) return;
          if (ec) return self->DialFailed(ec.message());
          size_t message_bytes = 0;
          absl::StatusOr<absl::StatusCode> code =
              wire::DecodeReply(self->reply_, &message_bytes);
          if (!code.ok()) return self->DialFailed(code.status().message());
          self->reply_message_.resize(message_bytes);
          asio::async_read(
              self->socket_, asio::buffer(self->reply_message_),
              [self, generation, code = *code](const asio::error_code& ec,
                                               size_t) {
                if (generation != self->generation_) return;
                if (ec) return self->DialFailed(ec.message());
                if (code != absl::StatusCode::kOk) {
                  return self->DialFailed(
                      absl::StrCat("refused: ", self->reply_message_));
                }
                self->timer_.cancel();
                self->state_ = State::kReady;
                self->ReadAck(generation);
                self->WriteNext();
              });
        });
  }

  // Dialling failed: every queued piece fails (the next push dials again).
  void DialFailed(absl::string_view cause) {
    Disconnect();
    state_ = State::kIdle;
    const absl::Status status = absl::UnavailableError(absl::StrCat(
        "data plane: cannot reach ", Describe(), ": ", cause));
    CW_LOG(WARNING) << status.message();
    FailAll(queue_, status);
  }

  // A connection that worked broke: pieces not acknowledged fail (the peer
  // may not have them); queued ones go on a new connection.
  void Broke(absl::string_view cause) {
    Disconnect();
    state_ = State::kIdle;
    if (in_flight_.empty()) {
      // Idle: the peer closed it (it stopped). The next push redials.
      CW_LOG(INFO) << "data plane: the connection to " << Describe()
                   << " closed: " << cause;
    } else {
      const absl::Status status = absl::UnavailableError(absl::StrCat(
          "data plane: the connection to ", Describe(),
          " broke before it acknowledged the piece: ", cause));
      CW_LOG(WARNING) << status.message() << " (" << in_flight_.size()
                      << " piece" << (in_flight_.size() == 1 ? "" : "s")
                      << " lost)";
      FailAll(in_flight_, status);
    }
    if (!queue_.empty()) Dial();
  }

  void WriteNext() {
    if (state_ != State::kReady || writing_ || queue_.empty()) return;
    in_flight_.push_back(std::move(queue_.front()));
    queue_.pop_front();
    const OutgoingPiece& piece = in_flight_.back();
    writing_ = true;
    if (sealer_ != nullptr) return WriteSealed(piece);
    // The piece may be acknowledged (and gone) as soon as its last byte is
    // out: what the writes below need is copied out of it first.
    bool gather = false;
    std::array<asio::const_buffer, 2> buffers;
    buffers[0] = asio::buffer(piece.header);
    if (!piece.piece.data.ok()) {
      buffers[1] = asio::buffer(piece.message);
    } else {
      const auto* source =
          static_cast<const std::byte*>(piece.piece.data->untyped_data());
      const BoxRuns& runs = *piece.runs;
      if (runs.count() <= 1) {
        // Contiguous in the source: header and payload in one gather write.
        buffers[1] = asio::buffer(source + BoxRuns::Cursor(runs).offset(),
                                  static_cast<size_t>(runs.total_bytes()));
      } else {
        // The header, then the runs.
        gather = true;
        write_source_ = source;
        write_runs_.emplace(runs);
        write_cursor_.emplace(*write_runs_);
      }
    }
    const int64_t payload = static_cast<int64_t>(buffers[1].size());
    const uint64_t generation = generation_;
    auto self = shared_from_this();
    asio::async_write(
        socket_, buffers, LargeSteps(),
        [self, generation, gather, payload](const asio::error_code& ec,
                                            size_t) {
          if (generation != self->generation_) return;
          if (ec) return self->Broke(ec.message());
          self->impl_->counters.bytes_sent += payload;
          if (gather) return self->WriteRuns(generation);
          self->Written();
        });
  }

  // The piece being written is out.
  void Written() {
    writing_ = false;
    being_written_.reset();
    write_cursor_.reset();
    write_runs_.reset();
    seal_walk_.reset();
    window_.clear();
    window_start_ = 0;
    WriteNext();
  }

  // A box of the source, gathered from its runs without a copy: sendmsg(2)
  // of up to kMaxDirectRuns runs per call whenever the socket can take
  // more; runs narrower than min_direct_run_bytes are packed into a
  // staging block first.
  void WriteRuns(uint64_t generation) {
    if (write_runs_->run_bytes() < impl_->options().min_direct_run_bytes) {
      return WriteStaged(generation);
    }
    auto self = shared_from_this();
    socket_.async_wait(tcp::socket::wait_write,
                       [self, generation](const asio::error_code& ec) {
                         if (generation != self->generation_) return;
                         if (ec) return self->Broke(ec.message());
                         self->WriteRunsNow(generation);
                       });
  }

  void WriteRunsNow(uint64_t generation) {
    const size_t run = static_cast<size_t>(write_runs_->run_bytes());
    uint64_t turn = 0;
    while (true) {
      if (window_start_ > 0) {
        window_.erase(window_.begin(), window_.begin() + window_start_);
        window_start_ = 0;
      }
      while (window_.size() < kMaxDirectRuns && !write_cursor_->done()) {
        window_.push_back({const_cast<std::byte*>(write_source_ +
                                                  write_cursor_->offset()),
                           run});
        write_cursor_->Next();
      }
      if (window_.empty()) return Written();
      if (turn >= kDirectBytesPerTurn) {
        auto self = shared_from_this();
        asio::post(socket_.get_executor(), [self, generation] {
          if (generation == self->generation_) self->WriteRunsNow(generation);
        });
        return;
      }
      // sendmsg rather than writev: MSG_NOSIGNAL, no SIGPIPE from a peer
      // that is gone.
      msghdr message{};
      message.msg_iov = window_.data();
      message.msg_iovlen = window_.size();
      const ssize_t n =
          sendmsg(socket_.native_handle(), &message, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          return WriteRuns(generation);
        }
        return Broke(std::strerror(errno));
      }
      impl_->counters.bytes_sent += n;
      turn += static_cast<uint64_t>(n);
      for (size_t left = static_cast<size_t>(n); left > 0;) {
        iovec& first = window_[window_start_];
        const size_t take = std::min(left, first.iov_len);
        first.iov_base = static_cast<std::byte*>(first.iov_base) + take;
        first.iov_len -= take;
        left -= take;
        if (first.iov_len == 0) ++window_start_;
      }
    }
  }

  // Narrow runs: packed a staging block at a time.
  void WriteStaged(uint64_t generation) {
    if (write_cursor_->done()) return Written();
    const size_t run = static_cast<size_t>(write_runs_->run_bytes());
    staging_.resize(std::max(run, kStagingBytes / run * run));
    size_t filled = 0;
    while (!write_cursor_->done() && filled + run <= staging_.size()) {
      std::memcpy(staging_.data() + filled,
                  write_source_ + write_cursor_->offset(), run);
      write_cursor_->Next();
      filled += run;
    }
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(staging_.data(), filled),
                      LargeSteps(),
                      [self, generation](const asio::error_code& ec, size_t n) {
                        if (generation != self->generation_) return;
                        if (ec) return self->Broke(ec.message());
                        self->impl_->counters.bytes_sent +=
                            static_cast<int64_t>(n);
                        self->WriteStaged(generation);
                      });
  }

  // Sealed: the frame's header record, then as much of its payload as
  // one record holds, in one write; WriteSealedRecords does the rest. The
  // payload is encrypted from the source (its runs gathered as they are
  // encrypted) into the staging block: no other copy.
  void WriteSealed(const OutgoingPiece& piece) {
    const size_t header_bytes = piece.header.size() - wire::kLengthBytes;
    staging_.resize(std::max(
        staging_.size(), piece.header.size() + kSealTagBytes +
                             wire::kSealedRecordBytes + kSealTagBytes));
    auto* out = reinterpret_cast<uint8_t*>(staging_.data());
    std::memcpy(out, piece.header.data(), piece.header.size());
    sealer_->SealInPlace(out + wire::kLengthBytes, header_bytes,
                         out + piece.header.size(),
                         absl::MakeConstSpan(out, wire::kLengthBytes));
    size_t filled = piece.header.size() + kSealTagBytes;
    seal_left_ = 0;
    if (!piece.piece.data.ok()) {
      // An error's message: one record at most.
      const size_t size = piece.message.size();
      if (size > 0) {
        std::memcpy(out + filled, piece.message.data(), size);
        sealer_->SealInPlace(out + filled, size, out + filled + size);
        filled += size + kSealTagBytes;
      }
    } else {
      write_source_ =
          static_cast<const std::byte*>(piece.piece.data->untyped_data());
      write_runs_.emplace(*piece.runs);
      seal_walk_.emplace(*write_runs_);
      seal_left_ = static_cast<uint64_t>(write_runs_->total_bytes());
      filled = SealRecord(filled);
    }
    SendSealed(filled, generation_);
  }

  // Seals the next record of the piece's payload at `at` in the staging
  // block; returns where it ends.
  size_t SealRecord(size_t at) {
    const uint64_t size = std::min(seal_left_, wire::kSealedRecordBytes);
    if (size == 0) return at;
    auto* out = reinterpret_cast<uint8_t*>(staging_.data()) + at;
    const bool narrow =
        write_runs_->run_bytes() < impl_->options().min_direct_run_bytes;
    size_t filled = 0;
    if (narrow) {
      // Narrow runs: gathered by memcpy, then sealed in place (one call
      // into the cipher instead of one per run).
      seal_walk_->Take(size, [&](uint64_t offset, size_t bytes) {
        std::memcpy(out + filled, write_source_ + offset, bytes);
        filled += bytes;
      });
      sealer_->SealInPlace(out, size, out + size);
    } else {
      sealer_->Begin();
      seal_walk_->Take(size, [&](uint64_t offset, size_t bytes) {
        sealer_->Add(write_source_ + offset, out + filled, bytes);
        filled += bytes;
      });
      sealer_->End(out + size);
    }
    seal_left_ -= size;
    sealed_payload_ += static_cast<int64_t>(size);
    return at + size + kSealTagBytes;
  }

  void SendSealed(size_t bytes, uint64_t generation) {
    auto self = shared_from_this();
    asio::async_write(
        socket_, asio::buffer(staging_.data(), bytes), LargeSteps(),
        [self, generation](const asio::error_code& ec, size_t) {
          if (generation != self->generation_) return;
          if (ec) return self->Broke(ec.message());
          self->impl_->counters.bytes_sent += self->sealed_payload_;
          self->sealed_payload_ = 0;
          if (self->seal_left_ == 0) return self->Written();
          self->SendSealed(self->SealRecord(0), generation);
        });
  }

  void ReadAck(uint64_t generation) {
    auto self = shared_from_this();
    asio::async_read(
        socket_, asio::buffer(ack_length_),
        [self, generation](const asio::error_code& ec, size_t) {
          if (generation != self->generation_) return;
          if (ec) return self->Broke(ec.message());
          absl::StatusOr<size_t> length = wire::DecodeFrameLength(self->ack_length_);
          if (!length.ok() || *length != wire::kFrameFixedBytes) {
            return self->Broke("malformed acknowledgement");
          }
          const size_t size = wire::kFrameFixedBytes +
                              (self->opener_ != nullptr ? kSealTagBytes : 0);
          asio::async_read(
              self->socket_, asio::buffer(self->ack_.data(), size),
              [self, generation](const asio::error_code& ec, size_t) {
                if (generation != self->generation_) return;
                if (ec) return self->Broke(ec.message());
                if (self->opener_ != nullptr) {
                  absl::Status opened = self->opener_->OpenInPlace(
                      self->ack_.data(), wire::kFrameFixedBytes,
                      self->ack_.data() + wire::kFrameFixedBytes,
                      self->ack_length_);
                  if (!opened.ok()) return self->Tampered(opened);
                }
                self->OnAck(generation);
              });
        });
  }

  // A sealed record from the peer failed to open: nothing on this
  // connection can be trusted any more.
  void Tampered(const absl::Status& status) {
    ++impl_->counters.records_refused;
    Broke(absl::StrCat("an acknowledgement from it failed its authentication "
                       "(", status.message(), ")"));
  }

  void OnAck(uint64_t generation) {
    absl::StatusOr<wire::FrameHeader> ack = wire::DecodeFrameHeader(
        absl::MakeConstSpan(ack_.data(), wire::kFrameFixedBytes),
        impl_->options().max_piece_bytes);
    if (!ack.ok() || ack->kind != wire::FrameKind::kAck || in_flight_.empty() ||
        in_flight_.front().piece.transfer_id != ack->transfer_id) {
      return Broke(absl::StrCat(
          "unexpected acknowledgement",
          ack.ok() ? absl::StrCat(" of transfer ", ack->transfer_id)
                   : absl::StrCat(": ", ack.status().message())));
    }
    ack_code_ = ack->code;
    const size_t message_bytes = static_cast<size_t>(ack->payload_bytes);
    if (message_bytes == 0) {
      ack_message_.clear();
      return Acknowledged(generation);
    }
    ack_message_.resize(message_bytes +
                        (opener_ != nullptr ? kSealTagBytes : 0));
    auto self = shared_from_this();
    asio::async_read(
        socket_, asio::buffer(ack_message_),
        [self, generation, message_bytes](const asio::error_code& ec, size_t) {
          if (generation != self->generation_) return;
          if (ec) return self->Broke(ec.message());
          if (self->opener_ != nullptr) {
            auto* data = reinterpret_cast<uint8_t*>(self->ack_message_.data());
            absl::Status opened = self->opener_->OpenInPlace(
                data, message_bytes, data + message_bytes);
            if (!opened.ok()) return self->Tampered(opened);
            self->ack_message_.resize(message_bytes);
          }
          self->Acknowledged(generation);
        });
  }

  // The peer took the piece, or refused it (ack_code_ not OK).
  void Acknowledged(uint64_t generation) {
    OutgoingPiece piece = std::move(in_flight_.front());
    in_flight_.pop_front();
    // A refusal (or a peer that acknowledges early) may come while the
    // piece's bytes still go out: its source lives until they have.
    const bool still_writing = writing_ && in_flight_.empty();
    if (ack_code_ == absl::StatusCode::kOk) {
      ++impl_->counters.pieces_sent;
      impl_->Settle(piece.promise, absl::OkStatus());
    } else {
      impl_->Settle(piece.promise,
                    absl::Status(ack_code_, absl::StrCat(
                                                "data plane: ", Describe(),
                                                " refused transfer ",
                                                piece.piece.transfer_id, ": ",
                                                ack_message_)));
    }
    if (still_writing) being_written_.emplace(std::move(piece));
    ReadAck(generation);
  }

  Impl* const impl_;
  const HostId peer_;
  const std::string address_;
  const uint64_t incarnation_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  State state_ = State::kIdle;
  absl::Status closed_;
  uint64_t generation_ = 0;
  bool writing_ = false;
  std::deque<OutgoingPiece> queue_;      // Not written yet.
  std::deque<OutgoingPiece> in_flight_;  // Written (or being written).
  // Settled while it was written: kept until its write ends.
  std::optional<OutgoingPiece> being_written_;
  std::vector<uint8_t> hello_;
  std::array<uint8_t, wire::kChallengeBytes> challenge_{};
  std::vector<uint8_t> proof_;
  std::array<uint8_t, wire::kReplyBytes> reply_{};
  std::string reply_message_;
  std::array<uint8_t, wire::kLengthBytes> ack_length_{};
  std::array<uint8_t, wire::kFrameFixedBytes + kSealTagBytes> ack_{};
  absl::StatusCode ack_code_ = absl::StatusCode::kOk;
  std::string ack_message_;
  // Writing the runs of the piece at the back of in_flight_ (copied out
  // of it: it may be acknowledged before the last write completes).
  const std::byte* write_source_ = nullptr;
  std::optional<BoxRuns> write_runs_;
  std::optional<BoxRuns::Cursor> write_cursor_;
  std::vector<iovec> window_;
  size_t window_start_ = 0;
  std::vector<std::byte> staging_;
  // A sealed connection: what we send, what we read.
  std::unique_ptr<RecordSealer> sealer_;
  std::unique_ptr<RecordOpener> opener_;
  // Sealing the payload of the piece at the back of in_flight_: its runs
  // still to seal, and the payload bytes of the write under way.
  std::optional<RunWalk> seal_walk_;
  uint64_t seal_left_ = 0;
  int64_t sealed_payload_ = 0;
};

// ---------------------------------------------------------------------------
// A connection a peer dialled: its handshake, then frames. I/O thread only.

class TcpDataPlane::Impl::Incoming
    : public std::enable_shared_from_this<Incoming> {
 public:
  Incoming(Impl* impl, tcp::socket socket)
      : impl_(impl), socket_(std::move(socket)), timer_(impl->io()) {
    asio::error_code ec;
    const tcp::endpoint remote = socket_.remote_endpoint(ec);
    remote_ = ec ? "an unknown address" : FormatEndpoint(remote);
  }

  HostId peer() const { return peer_; }
  bool established() const { return established_; }
  bool in_handshake() const { return !established_ && !closed_; }
  uint64_t order() const { return order_; }

  void Start(uint64_t order) {
    order_ = order;
    TuneSocket(socket_, impl_->options());
    asio::error_code ignored;
    socket_.native_non_blocking(true, ignored);  // ReadDirectNow's readv.
    auto self = shared_from_this();
    timer_.expires_after(std::chrono::microseconds(
        absl::ToInt64Microseconds(impl_->options().handshake_timeout)));
    timer_.async_wait([self](const asio::error_code& ec) {
      if (ec || self->closed_ || self->established_) return;
      if (self->awaiting_peer_) {
        return self->Refuse(absl::PermissionDeniedError(absl::StrCat(
            "host ", self->hello_decoded_.sender.value(),
            " is not a member of this cluster (not in this worker's peer "
            "table after ",
            absl::FormatDuration(self->impl_->options().handshake_timeout),
            ")")));
      }
      self->Drop(absl::StrCat("no handshake within ",
                              absl::FormatDuration(
                                  self->impl_->options().handshake_timeout)));
    });
    asio::async_read(socket_, asio::buffer(hello_),
                     [self](const asio::error_code& ec, size_t) {
                       if (self->closed_) return;
                       if (ec) return self->Drop(ec.message());
                       self->OnHello();
                     });
  }

  // Reads frames once a receiver is attached.
  void Resume() {
    if (!closed_) ReadFrame();
  }

  // The peer table changed: a proven peer waiting to be known goes on.
  void PeersChanged() {
    if (awaiting_peer_ && !closed_) Admit();
  }

  // Closes the connection. `status`, when not OK, is what the receiver
  // hears: every receive waiting for this peer fails with it
  // (ConnectionLost), and so does the piece being read. The receives fail
  // first, before the socket closes: whoever learns of the loss (the piece
  // being read failing, or the peer seeing the close and reporting its
  // pieces undelivered) finds every receive it affects already failed, and
  // a receive set up after that is not failed by it.
  void Close(const absl::Status& status) {
    if (closed_) return;
    closed_ = true;
    PieceReceiver* receiver = impl_->receiver();
    if (established_ && receiver != nullptr && !status.ok()) {
      receiver->ConnectionLost(peer_, status);
    }
    asio::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    timer_.cancel();
    StopWaiting();
    if (writer_ != nullptr) {
      std::unique_ptr<PieceWriter> writer = std::move(writer_);
      writer->Finish(status.ok()
                         ? absl::UnavailableError("data plane shut down")
                         : status);
    }
    impl_->Forget(this);
  }

  // Before the handshake: nothing to tell anyone.
  void Drop(absl::string_view cause) {
    CW_LOG(WARNING) << "data plane: dropping the connection from " << remote_
                    << ": " << cause;
    ++impl_->counters.protocol_errors;
    Close(absl::OkStatus());
  }

 private:
  std::string Describe() const {
    return established_ ? absl::StrCat("host ", peer_.value(), " (", remote_, ")")
                        : remote_;
  }

  // The hello: the listener answers with its nonce and its proof of the
  // token over the hello and that nonce.
  void OnHello() {
    absl::StatusOr<wire::Hello> hello = wire::DecodeHello(hello_);
    if (!hello.ok()) return Drop(hello.status().message());
    hello_decoded_ = *std::move(hello);
    auto self = shared_from_this();
    if (hello_decoded_.version != wire::kVersion) {
      const absl::Status refusal = absl::FailedPreconditionError(absl::StrCat(
          "data-plane protocol version ", hello_decoded_.version,
          " is not supported; this worker speaks ", wire::kVersion));
      LogRefusal(refusal);
      reply_ = wire::EncodeChallenge(refusal, {}, {});
      asio::async_write(socket_, asio::buffer(reply_),
                        [self](const asio::error_code&, size_t) {
                          self->Close(absl::OkStatus());
                        });
      return;
    }
    nonce_ = wire::RandomNonce();
    reply_ = wire::EncodeChallenge(
        absl::OkStatus(), nonce_,
        wire::ListenerProof(impl_->options().auth_token, hello_, nonce_));
    asio::async_write(
        socket_, asio::buffer(reply_), [self](const asio::error_code& ec, size_t) {
          if (self->closed_) return;
          if (ec) return self->Drop(ec.message());
          asio::async_read(self->socket_, asio::buffer(self->proof_),
                           [self](const asio::error_code& ec, size_t) {
                             if (self->closed_) return;
                             if (ec) return self->Drop(ec.message());
                             self->Authenticate();
                           });
        });
  }

  void Authenticate() {
    const wire::Hello& hello = hello_decoded_;
    const TcpDataPlaneOptions& options = impl_->options();
    if (!wire::ProofsMatch(proof_, wire::DiallerProof(options.auth_token,
                                                      hello_, nonce_))) {
      return Refuse(absl::UnauthenticatedError(
          "wrong auth token (the handshake's proof does not match this "
          "worker's token)"));
    }
    if (hello.sealed != impl_->sealed()) {
      return Refuse(absl::FailedPreconditionError(absl::StrCat(
          "host ", hello.sender.value(), " dials with data-plane encryption ",
          hello.sealed ? "on" : "off", ", and this worker has it ",
          impl_->sealed() ? "on" : "off",
          " (every worker of a cluster must be configured alike)")));
    }
    if (impl_->sealed()) {
      const wire::SealKeys keys =
          wire::DeriveSealKeys(options.auth_token, hello_, nonce_);
      opener_ = std::make_unique<RecordOpener>(keys.dialler_to_listener);
      sealer_ = std::make_unique<RecordSealer>(keys.listener_to_dialler);
    }
    if (hello.receiver_incarnation != 0 &&
        hello.receiver_incarnation != options.incarnation) {
      return Refuse(absl::FailedPreconditionError(absl::StrCat(
          "this worker is incarnation ", options.incarnation, ", not ",
          hello.receiver_incarnation)));
    }
    Admit();
  }

  // A proven peer: admitted once the peer table knows it (at this
  // incarnation).
  void Admit() {
    const wire::Hello& hello = hello_decoded_;
    const std::optional<uint64_t> known = impl_->PeerIncarnation(hello.sender);
    if (!known.has_value()) {
      awaiting_peer_ = true;  // Until the handshake's deadline.
      return;
    }
    awaiting_peer_ = false;
    if (*known != 0 && *known != hello.sender_incarnation) {
      return Refuse(absl::FailedPreconditionError(absl::StrCat(
          "host ", hello.sender.value(), " is incarnation ", *known,
          " here, not ", hello.sender_incarnation)));
    }
    peer_ = hello.sender;
    established_ = true;
    timer_.cancel();
    ++impl_->counters.connections_accepted;
    // The reply goes first in the queue the acknowledgements share.
    acks_.push_back(wire::EncodeReply(absl::OkStatus()));
    WriteAcks();
    impl_->Established(shared_from_this());
  }

  void LogRefusal(const absl::Status& refusal) {
    CW_LOG(WARNING) << "data plane: refused a connection from " << remote_
                    << " (host " << hello_decoded_.sender.value()
                    << "): " << refusal.message();
    ++impl_->counters.connections_refused;
  }

  // After the proofs: the reply says why, then the connection closes.
  void Refuse(const absl::Status& refusal) {
    awaiting_peer_ = false;
    LogRefusal(refusal);
    reply_ = wire::EncodeReply(refusal);
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(reply_),
                      [self](const asio::error_code&, size_t) {
                        self->Close(absl::OkStatus());
                      });
  }

  void ReadFrame() {
    if (closed_) return;
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(length_),
                     [self](const asio::error_code& ec, size_t) {
                       if (self->closed_) return;
                       if (ec) return self->Lost(ec.message());
                       absl::StatusOr<size_t> length =
                           wire::DecodeFrameLength(self->length_);
                       if (!length.ok()) {
                         return self->ProtocolError(length.status());
                       }
                       self->mid_frame_ = true;
                       self->header_.transfer_id = 0;  // Not read yet.
                       self->header_bytes_.resize(
                           *length +
                           (self->opener_ != nullptr ? kSealTagBytes : 0));
                       self->ReadHeader();
                     });
  }

  void ReadHeader() {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(header_bytes_),
                     [self](const asio::error_code& ec, size_t) {
                       if (self->closed_) return;
                       if (ec) return self->Lost(ec.message());
                       if (self->opener_ != nullptr) {
                         const size_t size =
                             self->header_bytes_.size() - kSealTagBytes;
                         absl::Status opened = self->opener_->OpenInPlace(
                             self->header_bytes_.data(), size,
                             self->header_bytes_.data() + size,
                             self->length_);
                         if (!opened.ok()) return self->Tampered(opened);
                         self->header_bytes_.resize(size);
                       }
                       self->OnHeader();
                     });
  }

  void OnHeader() {
    absl::StatusOr<wire::FrameHeader> header = wire::DecodeFrameHeader(
        header_bytes_, impl_->options().max_piece_bytes);
    if (!header.ok()) return ProtocolError(header.status());
    header_ = *std::move(header);
    switch (header_.kind) {
      case wire::FrameKind::kAck:
        return ProtocolError(absl::InvalidArgumentError(
            "data plane: an acknowledgement on a connection that carries "
            "pieces to this worker"));
      case wire::FrameKind::kError:
        return ReadError();
      case wire::FrameKind::kPiece:
        return BeginPiece();
    }
  }

  PieceMessage MessageOf(const wire::FrameHeader& header) const {
    PieceMessage message;
    message.transfer_id = header.transfer_id;
    message.source_device = header.source_device;
    message.source_host = peer_;
    message.destination_device = header.destination_device;
    message.destination = header.destination;
    message.offsets = header.offsets;
    message.whole = header.whole;
    return message;
  }

  // An error in place of a piece: held like an early piece (the worker
  // may not have its receive yet), within the same bound.
  void ReadError() {
    held_ = impl_->HoldEarly(header_.payload_bytes);
    remaining_ = header_.payload_bytes;
    if (held_ == nullptr) return RefuseEarly();
    message_.resize(header_.payload_bytes);
    if (opener_ != nullptr) return ReadSealed(Sink::kMessage);
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(message_),
                     [self](const asio::error_code& ec, size_t) {
                       if (self->closed_) return;
                       if (ec) return self->Lost(ec.message());
                       self->ErrorRead();
                     });
  }

  void ErrorRead() {
    PieceMessage piece = MessageOf(header_);
    piece.data = absl::Status(header_.code, message_);
    piece.held = std::move(held_);
    Deliver(std::move(piece));
  }

  void BeginPiece() {
    remaining_ = header_.payload_bytes;
    early_tries_ = 0;
    PlacePiece();
  }

  // Where the piece's bytes go: its announced buffer, memory of its own
  // within the bound on early pieces, or (over the bound) nowhere yet: it
  // waits unread, trying again, up to early_piece_wait.
  void PlacePiece() {
    PieceHeader header;
    header.transfer_id = header_.transfer_id;
    header.source_device = header_.source_device;
    header.source_host = peer_;
    header.destination_device = header_.destination_device;
    header.destination = header_.destination;
    header.offsets = header_.offsets;
    header.whole = header_.whole;
    header.shape = hlo::Shape(header_.type, header_.dims);
    absl::StatusOr<std::unique_ptr<PieceWriter>> writer =
        impl_->receiver()->BeginPiece(header);
    if (!writer.ok()) {
      // Refused (the receiver dealt with it): skip the bytes.
      StopWaiting();
      return Discard();
    }
    if (*writer == nullptr) {
      // Not announced yet (or its buffer waits for memory).
      held_ = impl_->HoldEarly(header_.payload_bytes);
      if (held_ != nullptr) {
        StopWaiting();
        literal_ = hlo::Literal::Uninitialized(std::move(header.shape));
        if (opener_ != nullptr) return ReadSealed(Sink::kLiteral);
        return ReadLiteral();
      }
      const absl::Time now = absl::Now();
      if (!early_since_.has_value()) {
        early_since_ = now;
        ++impl_->counters.early_pieces_waiting;
      }
      if (now - *early_since_ >= impl_->options().early_piece_wait) {
        StopWaiting();
        return RefuseEarly();
      }
      // Try again soon: 1 ms, doubling to 64 ms.
      const int64_t delay_ms = int64_t{1} << std::min(early_tries_++, 6);
      auto self = shared_from_this();
      timer_.expires_after(std::chrono::milliseconds(delay_ms));
      timer_.async_wait([self](const asio::error_code& ec) {
        if (ec || self->closed_) return;
        self->PlacePiece();
      });
      return;
    }
    StopWaiting();
    writer_ = *std::move(writer);
    const BoxRuns& runs = writer_->runs();
    if (static_cast<uint64_t>(runs.total_bytes()) != header_.payload_bytes) {
      // The receiver's destination does not match what it accepted.
      std::unique_ptr<PieceWriter> bad = std::move(writer_);
      bad->Finish(absl::InternalError(absl::StrCat(
          "data plane: the destination of ",
          TransferText(header_.transfer_id, header_.destination,
                       header_.destination_device),
          " holds ", runs.total_bytes(), " bytes, the piece ",
          header_.payload_bytes)));
      return Discard();
    }
    cursor_.emplace(runs);
    if (runs.count() == 0) return FinishInPlace();
    if (opener_ != nullptr) {
      walk_.emplace(runs);
      return ReadSealed(Sink::kWriter);
    }
    if (runs.count() == 1 ||
        runs.run_bytes() >= impl_->options().min_direct_run_bytes) {
      return ReadDirect();
    }
    return ReadStaged();
  }

  void StopWaiting() {
    if (!early_since_.has_value()) return;
    early_since_.reset();
    --impl_->counters.early_pieces_waiting;
  }

  // Over the bound on early pieces: the sender hears so at once (the
  // acknowledgements keep their order: this frame's is next), then the
  // bytes are read and dropped.
  void RefuseEarly() {
    const absl::Status refusal = EarlyRefusal();
    ++impl_->counters.pieces_refused;
    CW_LOG(WARNING) << refusal.message();
    QueueAck(header_.transfer_id, refusal);
    acknowledged_ = true;
    Discard();
  }

  absl::Status EarlyRefusal() const {
    const TcpDataPlaneOptions& options = impl_->options();
    return absl::ResourceExhaustedError(absl::StrCat(
        "data plane of host ", impl_->self().value(), ": ",
        TransferText(header_.transfer_id, header_.destination,
                     header_.destination_device),
        " came before its receive, and its ", header_.payload_bytes,
        " bytes do not fit in the limit on such early pieces "
        "(max_early_piece_bytes, causeway worker --max-early-piece-bytes: ",
        options.max_early_piece_bytes, " bytes, ", impl_->early_bytes(),
        " held) within ", absl::FormatDuration(options.early_piece_wait)));
  }

  // Straight into the destination runs: readv(2) of up to kMaxDirectRuns
  // runs per call (Asio's reads take at most 64 buffers), whenever the
  // socket is readable.
  void ReadDirect() {
    auto self = shared_from_this();
    socket_.async_wait(tcp::socket::wait_read,
                       [self](const asio::error_code& ec) {
                         if (self->closed_) return;
                         if (ec) return self->Lost(ec.message());
                         self->ReadDirectNow();
                       });
  }

  void ReadDirectNow() {
    const int64_t run = writer_->runs().run_bytes();
    std::byte* base = writer_->base();
    uint64_t turn = 0;  // Bytes read in this turn of the I/O thread.
    while (remaining_ > 0) {
      if (turn >= kDirectBytesPerTurn) {
        // Let the other connections have the thread, then go on.
        auto self = shared_from_this();
        asio::post(socket_.get_executor(), [self] {
          if (!self->closed_) self->ReadDirectNow();
        });
        return;
      }
      // The window holds the next runs to read: refill what was consumed
      // (building all kMaxDirectRuns per call would cost more than a short
      // read brings).
      if (window_start_ > 0) {
        window_.erase(window_.begin(), window_.begin() + window_start_);
        window_start_ = 0;
      }
      while (window_.size() < kMaxDirectRuns && !cursor_->done()) {
        window_.push_back({base + cursor_->offset(), static_cast<size_t>(run)});
        cursor_->Next();
      }
      const ssize_t n =
          readv(socket_.native_handle(), window_.data(),
                static_cast<int>(window_.size()));
      if (n == 0) return Lost("End of file");
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return ReadDirect();
        return Lost(std::strerror(errno));
      }
      remaining_ -= static_cast<uint64_t>(n);
      turn += static_cast<uint64_t>(n);
      // Drop the runs filled; the first one left may be partly filled.
      size_t left = static_cast<size_t>(n);
      while (left > 0) {
        iovec& first = window_[window_start_];
        const size_t take = std::min(left, first.iov_len);
        first.iov_base = static_cast<std::byte*>(first.iov_base) + take;
        first.iov_len -= take;
        left -= take;
        if (first.iov_len == 0) ++window_start_;
      }
    }
    window_.clear();
    window_start_ = 0;
    FinishInPlace();
  }

  // Narrow runs: a staging block at a time, copied into the runs.
  void ReadStaged() {
    const int64_t run = writer_->runs().run_bytes();
    const uint64_t block =
        std::max<uint64_t>(run, kStagingBytes / static_cast<uint64_t>(run) * run);
    const size_t chunk = static_cast<size_t>(std::min(remaining_, block));
    staging_.resize(std::max(staging_.size(), chunk));
    auto self = shared_from_this();
    asio::async_read(
        socket_, asio::buffer(staging_.data(), chunk), LargeSteps(),
        [self, chunk, run](const asio::error_code& ec, size_t) {
          if (self->closed_) return;
          if (ec) return self->Lost(ec.message());
          self->remaining_ -= chunk;
          std::byte* base = self->writer_->base();
          for (size_t at = 0; at < chunk; at += static_cast<size_t>(run)) {
            std::memcpy(base + self->cursor_->offset(),
                        self->staging_.data() + at, static_cast<size_t>(run));
            self->cursor_->Next();
          }
          if (self->remaining_ > 0) return self->ReadStaged();
          self->FinishInPlace();
        });
  }

  void FinishInPlace() {
    ++impl_->counters.pieces_in_place;
    ++impl_->counters.pieces_received;
    impl_->counters.bytes_received += header_.payload_bytes;
    std::unique_ptr<PieceWriter> writer = std::move(writer_);
    cursor_.reset();
    walk_.reset();
    writer->Finish(absl::OkStatus());
    Acknowledge(header_.transfer_id);
  }

  void ReadLiteral() {
    auto self = shared_from_this();
    asio::async_read(
        socket_,
        asio::buffer(literal_.mutable_untyped_data(),
                     static_cast<size_t>(literal_.size_bytes())),
        LargeSteps(), [self](const asio::error_code& ec, size_t) {
          if (self->closed_) return;
          if (ec) return self->Lost(ec.message());
          self->LiteralRead();
        });
  }

  void LiteralRead() {
    ++impl_->counters.pieces_received;
    impl_->counters.bytes_received += header_.payload_bytes;
    PieceMessage piece = MessageOf(header_);
    piece.data = std::move(literal_);
    piece.held = std::move(held_);
    literal_ = hlo::Literal();
    Deliver(std::move(piece));
  }

  // Where the plaintext of a sealed payload goes.
  enum class Sink { kWriter, kLiteral, kMessage, kDiscard };

  // A sealed payload, a record at a time: each is read into the staging
  // block, opened there, and only then copied where it belongs, so a
  // record that fails to open writes nothing into any buffer.
  void ReadSealed(Sink sink) {
    if (remaining_ == 0) return SealedRead(sink);
    const size_t size =
        static_cast<size_t>(std::min(remaining_, wire::kSealedRecordBytes));
    staging_.resize(std::max(staging_.size(), size + kSealTagBytes));
    auto self = shared_from_this();
    asio::async_read(
        socket_, asio::buffer(staging_.data(), size + kSealTagBytes),
        LargeSteps(), [self, sink, size](const asio::error_code& ec, size_t) {
          if (self->closed_) return;
          if (ec) return self->Lost(ec.message());
          auto* data = reinterpret_cast<uint8_t*>(self->staging_.data());
          absl::Status opened =
              self->opener_->OpenInPlace(data, size, data + size);
          if (!opened.ok()) return self->Tampered(opened);
          const uint64_t at = self->header_.payload_bytes - self->remaining_;
          switch (sink) {
            case Sink::kWriter: {
              std::byte* base = self->writer_->base();
              size_t done = 0;
              self->walk_->Take(size, [&](uint64_t offset, size_t bytes) {
                std::memcpy(base + offset, data + done, bytes);
                done += bytes;
              });
              break;
            }
            case Sink::kLiteral:
              std::memcpy(
                  static_cast<uint8_t*>(self->literal_.mutable_untyped_data()) +
                      at,
                  data, size);
              break;
            case Sink::kMessage:
              std::memcpy(self->message_.data() + at, data, size);
              break;
            case Sink::kDiscard:
              break;
          }
          self->remaining_ -= size;
          self->ReadSealed(sink);
        });
  }

  void SealedRead(Sink sink) {
    switch (sink) {
      case Sink::kWriter:
        return FinishInPlace();
      case Sink::kLiteral:
        return LiteralRead();
      case Sink::kMessage:
        return ErrorRead();
      case Sink::kDiscard:
        return Discard();
    }
  }

  // Reads and drops the payload of a refused piece (sealed: each record
  // is opened all the same, to keep in step and to notice tampering).
  void Discard() {
    if (remaining_ == 0) {
      if (!acknowledged_) return Acknowledge(header_.transfer_id);
      acknowledged_ = false;
      mid_frame_ = false;
      return ReadFrame();
    }
    if (opener_ != nullptr) return ReadSealed(Sink::kDiscard);
    const size_t chunk =
        static_cast<size_t>(std::min<uint64_t>(remaining_, kStagingBytes));
    staging_.resize(std::max(staging_.size(), chunk));
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(staging_.data(), chunk),
                     LargeSteps(),
                     [self, chunk](const asio::error_code& ec, size_t) {
                       if (self->closed_) return;
                       if (ec) return self->Lost(ec.message());
                       self->remaining_ -= chunk;
                       self->Discard();
                     });
  }

  void Deliver(PieceMessage piece) {
    const uint64_t transfer = piece.transfer_id;
    impl_->receiver()->ReceivePiece(std::move(piece));
    Acknowledge(transfer);
  }

  // Tells the sender the receiver has the piece (or, `refusal` not OK,
  // that it refused it), and reads the next frame.
  void Acknowledge(uint64_t transfer_id) {
    mid_frame_ = false;
    QueueAck(transfer_id, absl::OkStatus());
    ReadFrame();
  }

  void QueueAck(uint64_t transfer_id, const absl::Status& refusal) {
    wire::FrameHeader ack;
    ack.kind = wire::FrameKind::kAck;
    ack.transfer_id = transfer_id;
    ack.code = refusal.code();
    const absl::string_view text = refusal.message().substr(
        0, std::min(refusal.message().size(), wire::kMaxReplyMessageBytes));
    ack.payload_bytes = text.size();
    std::vector<uint8_t> frame = wire::EncodeFrameHeader(ack);
    if (sealer_ != nullptr) {
      // Sealed in the order they are written (the queue's order).
      frame = SealSmallFrame(*sealer_, std::move(frame), text);
    } else {
      frame.insert(frame.end(), text.begin(), text.end());
    }
    acks_.push_back(std::move(frame));
    WriteAcks();
  }

  void WriteAcks() {
    if (writing_acks_ || acks_.empty()) return;
    writing_acks_ = true;
    sending_.clear();
    while (!acks_.empty()) {
      sending_.insert(sending_.end(), acks_.front().begin(), acks_.front().end());
      acks_.pop_front();
    }
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(sending_),
                      [self](const asio::error_code& ec, size_t) {
                        if (self->closed_) return;
                        self->writing_acks_ = false;
                        if (ec) return self->Lost(ec.message());
                        self->WriteAcks();
                      });
  }

  // The connection broke (or the peer closed it).
  void Lost(absl::string_view cause) {
    std::string text = absl::StrCat("data plane: the connection from ",
                                    Describe(), " broke");
    if (writer_ != nullptr) {
      absl::StrAppend(&text, " after ",
                      header_.payload_bytes - remaining_, " of ",
                      header_.payload_bytes, " bytes of ",
                      TransferText(header_.transfer_id, header_.destination,
                                   header_.destination_device));
    }
    absl::StrAppend(&text, ": ", cause);
    if (mid_frame_) {
      CW_LOG(WARNING) << text;
    } else {
      CW_LOG(INFO) << text;  // Between pieces: the peer stopped.
    }
    Close(absl::DataLossError(text));
  }

  // A sealed record failed to open: changed, dropped, repeated or
  // replayed on the way. The piece it carried fails (and every receive
  // waiting for this peer: nothing more from this connection can be
  // trusted); the sender hears the connection close.
  void Tampered(const absl::Status& error) {
    ++impl_->counters.records_refused;
    std::string text = absl::StrCat(
        "data plane: closing the connection from ", Describe(),
        ": what it sent failed its authentication (tampered with on the way, "
        "or not sealed by that host)");
    if (mid_frame_ && header_.transfer_id != 0) {
      absl::StrAppend(&text, " in ",
                      TransferText(header_.transfer_id, header_.destination,
                                   header_.destination_device));
    }
    absl::StrAppend(&text, ": ", error.message());
    CW_LOG(WARNING) << text;
    Close(absl::DataLossError(text));
  }

  void ProtocolError(const absl::Status& error) {
    ++impl_->counters.protocol_errors;
    const std::string text =
        absl::StrCat("data plane: closing the connection from ", Describe(),
                     ", which sent a malformed frame: ", error.message());
    CW_LOG(WARNING) << text;
    Close(absl::DataLossError(text));
  }

  Impl* const impl_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  std::string remote_;
  bool closed_ = false;
  bool established_ = false;
  HostId peer_;

  uint64_t order_ = 0;  // Accepted as the order_-th connection.
  std::array<uint8_t, wire::kHelloBytes> hello_{};
  wire::Hello hello_decoded_;
  wire::Nonce nonce_{};
  wire::Proof proof_{};
  bool awaiting_peer_ = false;  // Proven, not in the peer table yet.
  std::vector<uint8_t> reply_;

  std::array<uint8_t, wire::kLengthBytes> length_{};
  std::vector<uint8_t> header_bytes_;
  wire::FrameHeader header_;
  bool mid_frame_ = false;  // Between a frame's length and its ack.
  uint64_t remaining_ = 0;  // Payload bytes of the current frame not read.
  std::unique_ptr<PieceWriter> writer_;
  std::optional<BoxRuns::Cursor> cursor_;
  // ReadDirectNow's runs still to read, from window_start_.
  std::vector<iovec> window_;
  size_t window_start_ = 0;
  std::vector<std::byte> staging_;
  // A sealed connection: what we read, what we send (the acknowledgements).
  std::unique_ptr<RecordOpener> opener_;
  std::unique_ptr<RecordSealer> sealer_;
  // The destination runs of a sealed piece still to fill.
  std::optional<RunWalk> walk_;
  hlo::Literal literal_;
  std::string message_;
  // The current early piece's share of the bound, while it is read.
  std::shared_ptr<const void> held_;
  // Over the bound: since when it waits, and how often it tried.
  std::optional<absl::Time> early_since_;
  int early_tries_ = 0;
  bool acknowledged_ = false;  // The frame being dropped was refused.

  std::deque<std::vector<uint8_t>> acks_;
  std::vector<uint8_t> sending_;
  bool writing_acks_ = false;
};

// ---------------------------------------------------------------------------
// Impl.

absl::Status TcpDataPlane::Impl::Listen() {
  absl::StatusOr<tcp::endpoint> endpoint = ParseAddress(options_.listen_address);
  if (!endpoint.ok()) return endpoint.status();
  asio::error_code ec;
  acceptor_.open(endpoint->protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(*endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("data plane: cannot listen on ",
                                               options_.listen_address, ": ",
                                               ec.message()));
  }
  address_ = FormatEndpoint(acceptor_.local_endpoint(ec));
  Accept();
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "dataplane");
    io_.run();
  });
  return absl::OkStatus();
}

void TcpDataPlane::Impl::Accept() {
  acceptor_.async_accept([this](const asio::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      // Out of descriptors and the like: try again shortly.
      CW_LOG(WARNING) << "data plane: accept failed: " << ec.message();
      accept_retry_.expires_after(std::chrono::milliseconds(10));
      accept_retry_.async_wait([this](const asio::error_code& ec) {
        if (!ec) Accept();
      });
      return;
    }
    // A flood of connections that never finish their handshake: the
    // oldest of them makes room.
    Incoming* oldest = nullptr;
    int in_handshake = 0;
    for (const auto& other : incoming_) {
      if (!other->in_handshake()) continue;
      ++in_handshake;
      if (oldest == nullptr || other->order() < oldest->order()) {
        oldest = other.get();
      }
    }
    if (oldest != nullptr && in_handshake >= options_.max_pending_handshakes) {
      oldest->Drop(absl::StrCat("more than ", options_.max_pending_handshakes,
                                " connections in their handshake"));
    }
    auto connection = std::make_shared<Incoming>(this, std::move(socket));
    incoming_.insert(connection);
    connection->Start(++accepted_);
    Accept();
  });
}

void TcpDataPlane::Impl::Established(
    const std::shared_ptr<Incoming>& connection) {
  if (receiver() == nullptr) {
    parked_.push_back(connection);
  } else {
    connection->Resume();
  }
}

void TcpDataPlane::Impl::PeersChanged() {
  std::vector<std::shared_ptr<Incoming>> waiting;
  for (const auto& connection : incoming_) {
    if (connection->in_handshake()) waiting.push_back(connection);
  }
  for (auto& connection : waiting) connection->PeersChanged();
}

void TcpDataPlane::Impl::Forget(Incoming* connection) {
  for (auto it = incoming_.begin(); it != incoming_.end(); ++it) {
    if (it->get() == connection) {
      incoming_.erase(it);
      return;
    }
  }
}

void TcpDataPlane::Impl::Attach(HostId self, PieceReceiver* receiver) {
  CW_CHECK(receiver != nullptr);
  CW_CHECK(this->receiver() == nullptr) << "data plane attached twice";
  self_.store(self.value(), std::memory_order_release);
  receiver_.store(receiver, std::memory_order_release);
  asio::post(io_, [this] {
    std::vector<std::shared_ptr<Incoming>> parked = std::move(parked_);
    parked_.clear();
    for (auto& connection : parked) connection->Resume();
  });
}

void TcpDataPlane::Impl::SetPeer(HostId host, std::string address,
                                 uint64_t incarnation) {
  std::shared_ptr<Outgoing> old;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    auto it = peers_.find(host);
    if (it != peers_.end()) {
      if (it->second.address == address &&
          it->second.incarnation == incarnation) {
        return;
      }
      old = std::move(it->second.outgoing);
    }
    peers_[host] = Peer{std::move(address), incarnation, nullptr};
  }
  asio::post(io_, [this] { PeersChanged(); });
  if (old != nullptr) {
    asio::post(io_, [old, host] {
      old->Close(absl::UnavailableError(absl::StrCat(
          "data plane: host ", host.value(),
          " changed its address or incarnation")));
    });
  }
}

void TcpDataPlane::Impl::RemovePeer(HostId host) {
  std::shared_ptr<Outgoing> old;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    auto it = peers_.find(host);
    if (it == peers_.end()) return;
    old = std::move(it->second.outgoing);
    peers_.erase(it);
  }
  asio::post(io_, [this, old, host] {
    const absl::Status gone = absl::UnavailableError(absl::StrCat(
        "data plane: host ", host.value(), " was removed from the peer table"));
    if (old != nullptr) old->Close(gone);
    std::vector<std::shared_ptr<Incoming>> from_host;
    for (const auto& connection : incoming_) {
      if (connection->established() && connection->peer() == host) {
        from_host.push_back(connection);
      }
    }
    for (auto& connection : from_host) {
      connection->Close(absl::DataLossError(absl::StrCat(
          "data plane: host ", host.value(), " is gone")));
    }
  });
}

Future<> TcpDataPlane::Impl::Push(HostId destination, PieceMessage piece) {
  wire::FrameHeader header;
  header.transfer_id = piece.transfer_id;
  header.source_device = piece.source_device;
  header.destination_device = piece.destination_device;
  header.destination = piece.destination;
  header.whole = piece.whole;
  std::string message;
  std::optional<BoxRuns> runs;
  if (piece.data.ok()) {
    absl::StatusOr<hlo::Shape> shape = PieceShape(piece);
    if (!shape.ok() || shape->rank() > wire::kMaxRank ||
        static_cast<int64_t>(piece.offsets.size()) != shape->rank() ||
        wire::WireType(shape->type()) == 0) {
      return MakeErrorFuture(absl::InvalidArgumentError(absl::StrCat(
          "data plane: cannot send a piece of ",
          shape.ok() ? shape->ToString(false) : shape.status().ToString(),
          " at ", piece.offsets.size(), " offsets")));
    }
    const hlo::Shape& source = piece.data->shape();
    runs.emplace(source.dims(),
                 piece.source_offsets.empty()
                     ? std::vector<int64_t>(source.rank(), 0)
                     : piece.source_offsets,
                 shape->dims(), hlo::ByteWidth(shape->type()));
    header.kind = wire::FrameKind::kPiece;
    header.type = shape->type();
    header.dims = shape->dims();
    header.offsets = piece.offsets;
    header.payload_bytes = static_cast<uint64_t>(runs->total_bytes());
  } else {
    header.kind = wire::FrameKind::kError;
    header.code = piece.data.status().code();
    const absl::string_view text = piece.data.status().message();
    message = std::string(text.substr(
        0, std::min(text.size(), wire::kMaxErrorMessageBytes)));
    header.payload_bytes = message.size();
  }
  if (piece.transfer_id == 0 || piece.source_device.value() < 0 ||
      piece.destination_device.value() < 0 || piece.destination.shard < 0) {
    // The receiver would refuse the frame and close the connection.
    return MakeErrorFuture(absl::InvalidArgumentError(absl::StrCat(
        "data plane: a piece needs a transfer id and real devices and shard "
        "(transfer ", piece.transfer_id, ", device ",
        piece.source_device.value(), " to ", piece.destination.ToString(),
        " on device ", piece.destination_device.value(), ")")));
  }
  std::shared_ptr<Outgoing> outgoing;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) {
      return MakeErrorFuture(
          absl::UnavailableError("data plane: shut down"));
    }
    if (self().value() < 0) {
      return MakeErrorFuture(absl::FailedPreconditionError(
          "data plane: not attached to a worker yet"));
    }
    if (destination == self()) {
      ++local_calls_;
    } else {
      outgoing = OutgoingLocked(destination);
      if (outgoing == nullptr) {
        return MakeErrorFuture(absl::UnavailableError(
            absl::StrCat("data plane: host ", destination.value(),
                         " is not in the peer table")));
      }
      ++pending_pushes_;
    }
  }
  if (outgoing == nullptr) {
    // To this worker itself: no socket, as the in-process data plane does.
    receiver()->ReceivePiece(std::move(piece));
    absl::MutexLock lock(&mu_);
    --local_calls_;
    return MakeReadyFuture();
  }
  PromiseAndFuture<> result = MakePromise<>();
  OutgoingPiece item{std::move(piece), std::move(result.promise),
                     wire::EncodeFrameHeader(header), std::move(message),
                     std::move(runs)};
  asio::post(io_, [outgoing, item = std::move(item)]() mutable {
    outgoing->Enqueue(std::move(item));
  });
  return std::move(result.future);
}

std::shared_ptr<TcpDataPlane::Impl::Outgoing>
TcpDataPlane::Impl::OutgoingLocked(HostId destination) {
  auto it = peers_.find(destination);
  if (it == peers_.end()) return nullptr;
  if (it->second.outgoing == nullptr) {
    it->second.outgoing = std::make_shared<Outgoing>(
        this, destination, it->second.address, it->second.incarnation);
  }
  return it->second.outgoing;
}

void TcpDataPlane::Impl::Shutdown() {
  std::vector<std::shared_ptr<Outgoing>> outgoing;
  {
    absl::MutexLock lock(&mu_);
    if (joined_) return;
    joined_ = true;
    shut_down_ = true;
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return local_calls_ == 0;
    };
    mu_.Await(absl::Condition(&idle));
    for (auto& [host, peer] : peers_) {
      if (peer.outgoing != nullptr) outgoing.push_back(std::move(peer.outgoing));
    }
    peers_.clear();
  }
  asio::post(io_, [this, outgoing = std::move(outgoing)] {
    asio::error_code ignored;
    acceptor_.close(ignored);
    accept_retry_.cancel();
    const absl::Status down = absl::UnavailableError(
        absl::StrCat("data plane of host ", self().value(), " shut down"));
    for (const auto& connection : outgoing) connection->Close(down);
    std::vector<std::shared_ptr<Incoming>> incoming(incoming_.begin(),
                                                    incoming_.end());
    for (auto& connection : incoming) connection->Close(absl::OkStatus());
    parked_.clear();
  });
  work_.reset();
  if (thread_.joinable()) thread_.join();
}

// ---------------------------------------------------------------------------
// TcpDataPlane.

absl::StatusOr<std::unique_ptr<TcpDataPlane>> TcpDataPlane::Create(
    TcpDataPlaneOptions options) {
  if (options.max_piece_bytes <= 0) {
    return absl::InvalidArgumentError("data plane: max_piece_bytes must be > 0");
  }
  if (options.max_early_piece_bytes < 0 || options.max_pending_handshakes < 1) {
    return absl::InvalidArgumentError(
        "data plane: max_early_piece_bytes must be >= 0 and "
        "max_pending_handshakes >= 1");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  absl::Status listening = impl->Listen();
  if (!listening.ok()) return listening;
  return std::unique_ptr<TcpDataPlane>(new TcpDataPlane(std::move(impl)));
}

TcpDataPlane::TcpDataPlane(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

TcpDataPlane::~TcpDataPlane() { Shutdown(); }

const std::string& TcpDataPlane::address() const { return impl_->address(); }

uint64_t TcpDataPlane::incarnation() const {
  return impl_->options().incarnation;
}

void TcpDataPlane::Attach(HostId self, PieceReceiver* receiver) {
  impl_->Attach(self, receiver);
}

void TcpDataPlane::SetPeer(HostId host, std::string address,
                           uint64_t incarnation) {
  impl_->SetPeer(host, std::move(address), incarnation);
}

void TcpDataPlane::RemovePeer(HostId host) { impl_->RemovePeer(host); }

Future<> TcpDataPlane::Push(HostId destination, PieceMessage piece) {
  return impl_->Push(destination, std::move(piece));
}

TcpDataPlaneStats TcpDataPlane::Stats() const {
  const Impl::Counters& c = impl_->counters;
  TcpDataPlaneStats stats;
  stats.connections_accepted = c.connections_accepted;
  stats.connections_refused = c.connections_refused;
  stats.protocol_errors = c.protocol_errors;
  stats.pieces_received = c.pieces_received;
  stats.pieces_in_place = c.pieces_in_place;
  stats.bytes_received = c.bytes_received;
  stats.pieces_sent = c.pieces_sent;
  stats.bytes_sent = c.bytes_sent;
  stats.pieces_refused = c.pieces_refused;
  stats.early_pieces_waiting = c.early_pieces_waiting;
  stats.records_refused = c.records_refused;
  stats.early_piece_bytes = impl_->early_bytes();
  return stats;
}

bool TcpDataPlane::AwaitIdle(absl::Time deadline) {
  return impl_->AwaitIdle(deadline);
}

void TcpDataPlane::Shutdown() { impl_->Shutdown(); }

}  // namespace causeway::transport
