// The head's channel to a worker bounds what waits to be written to it: a
// worker that does not read its stream is cut off once, instead of the
// head's memory growing (the server then ends its stream, naming the
// limit: docs/security.md, "Limits").
#include "causeway/transport/grpc_control_channel.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace causeway::transport {
namespace grpc_control_channel_test {

TEST(GrpcControlChannelTest, AWorkerThatDoesNotReadIsCutOffOnceOverTheBound) {
  // The worker never reads: the first write started never ends.
  std::atomic<int> started{0};
  std::atomic<int> overflows{0};
  {
    GrpcControlChannel channel(
        "worker w", WireLimits{},
        [&](const wire::HeadToWorker&) {
          ++started;
          return true;
        },
        /*max_queued_bytes=*/4096, [&] { ++overflows; });
    for (int i = 0; i < 100; ++i) {
      WorkerBatch batch;
      batch.releases.push_back(
          DeviceBuffer{DeviceId(0), BufferId{ArrayHandle(i + 1), 0}});
      channel.Dispatch(std::move(batch));
    }
    EXPECT_TRUE(channel.overflowed());
    EXPECT_EQ(overflows.load(), 1);
  }
  // One write at a time: the rest waited behind the first, and were
  // dropped at the bound.
  EXPECT_EQ(started.load(), 1);
}

}  // namespace grpc_control_channel_test
}  // namespace causeway::transport
