#include "causeway/head/dispatcher.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "causeway/base/logging.h"

namespace causeway::head {

using transport::ControlChannel;
using transport::DeviceBuffer;
using transport::Topology;

std::shared_ptr<ArrayBuffers> NewArrayBuffers(ArrayHandle internal,
                                              const ArrayPlacement& placement,
                                              const Topology& topology) {
  auto array = std::make_shared<ArrayBuffers>();
  for (size_t i = 0; i < placement.devices.size(); ++i) {
    const DeviceId device = placement.devices[i];
    array->buffers.emplace_back(
        topology.HostOf(device),
        DeviceBuffer{device, BufferId{internal, static_cast<int64_t>(i)}});
  }
  return array;
}

Dispatcher::Dispatcher(Options options, Membership* membership, Outbox* outbox)
    : options_(options), membership_(membership), outbox_(outbox) {
  CW_CHECK(options_.events != nullptr);
}

Dispatcher::~Dispatcher() {
  std::map<IslandId, std::unique_ptr<IslandScheduler>> schedulers;
  {
    absl::MutexLock lock(&mu_);
    schedulers.swap(schedulers_);
  }
  schedulers.clear();  // Drops what is queued (DropLaunch).
}

// ---------------------------------------------------------------------------
// Batches.

Dispatcher::Batch::Batch(Dispatcher& dispatcher) : dispatcher_(dispatcher) {
  absl::MutexLock lock(&dispatcher_.mu_);
  ++dispatcher_.open_depth_;
}

Dispatcher::Batch::~Batch() {
  absl::MutexLock lock(&dispatcher_.mu_);
  if (--dispatcher_.open_depth_ == 0 && !dispatcher_.open_.empty()) {
    Messages messages = std::move(dispatcher_.open_);
    dispatcher_.open_ = Messages();
    dispatcher_.PostLocked(std::move(messages));
  }
}

Dispatcher::Messages& Dispatcher::MessagesLocked(Messages* local) {
  return open_depth_ > 0 ? open_ : *local;
}

void Dispatcher::PostIfLocalLocked(Messages& messages, Messages* local) {
  if (&messages == local && !local->empty()) PostLocked(std::move(*local));
}

void Dispatcher::PostLocked(Messages messages) {
  for (Outbox::Action& action : messages.before) {
    outbox_->Post(std::move(action));
  }
  if (!messages.batches.empty()) {
    outbox_->Post([membership = membership_,
                   batches = std::move(messages.batches)]() mutable {
      for (auto& [host, batch] : batches) {
        if (std::shared_ptr<ControlChannel> channel =
                membership->Channel(host)) {
          channel->Dispatch(std::move(batch));
        }
      }
    });
  }
  for (Outbox::Action& action : messages.after) {
    outbox_->Post(std::move(action));
  }
}

void Dispatcher::AfterSentLocked(Outbox::Action action) {
  if (open_depth_ > 0) {
    open_.after.push_back(std::move(action));
  } else {
    outbox_->Post(std::move(action));
  }
}

void Dispatcher::AfterSent(Outbox::Action action) {
  absl::MutexLock lock(&mu_);
  AfterSentLocked(std::move(action));
}

void Dispatcher::Call(HostId host,
                      absl::AnyInvocable<void(ControlChannel*) &&> call) {
  Outbox::Action action = [membership = membership_, host,
                           call = std::move(call)]() mutable {
    std::shared_ptr<ControlChannel> channel = membership->Channel(host);
    std::move(call)(channel.get());
  };
  absl::MutexLock lock(&mu_);
  if (open_depth_ > 0) {
    open_.before.push_back(std::move(action));
  } else {
    outbox_->Post(std::move(action));
  }
}

void Dispatcher::Broadcast(
    absl::AnyInvocable<void(ControlChannel&) const> call) {
  AfterSent([membership = membership_, call = std::move(call)]() {
    for (const auto& [host, channel] : membership->LiveChannels()) {
      call(*channel);
    }
  });
}

// ---------------------------------------------------------------------------
// Array buffers.

void Dispatcher::MaybeHandBackLocked(ArrayBuffers& array, Messages& messages) {
  if (!array.deleted || !array.placed || array.pending_uses > 0 ||
      array.handed_back) {
    return;
  }
  array.handed_back = true;
  for (const auto& [host, buffer] : array.buffers) {
    messages.batches[host].releases.push_back(buffer);
  }
}

void Dispatcher::PlacedLocked(ArrayBuffers& array, Messages& messages) {
  array.placed = true;
  for (auto& [host, send] : array.pending_sends) {
    messages.batches[host].sends.push_back(std::move(send));
  }
  array.pending_sends.clear();
  for (auto& callback : array.on_placed) {
    messages.after.push_back([callback = std::move(callback)]() mutable {
      std::move(callback)(absl::OkStatus());
    });
  }
  array.on_placed.clear();
}

void Dispatcher::MarkPlaced(ArrayBuffers& array) {
  absl::MutexLock lock(&mu_);
  Messages local;
  Messages& messages = MessagesLocked(&local);
  PlacedLocked(array, messages);
  PostIfLocalLocked(messages, &local);
}

void Dispatcher::WhenPlaced(
    std::shared_ptr<ArrayBuffers> array,
    absl::AnyInvocable<void(absl::Status) &&> callback) {
  absl::MutexLock lock(&mu_);
  if (!array->dropped.ok()) {
    outbox_->Post(
        [callback = std::move(callback), dropped = array->dropped]() mutable {
          std::move(callback)(dropped);
        });
  } else if (!array->placed) {
    array->on_placed.push_back(std::move(callback));
  } else {
    AfterSentLocked([callback = std::move(callback)]() mutable {
      std::move(callback)(absl::OkStatus());
    });
  }
}

void Dispatcher::Delete(std::shared_ptr<ArrayBuffers> array) {
  absl::MutexLock lock(&mu_);
  array->deleted = true;
  Messages local;
  Messages& messages = MessagesLocked(&local);
  MaybeHandBackLocked(*array, messages);
  PostIfLocalLocked(messages, &local);
}

void Dispatcher::Transfer(TransferPlan plan,
                          std::shared_ptr<ArrayBuffers> source,
                          std::shared_ptr<ArrayBuffers> destination) {
  absl::MutexLock lock(&mu_);
  Messages local;
  Messages& messages = MessagesLocked(&local);
  for (auto& [host, receive] : plan.receives) {
    messages.batches[host].receives.push_back(std::move(receive));
  }
  for (auto& [host, send] : plan.sends) {
    if (source->placed) {
      messages.batches[host].sends.push_back(std::move(send));
    } else {
      source->pending_sends.emplace_back(host, std::move(send));
    }
  }
  PlacedLocked(*destination, messages);
  PostIfLocalLocked(messages, &local);
}

// ---------------------------------------------------------------------------
// Launches.

IslandScheduler& Dispatcher::SchedulerFor(IslandId island) {
  std::vector<std::pair<SessionId, double>> weights;
  IslandScheduler* scheduler = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = schedulers_.find(island);
    if (it != schedulers_.end()) return *it->second;
    IslandScheduler::Options options;
    options.max_in_flight =
        std::max<int64_t>(1, options_.max_inflight_launches_per_island);
    options.name = absl::StrCat("island ", island.value());
    auto created = std::make_unique<IslandScheduler>(options);
    scheduler = created.get();
    schedulers_.emplace(island, std::move(created));
    weights.assign(weights_.begin(), weights_.end());
  }
  for (const auto& [session, weight] : weights) {
    scheduler->SetWeight(session, weight).IgnoreError();
  }
  return *scheduler;
}

