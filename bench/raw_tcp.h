// The raw TCP baseline of the transfer benchmarks (transfer_bench.cc,
// cluster_transfer_bench.cc): the same bytes over one plain TCP
// connection, each end's socket in a network namespace of its choice.
#ifndef CAUSEWAY_BENCH_RAW_TCP_H_
#define CAUSEWAY_BENCH_RAW_TCP_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "causeway/base/logging.h"

namespace causeway::bench {

// Runs `fn` on a thread that is in network namespace `netns` (none: this
// one's), so the sockets and threads it makes live there.
inline void InNetns(const std::string& netns, const std::function<void()>& fn) {
  std::thread thread([&] {
    if (!netns.empty()) {
      const std::string path = "/var/run/netns/" + netns;
      const int fd = open(path.c_str(), O_RDONLY);
      CW_CHECK(fd >= 0) << "cannot open " << path;
      CW_CHECK(setns(fd, CLONE_NEWNET) == 0) << "setns " << netns;
      close(fd);
    }
    fn();
  });
  thread.join();
}

// One connection, the whole buffer per write(), one byte back. The
// receiver listens on `receiver_ip` inside `receiver_netns`, the sender's
// socket is made inside `sender_netns` (empty: this process's namespace).
class RawTcp {
 public:
  RawTcp(int64_t bytes, const std::string& receiver_ip,
         const std::string& receiver_netns,
         const std::string& sender_netns = "")
      : bytes_(bytes), send_buffer_(bytes, 1), receive_buffer_(bytes) {
    int listener = -1;
    sockaddr_in address{};
    InNetns(receiver_netns, [&] {
      listener = socket(AF_INET, SOCK_STREAM, 0);
      address.sin_family = AF_INET;
      CW_CHECK(inet_pton(AF_INET, receiver_ip.c_str(), &address.sin_addr) ==
               1);
      CW_CHECK(bind(listener, reinterpret_cast<sockaddr*>(&address),
                    sizeof address) == 0);
      CW_CHECK(listen(listener, 1) == 0);
      socklen_t size = sizeof address;
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size);
    });
    // The connection completes in the listener's backlog: no accept yet.
    InNetns(sender_netns, [&] {
      sender_ = socket(AF_INET, SOCK_STREAM, 0);
      CW_CHECK(connect(sender_, reinterpret_cast<sockaddr*>(&address),
                       sizeof address) == 0);
    });
    receiver_ = accept(listener, nullptr, nullptr);
    CW_CHECK(receiver_ >= 0);
    close(listener);
    const int one = 1;
    setsockopt(sender_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(receiver_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    thread_ = std::thread([this] { Serve(); });
  }
  ~RawTcp() {
    shutdown(sender_, SHUT_RDWR);
    thread_.join();
    close(sender_);
    close(receiver_);
  }

  RawTcp(const RawTcp&) = delete;
  RawTcp& operator=(const RawTcp&) = delete;

  // Seconds for one transfer of the buffer.
  double Transfer() {
    const absl::Time start = absl::Now();
    for (int64_t sent = 0; sent < bytes_;) {
      const ssize_t n = write(sender_, send_buffer_.data() + sent,
                              static_cast<size_t>(bytes_ - sent));
      CW_CHECK(n > 0);
      sent += n;
    }
    char ack;
    CW_CHECK(read(sender_, &ack, 1) == 1);
    return absl::ToDoubleSeconds(absl::Now() - start);
  }

 private:
  void Serve() {
    while (true) {
      for (int64_t got = 0; got < bytes_;) {
        const ssize_t n = read(receiver_, receive_buffer_.data() + got,
                               static_cast<size_t>(bytes_ - got));
        if (n <= 0) return;
        got += n;
      }
      const char ack = 1;
      if (write(receiver_, &ack, 1) != 1) return;
    }
  }

  const int64_t bytes_;
  std::vector<char> send_buffer_;
  std::vector<char> receive_buffer_;
  int sender_ = -1;
  int receiver_ = -1;
  std::thread thread_;
};

}  // namespace causeway::bench

#endif  // CAUSEWAY_BENCH_RAW_TCP_H_
