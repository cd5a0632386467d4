#include "causeway/cluster/local_cluster.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/transport/in_process_session_channel.h"

namespace causeway::cluster {

using head::Head;
using head::HeadOptions;
using transport::ControlChannel;
using transport::InProcessControlChannel;
using transport::InProcessDataPlane;
using transport::InProcessLaunchCollectives;
using transport::InProcessSessionChannel;
using transport::OpDone;
using transport::TcpDataPlane;
using transport::UndeliveredPiece;
using transport::Topology;
using transport::WorkerListener;
using worker::Worker;
using worker::WorkerOptions;

class LocalCluster::ListenerProxy final : public WorkerListener {
 public:
  void set_head(Head* head) { head_.store(head, std::memory_order_release); }
  void OnOpDone(const OpDone& done) override {
    if (Head* head = head_.load(std::memory_order_acquire)) {
      head->OnOpDone(done);
    }
  }
  void OnPushFailed(const UndeliveredPiece& piece) override {
    if (Head* head = head_.load(std::memory_order_acquire)) {
      head->OnPushFailed(piece);
    }
  }

 private:
  std::atomic<Head*> head_{nullptr};
};

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Create(
    LocalClusterOptions options) {
  CW_ASSIGN_OR_RETURN(
      Topology topology,
      Topology::Uniform(options.islands, options.hosts_per_island,
                        options.devices_per_host, options.memory_per_device));
  std::unique_ptr<LocalCluster> cluster(new LocalCluster());
  cluster->options_ = options;
  cluster->topology_ = std::make_shared<const Topology>(std::move(topology));
  const Topology& t = *cluster->topology_;
  if (options.data_plane == DataPlaneKind::kInProcess) {
    cluster->data_plane_ = std::make_unique<InProcessDataPlane>();
  } else {
    for (int64_t h = 0; h < t.num_hosts(); ++h) {
      CW_ASSIGN_OR_RETURN(std::unique_ptr<TcpDataPlane> plane,
                          TcpDataPlane::Create({}));
      cluster->tcp_data_planes_.push_back(std::move(plane));
    }
  }
  cluster->listener_ = std::make_unique<ListenerProxy>();
  for (int64_t i = 0; i < t.num_islands(); ++i) {
    cluster->collectives_.push_back(
        std::make_unique<InProcessLaunchCollectives>(
            options.collective_timeout));
  }
  std::vector<ControlChannel*> channels;
  for (int64_t h = 0; h < t.num_hosts(); ++h) {
    const HostId host(h);
    WorkerOptions worker_options;
    worker_options.host = host;
    worker_options.island = t.IslandOfHost(host);
    for (DeviceId device : t.DevicesOfHost(host)) {
      worker_options.devices.push_back(t.device(device));
    }
    worker_options.data_plane =
        cluster->data_plane_ != nullptr
            ? static_cast<transport::DataPlane*>(cluster->data_plane_.get())
            : cluster->tcp_data_planes_[h].get();
    worker_options.collectives =
        cluster->collectives_[worker_options.island.value()].get();
    worker_options.listener = cluster->listener_.get();
    worker_options.events = options.event_sink.get();
    CW_ASSIGN_OR_RETURN(std::unique_ptr<Worker> worker,
                        Worker::Create(std::move(worker_options)));
    if (cluster->data_plane_ != nullptr) {
      cluster->data_plane_->Register(host, worker.get());
    } else {
      cluster->tcp_data_planes_[h]->Attach(host, worker.get());
    }
    cluster->channels_.push_back(
        std::make_unique<InProcessControlChannel>(worker.get()));
    channels.push_back(cluster->channels_.back().get());
    cluster->workers_.push_back(std::move(worker));
  }
  // Every TCP data plane knows every other (the peer table a networked
  // worker gets from the head).
  for (int64_t from = 0; from < static_cast<int64_t>(
                                    cluster->tcp_data_planes_.size());
       ++from) {
    for (int64_t to = 0; to < t.num_hosts(); ++to) {
      if (to == from) continue;
      const TcpDataPlane& peer = *cluster->tcp_data_planes_[to];
      cluster->tcp_data_planes_[from]->SetPeer(HostId(to), peer.address(),
                                               peer.incarnation());
    }
  }
  HeadOptions head_options;
  head_options.topology = cluster->topology_;
  head_options.workers = std::move(channels);
  head_options.events = options.event_sink.get();
  head_options.heartbeat_interval = options.heartbeat_interval;
  head_options.heartbeat_timeout = options.heartbeat_timeout;
  head_options.max_inflight_launches_per_island =
      options.max_inflight_launches_per_island;
  CW_ASSIGN_OR_RETURN(cluster->head_, Head::Create(std::move(head_options)));
  cluster->listener_->set_head(cluster->head_.get());
  return cluster;
}

LocalCluster::~LocalCluster() {
  if (head_ != nullptr) head_->Shutdown();
  // A clean stop: pieces on their way land (and are acknowledged) first.
  for (auto& plane : tcp_data_planes_) {
    plane->AwaitIdle(absl::Now() + absl::Seconds(5));
  }
  for (auto& worker : workers_) worker->Stop();
  for (auto& worker : workers_) StopDataPlane(worker->host());
  if (listener_ != nullptr) listener_->set_head(nullptr);
  head_.reset();
  workers_.clear();
  channels_.clear();
}

std::unique_ptr<transport::SessionChannel> LocalCluster::Connect() {
  return std::make_unique<InProcessSessionChannel>(head_.get());
}

absl::Status LocalCluster::StopHost(HostId host) {
  CW_RETURN_IF_ERROR(topology_->ValidateHost(host));
  Worker& worker = *workers_[host.value()];
  StopDataPlane(host);
  worker.Stop();
  if (options_.heartbeat_interval <= absl::ZeroDuration()) {
    head_->MarkHostDead(host, "stopped (told directly: no health checker)");
    return absl::OkStatus();
  }
  const absl::Duration limit = options_.heartbeat_interval +
                               options_.heartbeat_timeout + absl::Seconds(5);
  return head_->AwaitHostDead(host, absl::Now() + limit);
}

void LocalCluster::StopDataPlane(HostId host) {
  if (data_plane_ != nullptr) {
    data_plane_->Unregister(host);
  } else {
    // Its connections close: peers fail what they wait for from it.
    tcp_data_planes_[host.value()]->Shutdown();
  }
}

absl::StatusOr<transport::StatusReport> LocalCluster::Status() {
  return head_->GetStatus().Await();
}

}  // namespace causeway::cluster
