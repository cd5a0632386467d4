#include "causeway/proxy/host_buffer_store.h"

#include <string>

#include "gtest/gtest.h"

namespace causeway::proxy {
namespace host_buffer_store_test {

HostBuffer Bytes(size_t n) { return HostBuffer::Copy(std::string(n, 'x')); }

class HostBufferStoreTest : public ::testing::Test {
 protected:
  static HostBufferStore::Limits SmallLimits() {
    HostBufferStore::Limits limits;
    limits.max_buffer_bytes = 100;
    limits.max_total_bytes = 150;
    limits.max_waiters = 2;
    return limits;
  }
  HostBufferStore store_{SmallLimits()};
};

TEST_F(HostBufferStoreTest, LookupBeforeStoreResolvesWhenTheBytesArrive) {
  Future<HostBuffer> lookup = store_.Lookup(7);
  EXPECT_FALSE(lookup.IsReady());
  ASSERT_TRUE(store_.Store(7, Bytes(10)).ok());
  ASSERT_TRUE(lookup.IsReady());
  EXPECT_EQ(lookup.Await()->bytes(), std::string(10, 'x'));
}

TEST_F(HostBufferStoreTest, AFailedBufferFailsTheLookupWaitingForIt) {
  Future<HostBuffer> lookup = store_.Lookup(7);
  store_.Fail(7, absl::DataLossError("host 1 was lost"));
  ASSERT_TRUE(lookup.IsReady());
  EXPECT_EQ(lookup.Await().status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(lookup.Await().status().message(), "host 1 was lost");
}

TEST_F(HostBufferStoreTest, AFailureWaitsForTheNextLookupWhichTakesIt) {
  store_.Fail(7, absl::DataLossError("host 1 was lost"));
  EXPECT_EQ(store_.CheckUnused(7).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_.Lookup(7).Await().status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_TRUE(store_.CheckUnused(7).ok());
  EXPECT_FALSE(store_.Lookup(7).IsReady());  // Taken: waits for a store.
}

TEST_F(HostBufferStoreTest, FailingAStoredBufferLeavesIt) {
  ASSERT_TRUE(store_.Store(7, Bytes(3)).ok());
  store_.Fail(7, absl::InternalError("late"));
  EXPECT_EQ(store_.Lookup(7).Await()->bytes(), "xxx");
}

TEST_F(HostBufferStoreTest, StoringAHandleTwiceIsRefused) {
  ASSERT_TRUE(store_.Store(1, Bytes(1)).ok());
  EXPECT_EQ(store_.Store(1, Bytes(1)).code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(HostBufferStoreTest, BufferOverTheLimitIsRefusedBeforeItsBytesArrive) {
  EXPECT_EQ(store_.CheckSize(101).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store_.CheckSize(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_.CheckSize(100).ok());
}

TEST_F(HostBufferStoreTest, TotalOverTheLimitIsRefusedUntilABufferIsDeleted) {
  ASSERT_TRUE(store_.Store(1, Bytes(100)).ok());
  EXPECT_EQ(store_.Store(2, Bytes(60)).code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(store_.Delete(1).ok());
  EXPECT_TRUE(store_.Store(2, Bytes(60)).ok());
  EXPECT_EQ(store_.total_bytes(), 60);
}

TEST_F(HostBufferStoreTest, TooManyWaitersAreRefused) {
  Future<HostBuffer> a = store_.Lookup(1);
  Future<HostBuffer> b = store_.Lookup(2);
  Future<HostBuffer> c = store_.Lookup(3);
  ASSERT_TRUE(c.IsReady());
  EXPECT_EQ(c.Await().status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(a.IsReady());
}

TEST_F(HostBufferStoreTest, CloseFailsWaitersAndRefusesLaterStores) {
  Future<HostBuffer> lookup = store_.Lookup(5);
  store_.Close();
  ASSERT_TRUE(lookup.IsReady());
  EXPECT_EQ(lookup.Await().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(store_.Store(5, Bytes(1)).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(HostBufferStoreTest, LookupSharesTheStoredBytesWithoutCopying) {
  HostBuffer stored = Bytes(64);
  const char* where = stored.bytes().data();
  ASSERT_TRUE(store_.Store(4, stored).ok());
  absl::StatusOr<HostBuffer> found = store_.Lookup(4).Await();
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->bytes().data(), where);
}

TEST_F(HostBufferStoreTest, DeletingAnUnknownHandleIsNotFound) {
  EXPECT_EQ(store_.Delete(9).code(), absl::StatusCode::kNotFound);
}

}  // namespace host_buffer_store_test
}  // namespace causeway::proxy