void Dispatcher::SetWeight(SessionId session, double weight) {
  weight = std::clamp(weight, IslandScheduler::kMinWeight,
                      IslandScheduler::kMaxWeight);
  std::vector<IslandScheduler*> schedulers;
  {
    absl::MutexLock lock(&mu_);
    weights_[session] = weight;
    for (auto& [island, scheduler] : schedulers_) {
      schedulers.push_back(scheduler.get());
    }
  }
  for (IslandScheduler* scheduler : schedulers) {
    absl::Status set = scheduler->SetWeight(session, weight);
    if (!set.ok()) {
      CW_LOG(WARNING) << "session weight: " << set;
    }
  }
}

absl::Status Dispatcher::Schedule(std::shared_ptr<PreparedLaunch> launch) {
  {
    absl::MutexLock lock(&mu_);
    for (const auto& array : launch->used) ++array->pending_uses;
  }
  Launch scheduled;
  scheduled.session = launch->session;
  scheduled.devices = launch->devices;
  scheduled.release = [this, launch](uint64_t seq) {
    ReleaseLaunch(*launch, seq);
  };
  scheduled.on_drop = [this, launch](absl::Status) {
    DropLaunch(*launch, absl::CancelledError(absl::StrCat(
                            "program '", launch->program,
                            "' was never run (its session ended before its "
                            "turn)")));
  };
  absl::Status submitted =
      SchedulerFor(launch->island).Submit(std::move(scheduled));
  if (!submitted.ok()) {
    submitted = absl::Status(
        submitted.code(),
        absl::StrCat("program '", launch->program, "': ", submitted.message()));
    DropLaunch(*launch, submitted);
  }
  return submitted;
}

