#include "causeway/observe/http_connections.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "causeway/base/logging.h"
#include "causeway/base/socket_address.h"
#include "httplib.h"

namespace causeway::observe {
namespace {

constexpr int kReadTimeoutSeconds = 5;
constexpr int kWriteTimeoutSeconds = 5;
// The waiting room: how long a request head may take to come, how big it
// may be before it is handed on anyway (httplib then refuses it), and how
// many connections may wait at once (the oldest is closed beyond).
constexpr absl::Duration kHeadDeadline = absl::Seconds(kReadTimeoutSeconds);
constexpr size_t kMaxHeadBytes = 64 << 10;
constexpr size_t kMaxWaiting = 4096;

// OpenSSL writes with write(2), which raises SIGPIPE when the client has
// gone (a plain connection's send says MSG_NOSIGNAL): the threads that run
// TLS block it, so the write fails with EPIPE instead of ending the
// process. Blocked, a thread's SIGPIPE stays pending and is never
// delivered.
void BlockSigpipe() {
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
}

void SetTimeouts(httplib::Server& server) {
  server.set_read_timeout(kReadTimeoutSeconds, 0);
  server.set_write_timeout(kWriteTimeoutSeconds, 0);
}

// A thread per task being run, made when none is idle, at most
// `max_threads`; beyond that tasks wait in order. Threads stay until
// shutdown.
class GrowingTaskQueue final : public httplib::TaskQueue {
 public:
  explicit GrowingTaskQueue(int max_threads) : max_threads_(max_threads) {}
  ~GrowingTaskQueue() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    tasks_.push_back(std::move(fn));
    if (idle_ < static_cast<int>(tasks_.size()) &&
        static_cast<int>(threads_.size()) < max_threads_) {
      threads_.emplace_back([this] {
        BlockSigpipe();
        Loop();
      });
    }
  }

  // Runs what was queued, then joins every thread.
  void shutdown() override {
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      threads.swap(threads_);
    }
    for (std::thread& thread : threads) thread.join();
  }

