#include "causeway/head/fetches.h"

#include <functional>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace causeway::head {
namespace {

using transport::ControlChannel;
using transport::DeviceBuffer;

// `future`, its error replaced by `map(error)`.
template <typename T>
Future<T> MapError(const Future<T>& future,
                   std::function<absl::Status(const absl::Status&)> map) {
  auto [promise, mapped] = MakePromise<T>();
  future.OnReady(InlineExecutor::Instance(),
                 [promise = std::move(promise), map = std::move(map)](
                     const internal::FutureResult<T>& result) mutable {
                   const absl::Status& status = internal::StatusOf(result);
                   if (status.ok()) {
                     promise.Set(result);
                   } else {
                     promise.Set(map(status));
                   }
                 });
  return std::move(mapped);
}

// The call `ask` makes of `host`'s worker, or Unavailable if it is not
// alive; a dead host's error is DATA_LOSS.
template <typename T>
Future<T> AskWorker(Membership& membership, HostId host,
                    absl::FunctionRef<Future<T>(ControlChannel& worker)> ask) {
  std::shared_ptr<ControlChannel> worker = membership.Channel(host);
  return MapError<T>(
      worker == nullptr
          ? MakeErrorFuture<T>(absl::UnavailableError(
                absl::StrCat("host ", host.value(), " is not alive")))
          : ask(*worker),
      [&membership, host](const absl::Status& status) {
        return membership.CallError(host, status);
      });
}

}  // namespace

absl::StatusOr<hlo::Literal> AssembleFetched(
    const ArrayPlacement& placement,
    const std::vector<hlo::ShardRegion>& regions,
    const std::vector<int64_t>& fetched,
    const std::vector<hlo::Literal>& values) {
  std::vector<hlo::Literal> all(regions.size());
  for (size_t k = 0; k < fetched.size(); ++k) all[fetched[k]] = values[k];
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].shape().IsArray()) continue;
    for (const hlo::Literal& value : values) {
      if (value.shape().dims() == regions[i].dims) {
        all[i] = value;  // A stand-in; not read.
        break;
      }
    }
  }
  return hlo::AssembleGlobal(all, placement.sharding, placement.global_shape);
}

Future<std::vector<hlo::Literal>> Fetches::FetchBuffers(
    const ArrayRecord& array, const std::vector<int64_t>& which) {
  std::vector<Future<hlo::Literal>> shards;
  shards.reserve(which.size());
  for (int64_t i : which) {
    const auto& [host, buffer] = array.buffers->buffers[i];
    shards.push_back(AskWorker<hlo::Literal>(
        *membership_, host, [&buffer = buffer](ControlChannel& worker) {
          return worker.FetchBuffer(buffer);
        }));
  }
  return JoinFutures(std::move(shards));
}

void Fetches::Ready(std::shared_ptr<const ArrayRecord> array,
                    std::shared_ptr<Promise<>> done) {
  // Runs through the outbox, with no lock held.
  dispatcher_->WhenPlaced(
      array->buffers, [this, array, done](absl::Status placed) {
        if (!placed.ok()) {
          done->Set(placed);
          return;
        }
        std::map<HostId, std::vector<DeviceBuffer>> by_host;
        for (const auto& [host, buffer] : array->buffers->buffers) {
          by_host[host].push_back(buffer);
        }
        std::vector<Future<>> ready;
        for (auto& [host, buffers] : by_host) {
          ready.push_back(AskWorker<void>(
              *membership_, host, [&buffers = buffers](ControlChannel& worker) {
                return worker.AwaitBuffers(std::move(buffers));
              }));
        }
        JoinFutures(std::move(ready))
            .OnReady(*callbacks_,
                     [done](const absl::Status& status) { done->Set(status); });
      });
}

void Fetches::Fetch(std::shared_ptr<const ArrayRecord> array,
                    std::shared_ptr<Promise<hlo::Literal>> done) {
  absl::StatusOr<std::vector<hlo::ShardRegion>> regions =
      RegionsOf(array->placement);
  if (!regions.ok()) {
    dispatcher_->AfterSent(
        [done, status = regions.status()] { done->Set(status); });
    return;
  }
  // Runs through the outbox, with no lock held.
  dispatcher_->WhenPlaced(
      array->buffers,
      [this, array, done, regions = *std::move(regions)](absl::Status placed) {
        if (!placed.ok()) {
          done->Set(placed);
          return;
        }
        // Only the primary replica of each tile travels.
        std::vector<int64_t> fetched;
        for (size_t i = 0; i < regions.size(); ++i) {
          if (regions[i].primary) fetched.push_back(static_cast<int64_t>(i));
        }
        FetchBuffers(*array, fetched)
            .OnReady(
                *callbacks_,
                [array, done, fetched, regions](
                    const absl::StatusOr<std::vector<hlo::Literal>>& values) {
                  if (!values.ok()) {
                    done->Set(values.status());
                    return;
                  }
                  done->Set(AssembleFetched(array->placement, regions, fetched,
                                            *values));
                });
      });
}

void Fetches::FetchShards(
    std::shared_ptr<const ArrayRecord> array,
    std::shared_ptr<Promise<std::vector<hlo::Literal>>> done) {
  // Runs through the outbox, with no lock held.
  dispatcher_->WhenPlaced(array->buffers, [this, array,
                                           done](absl::Status placed) {
    if (!placed.ok()) {
      done->Set(placed);
      return;
    }
    // Every buffer travels, replicas too: they may differ.
    std::vector<int64_t> all(array->buffers->buffers.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    FetchBuffers(*array, all)
        .OnReady(
            *callbacks_,
            [done](const absl::StatusOr<std::vector<hlo::Literal>>& values) {
              done->Set(values);
            });
  });
}

}  // namespace causeway::head