void Dispatcher::DropLaunch(PreparedLaunch& launch, const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  Messages local;
  Messages& messages = MessagesLocked(&local);
  for (const auto& array : launch.used) {
    --array->pending_uses;
    MaybeHandBackLocked(*array, messages);
  }
  for (const auto& array : launch.outputs) {
    array->handed_back = true;  // They were never created.
    array->dropped = why;
    // Sends parked on an output that will never exist go out anyway: the
    // source worker does not find the buffer and pushes that error, so the
    // receivers waiting for them fail instead of holding memory forever.
    array->placed = true;
    for (auto& [host, send] : array->pending_sends) {
      messages.batches[host].sends.push_back(std::move(send));
    }
    array->pending_sends.clear();
    for (auto& callback : array->on_placed) {
      messages.after.push_back([callback = std::move(callback), why]() mutable {
        std::move(callback)(why);
      });
    }
    array->on_placed.clear();
  }
  PostIfLocalLocked(messages, &local);
}

void Dispatcher::ReleaseLaunch(PreparedLaunch& launch, uint64_t seq) {
  const std::shared_ptr<const Topology> topology = membership_->topology();
  std::set<DeviceId> running;
  trace::LaunchEvent event;
  {
    absl::MutexLock lock(&mu_);
    Messages local;
    Messages& messages = MessagesLocked(&local);
    absl::Status abandoned;
    for (HostId host : launch.hosts) {
      if (!topology->IsAlive(host)) {
        abandoned = absl::DataLossError(
            absl::StrCat("program '", launch.program, "' (seq ", seq,
                         ") needs host ", host.value(), ", which was lost"));
        break;
      }
    }
    const uint64_t epoch = topology->epoch(launch.island);
    for (auto& [host, op] : launch.ops) {
      op.seq = seq;
      op.epoch = epoch;
      op.abandoned = abandoned;
      if (!topology->IsAlive(host)) continue;
      running.insert(op.device);
      messages.batches[host].launches.push_back(std::move(op));
    }
    for (auto& [source, sends] : launch.source_sends) {
      for (auto& [host, send] : sends) {
        if (source->placed) {
          messages.batches[host].sends.push_back(std::move(send));
        } else {
          source->pending_sends.emplace_back(host, std::move(send));
        }
      }
    }
    for (const auto& array : launch.outputs) PlacedLocked(*array, messages);
    // Outputs deleted before they were sent, and inputs nothing else waits
    // for, go back now (after the launch, in the same message).
    for (const auto& array : launch.used) {
      --array->pending_uses;
      MaybeHandBackLocked(*array, messages);
    }
    for (const auto& array : launch.outputs) {
      MaybeHandBackLocked(*array, messages);
    }
    if (!running.empty()) {
      absl::MutexLock inflight_lock(&inflight_mu_);
      inflight_[{launch.island, seq}] =
          LaunchInFlight{std::move(running), epoch, launch.hosts.size() > 1,
                         false, launch.session};
      ++epochs_[{launch.island, epoch}];
    } else {
      // Nothing will report back: the window slot is free at once (after
      // this release returns, through the outbox).
      messages.after.push_back(
          [this, island = launch.island, seq] { LaunchFinished(island, seq); });
    }
    PostIfLocalLocked(messages, &local);
  }
  event.time = absl::Now();
  event.island = launch.island;
  event.seq = seq;
  event.session = launch.session;
  event.session_name = launch.session_name;
  event.program = launch.program;
  event.devices = launch.devices;
  options_.events->LaunchDispatched(event);
}

void Dispatcher::LaunchFinished(IslandId island, uint64_t seq) {
  absl::Status completed = SchedulerFor(island).OnLaunchComplete(seq);
  if (!completed.ok()) {
    CW_LOG(WARNING) << "launch complete: " << completed;
  }
}

void Dispatcher::EraseInFlightLocked(InFlightMap::iterator it) {
  --epochs_[{it->first.first, it->second.epoch}];
  inflight_.erase(it);
}

void Dispatcher::OnOpDone(const transport::OpDone& done) {
  std::optional<uint64_t> failed_epoch;
  bool finished = false;
  {
    absl::MutexLock lock(&inflight_mu_);
    auto it = inflight_.find({done.island, done.seq});
    if (it == inflight_.end() || !it->second.running.contains(done.device)) {
      return;
    }
    LaunchInFlight& launch = it->second;
    if (!done.status.ok() && launch.across_hosts && !launch.failed) {
      launch.failed = true;
      failed_epoch = launch.epoch;
    }
    launch.running.erase(done.device);
    if (launch.running.empty()) {
      EraseInFlightLocked(it);
      finished = true;
    }
  }
  if (failed_epoch.has_value() &&
      membership_->topology()->epoch(done.island) == *failed_epoch) {
    // Its collectives may have closed the epoch's communicators: launches
    // released from now on use new ones.
    membership_->BumpEpoch(done.island);
    MembershipChanged();
  }
  if (finished) {
    LaunchFinished(done.island, done.seq);
    RetireEpochs();
  }
}

