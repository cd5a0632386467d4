#include "causeway/transport/gloo_store.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "causeway/transport/in_process_key_value_store.h"
#include "gloo/common/error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::transport {
namespace gloo_store_test {

using ::testing::HasSubstr;

std::vector<char> Bytes(const std::string& s) {
  return std::vector<char>(s.begin(), s.end());
}

class GlooStoreTest : public ::testing::Test {
 protected:
  InProcessKeyValueStore kv_;
};

TEST_F(GlooStoreTest, KeysLiveUnderThePrefix) {
  GlooStore store(kv_, "ctx/", absl::Now() + absl::Seconds(20));
  store.set("0", Bytes("address"));
  EXPECT_EQ(*kv_.Get("ctx/0", absl::Now()).Await(), "address");
  EXPECT_EQ(store.get("0"), Bytes("address"));
}

TEST_F(GlooStoreTest, WaitReturnsOnceEveryKeyIsSet) {
  GlooStore store(kv_, "ctx/", absl::Now() + absl::Seconds(20));
  std::thread writer([&] {
    kv_.Set("ctx/1", "one");
    kv_.Set("ctx/2", "two");
  });
  store.wait({"1", "2"}, std::chrono::milliseconds(20000));
  writer.join();
  EXPECT_EQ(store.get("2"), Bytes("two"));
  EXPECT_TRUE(store.failure().ok());
}

TEST_F(GlooStoreTest, AKeyNotSetInTimeThrowsAndIsNamed) {
  GlooStore store(kv_, "ctx/", absl::Now() + absl::Milliseconds(30));
  EXPECT_THROW(store.wait({"7"}), ::gloo::IoException);
  EXPECT_EQ(store.failure().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(store.failure().message(), HasSubstr("ctx/7"));
  EXPECT_EQ(store.missing_key(), "7");
}

TEST_F(GlooStoreTest, AbortFromAnotherThreadEndsAWait) {
  GlooStore store(kv_, "ctx/", absl::Now() + absl::Seconds(20));
  std::thread aborter(
      [&] { store.Abort(absl::CancelledError("session closed")); });
  EXPECT_THROW(store.get("never"), ::gloo::IoException);
  aborter.join();
  EXPECT_EQ(store.failure().code(), absl::StatusCode::kCancelled);
  EXPECT_THROW(store.set("0", Bytes("x")), ::gloo::IoException);
}

TEST_F(GlooStoreTest, AWatchedKeyEndsAWaitWithTheStatusItHolds) {
  GlooStore store(kv_, "ctx/", absl::Now() + absl::Seconds(20));
  store.AbortWhenSet("launch/cancel");
  std::thread canceller([&] {
    kv_.Set("launch/cancel",
            EncodeStatus(absl::InternalError("partition 1 failed")));
  });
  EXPECT_THROW(store.wait({"1"}), ::gloo::IoException);
  canceller.join();
  EXPECT_EQ(store.failure().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(store.failure().message(), HasSubstr("partition 1 failed"));
}

TEST(StatusEncodingTest, RoundTripsAndRefusesGarbage) {
  const absl::Status status = absl::DataLossError("host 3: lost");
  EXPECT_EQ(DecodeStatus(EncodeStatus(status)), status);
  EXPECT_EQ(DecodeStatus("junk").code(), absl::StatusCode::kInternal);
  EXPECT_EQ(DecodeStatus("99:x").code(), absl::StatusCode::kInternal);
}

}  // namespace gloo_store_test
}  // namespace causeway::transport