 private:
  void Loop() {
    while (true) {
      std::function<void()> task;
      {
        absl::MutexLock lock(&mu_);
        ++idle_;
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !tasks_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        --idle_;
        if (tasks_.empty()) return;  // Stopping, nothing left.
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  const int max_threads_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using Ssl = std::unique_ptr<SSL, SslFree>;

// An accepted connection: its socket (non-blocking) and, on an HTTPS
// server, its TLS session and the plaintext of the request read so far.
struct Connection {
  int fd = -1;
  Ssl ssl;
  std::string head;
};

void CloseConnection(Connection& connection) {
  if (connection.fd < 0) return;
  connection.ssl.reset();
  shutdown(connection.fd, SHUT_RDWR);
  close(connection.fd);
  connection.fd = -1;
}

// Waits until `fd` is ready for `events`, at most `seconds`.
bool Await(int fd, short events, int seconds) {
  pollfd p{fd, events, 0};
  while (true) {
    const int n = poll(&p, 1, seconds * 1000);
    if (n >= 0 || errno != EINTR) return n > 0;
  }
}

// httplib's Stream over a connection, plain or TLS (the request's first
// bytes, read in the waiting room, first), each read and write waiting at
// most its timeout.
class ConnectionStream final : public httplib::Stream {
 public:
  explicit ConnectionStream(Connection& connection) : c_(connection) {}

  bool is_readable() const override {
    return taken_ < c_.head.size() ||
           (c_.ssl != nullptr && SSL_pending(c_.ssl.get()) > 0) ||
           Await(c_.fd, POLLIN, kReadTimeoutSeconds);
  }
  bool is_writable() const override {
    return Await(c_.fd, POLLOUT, kWriteTimeoutSeconds);
  }
  ssize_t read(char* ptr, size_t size) override {
    if (taken_ < c_.head.size()) {
      const size_t n = std::min(size, c_.head.size() - taken_);
      std::memcpy(ptr, c_.head.data() + taken_, n);
      taken_ += n;
      return static_cast<ssize_t>(n);
    }
    if (c_.ssl == nullptr) {
      if (!is_readable()) return -1;
      while (true) {
        const ssize_t n = recv(c_.fd, ptr, size, 0);
        if (n >= 0 || errno != EINTR) return n;
      }
    }
    return Tls([&] { return SSL_read(c_.ssl.get(), ptr, Int(size)); },
               kReadTimeoutSeconds);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (c_.ssl == nullptr) {
      if (!is_writable()) return -1;
      while (true) {
        const ssize_t n = send(c_.fd, ptr, size, MSG_NOSIGNAL);
        if (n >= 0 || errno != EINTR) return n;
      }
    }
    return Tls([&] { return SSL_write(c_.ssl.get(), ptr, Int(size)); },
               kWriteTimeoutSeconds);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(getsockname, ip, port);
  }
  socket_t socket() const override { return c_.fd; }

 private:
  static int Int(size_t size) {
    return static_cast<int>(std::min<size_t>(size, 1 << 30));
  }
  // Runs a TLS read or write on the non-blocking socket until it moves
  // bytes, waiting for what it wants; -1 on an error or the timeout, 0 at
  // the peer's close.
  template <typename Op>
  ssize_t Tls(Op op, int seconds) {
    while (true) {
      ERR_clear_error();
      const int n = op();
      if (n > 0) return n;
      switch (SSL_get_error(c_.ssl.get(), n)) {
        case SSL_ERROR_WANT_READ:
          if (!Await(c_.fd, POLLIN, seconds)) return -1;
          break;
        case SSL_ERROR_WANT_WRITE:
          if (!Await(c_.fd, POLLOUT, seconds)) return -1;
          break;
        case SSL_ERROR_ZERO_RETURN:
          return 0;
        default:
          return -1;
      }
    }
  }
  void Address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip,
               int& port) const {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    if (get(c_.fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      address.ss_family = AF_UNSPEC;
    }
    IpPort ip_port = IpAndPort(address);
    ip = std::move(ip_port.ip);
    port = ip_port.port;
  }

  Connection& c_;
  size_t taken_ = 0;  // Of c_.head.
};

struct SslCtxFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};

// Connections wait here, without a thread, until their request head has
// come (`admit` gets them then), they end, their deadline passes or newer
// ones push them out (closed). With `tls`, the TLS handshake is made here
// too, step by step as its bytes come, and the request's first bytes are
// read (decrypted) into the connection. One epoll thread. Thread-safe.
class WaitingRoom {
 public:
  WaitingRoom(std::function<void(Connection)> admit, SSL_CTX* tls)
      : admit_(std::move(admit)),
        tls_(tls),
        epoll_(epoll_create1(EPOLL_CLOEXEC)),
        wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    CW_CHECK(epoll_ >= 0 && wake_ >= 0)
        << "the HTTP waiting room: " << std::strerror(errno);
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = wake_;
    epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &event);
    thread_ = std::thread([this] {
      BlockSigpipe();
      Loop();
    });
  }
  ~WaitingRoom() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    const uint64_t one = 1;
    if (::write(wake_, &one, sizeof one) < 0) {
      CW_LOG(WARNING) << "the HTTP waiting room: cannot wake its thread";
    }
    thread_.join();
    for (Waiting& waiting : order_) CloseConnection(waiting.connection);
    close(wake_);
    close(epoll_);
  }

