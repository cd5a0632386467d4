#include "causeway/base/socket_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "absl/strings/str_cat.h"

namespace causeway {

std::string IpPort::ToString() const {
  return v6 ? absl::StrCat("[", ip, "]:", port) : absl::StrCat(ip, ":", port);
}

IpPort IpAndPort(const sockaddr_storage& address) {
  IpPort out;
  char text[INET6_ADDRSTRLEN] = {0};
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    out.port = ntohs(v4->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    out.port = ntohs(v6->sin6_port);
    out.v6 = true;
  }
  out.ip = text;
  return out;
}

}  // namespace causeway
