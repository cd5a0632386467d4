// LocalCluster: the whole runtime in one process (embedded mode). Islands ×
// hosts × devices of CPU devices; one Worker per host, one Head; the head
// reaches the workers through in-process control channels, workers reach
// each other through an in-process data plane, and the devices of each
// island meet for collectives through one in-process rendezvous per island.
// Clients connect through in-process session channels. Nothing here
// bypasses those interfaces, so a networked deployment swaps only them.
//
// Hosts join the way a worker process joins a networked head (register,
// then activate), at creation and at any time later (AddHost); a stopped
// host can come back as a new incarnation (RestartHost), which is a new
// host with new device ids. With DataPlaneKind::kTcp every worker has a TCP
// data plane of its own, whose peer table follows the membership the head
// sends (as a worker process's does).
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
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "causeway/cluster/cluster_connection.h"
#include "causeway/head/head.h"
#include "causeway/trace/events.h"
#include "causeway/transport/data_plane.h"
#include "causeway/transport/gloo_launch_collectives.h"
#include "causeway/transport/in_process_control_channel.h"
#include "causeway/transport/in_process_key_value_store.h"
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
  // Each host gets its own GlooLaunchCollectives (over one in-process
  // key-value store), as separate worker processes have them: a launch
  // whose devices span hosts runs its collectives through Gloo on
  // loopback (docs/collectives.md). Off: one in-process rendezvous per
  // island.
  bool gloo_between_hosts = false;
  // See HeadOptions.
  bool slices_wait_for_hosts = false;
  // How the devices' evaluator runs programs (fused loops or op by op).
  exec::Evaluator::Options evaluator = {};
};

class LocalCluster {
 public:
  // Each device runs on a thread of this process: at most this many in all.
  static constexpr int64_t kMaxDevices = 1024;

  // InvalidArgument for options that make no sense (counts below 1, more
  // than kMaxDevices devices, a budget or timeout that is not positive; a
  // zero heartbeat_interval turns the health checker off), naming the
  // option; ResourceExhausted when a device's thread cannot be started.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Create(
      LocalClusterOptions options);
  // Closes every session still open (their launches are cancelled: a
  // program that loops stops at its next iteration), then stops the head
  // and every worker. Channels and clients that outlive the cluster fail
  // every later call with FailedPrecondition.
  ~LocalCluster();

  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // A new client connection (one session once OpenSession is called).
  std::unique_ptr<transport::SessionChannel> Connect();
  // Connect, callable after the cluster is gone (then FailedPrecondition):
  // what ConnectLocal gives its Client.
  std::function<absl::StatusOr<std::unique_ptr<transport::SessionChannel>>()>
  ConnectionFactory();

  // A new host of `devices` devices (of the options' memory) joins
  // `island`, which comes into being if it is new, as a worker process
  // joins a networked head. Returns its id once its devices are in the
  // pool (slices waiting for devices may already have them).
  absl::StatusOr<HostId> AddHost(IslandId island, int64_t devices);

  // Stops host `host` as a crash would: its devices stop, its buffers are
  // gone, it answers nothing, and its connection breaks, which tells the
  // head at once (as a killed worker's stream does). Returns once the head
  // has handled the death (arrays failed, slices remapped), or
  // DeadlineExceeded after 10 s.
  absl::Status StopHost(HostId host);

  // The link to `host` goes down (or the worker hangs): calls to it are
  // lost, nothing is told. The head finds out when its heartbeats time
  // out. Returns once the head has handled the death, or DeadlineExceeded
  // if it has not within heartbeat interval + timeout + 5 s.
  absl::Status SeverHost(HostId host);

  // Brings a stopped (or severed) host back as a new incarnation: a new
  // host, with new device ids, on the same island with as many devices. The
  // old host stays dead and its buffers stay lost. Returns the new id.
  absl::StatusOr<HostId> RestartHost(HostId host);

  // The head's status view (what GetStatus returns), awaited.
  absl::StatusOr<transport::StatusReport> Status();

  // The current snapshot of the cluster.
  std::shared_ptr<const transport::Topology> topology() const;
  head::Head& head() { return *head_; }
  // For tests: the rendezvous of `island` (e.g. to check none is left over).
  transport::InProcessLaunchCollectives& collectives(IslandId island);
  // For tests: the TCP data plane of `host` (null with kInProcess or for a
  // host the cluster never had).
  transport::TcpDataPlane* tcp_data_plane(HostId host);
  // For tests: the Gloo rendezvous store (null without gloo_between_hosts).
  const transport::InProcessKeyValueStore* key_value_store() const {
    return key_value_store_.get();
  }

 private:
  struct Host {
    std::unique_ptr<transport::TcpDataPlane> tcp;  // kTcp.
    // gloo_between_hosts: its collectives (outlive its worker).
    std::unique_ptr<transport::GlooLaunchCollectives> gloo;
    std::unique_ptr<worker::Worker> worker;
    std::shared_ptr<transport::InProcessControlChannel> channel;
    int64_t num_devices = 0;
    bool stopped = false;
  };

  LocalCluster() = default;
  // NotFound for a host this cluster never had. Hosts are never erased
  // before the cluster is destroyed, so the pointer stays valid.
  absl::StatusOr<Host*> FindHostLocked(HostId host)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stops the worker (as a crash would) and takes it off the data plane.
  absl::StatusOr<Host*> StopWorker(HostId host) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends `host`'s data plane: after it returns, nothing calls into its
  // worker through it (a TCP one closes its connections: peers fail what
  // they wait for from it).
  void StopDataPlane(HostId id, Host& host);

  LocalClusterOptions options_;
  std::unique_ptr<transport::InProcessDataPlane> data_plane_;  // kInProcess.
  // gloo_between_hosts: the rendezvous store every host's collectives use.
  std::unique_ptr<transport::InProcessKeyValueStore> key_value_store_;
  std::unique_ptr<head::Head> head_;
  // Every connection handed out, cut when the cluster goes.
  absl::Mutex connections_mu_;
  std::vector<std::weak_ptr<ConnectionLink>> connections_
      ABSL_GUARDED_BY(connections_mu_);
  // Points at the cluster while it lives; ConnectionFactory's functions
  // hold it weakly.
  struct Self {
    absl::Mutex mu;
    LocalCluster* cluster ABSL_GUARDED_BY(mu) = nullptr;
  };
  std::shared_ptr<Self> self_ = std::make_shared<Self>();

  mutable absl::Mutex mu_;
  std::map<IslandId, std::unique_ptr<transport::InProcessLaunchCollectives>>
      collectives_ ABSL_GUARDED_BY(mu_);
  std::map<HostId, Host> hosts_ ABSL_GUARDED_BY(mu_);
  int64_t next_incarnation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace causeway::cluster

#endif  // CAUSEWAY_CLUSTER_LOCAL_CLUSTER_H_
