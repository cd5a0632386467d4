#include "causeway/base/future.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace causeway {
namespace internal {

absl::Status DroppedPromiseError() {
  return absl::CancelledError(
      "promise dropped before it was set: its producer was destroyed or gave "
      "up without a result");
}

absl::Status NotReadyByDeadlineError(absl::Time deadline) {
  return absl::DeadlineExceededError(
      absl::StrCat("future not ready by its deadline ",
                   absl::FormatTime(deadline, absl::UTCTimeZone()),
                   " UTC; the producer may still set it later"));
}

}  // namespace internal

Future<> MakeReadyFuture(absl::Status status) {
  PromiseAndFuture<> pair = MakePromise<>();
  pair.promise.Set(std::move(status));
  return std::move(pair.future);
}

Future<> JoinFutures(std::vector<Future<>> futures) {
  return internal::Join<void, void>(std::move(futures));
}

}  // namespace causeway
