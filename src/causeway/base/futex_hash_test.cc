#include "causeway/base/futex_hash.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace causeway {
namespace futex_hash_test {

TEST(FutexHashTest, SlotsThatAreNotAPowerOfTwoAreRefused) {
  EXPECT_EQ(SizeFutexHash(1000).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SizeFutexHash(0).code(), absl::StatusCode::kInvalidArgument);
}

// In a child process, so that the test binary keeps its own table.
TEST(FutexHashTest, TheKernelKeepsTheSizeGivenOrHasNoSuchTable) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const absl::Status sized = SizeFutexHash(4096);
    if (absl::IsUnimplemented(sized)) _exit(0);  // Before Linux 6.16.
    if (!sized.ok()) _exit(1);
    // PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS.
    _exit(prctl(78, 2, 0UL, 0UL, 0UL) == 4096 ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace futex_hash_test
}  // namespace causeway
