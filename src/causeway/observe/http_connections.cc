#include "causeway/observe/http_connections.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
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
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "causeway/base/logging.h"
#include "causeway/base/socket_address.h"
#include "httplib.h"

namespace causeway::observe {
namespace {

// How long the kernel holds a connection that has sent nothing (HTTPS).
constexpr int kDeferAcceptSeconds = 10;
constexpr int kReadTimeoutSeconds = 5;
constexpr int kWriteTimeoutSeconds = 5;
// The waiting room: how long a request head may take to come, how big it
// may be before it is handed on anyway (httplib then refuses it), and how
// many connections may wait at once (the oldest is closed beyond).
constexpr absl::Duration kHeadDeadline = absl::Seconds(kReadTimeoutSeconds);
constexpr size_t kMaxHeadBytes = 64 << 10;
constexpr size_t kMaxWaiting = 4096;

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
      threads_.emplace_back([this] { Loop(); });
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

// httplib's Stream over a plain socket, each read and write waiting at
// most its timeout.
class PlainStream final : public httplib::Stream {
 public:
  explicit PlainStream(int fd) : fd_(fd) {}

  bool is_readable() const override {
    return Wait(POLLIN, kReadTimeoutSeconds);
  }
  bool is_writable() const override {
    return Wait(POLLOUT, kWriteTimeoutSeconds);
  }
  ssize_t read(char* ptr, size_t size) override {
    if (!is_readable()) return -1;
    while (true) {
      const ssize_t n = recv(fd_, ptr, size, 0);
      if (n >= 0 || errno != EINTR) return n;
    }
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    while (true) {
      const ssize_t n = send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n >= 0 || errno != EINTR) return n;
    }
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  bool Wait(short events, int seconds) const {
    pollfd p{fd_, events, 0};
    while (true) {
      const int n = poll(&p, 1, seconds * 1000);
      if (n >= 0 || errno != EINTR) return n > 0;
    }
  }
  void Address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip,
               int& port) const {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    if (get(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      address.ss_family = AF_UNSPEC;
    }
    IpPort ip_port = IpAndPort(address);
    ip = std::move(ip_port.ip);
    port = ip_port.port;
  }

  const int fd_;
};

void CloseConnection(int fd) {
  shutdown(fd, SHUT_RDWR);
  close(fd);
}

// Connections wait here, without a thread, until their request head has
// come (`admit` gets them then), they end, their deadline passes or newer
// ones push them out (closed). One epoll thread. Thread-safe.
class WaitingRoom {
 public:
  explicit WaitingRoom(std::function<void(int fd)> admit)
      : admit_(std::move(admit)),
        epoll_(epoll_create1(EPOLL_CLOEXEC)),
        wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    CW_CHECK(epoll_ >= 0 && wake_ >= 0)
        << "the HTTP waiting room: " << std::strerror(errno);
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = wake_;
    epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &event);
    thread_ = std::thread([this] { Loop(); });
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
    for (const Waiting& waiting : order_) CloseConnection(waiting.fd);
    close(wake_);
    close(epoll_);
  }

  void Add(int fd) {
    absl::MutexLock lock(&mu_);
    if (stopping_) return CloseConnection(fd);
    if (order_.size() >= kMaxWaiting) RemoveLocked(order_.begin(), true);
    order_.push_back({fd, absl::Now() + kHeadDeadline});
    by_fd_[fd] = std::prev(order_.end());
    // Edge-triggered: told again only when more bytes come (what has come
    // is peeked, never taken). Data already there is reported at once.
    epoll_event event{};
    event.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
    event.data.fd = fd;
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0) {
      RemoveLocked(std::prev(order_.end()), true);
    }
  }

 private:
  struct Waiting {
    int fd;
    absl::Time deadline;
  };
  using Order = std::list<Waiting>;

  void RemoveLocked(Order::iterator it, bool close_it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    epoll_ctl(epoll_, EPOLL_CTL_DEL, it->fd, nullptr);
    if (close_it) CloseConnection(it->fd);
    by_fd_.erase(it->fd);
    order_.erase(it);
  }

  // Whether `fd`'s request head has come whole; false while it may yet.
  enum class Head { kWaiting, kComplete, kGone };
  Head Peek(int fd) {
    const ssize_t n =
        recv(fd, peek_.data(), peek_.size(), MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return Head::kGone;
    if (n < 0) {
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
                 ? Head::kWaiting
                 : Head::kGone;
    }
    const std::string_view head(peek_.data(), static_cast<size_t>(n));
    // Too big for a head: httplib reads it and refuses it.
    if (head.find("\r\n\r\n") != std::string_view::npos ||
        head.size() >= kMaxHeadBytes) {
      return Head::kComplete;
    }
    return Head::kWaiting;
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
      std::vector<int> admitted;
      absl::MutexLock lock(&mu_);
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_) continue;
        auto it = by_fd_.find(fd);
        if (it == by_fd_.end()) continue;  // Closed meanwhile.
        switch (Peek(fd)) {
          case Head::kWaiting:
            break;
          case Head::kGone:
            RemoveLocked(it->second, true);
            break;
          case Head::kComplete:
            RemoveLocked(it->second, false);
            admitted.push_back(fd);
            break;
        }
      }
      for (int fd : admitted) admit_(fd);
    }
  }

  const std::function<void(int fd)> admit_;
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
  explicit AdmittingServer(int max_threads)
      : workers_(max_threads),
        room_([this](int fd) { workers_.enqueue([this, fd] { Serve(fd); }); }) {
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

  void Serve(int fd) {
    PlainStream stream(fd);
    bool closed = false;
    process_request(stream, /*close_connection=*/true, closed,
                    [](httplib::Request&) {});
    CloseConnection(fd);
  }

  // Destroyed in reverse: the room first (it hands connections to the
  // workers), then the workers (joined), while the server base they call
  // is still whole.
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
  return std::make_unique<AdmittingServer>(max_threads);
}

void ConfigureConnections(httplib::Server& server, int max_threads) {
  server.new_task_queue = [max_threads] {
    return new GrowingTaskQueue(max_threads);
  };
  // Replaces httplib's default options (SO_REUSEADDR), so it sets that too.
  server.set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    const int seconds = kDeferAcceptSeconds;
    setsockopt(sock, IPPROTO_TCP, TCP_DEFER_ACCEPT, &seconds, sizeof(seconds));
  });
  SetTimeouts(server);
  server.set_keep_alive_timeout(2);
}

}  // namespace causeway::observe
