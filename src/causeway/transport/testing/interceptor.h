// A man in the middle on loopback, for tests that attack a connection
// between two real peers: it relays every connection made to it on to a
// target, and lets the test change (or record) what the dialler sends.
// Test-only; header-only.
#ifndef CAUSEWAY_TRANSPORT_TESTING_INTERCEPTOR_H_
#define CAUSEWAY_TRANSPORT_TESTING_INTERCEPTOR_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"

namespace causeway::transport::testing {

// A connected TCP socket to `address` ("127.0.0.1:PORT"), for tests that
// speak to a port directly.
inline int DialTcp(const std::string& address) {
  const size_t colon = address.rfind(':');
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  int port = 0;
  CW_CHECK(absl::SimpleAtoi(address.substr(colon + 1), &port));
  peer.sin_port = htons(static_cast<uint16_t>(port));
  CW_CHECK(inet_pton(AF_INET, address.substr(0, colon).c_str(),
                     &peer.sin_addr) == 1);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CW_CHECK(connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof peer) == 0);
  return fd;
}


// Relays every connection made to it on to `target`, handing each chunk
// the dialler sends to `edit` (its connection's number, its offset in that
// connection) before passing it on. Closes everything when it goes.
class Interceptor {
 public:
  using Edit =
      std::function<void(int connection, uint64_t offset, uint8_t* bytes,
                         size_t size)>;
  Interceptor(const std::string& target, Edit edit)
      : target_(target), edit_(std::move(edit)) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CW_CHECK(bind(listener_, reinterpret_cast<sockaddr*>(&local),
                  sizeof local) == 0 &&
             listen(listener_, 8) == 0);
    socklen_t size = sizeof local;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&local), &size);
    address_ = absl::StrCat("127.0.0.1:", ntohs(local.sin_port));
    CW_CHECK(pipe(stop_) == 0);
    thread_ = std::thread([this] { Run(); });
  }
  ~Interceptor() {
    CW_CHECK(write(stop_[1], "x", 1) == 1);
    thread_.join();
    for (int fd : {listener_, stop_[0], stop_[1]}) close(fd);
  }
  const std::string& address() const { return address_; }


 private:
  struct Link {
    int from = -1;  // The dialler.
    int to = -1;    // The target.
    int number = 0;
    uint64_t offset = 0;
  };

  void Run() {
    std::vector<Link> links;
    int connections = 0;
    char buffer[64 << 10];
    while (true) {
      std::vector<pollfd> fds = {{stop_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
      for (const Link& link : links) {
        fds.push_back({link.from, POLLIN, 0});
        fds.push_back({link.to, POLLIN, 0});
      }
      if (poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents != 0) break;
      if (fds[1].revents != 0) {
        Link link;
        link.from = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        link.to = DialTcp(target_);
        link.number = connections++;
        links.push_back(link);
        continue;  // The poll set changed.
      }
      for (size_t i = 0; i < links.size(); ++i) {
        Link& link = links[i];
        bool closed = false;
        for (int side = 0; side < 2 && !closed; ++side) {
          if (fds[2 + 2 * i + side].revents == 0) continue;
          const int in = side == 0 ? link.from : link.to;
          const int out = side == 0 ? link.to : link.from;
          const ssize_t n = read(in, buffer, sizeof buffer);
          if (n <= 0) {
            closed = true;
            break;
          }
          if (side == 0) {
            edit_(link.number, link.offset, reinterpret_cast<uint8_t*>(buffer),
                  static_cast<size_t>(n));
            link.offset += static_cast<uint64_t>(n);
          }
          if (send(out, buffer, static_cast<size_t>(n), MSG_NOSIGNAL) != n) {
            closed = true;
          }
        }
        if (closed) {
          close(link.from);
          close(link.to);
          link.from = -1;
        }
      }
      links.erase(std::remove_if(links.begin(), links.end(),
                                 [](const Link& l) { return l.from < 0; }),
                  links.end());
    }
    for (const Link& link : links) {
      close(link.from);
      close(link.to);
    }
  }

  const std::string target_;
  const Edit edit_;
  std::string address_;
  int listener_ = -1;
  int stop_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace causeway::transport::testing

#endif  // CAUSEWAY_TRANSPORT_TESTING_INTERCEPTOR_H_
