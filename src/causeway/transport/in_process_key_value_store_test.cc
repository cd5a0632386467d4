#include "causeway/transport/in_process_key_value_store.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace causeway::transport {
namespace in_process_key_value_store_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

TEST(InProcessKeyValueStoreTest, GetReturnsWhatSetStored) {
  InProcessKeyValueStore store;
  ASSERT_TRUE(store.Set("a/b", "value").Await().ok());
  absl::StatusOr<std::string> value = store.Get("a/b", Soon()).Await();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "value");
}

TEST(InProcessKeyValueStoreTest, GetWaitsForALaterSet) {
  InProcessKeyValueStore store;
  Future<std::string> value = store.Get("later", Soon());
  EXPECT_FALSE(value.IsReady());
  ASSERT_TRUE(store.Set("later", "here").Await().ok());
  ASSERT_TRUE(value.IsReady());
  EXPECT_EQ(*value.Await(), "here");
}

TEST(InProcessKeyValueStoreTest, GetEndsAtItsDeadlineNamingTheKey) {
  InProcessKeyValueStore store;
  absl::StatusOr<std::string> value =
      store.Get("never", absl::Now() + absl::Milliseconds(20)).Await();
  EXPECT_EQ(value.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(value.status().message(), HasSubstr("'never'"));
}

TEST(InProcessKeyValueStoreTest, APassedDeadlineMakesAPlainLookup) {
  InProcessKeyValueStore store;
  Future<std::string> missing = store.Get("k", absl::Now());
  ASSERT_TRUE(missing.IsReady());
  EXPECT_EQ(missing.Await().status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(store.Set("k", "v").Await().ok());
  EXPECT_EQ(*store.Get("k", absl::Now()).Await(), "v");
}

TEST(InProcessKeyValueStoreTest, DeletePrefixRemovesOnlyThatSubtree) {
  InProcessKeyValueStore store;
  for (const char* key : {"gloo/1/a", "gloo/1/b", "gloo/10/a", "other"}) {
    ASSERT_TRUE(store.Set(key, "x").Await().ok());
  }
  ASSERT_TRUE(store.DeletePrefix("gloo/1/").Await().ok());
  EXPECT_THAT(store.Keys(), ElementsAre("gloo/10/a", "other"));
}

TEST(InProcessKeyValueStoreTest, OversizedKeysAndValuesAreRefused) {
  InProcessKeyValueStore store;
  const std::string long_key(KeyValueStore::kMaxKeyBytes + 1, 'k');
  EXPECT_EQ(store.Set(long_key, "v").Await().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string big_value(KeyValueStore::kMaxValueBytes + 1, 'v');
  EXPECT_EQ(store.Set("k", big_value).Await().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Get("", Soon()).Await().status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store.Keys().empty());
}

TEST(InProcessKeyValueStoreTest, DestructionFailsWaitingGets) {
  auto store = std::make_unique<InProcessKeyValueStore>();
  Future<std::string> value = store->Get("k", Soon());
  store.reset();
  ASSERT_TRUE(value.IsReady());
  EXPECT_EQ(value.Await().status().code(), absl::StatusCode::kCancelled);
}

}  // namespace in_process_key_value_store_test
}  // namespace causeway::transport
