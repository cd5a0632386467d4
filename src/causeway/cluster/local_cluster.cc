#include "causeway/cluster/local_cluster.h"

#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/transport/gloo_collectives.h"
#include "causeway/transport/in_process_session_channel.h"

namespace causeway::cluster {

using head::Head;
using head::HeadOptions;
using transport::InProcessControlChannel;
using transport::InProcessDataPlane;
using transport::InProcessLaunchCollectives;
using transport::InProcessSessionChannel;
using transport::TcpDataPlane;
using transport::Topology;
using worker::Worker;
using worker::WorkerOptions;

namespace {

absl::Status ValidateOptions(const LocalClusterOptions& options) {
  auto invalid = [](auto&&... what) {
    return absl::InvalidArgumentError(absl::StrCat("LocalCluster: ", what...));
  };
  if (options.islands < 1 || options.hosts_per_island < 1 ||
      options.devices_per_host < 1) {
    return invalid(
        "islands, hosts_per_island and devices_per_host must be "
        "at least 1; got ",
        options.islands, ", ", options.hosts_per_island, " and ",
        options.devices_per_host);
  }
  const int64_t limit = LocalCluster::kMaxDevices;
  if (options.islands > limit || options.hosts_per_island > limit ||
      options.devices_per_host > limit ||
      options.islands * options.hosts_per_island > limit ||
      options.islands * options.hosts_per_island * options.devices_per_host >
          limit) {
    return invalid(options.islands, " islands x ", options.hosts_per_island,
                   " hosts x ", options.devices_per_host,
                   " devices is more than the ", limit,
                   " devices one process runs (a thread each)");
  }
  if (options.memory_per_device <= 0) {
    return invalid("memory_per_device must be positive, got ",
                   options.memory_per_device);
  }
  if (options.heartbeat_interval < absl::ZeroDuration()) {
    return invalid(
        "heartbeat_interval must not be negative (zero turns the "
        "health checker off), got ",
        absl::FormatDuration(options.heartbeat_interval));
  }
  if (options.heartbeat_interval > absl::ZeroDuration() &&
      options.heartbeat_timeout <= absl::ZeroDuration()) {
    return invalid("heartbeat_timeout must be positive, got ",
                   absl::FormatDuration(options.heartbeat_timeout));
  }
  if (options.collective_timeout <= absl::ZeroDuration()) {
    return invalid("collective_timeout must be positive, got ",
                   absl::FormatDuration(options.collective_timeout));
  }
  if (options.max_inflight_launches_per_island < 1) {
    return invalid("max_inflight_launches_per_island must be at least 1, got ",
                   options.max_inflight_launches_per_island);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Create(
    LocalClusterOptions options) {
  CW_RETURN_IF_ERROR(ValidateOptions(options));
  // The same checks (and messages) as a fixed topology of that shape.
  CW_RETURN_IF_ERROR(
      Topology::Uniform(options.islands, options.hosts_per_island,
                        options.devices_per_host, options.memory_per_device)
          .status());
  std::unique_ptr<LocalCluster> cluster(new LocalCluster());
  cluster->options_ = options;
  if (options.data_plane == DataPlaneKind::kInProcess) {
    cluster->data_plane_ = std::make_unique<InProcessDataPlane>();
  }
  if (options.gloo_between_hosts) {
    cluster->key_value_store_ =
        std::make_unique<transport::InProcessKeyValueStore>();
  }
  HeadOptions head_options;
  head_options.events = options.event_sink.get();
  head_options.heartbeat_interval = options.heartbeat_interval;
  head_options.heartbeat_timeout = options.heartbeat_timeout;
  head_options.max_inflight_launches_per_island =
      options.max_inflight_launches_per_island;
  head_options.slices_wait_for_hosts = options.slices_wait_for_hosts;
  if (transport::InProcessKeyValueStore* store =
          cluster->key_value_store_.get()) {
    // An epoch's rendezvous keys go once no launch of it is in flight.
    head_options.epoch_retired = [store](IslandId island, uint64_t epoch) {
      transport::DeleteGlooKeysThrough(*store, island, epoch);
    };
  }
  CW_ASSIGN_OR_RETURN(cluster->head_, Head::Create(std::move(head_options)));
  for (int64_t i = 0; i < options.islands; ++i) {
    for (int64_t h = 0; h < options.hosts_per_island; ++h) {
      CW_RETURN_IF_ERROR(
          cluster->AddHost(IslandId(i), options.devices_per_host).status());
    }
  }
  {
    absl::MutexLock lock(&cluster->self_->mu);
    cluster->self_->cluster = cluster.get();
  }
  return cluster;
}

LocalCluster::~LocalCluster() {
  {
    absl::MutexLock lock(&self_->mu);
    self_->cluster = nullptr;
  }
  std::vector<std::shared_ptr<ConnectionLink>> links;
  {
    absl::MutexLock lock(&connections_mu_);
    for (const std::weak_ptr<ConnectionLink>& weak : connections_) {
      if (auto link = weak.lock()) links.push_back(std::move(link));
    }
    connections_.clear();
  }
  // Sessions still open are closed first: their launches are cancelled on
  // the devices, so a program looping forever does not hold the workers.
  for (const auto& link : links) link->Cut("the LocalCluster was shut down");
  if (head_ != nullptr) head_->Shutdown();
  std::map<HostId, Host> hosts;
  {
    absl::MutexLock lock(&mu_);
    hosts.swap(hosts_);
  }
  // A clean stop: pieces on their way land (and are acknowledged) first.
  for (auto& [id, host] : hosts) {
    if (host.tcp != nullptr) {
      host.tcp->AwaitIdle(absl::Now() + absl::Seconds(5));
    }
  }
  for (auto& [id, host] : hosts) host.worker->Stop();
  for (auto& [id, host] : hosts) StopDataPlane(id, host);
  // The head's last calls find the workers stopped.
  head_.reset();
  hosts.clear();
}

std::unique_ptr<transport::SessionChannel> LocalCluster::Connect() {
  auto link = std::make_shared<ConnectionLink>(
      std::make_unique<InProcessSessionChannel>(head_.get()));
  absl::MutexLock lock(&connections_mu_);
  // Forget the connections already gone, so a long-lived cluster's list
  // does not grow without bound.
  std::erase_if(connections_, [](const std::weak_ptr<ConnectionLink>& weak) {
    return weak.expired();
  });
  connections_.push_back(link);
  return std::make_unique<ClusterConnection>(std::move(link));
}

std::function<absl::StatusOr<std::unique_ptr<transport::SessionChannel>>()>
LocalCluster::ConnectionFactory() {
  return [self = std::weak_ptr<Self>(self_)]()
             -> absl::StatusOr<std::unique_ptr<transport::SessionChannel>> {
    std::shared_ptr<Self> alive = self.lock();
    if (alive != nullptr) {
      absl::MutexLock lock(&alive->mu);
      if (alive->cluster != nullptr) return alive->cluster->Connect();
    }
    return absl::FailedPreconditionError(
        "the LocalCluster this client connects to was shut down");
  };
}

transport::InProcessLaunchCollectives& LocalCluster::collectives(
    IslandId island) {
  absl::MutexLock lock(&mu_);
  auto& collectives = collectives_[island];
  if (collectives == nullptr) {
    collectives = std::make_unique<InProcessLaunchCollectives>(
        options_.collective_timeout);
  }
  return *collectives;
}

absl::StatusOr<HostId> LocalCluster::AddHost(IslandId island, int64_t devices) {
  head::HostRegistration registration;
  registration.island = island;
  registration.devices =
      transport::HostSpec{devices, "cpu", options_.memory_per_device};
  std::unique_ptr<TcpDataPlane> tcp;
  if (options_.data_plane == DataPlaneKind::kTcp) {
    CW_ASSIGN_OR_RETURN(tcp, TcpDataPlane::Create({}));
    // Its peers dial it by address and expect its incarnation.
    registration.incarnation = absl::StrCat(tcp->incarnation());
    registration.address = tcp->address();
  } else {
    absl::MutexLock lock(&mu_);
    registration.incarnation = absl::StrCat("local-", next_incarnation_++);
  }
  CW_ASSIGN_OR_RETURN(head::HostAssignment assignment,
                      head_->RegisterHost(registration));
  WorkerOptions worker_options;
  worker_options.host = assignment.host;
  worker_options.island = island;
  worker_options.devices = assignment.devices;
  worker_options.data_plane =
      tcp != nullptr ? static_cast<transport::DataPlane*>(tcp.get())
                     : data_plane_.get();
  worker_options.collectives = &collectives(island);
  std::unique_ptr<transport::GlooLaunchCollectives> gloo;
  if (options_.gloo_between_hosts) {
    std::vector<DeviceId> local_devices;
    for (const transport::DeviceInfo& device : assignment.devices) {
      local_devices.push_back(device.id);
    }
    absl::StatusOr<std::unique_ptr<transport::GlooLaunchCollectives>>
        created = transport::GlooLaunchCollectives::Create(
            {.store = key_value_store_.get(),
             .local_devices = std::move(local_devices),
             .timeout = options_.collective_timeout});
    if (!created.ok()) {
      head_->MarkHostDead(assignment.host, "its collectives could not start");
      return created.status();
    }
    gloo = *std::move(created);
    worker_options.collectives = gloo.get();
  }
  worker_options.listener = head_.get();
  worker_options.events = options_.event_sink.get();
  worker_options.evaluator = options_.evaluator;
  absl::StatusOr<std::unique_ptr<Worker>> worker;
  try {
    worker = Worker::Create(std::move(worker_options));
  } catch (const std::system_error& error) {
    // A device's thread could not start (the process's thread limit).
    worker = absl::ResourceExhaustedError(
        absl::StrCat("LocalCluster: cannot start the devices of host ",
                     assignment.host.value(), ": ", error.what()));
  }
  if (!worker.ok()) {
    head_->MarkHostDead(assignment.host, "its worker could not start");
    return worker.status();
  }
  if (tcp != nullptr) {
    tcp->Attach(assignment.host, worker->get());
    // Every TCP data plane knows every other (the peer table a networked
    // worker gets from the head).
    absl::MutexLock lock(&mu_);
    for (auto& [id, other] : hosts_) {
      if (other.tcp == nullptr || other.stopped) continue;
      other.tcp->SetPeer(assignment.host, tcp->address(), tcp->incarnation());
      tcp->SetPeer(id, other.tcp->address(), other.tcp->incarnation());
    }
  } else {
    data_plane_->Register(assignment.host, worker->get());
  }
  auto channel = std::make_shared<InProcessControlChannel>(worker->get());
  {
    absl::MutexLock lock(&mu_);
    hosts_[assignment.host] =
        Host{std::move(tcp), std::move(gloo), *std::move(worker), channel,
             devices};
  }
  CW_RETURN_IF_ERROR(head_->ActivateHost(assignment.host, channel));
  return assignment.host;
}

absl::StatusOr<LocalCluster::Host*> LocalCluster::FindHostLocked(HostId id) {
  auto it = hosts_.find(id);
  if (it == hosts_.end()) {
    return absl::NotFoundError(
        absl::StrCat("host ", id.value(), " is not in this cluster"));
  }
  return &it->second;
}

absl::StatusOr<LocalCluster::Host*> LocalCluster::StopWorker(HostId id) {
  Host* host = nullptr;
  {
    absl::MutexLock lock(&mu_);
    CW_ASSIGN_OR_RETURN(host, FindHostLocked(id));
    if (host->stopped) return host;
    host->stopped = true;
  }
  StopDataPlane(id, *host);
  host->worker->Stop();
  return host;
}

void LocalCluster::StopDataPlane(HostId id, Host& host) {
  if (host.tcp != nullptr) {
    host.tcp->Shutdown();
  } else {
    data_plane_->Unregister(id);
  }
}

transport::TcpDataPlane* LocalCluster::tcp_data_plane(HostId id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Host*> host = FindHostLocked(id);
  return host.ok() ? (*host)->tcp.get() : nullptr;
}

absl::Status LocalCluster::StopHost(HostId id) {
  CW_RETURN_IF_ERROR(StopWorker(id).status());
  head_->OnWorkerDisconnected(
      id, absl::UnavailableError("the worker process stopped"));
  return head_->AwaitHostDead(id, absl::Now() + absl::Seconds(10));
}

absl::Status LocalCluster::SeverHost(HostId id) {
  Host* host = nullptr;
  {
    absl::MutexLock lock(&mu_);
    CW_ASSIGN_OR_RETURN(host, FindHostLocked(id));
  }
  host->channel->Sever();
  const absl::Duration limit = options_.heartbeat_interval +
                               options_.heartbeat_timeout + absl::Seconds(5);
  return head_->AwaitHostDead(id, absl::Now() + limit);
}

absl::StatusOr<HostId> LocalCluster::RestartHost(HostId id) {
  CW_ASSIGN_OR_RETURN(Host * host, StopWorker(id));
  head_->OnWorkerDisconnected(
      id, absl::UnavailableError("the worker process restarted"));
  CW_RETURN_IF_ERROR(head_->AwaitHostDead(id, absl::Now() + absl::Seconds(10)));
  const std::shared_ptr<const Topology> topology = head_->topology();
  return AddHost(topology->IslandOfHost(id), host->num_devices);
}

absl::StatusOr<transport::StatusReport> LocalCluster::Status() {
  return head_->GetStatus().Await();
}

std::shared_ptr<const transport::Topology> LocalCluster::topology() const {
  return head_->topology();
}

}  // namespace causeway::cluster
