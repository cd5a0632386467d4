#include "causeway/base/futex_hash.h"

#include <sys/prctl.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace causeway {
namespace {

// From linux/prctl.h of 6.16; the system's headers may be older.
constexpr int kPrFutexHash = 78;
constexpr int kPrFutexHashSetSlots = 1;

}  // namespace

absl::Status SizeFutexHash(int64_t slots) {
  if (slots < 2 || (slots & (slots - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("futex hash slots must be a power of two, got ", slots));
  }
  if (prctl(kPrFutexHash, kPrFutexHashSetSlots,
            static_cast<unsigned long>(slots), 0UL, 0UL) == 0) {
    return absl::OkStatus();
  }
  const int error = errno;
  if (error == EINVAL) {
    return absl::UnimplementedError(
        "this kernel has no PR_FUTEX_HASH (before Linux 6.16): its futex "
        "hash is shared and sized by the kernel");
  }
  return absl::InternalError(
      absl::StrCat("prctl(PR_FUTEX_HASH): ", std::strerror(error)));
}

}  // namespace causeway
