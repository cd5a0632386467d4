#include "causeway/base/socket_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "gtest/gtest.h"

namespace causeway {
namespace socket_address_test {

TEST(SocketAddressTest, Ipv4AndIpv6AreNumericWithTheirPort) {
  sockaddr_storage storage{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  v4->sin_family = AF_INET;
  v4->sin_port = htons(8470);
  inet_pton(AF_INET, "10.0.0.7", &v4->sin_addr);
  EXPECT_EQ(IpAndPort(storage).ToString(), "10.0.0.7:8470");

  storage = {};
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  v6->sin6_family = AF_INET6;
  v6->sin6_port = htons(443);
  inet_pton(AF_INET6, "fd00::1", &v6->sin6_addr);
  const IpPort six = IpAndPort(storage);
  EXPECT_EQ(six.ip, "fd00::1");
  EXPECT_EQ(six.ToString(), "[fd00::1]:443");

  storage = {};
  storage.ss_family = AF_UNIX;
  EXPECT_EQ(IpAndPort(storage).ip, "");
  EXPECT_EQ(IpAndPort(storage).port, 0);
}

}  // namespace socket_address_test
}  // namespace causeway
