#include "causeway/base/ids.h"

#include <cstdint>
#include <sstream>
#include <type_traits>
#include <unordered_set>

#include "gtest/gtest.h"

namespace causeway {
namespace ids_test {

// Distinct id types never convert into each other or from bare integers.
static_assert(!std::is_convertible_v<DeviceId, HostId>);
static_assert(!std::is_convertible_v<HostId, DeviceId>);
static_assert(!std::is_convertible_v<int64_t, DeviceId>);
static_assert(!std::is_convertible_v<DeviceId, int64_t>);
static_assert(std::is_same_v<decltype(ArrayHandle().value()), uint64_t>);

TEST(StrongIdTest, DefaultConstructedIdIsMinusOne) {
  EXPECT_EQ(DeviceId().value(), -1);
  EXPECT_EQ(DeviceId(), DeviceId(-1));
}

TEST(StrongIdTest, ComparesByValue) {
  EXPECT_EQ(DeviceId(3), DeviceId(3));
  EXPECT_NE(DeviceId(3), DeviceId(4));
  EXPECT_LT(HostId(1), HostId(2));
  EXPECT_GE(SessionId(9), SessionId(9));
}

TEST(StrongIdTest, WorksAsAHashKey) {
  std::unordered_set<DeviceId> devices = {DeviceId(0), DeviceId(1),
                                          DeviceId(0)};
  EXPECT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices.count(DeviceId(1)), 1u);
  EXPECT_EQ(devices.count(DeviceId(2)), 0u);
}

TEST(StrongIdTest, PrintsItsValue) {
  std::ostringstream out;
  out << DeviceId(7) << " " << ArrayHandle(123456789012345ull);
  EXPECT_EQ(out.str(), "7 123456789012345");
}

}  // namespace ids_test
}  // namespace causeway
