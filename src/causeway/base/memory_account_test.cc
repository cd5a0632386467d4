#include "causeway/base/memory_account.h"

#include <memory>
#include <thread>

#include "gtest/gtest.h"

namespace causeway {
namespace memory_account_test {

TEST(MemoryAccountTest, ChargesOnTheOpenThreadAreCountedAndCreditedBack) {
  auto account = std::make_shared<MemoryAccount>(1000);
  {
    ScopedMemoryAccount open(account);
    MemoryCharge a(600);
    {
      MemoryCharge b(400);
      EXPECT_EQ(account->live_bytes(), 1000);
      EXPECT_EQ(account->available_bytes(), 0);
    }
    EXPECT_EQ(account->live_bytes(), 600);
  }
  EXPECT_EQ(account->live_bytes(), 0);
  EXPECT_EQ(account->peak_bytes(), 1000);
}

TEST(MemoryAccountTest, AChargePastTheLimitThrowsAndChargesNothing) {
  auto account = std::make_shared<MemoryAccount>(1000);
  ScopedMemoryAccount open(account);
  MemoryCharge held(700);
  try {
    MemoryCharge refused(400);
    FAIL() << "the charge should have thrown";
  } catch (const MemoryLimitExceeded& exceeded) {
    EXPECT_EQ(exceeded.requested_bytes(), 400);
    EXPECT_EQ(exceeded.live_bytes(), 700);
    EXPECT_EQ(exceeded.limit_bytes(), 1000);
  }
  EXPECT_EQ(account->live_bytes(), 700);
}

TEST(MemoryAccountTest, NonThrowingChargesCountPastTheLimit) {
  auto account = std::make_shared<MemoryAccount>(1000);
  ScopedMemoryAccount open(account);
  ScopedNonThrowingCharges non_throwing;
  MemoryCharge big(5000);
  EXPECT_EQ(account->live_bytes(), 5000);
  EXPECT_EQ(account->available_bytes(), 0);
}

TEST(MemoryAccountTest, OtherThreadsAndClosedScopesChargeNothing) {
  auto account = std::make_shared<MemoryAccount>(1000);
  std::unique_ptr<MemoryCharge> survivor;
  {
    ScopedMemoryAccount open(account);
    std::thread([] { MemoryCharge elsewhere(5000); }).join();
    survivor = std::make_unique<MemoryCharge>(300);
  }
  MemoryCharge after_close(5000);
  EXPECT_EQ(account->live_bytes(), 300);
  // A charge freed on another thread, after its scope closed, credits its
  // own account.
  std::thread([&] { survivor.reset(); }).join();
  EXPECT_EQ(account->live_bytes(), 0);
}

TEST(MemoryAccountTest, NestedScopesRestoreTheOuterAccount) {
  auto outer = std::make_shared<MemoryAccount>(1000);
  auto inner = std::make_shared<MemoryAccount>(1000);
  ScopedMemoryAccount open_outer(outer);
  {
    ScopedMemoryAccount open_inner(inner);
    MemoryCharge charge(10);
    EXPECT_EQ(inner->live_bytes(), 10);
  }
  MemoryCharge charge(20);
  EXPECT_EQ(outer->live_bytes(), 20);
  EXPECT_EQ(inner->live_bytes(), 0);
}

TEST(MemoryAccountTest, NoLimitMeansThePhysicalMemory) {
  EXPECT_GT(PhysicalMemoryBytes(), int64_t{1} << 26);
  EXPECT_EQ(MemoryAccount(0).limit_bytes(), PhysicalMemoryBytes());
}

}  // namespace memory_account_test
}  // namespace causeway
