// LocalCluster: the whole runtime in one process (embedded mode). Islands ×
// hosts × devices of CPU devices; one Worker per host, one Head; the head
// reaches the workers through in-process control channels, workers reach
// each other through an in-process data plane (or TCP on loopback:
// LocalClusterOptions::data_plane), and the devices of each
// island meet for collectives through one in-process rendezvous per island.
// Clients connect through in-process session channels. Nothing here
// bypasses those interfaces, so a networked deployment swaps only them.
//
//   auto cluster = LocalCluster::Create({.islands = 2, .hosts_per_island = 2,
//                                        .devices_per_host = 2});
//   std::unique_ptr<transport::SessionChannel> channel =
//       (*cluster)->Connect();
//
// Thread-safe.
#ifndef CAUSEWAY_CLUSTER_LOCAL_CLUSTER_H_
#define CAUSEWAY_CLUSTER_LOCAL_CLUSTER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "causeway/head/head.h"
#include "causeway/trace/events.h"
#include "causeway/transport/data_plane.h"
#include "causeway/transport/in_process_control_channel.h"
#include "causeway/transport/launch_collectives.h"
#include "causeway/transport/session_channel.h"
#include "causeway/transport/tcp_data_plane.h"
#include "causeway/transport/topology.h"
#include "causeway/worker/worker.h"

namespace causeway::cluster {

// How the workers of a LocalCluster reach each other.
enum class DataPlaneKind {
  kInProcess,  // Direct calls (transport::InProcessDataPlane).
  kTcp,        // One transport::TcpDataPlane per worker on 127.0.0.1, port 0.
};

struct LocalClusterOptions {
  int64_t islands = 1;
  int64_t hosts_per_island = 1;
  int64_t devices_per_host = 2;
  int64_t memory_per_device = int64_t{1} << 30;
  // Receives every runtime event (a trace recorder, for GetTrace). Shared
  // with the cluster, which keeps it alive while it runs.
  std::shared_ptr<trace::EventSink> event_sink = nullptr;
  // The head's health checker (docs/failure.md).
  absl::Duration heartbeat_interval = absl::Milliseconds(50);
  absl::Duration heartbeat_timeout = absl::Seconds(2);
  // How long a device waits in a collective for its peers.
  absl::Duration collective_timeout = absl::Seconds(60);
  // The island schedulers' window (launches released, not finished).
  int64_t max_inflight_launches_per_island = 64;
  DataPlaneKind data_plane = DataPlaneKind::kInProcess;
};

class LocalCluster {
 public:
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Create(
      LocalClusterOptions options);
  ~LocalCluster();  // Stops the head, then every worker.

  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // A new client connection (one session once OpenSession is called). The
  // channel must not outlive the cluster.
  std::unique_ptr<transport::SessionChannel> Connect();

  // Stops host `host` as a crash would: its devices stop, its buffers are
  // gone, it answers nothing. The head is NOT told: it finds out through a
  // missed heartbeat, as it would in a real cluster (docs/failure.md).
  // Returns once the head has declared the host dead (or with
  // DeadlineExceeded if it has not within heartbeat interval + timeout +
  // 5 s). With the health checker off, the head is told directly.
  absl::Status StopHost(HostId host);

  // The head's status view (what GetStatus returns), awaited.
  absl::StatusOr<transport::StatusReport> Status();

  const transport::Topology& topology() const { return *topology_; }
  head::Head& head() { return *head_; }
  // For tests: the rendezvous of `island` (e.g. to check none is left over).
  transport::InProcessLaunchCollectives& collectives(IslandId island) {
    return *collectives_[island.value()];
  }
  // For tests: the TCP data plane of `host` (null with kInProcess).
  transport::TcpDataPlane* tcp_data_plane(HostId host) {
    return tcp_data_planes_.empty() ? nullptr
                                    : tcp_data_planes_[host.value()].get();
  }

 private:
  LocalCluster() = default;
  // Ends `host`'s data plane: after it returns, nothing calls into its
  // worker through it.
  void StopDataPlane(HostId host);

  LocalClusterOptions options_;
  std::shared_ptr<const transport::Topology> topology_;
  std::unique_ptr<transport::InProcessDataPlane> data_plane_;  // kInProcess.
  std::vector<std::unique_ptr<transport::TcpDataPlane>>
      tcp_data_planes_;  // kTcp, by host.
  std::vector<std::unique_ptr<transport::InProcessLaunchCollectives>>
      collectives_;
  std::vector<std::unique_ptr<worker::Worker>> workers_;
  std::vector<std::unique_ptr<transport::InProcessControlChannel>> channels_;
  // Forwards worker notices to the head, which is created after them.
  class ListenerProxy;
  std::unique_ptr<ListenerProxy> listener_;
  std::unique_ptr<head::Head> head_;
};

}  // namespace causeway::cluster

#endif  // CAUSEWAY_CLUSTER_LOCAL_CLUSTER_H_