  void Add(int fd) {
    Connection connection{fd, nullptr, {}};
    absl::MutexLock lock(&mu_);
    const int flags = fcntl(fd, F_GETFL);
    if (stopping_ || flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
      return CloseConnection(connection);
    }
    if (tls_ != nullptr) {
      connection.ssl.reset(SSL_new(tls_));
      if (connection.ssl == nullptr || SSL_set_fd(connection.ssl.get(), fd) != 1) {
        return CloseConnection(connection);
      }
      SSL_set_accept_state(connection.ssl.get());
    }
    if (order_.size() >= kMaxWaiting) RemoveLocked(order_.begin(), true);
    order_.push_back({std::move(connection), absl::Now() + kHeadDeadline});
    by_fd_[fd] = std::prev(order_.end());
    // Edge-triggered: told again only when more bytes come (plain: what
    // has come is peeked, never taken; TLS: OpenSSL reads until it has to
    // wait), or, for TLS, when a full socket buffer has room again. Data
    // already there is reported at once.
    epoll_event event{};
    event.events = EPOLLIN | EPOLLRDHUP | EPOLLET |
                   (tls_ != nullptr ? static_cast<uint32_t>(EPOLLOUT) : 0u);
    event.data.fd = fd;
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0) {
      RemoveLocked(std::prev(order_.end()), true);
    }
  }

 private:
  struct Waiting {
    Connection connection;
    absl::Time deadline;
  };
  using Order = std::list<Waiting>;

  void RemoveLocked(Order::iterator it, bool close_it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int fd = it->connection.fd;
    epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    if (close_it) CloseConnection(it->connection);
    by_fd_.erase(fd);
    order_.erase(it);
  }

  // Whether the connection's request head has come whole; kWaiting while
  // it may yet.
  enum class Head { kWaiting, kComplete, kGone };
  Head Advance(Connection& c) {
    return c.ssl == nullptr ? Peek(c.fd) : AdvanceTls(c);
  }

  Head Peek(int fd) {
    const ssize_t n =
        recv(fd, peek_.data(), peek_.size(), MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return Head::kGone;
    if (n < 0) {
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
                 ? Head::kWaiting
                 : Head::kGone;
    }
    return Complete(std::string_view(peek_.data(), static_cast<size_t>(n)))
               ? Head::kComplete
               : Head::kWaiting;
  }

  // The handshake as far as the bytes that came allow, then the request's
  // plaintext into `c.head`. A handshake that fails (no client certificate
  // of the CA, not TLS at all) ends the connection here.
  Head AdvanceTls(Connection& c) {
    SSL* ssl = c.ssl.get();
    // Each step runs until OpenSSL has to wait for the socket (it has
    // read all there is: edge-triggered events stay sound).
    auto waiting = [ssl](int result) {
      const int error = SSL_get_error(ssl, result);
      return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE;
    };
    if (!SSL_is_init_finished(ssl)) {
      ERR_clear_error();
      const int accepted = SSL_accept(ssl);
      if (accepted != 1) return waiting(accepted) ? Head::kWaiting : Head::kGone;
    }
    while (c.head.size() < kMaxHeadBytes) {
      ERR_clear_error();
      const int n = SSL_read(ssl, peek_.data(),
                             static_cast<int>(kMaxHeadBytes - c.head.size()));
      if (n <= 0) return waiting(n) ? Head::kWaiting : Head::kGone;
      c.head.append(peek_.data(), static_cast<size_t>(n));
      if (Complete(c.head)) return Head::kComplete;
    }
    return Head::kComplete;
  }

  // A blank line ends the head; one too big for a head is handed on
  // anyway (httplib reads it and refuses it).
  static bool Complete(std::string_view head) {
    return head.find("\r\n\r\n") != std::string_view::npos ||
           head.size() >= kMaxHeadBytes;
  }

  void Loop() {
    std::vector<epoll_event> events(64);
    while (true) {
      int timeout_ms = 1000;
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
        const absl::Time now = absl::Now();
        while (!order_.empty() && order_.front().deadline <= now) {
          RemoveLocked(order_.begin(), true);
        }
        if (!order_.empty()) {
          timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(
                           order_.front().deadline - now)) + 1;
        }
      }
      const int n = epoll_wait(epoll_, events.data(),
                               static_cast<int>(events.size()), timeout_ms);
      std::vector<Connection> admitted;
      absl::MutexLock lock(&mu_);
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_) continue;
        auto it = by_fd_.find(fd);
        if (it == by_fd_.end()) continue;  // Closed meanwhile.
        switch (Advance(it->second->connection)) {
          case Head::kWaiting:
            break;
          case Head::kGone:
            RemoveLocked(it->second, true);
            break;
          case Head::kComplete:
            admitted.push_back(std::move(it->second->connection));
            RemoveLocked(it->second, false);
            break;
        }
      }
      for (Connection& connection : admitted) admit_(std::move(connection));
    }
  }

  const std::function<void(Connection)> admit_;
  SSL_CTX* const tls_;  // Null: plain HTTP.
  const int epoll_;
  const int wake_;
  std::vector<char> peek_ = std::vector<char>(kMaxHeadBytes);  // Loop only.
  absl::Mutex mu_;
  Order order_ ABSL_GUARDED_BY(mu_);  // Oldest first: deadline order.
  std::unordered_map<int, Order::iterator> by_fd_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// httplib's accept loop hands each connection to the waiting room (on a
