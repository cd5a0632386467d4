// A socket address as text: the numeric IP (IPv4 or IPv6) and the port of
// what getsockname/getpeername/accept fill in.
#ifndef CAUSEWAY_BASE_SOCKET_ADDRESS_H_
#define CAUSEWAY_BASE_SOCKET_ADDRESS_H_

#include <sys/socket.h>

#include <string>

namespace causeway {

struct IpPort {
  std::string ip;  // Empty for a family other than AF_INET and AF_INET6.
  int port = 0;
  bool v6 = false;

  // "IP:PORT", or "[IP]:PORT" for IPv6.
  std::string ToString() const;
};

IpPort IpAndPort(const sockaddr_storage& address);

}  // namespace causeway

#endif  // CAUSEWAY_BASE_SOCKET_ADDRESS_H_
