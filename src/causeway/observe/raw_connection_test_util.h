// A client connection made by hand, for the HTTP endpoints' flood tests
// (http_server_test.cc, health_server_test.cc): it sends what it is given
// first (nothing: an idle connection) and is closed with the object.
#ifndef CAUSEWAY_OBSERVE_RAW_CONNECTION_TEST_UTIL_H_
#define CAUSEWAY_OBSERVE_RAW_CONNECTION_TEST_UTIL_H_

#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "causeway/transport/testing/interceptor.h"

namespace causeway::observe::testing {

class RawConnection {
 public:
  // Connects to `address` ("127.0.0.1:PORT") and sends `send`.
  RawConnection(const std::string& address, const std::string& send)
      : fd_(transport::testing::DialTcp(address)) {
    sent_ = send.empty() || ::send(fd_, send.data(), send.size(),
                                   MSG_NOSIGNAL) ==
                                static_cast<ssize_t>(send.size());
  }
  ~RawConnection() { close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool sent() const { return sent_; }
  int fd() const { return fd_; }
  // What came back before the server closed (or `limit` bytes).
  std::string ReadAll(size_t limit = 4096) {
    std::string out;
    char buffer[1024];
    while (out.size() < limit) {
      const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      out.append(buffer, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  const int fd_;
  bool sent_ = false;
};

}  // namespace causeway::observe::testing

#endif  // CAUSEWAY_OBSERVE_RAW_CONNECTION_TEST_UTIL_H_