// task of httplib's own one-thread pool, which returns at once); the
// workers answer the ones whose head has come.
class AdmittingServer final : public httplib::Server {
 public:
  AdmittingServer(int max_threads, std::unique_ptr<SSL_CTX, SslCtxFree> tls)
      : tls_(std::move(tls)),
        workers_(max_threads),
        room_(
            [this](Connection connection) {
              auto shared = std::make_shared<Connection>(std::move(connection));
              workers_.enqueue([this, shared] { Serve(*shared); });
            },
            tls_.get()) {
    new_task_queue = [] { return new httplib::ThreadPool(1); };
    // No TCP_DEFER_ACCEPT: connections are accepted at once and wait in the
    // room, which closes them at their deadline, instead of half-open in
    // the kernel's queue beside everyone else's.
    SetTimeouts(*this);
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    room_.Add(sock);
    return true;
  }

  void Serve(Connection& connection) {
    {
      ConnectionStream stream(connection);
      bool closed = false;
      process_request(stream, /*close_connection=*/true, closed,
                      [](httplib::Request&) {});
    }
    // TLS: say the session ends (once; a client gone already is fine).
    if (connection.ssl != nullptr) SSL_shutdown(connection.ssl.get());
    CloseConnection(connection);
  }

  // Destroyed in reverse: the room first (it hands connections to the
  // workers), then the workers (joined), while the server base they call
  // and the TLS context are still whole.
  std::unique_ptr<SSL_CTX, SslCtxFree> tls_;
  GrowingTaskQueue workers_;
  WaitingRoom room_;
};

// httplib's listening socket, a protected member: read through a member
// pointer taken where it is accessible.
struct ListeningSocket : httplib::Server {
  static constexpr auto kSocket = &ListeningSocket::svr_sock_;
};

}  // namespace

void WidenListenBacklog(httplib::Server& server) {
  const socket_t sock = (server.*ListeningSocket::kSocket).load();
  if (sock >= 0 && listen(sock, 1024) != 0) {
    CW_LOG(WARNING) << "the HTTP endpoint keeps httplib's listen backlog: "
                    << std::strerror(errno);
  }
}

std::unique_ptr<httplib::Server> MakeAdmittingServer(int max_threads) {
  return std::make_unique<AdmittingServer>(max_threads, nullptr);
}

absl::StatusOr<std::unique_ptr<httplib::Server>> MakeAdmittingTlsServer(
    int max_threads, const TlsFiles& tls) {
  std::unique_ptr<SSL_CTX, SslCtxFree> ctx(SSL_CTX_new(TLS_server_method()));
  const bool loaded =
      ctx != nullptr &&
      SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION) == 1 &&
      SSL_CTX_use_certificate_chain_file(ctx.get(), tls.cert_file.c_str()) == 1 &&
      SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key_file.c_str(),
                                  SSL_FILETYPE_PEM) == 1 &&
      SSL_CTX_check_private_key(ctx.get()) == 1 &&
      (tls.client_ca_file.empty() ||
       SSL_CTX_load_verify_locations(ctx.get(), tls.client_ca_file.c_str(),
                                     nullptr) == 1);
  if (!loaded) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the HTTP endpoint cannot serve TLS with certificate '", tls.cert_file,
        "' and key '", tls.key_file, "'",
        tls.client_ca_file.empty()
            ? std::string()
            : absl::StrCat(" and client CA '", tls.client_ca_file, "'"),
        ": a file is missing, unreadable, not PEM, or the key does not "
        "match the certificate"));
  }
  if (!tls.client_ca_file.empty()) {
    SSL_CTX_set_verify(ctx.get(),
                       SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       nullptr);
  }
  // A connection waiting in the room holds no read or write buffer.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_RELEASE_BUFFERS);
  return std::make_unique<AdmittingServer>(max_threads, std::move(ctx));
}

}  // namespace causeway::observe
