#include "causeway/head/membership.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"

namespace causeway::head {

using transport::HostState;
using transport::Topology;

transport::MembershipUpdate MembershipUpdateOf(const Topology& topology) {
  transport::MembershipUpdate update;
  update.version = topology.version();
  for (int64_t h = 0; h < topology.num_hosts(); ++h) {
    const transport::HostInfo& host = topology.host(HostId(h));
    update.hosts.push_back(
        transport::PeerInfo{host.id, host.island, host.address, host.state,
                            host.incarnation});
  }
  for (int64_t i = 0; i < topology.num_islands(); ++i) {
    update.island_epochs.push_back(topology.epoch(IslandId(i)));
  }
  return update;
}

Membership::Membership(Limits limits)
    : limits_(limits),
      topology_(std::make_shared<const Topology>(Topology::Empty())) {}

absl::Status Membership::Validate(const HostRegistration& host) const {
  if (host.island.value() < 0 || host.island.value() >= limits_.max_islands) {
    return absl::InvalidArgumentError(absl::StrCat(
        "island ", host.island.value(), " is out of range: islands are 0..",
        limits_.max_islands - 1));
  }
  const transport::HostSpec& devices = host.devices;
  if (devices.num_devices < 1 ||
      devices.num_devices > limits_.max_devices_per_host) {
    return absl::InvalidArgumentError(
        absl::StrCat("a host has 1..", limits_.max_devices_per_host,
                     " devices; got ", devices.num_devices));
  }
  if (devices.memory_per_device < 1 ||
      devices.memory_per_device > limits_.max_memory_per_device) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory per device must be 1..", limits_.max_memory_per_device,
        " bytes; got ", devices.memory_per_device));
  }
  auto check_name = [&](const char* what, const std::string& value,
                        bool may_be_empty) -> absl::Status {
    if (value.empty() && !may_be_empty) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
    }
    if (value.size() > limits_.max_name_length) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is ", value.size(),
                                                     " bytes long; at most ",
                                                     limits_.max_name_length));
    }
    for (char c : value) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " holds a control character"));
      }
    }
    return absl::OkStatus();
  };
  CW_RETURN_IF_ERROR(check_name("the device kind", devices.kind, false));
  CW_RETURN_IF_ERROR(check_name("the incarnation", host.incarnation, false));
  CW_RETURN_IF_ERROR(check_name("the data-plane address", host.address, true));
  return absl::OkStatus();
}

absl::StatusOr<HostAssignment> Membership::Register(
    const HostRegistration& host) {
  CW_RETURN_IF_ERROR(Validate(host));
  absl::MutexLock lock(&mu_);
  if (auto known = incarnations_.find(host.incarnation);
      known != incarnations_.end()) {
    const transport::HostInfo& info = topology_->host(known->second);
    if (info.state == HostState::kDead) {
      return absl::FailedPreconditionError(absl::StrCat(
          "incarnation '", host.incarnation, "' was host ",
          known->second.value(),
          ", which died; a worker that lost its state joins again as a new "
          "incarnation (restart it)"));
    }
    return absl::AlreadyExistsError(absl::StrCat(
        "incarnation '", host.incarnation, "' is host ", known->second.value(),
        ", which is ", transport::HostStateName(info.state)));
  }
  if (joining_ >= limits_.max_joining_hosts) {
    return absl::ResourceExhaustedError(
        absl::StrCat(joining_, " hosts are joining already; try again later"));
  }
  CW_ASSIGN_OR_RETURN(Topology next,
                      topology_->WithHost(host.island, host.devices,
                                          host.incarnation, host.address));
  HostAssignment assignment;
  assignment.host = HostId(next.num_hosts() - 1);
  assignment.island = host.island;
  for (DeviceId device : next.DevicesOfHost(assignment.host)) {
    assignment.devices.push_back(next.device(device));
  }
  topology_ = std::make_shared<const Topology>(std::move(next));
  assignment.topology = topology_;
  incarnations_.emplace(host.incarnation, assignment.host);
  ++joining_;
  return assignment;
}

absl::Status Membership::Activate(
    HostId host, std::shared_ptr<transport::ControlChannel> channel) {
  if (channel == nullptr) {
    return absl::InvalidArgumentError("a host needs a control channel");
  }
  absl::MutexLock lock(&mu_);
  CW_RETURN_IF_ERROR(topology_->ValidateHost(host));
  const HostState state = topology_->host(host).state;
  if (state != HostState::kJoining) {
    return absl::FailedPreconditionError(
        absl::StrCat("host ", host.value(), " is ",
                     transport::HostStateName(state), ", not joining"));
  }
  topology_ = std::make_shared<const Topology>(topology_->WithHostAlive(host));
  channels_[host] = std::move(channel);
  --joining_;
  return absl::OkStatus();
}

HostState Membership::MarkDead(HostId host, std::string reason) {
  const auto declared = std::chrono::steady_clock::now();
  std::shared_ptr<transport::ControlChannel> channel;  // Dropped unlocked.
  absl::MutexLock lock(&mu_);
  if (!topology_->HasHost(host)) return HostState::kDead;
  const HostState state = topology_->host(host).state;
  if (state == HostState::kDead) return state;
  if (state == HostState::kJoining) --joining_;
  topology_ = std::make_shared<const Topology>(topology_->WithHostDead(host));
  deaths_.emplace(host, HostDeath{std::move(reason), declared});
  if (auto it = channels_.find(host); it != channels_.end()) {
    channel = std::move(it->second);
    channels_.erase(it);
  }
  return state;
}

uint64_t Membership::BumpEpoch(IslandId island) {
  absl::MutexLock lock(&mu_);
  topology_ = std::make_shared<const Topology>(topology_->WithNewEpoch(island));
  return topology_->epoch(island);
}

void Membership::DropChannels() {
  std::map<HostId, std::shared_ptr<transport::ControlChannel>> channels;
  absl::MutexLock lock(&mu_);
  channels.swap(channels_);
}

std::map<HostId, HostDeath> Membership::Deaths() const {
  absl::MutexLock lock(&mu_);
  return deaths_;
}

void Membership::DeathHandled(HostId host) {
  absl::MutexLock lock(&mu_);
  deaths_handled_.insert(host);
}

absl::Status Membership::AwaitDeathHandled(HostId host, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto handled = [this, host]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return deaths_handled_.contains(host);
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&handled), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat("host ", host.value(), " was not declared dead in time"));
  }
  return absl::OkStatus();
}

absl::Status Membership::CallError(HostId host,
                                   const absl::Status& status) const {
  if (status.ok()) return status;
  const std::shared_ptr<const Topology> now = topology();
  if (now->HasHost(host) && !now->IsAlive(host)) {
    return absl::DataLossError(
        absl::StrCat("host ", host.value(), " was lost: ", status.message()));
  }
  return status;
}

std::shared_ptr<const Topology> Membership::topology() const {
  absl::MutexLock lock(&mu_);
  return topology_;
}

std::shared_ptr<transport::ControlChannel> Membership::Channel(
    HostId host) const {
  absl::MutexLock lock(&mu_);
  auto it = channels_.find(host);
  return it == channels_.end() ? nullptr : it->second;
}

std::vector<std::pair<HostId, std::shared_ptr<transport::ControlChannel>>>
Membership::LiveChannels() const {
  absl::MutexLock lock(&mu_);
  return {channels_.begin(), channels_.end()};
}

}  // namespace causeway::head
