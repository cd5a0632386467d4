#include "causeway/transport/gloo_launch_collectives.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"

namespace causeway::transport {

absl::StatusOr<std::unique_ptr<GlooLaunchCollectives>>
GlooLaunchCollectives::Create(Options options) {
  if (options.store == nullptr) {
    return absl::InvalidArgumentError(
        "GlooLaunchCollectives needs a key-value store for its rendezvous");
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the collective timeout must be positive, not ",
                     absl::FormatDuration(options.timeout)));
  }
  absl::StatusOr<std::unique_ptr<GlooCommunicators>> communicators =
      GlooCommunicators::Create(
          {.store = options.store,
           .hostname = options.hostname,
           .auth_token = options.auth_token,
           .encrypt = options.encrypt});
  if (!communicators.ok()) return communicators.status();
  return std::unique_ptr<GlooLaunchCollectives>(new GlooLaunchCollectives(
      std::move(options), *std::move(communicators)));
}

GlooLaunchCollectives::GlooLaunchCollectives(
    Options options, std::unique_ptr<GlooCommunicators> communicators)
    : options_(std::move(options)),
      local_(options_.local_devices.begin(), options_.local_devices.end()),
      communicators_(std::move(communicators)),
      in_process_(options_.timeout) {}

GlooLaunchCollectives::~GlooLaunchCollectives() {
  absl::MutexLock lock(&mu_);
  CW_CHECK(participants_.empty())
      << "GlooLaunchCollectives destroyed while a launch runs";
}

bool GlooLaunchCollectives::InProcess(const LaunchMember& member) const {
  return std::all_of(member.devices.begin(), member.devices.end(),
                     [&](DeviceId device) { return local_.count(device) > 0; });
}

std::unique_ptr<GlooCollectives> GlooLaunchCollectives::MakeParticipant(
    const LaunchMember& member) {
  const int64_t count = static_cast<int64_t>(member.devices.size());
  if (member.partition < 0 || member.partition >= count ||
      local_.count(member.devices[member.partition]) == 0) {
    return nullptr;
  }
  std::shared_ptr<exec::InProcessCollectives> local;
  {
    absl::MutexLock lock(&mu_);
    LocalGroups& groups = local_groups_[{member.island, member.seq}];
    if (groups.collectives == nullptr) {
      groups.collectives = std::make_shared<exec::InProcessCollectives>(
          exec::InProcessCollectives::Options{.timeout = options_.timeout});
      groups.partitions = std::count_if(
          member.devices.begin(), member.devices.end(),
          [&](DeviceId device) { return local_.count(device) > 0; });
    }
    local = groups.collectives;
  }
  return std::make_unique<GlooCollectives>(
      *communicators_,
      GlooLaunch{.island = member.island,
                 .epoch = member.epoch,
                 .seq = member.seq,
                 .devices = member.devices},
      member.partition,
      GlooCollectives::Options{.timeout = options_.timeout},
      GlooCollectives::LocalGroups{std::move(local), local_});
}

exec::Collectives* GlooLaunchCollectives::Join(const LaunchMember& member) {
  if (InProcess(member)) return in_process_.Join(member);
  std::unique_ptr<GlooCollectives> participant = MakeParticipant(member);
  // The device checked the launch's devices when it took the launch.
  CW_CHECK(participant != nullptr)
      << "launch " << member.seq << " does not name partition "
      << member.partition << " on a device of this process";
  const DeviceId device = member.devices[member.partition];
  communicators_->RetireEpochsBefore(member.island, device, member.epoch);
  absl::Status early_abort;
  GlooCollectives* joined = participant.get();
  {
    absl::MutexLock lock(&mu_);
    uint64_t& newest = newest_epochs_[device];
    if (member.epoch < newest) {
      // Its communicators went when this device moved on (every peer of
      // the launch did the same, in the same gang order).
      early_abort = absl::AbortedError(absl::StrCat(
          "launch ", member.seq, " was dispatched at epoch ", member.epoch,
          " of island ", member.island.value(), ", but device ",
          device.value(), " already runs epoch ", newest));
    }
    newest = std::max(newest, member.epoch);
    auto early = early_aborts_.find(device);
    if (early != early_aborts_.end() && early->second.first <= member.seq) {
      if (early->second.first == member.seq && early_abort.ok()) {
        early_abort = early->second.second;
      }
      early_aborts_.erase(early);
    }
    participants_[{member.island, member.seq, member.partition}] =
        std::move(participant);
  }
  if (!early_abort.ok()) joined->Cancel(std::move(early_abort));
  return joined;
}

void GlooLaunchCollectives::DepartLocalGroupsLocked(const LaunchMember& member) {
  auto it = local_groups_.find({member.island, member.seq});
  if (it == local_groups_.end()) return;
  it->second.gone.insert(member.partition);
  if (static_cast<int64_t>(it->second.gone.size()) >= it->second.partitions) {
    local_groups_.erase(it);
  }
}

void GlooLaunchCollectives::Leave(const LaunchMember& member) {
  if (InProcess(member)) {
    in_process_.Leave(member);
    return;
  }
  std::unique_ptr<GlooCollectives> left;
  absl::MutexLock lock(&mu_);
  DepartLocalGroupsLocked(member);
  auto it = participants_.find({member.island, member.seq, member.partition});
  if (it == participants_.end()) return;
  left = std::move(it->second);
  participants_.erase(it);
}

void GlooLaunchCollectives::Cancel(const LaunchMember& member,
                                   absl::Status status) {
  CW_CHECK(!status.ok());
  if (InProcess(member)) {
    in_process_.Cancel(member, std::move(status));
    return;
  }
  std::unique_ptr<GlooCollectives> participant;
  {
    absl::MutexLock lock(&mu_);
    auto it =
        participants_.find({member.island, member.seq, member.partition});
    if (it != participants_.end()) {
      participant = std::move(it->second);
      participants_.erase(it);
    }
  }
  if (participant == nullptr) participant = MakeParticipant(member);
  if (participant == nullptr) return;  // Not a launch of ours to cancel.
  participant->Cancel(std::move(status));
  absl::MutexLock lock(&mu_);
  DepartLocalGroupsLocked(member);
}

void GlooLaunchCollectives::Abort(const LaunchMember& member,
                                  absl::Status status) {
  CW_CHECK(!status.ok());
  if (InProcess(member)) {
    in_process_.Abort(member, std::move(status));
    return;
  }
  const int64_t count = static_cast<int64_t>(member.devices.size());
  if (member.partition < 0 || member.partition >= count) return;
  absl::MutexLock lock(&mu_);
  auto it = participants_.find({member.island, member.seq, member.partition});
  if (it != participants_.end()) {
    // Never blocks: it publishes and closes on the abort thread.
    it->second->Cancel(std::move(status));
    return;
  }
  early_aborts_[member.devices[member.partition]] = {member.seq,
                                                     std::move(status)};
}

int64_t GlooLaunchCollectives::NumLive() const {
  absl::MutexLock lock(&mu_);
  return in_process_.NumLive() + static_cast<int64_t>(participants_.size()) +
         static_cast<int64_t>(local_groups_.size());
}

}  // namespace causeway::transport