void Dispatcher::MembershipChanged() {
  // Each action sends the newest topology when it runs, so an action whose
  // newest is what an earlier one sent already has nothing to add: a burst
  // of N joins is a few updates, not N (each to every host, each naming
  // every host; at 512 sim hosts the burst kept the head busy for a
  // minute and its heartbeats late).
  AfterSent([membership = membership_, sent = membership_versions_sent_] {
    const std::shared_ptr<const Topology> topology = membership->topology();
    if (topology->version() <= sent->load()) return;
    sent->store(topology->version());
    const transport::MembershipUpdate update = MembershipUpdateOf(*topology);
    for (const auto& [host, channel] : membership->LiveChannels()) {
      channel->UpdateMembership(update);
    }
  });
  RetireEpochs();
}

void Dispatcher::RetireEpochs() {
  if (!options_.epoch_retired) return;
  const std::shared_ptr<const Topology> topology = membership_->topology();
  std::vector<std::pair<IslandId, uint64_t>> retired;
  {
    absl::MutexLock lock(&inflight_mu_);
    for (auto it = epochs_.begin(); it != epochs_.end();) {
      const auto& [island, epoch] = it->first;
      if (it->second > 0 || epoch >= topology->epoch(island)) {
        ++it;
        continue;
      }
      retired.push_back(it->first);
      it = epochs_.erase(it);
    }
  }
  for (const auto& [island, epoch] : retired) {
    outbox_->Post([this, island = island, epoch = epoch] {
      options_.epoch_retired(island, epoch);
    });
  }
}

void Dispatcher::HostLost(HostId host, const absl::Status& lost) {
  Broadcast(
      [host, lost](ControlChannel& worker) { worker.PeerLost(host, lost); });
  const std::shared_ptr<const Topology> topology = membership_->topology();
  std::vector<std::pair<IslandId, uint64_t>> finished;
  {
    absl::MutexLock lock(&inflight_mu_);
    for (auto it = inflight_.begin(); it != inflight_.end();) {
      std::erase_if(it->second.running, [&](DeviceId device) {
        return topology->HostOf(device) == host;
      });
      if (it->second.running.empty()) {
        finished.push_back(it->first);
        EraseInFlightLocked(it++);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [island, seq] : finished) LaunchFinished(island, seq);
}

void Dispatcher::EndSession(SessionId session, const absl::Status& status) {
  std::vector<IslandScheduler*> schedulers;
  {
    absl::MutexLock lock(&mu_);
    weights_.erase(session);
    for (auto& [island, scheduler] : schedulers_) {
      schedulers.push_back(scheduler.get());
    }
  }
  for (IslandScheduler* scheduler : schedulers) {
    scheduler->RemoveSession(session);
  }
  std::set<std::pair<IslandId, uint64_t>> cancelled_epochs;
  {
    absl::MutexLock inflight_lock(&inflight_mu_);
    for (auto& [key, launch] : inflight_) {
      if (launch.session == session && launch.across_hosts && !launch.failed) {
        launch.failed = true;
        cancelled_epochs.emplace(key.first, launch.epoch);
      }
    }
  }
  bool bumped = false;
  for (const auto& [island, epoch] : cancelled_epochs) {
    if (membership_->topology()->epoch(island) == epoch) {
      membership_->BumpEpoch(island);
      bumped = true;
    }
  }
  if (bumped) MembershipChanged();
  // Its launches already on devices stop (a program may loop forever):
  // after everything produced so far, so none slips past.
  Broadcast([session, status](ControlChannel& worker) {
    worker.CancelSession(session, status);
  });
}

int64_t Dispatcher::InFlight() const {
  absl::MutexLock lock(&inflight_mu_);
  return static_cast<int64_t>(inflight_.size());
}

std::string Dispatcher::DebugString() const {
  std::vector<std::pair<IslandId, IslandScheduler*>> schedulers;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [island, scheduler] : schedulers_) {
      schedulers.emplace_back(island, scheduler.get());
    }
  }
  std::string out;
  for (const auto& [island, scheduler] : schedulers) {
    const IslandSchedulingStats stats = scheduler->Stats();
    absl::StrAppend(&out, out.empty() ? "" : "\n", "island ", island.value(),
                    ": ", stats.next_seq, " launches released, ", stats.queued,
                    " queued, ", stats.in_flight, " in flight");
  }
  return out;
}

}  // namespace causeway::head
