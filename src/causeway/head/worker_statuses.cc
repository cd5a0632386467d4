#include "causeway/head/worker_statuses.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/time/clock.h"

namespace causeway::head {

using transport::ControlChannel;
using transport::WorkerStatus;

Future<WorkerStatuses> WorkerStatusPoll::Ask(absl::Duration timeout) {
  // Asked after everything already sent, so that the view includes it.
  std::vector<std::pair<HostId, Future<WorkerStatus>>> reports;
  for (const auto& [host, channel] : membership_->LiveChannels()) {
    auto [promise, report] = MakePromise<WorkerStatus>();
    reports.emplace_back(host, std::move(report));
    dispatcher_->AfterSent([membership = membership_, host = host,
                            promise = std::move(promise)]() mutable {
      std::shared_ptr<ControlChannel> worker = membership->Channel(host);
      if (worker == nullptr) {
        promise.Set(absl::UnavailableError("it died meanwhile"));
        return;
      }
      worker->GetStatus().OnReady(
          InlineExecutor::Instance(),
          [promise = std::move(promise)](
              const absl::StatusOr<WorkerStatus>& status) mutable {
            promise.Set(status);
          });
    });
  }
  auto [promise, future] = MakePromise<WorkerStatuses>();
  const absl::Time deadline = absl::Now() + timeout;
  waiter_.Execute([reports = std::move(reports), deadline,
                   promise = std::move(promise)]() mutable {
    WorkerStatuses statuses;
    for (const auto& [host, report] : reports) {
      statuses.emplace(host, report.AwaitUntil(deadline));
    }
    promise.Set(std::move(statuses));
  });
  return future;
}

}  // namespace causeway::head
