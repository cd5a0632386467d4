#include "causeway/transport/gloo_collectives.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/transport/gloo_mesh.h"
#include "causeway/transport/gloo_store.h"
#include "gloo/common/error.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"

namespace causeway::transport {
namespace {

using hlo::Literal;
using hlo::PrimitiveType;

std::chrono::milliseconds Millis(absl::Duration duration) {
  return std::chrono::milliseconds(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(duration)));
}

std::string DeviceList(const std::vector<DeviceId>& devices) {
  return absl::StrJoin(devices, ",", [](std::string* out, DeviceId device) {
    absl::StrAppend(out, device.value());
  });
}

// The part of a context's key naming its group: the sorted ids, or a hash
// of them for a group too large to spell out in a key.
std::string GroupName(const std::vector<DeviceId>& sorted) {
  std::string ids = DeviceList(sorted);
  if (ids.size() <= 256) return ids;
  uint64_t h = 1469598103934665603ull;
  for (char c : ids) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return absl::StrCat("h", absl::Hex(h), "n", sorted.size());
}

// Names one Gloo operation identically on every member and differently
// from every other operation of the run: a member that runs a different
// operation (or the same with different bytes) never matches it, it waits
// (until the timeout) instead of mixing data.
uint32_t TagOf(const exec::CollectiveOp& op, int64_t part, int64_t bytes) {
  uint64_t h = op.key.run_id * 0x9E3779B97F4A7C15ull;
  for (uint64_t v : {static_cast<uint64_t>(op.key.instruction_id),
                     static_cast<uint64_t>(op.key.execution_count),
                     static_cast<uint64_t>(part),
                     static_cast<uint64_t>(bytes)}) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  }
  return static_cast<uint32_t>(h ^ (h >> 32));
}

// The slot of our own send/receive operations: Gloo's collectives use slot
// prefixes 0x01-0x08 (gloo/types.h), ours is apart from them.
uint64_t SlotOf(uint32_t tag) {
  return (uint64_t{0xC5} << 56) | (uint64_t{tag} << 24);
}

// The slot of the receive Abandon posts and lets time out; never sent to.
constexpr uint64_t kAbandonSlot = (uint64_t{0xC6} << 56);

// Fails every operation pending on `context`, from any thread: Gloo has no
// abort call, and Context::closeConnections() only drops the sockets, which
// leaves a call of this process waiting for its timeout. What Gloo does
// offer is its reaction to a timeout: when a wait on an unbound buffer times
// out, the TCP transport fails every pending operation on every pair of the
// context with an IoException and closes their sockets (the peers read end
// of stream). So: post a receive that nobody answers and let it time out at
// once.
void Abandon(::gloo::Context& context) {
  char byte = 0;
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer == context.rank) continue;
    std::unique_ptr<::gloo::transport::UnboundBuffer> buffer;
    try {
      buffer = context.createUnboundBuffer(&byte, 1);
      buffer->recv(peer, kAbandonSlot);
    } catch (const std::exception&) {
      continue;  // That pair has failed already; try another.
    }
    try {
      buffer->waitRecv(std::chrono::milliseconds(1));
    } catch (const std::exception& e) {
      // The timeout failed every pair; any other error was this pair's own
      // (it failed meanwhile), and the others may still hold a waiter.
      if (absl::StrContains(e.what(), "Timed out")) return;
      continue;
    }
    CW_LOG(WARNING) << "abandoning a Gloo context: an unanswered receive "
                       "completed";
    return;
  }
}

Literal Pack(std::vector<Literal> values) {
  if (values.size() == 1) return std::move(values[0]);
  return Literal::MakeTuple(std::move(values));
}

// Gloo never writes through the buffers it only sends from; its API takes
// them as non-const.
void* SendPointer(const Literal& value) {
  return const_cast<void*>(value.untyped_data());
}

}  // namespace

std::string GlooEpochPrefix(IslandId island, uint64_t epoch) {
  return absl::StrCat("gloo/isl/", island.value(), "/ep/", epoch, "/");
}

void DeleteGlooKeysThrough(KeyValueStore& store, IslandId island,
                           uint64_t epoch) {
  for (uint64_t e = 0; e <= epoch; ++e) {
    store.DeletePrefix(GlooEpochPrefix(island, e));
  }
}

std::string GlooCancelKey(IslandId island, uint64_t epoch, uint64_t seq) {
  return absl::StrCat(GlooEpochPrefix(island, epoch), "seq/", seq, "/cancel");
}

// --- GlooCommunicators ---

// The slot of the receives that watch a context's pairs; never sent to.
constexpr uint64_t kProbeSlot = (uint64_t{0xC7} << 56);
// How often the watchdog wakes the waits of a running operation.
constexpr absl::Duration kWatchPeriod = absl::Milliseconds(10);

// One rank's context. `context` is set once built and dropped (with
// `probe`) when the entry is closed and unused.
struct GlooCommunicators::Entry {
  ~Entry() {
    probe.reset();  // Before the context it belongs to.
    context.reset();
  }

  // Moves the probe and the context out, for the caller to destroy after
  // letting go of `mu`.
  void TakeContextLocked(
      std::unique_ptr<::gloo::transport::UnboundBuffer>& probe_out,
      std::shared_ptr<::gloo::Context>& context_out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  absl::Mutex mu;
  std::shared_ptr<::gloo::Context> context ABSL_GUARDED_BY(mu);
  // A receive from every peer that nobody answers: Gloo fails it when its
  // pair breaks, which is how a running operation learns of a broken pair
  // its own buffers were not told about. Used by the operation's thread.
  std::unique_ptr<::gloo::transport::UnboundBuffer> probe ABSL_GUARDED_BY(mu);
  char probe_byte = 0;
  // Not OK once closed: every later use fails with it.
  absl::Status closed ABSL_GUARDED_BY(mu);
  int64_t users ABSL_GUARDED_BY(mu) = 0;
};

// The buffers of one running operation, registered with the communicators
// so that the watchdog and Close can wake its waits. Made, used and
// destroyed by the operation's thread.
struct GlooCommunicators::Transfers {
  Transfers(GlooCommunicators& owner, Entry& entry,
            std::shared_ptr<::gloo::Context> context,
            ::gloo::transport::UnboundBuffer* probe, absl::Time deadline)
      : owner(owner),
        entry(entry),
        context(std::move(context)),
        probe(probe),
        deadline(deadline) {
    absl::MutexLock lock(&owner.mu_);
    owner.running_.insert(this);
    owner.watch_cv_.Signal();
  }
  ~Transfers() {
    absl::MutexLock lock(&owner.mu_);
    owner.running_.erase(this);
  }

  // Scratch memory that outlives every buffer (Gloo's I/O thread may still
  // be writing into a receive when an operation gives up).
  std::byte* Allocate(size_t bytes) {
    scratch.emplace_back(new std::byte[std::max<size_t>(bytes, 1)]);
    return scratch.back().get();
  }

  // A buffer over `bytes` at `data`, watched while the operation runs.
  // `data` must outlive the operation.
  ::gloo::transport::UnboundBuffer* Buffer(void* data, size_t bytes) {
    auto buffer = context->createUnboundBuffer(data, bytes);
    absl::MutexLock lock(&mu);
    buffers.push_back(std::move(buffer));
    return buffers.back().get();
  }

  // Wakes every wait on this operation's buffers (they then check why).
  void Wake() {
    absl::MutexLock lock(&mu);
    for (auto& buffer : buffers) {
      buffer->abortWaitRecv();
      buffer->abortWaitSend();
    }
  }

  // Waits for one receive (or send) on `buffer` to complete: throws Gloo's
  // IoException when the operation times out, when a pair of the context
  // breaks, or when the context is closed.
  void WaitRecv(::gloo::transport::UnboundBuffer* buffer) {
    Wait(buffer, /*send=*/false);
  }
  void WaitSend(::gloo::transport::UnboundBuffer* buffer) {
    Wait(buffer, /*send=*/true);
  }

  void Wait(::gloo::transport::UnboundBuffer* buffer, bool send) {
    while (true) {
      const std::chrono::milliseconds timeout =
          Millis(deadline - absl::Now());
      // On its timeout Gloo fails every pair of the context and throws.
      const bool done = send ? buffer->waitSend(nullptr, timeout)
                             : buffer->waitRecv(nullptr, timeout);
      if (done) return;
      // Woken: by the watchdog (check the pairs), or by Close.
      {
        absl::MutexLock lock(&entry.mu);
        if (!entry.closed.ok()) {
          throw ::gloo::IoException(
              absl::StrCat("context closed: ", entry.closed.message()));
        }
      }
      probe->abortWaitRecv();
      probe->waitRecv();  // Throws if a pair has failed; else returns false.
    }
  }

  GlooCommunicators& owner;
  Entry& entry;
  const std::shared_ptr<::gloo::Context> context;
  ::gloo::transport::UnboundBuffer* const probe;
  const absl::Time deadline;
  std::vector<std::unique_ptr<std::byte[]>> scratch;  // Outlives `buffers`.
  absl::Mutex mu;
  // Destroying one waits until Gloo's I/O thread no longer uses it.
  std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> buffers
      ABSL_GUARDED_BY(mu);
};

GlooCommunicators::GlooCommunicators(Options options)
    : options_(std::move(options)),
      watchdog_([this] { WatchLoop(); }),
      aborts_(std::make_unique<ThreadPool>("gloo-abort", 1)) {}

void GlooCommunicators::WatchLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    if (running_.empty()) {
      watch_cv_.Wait(&mu_);
      continue;
    }
    watch_cv_.WaitWithTimeout(&mu_, kWatchPeriod);
    for (Transfers* transfers : running_) transfers->Wake();
  }
}

void GlooCommunicators::WakeRunning(const Entry* entry) {
  absl::MutexLock lock(&mu_);
  for (Transfers* transfers : running_) {
    if (&transfers->entry == entry) transfers->Wake();
  }
}

absl::StatusOr<std::unique_ptr<GlooCommunicators>> GlooCommunicators::Create(
    Options options) {
  if (options.store == nullptr) {
    return absl::InvalidArgumentError(
        "GlooCommunicators needs a key-value store for its rendezvous");
  }
  // Gloo writes to its sockets with writev(2), which raises SIGPIPE when
  // the peer has gone: a dead peer would kill this process instead of
  // failing its collectives. With SIGPIPE ignored the write fails with
  // EPIPE, which Gloo turns into an IoException. A handler someone else
  // installed is left alone.
  struct sigaction current = {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 &&
      current.sa_handler == SIG_DFL) {
    ::signal(SIGPIPE, SIG_IGN);
  }
  std::unique_ptr<GlooCommunicators> communicators(
      new GlooCommunicators(std::move(options)));
  ::gloo::transport::tcp::attr attr;
  attr.hostname = communicators->options_.hostname;
  try {
    communicators->device_ = ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot open Gloo's TCP device on '", attr.hostname,
                     "': ", e.what()));
  }
  return communicators;
}

GlooCommunicators::~GlooCommunicators() {
  aborts_.reset();  // Finishes pending cancellations first.
  std::map<ContextKey, std::shared_ptr<Entry>> entries;
  {
    absl::MutexLock lock(&mu_);
    CW_CHECK(running_.empty())
        << "GlooCommunicators destroyed while a collective runs";
    stopping_ = true;
    watch_cv_.Signal();
    entries.swap(entries_);
  }
  watchdog_.join();
  for (auto& [key, entry] : entries) {
    std::unique_ptr<::gloo::transport::UnboundBuffer> probe;
    std::shared_ptr<::gloo::Context> context;
    {
      absl::MutexLock lock(&entry->mu);
      CW_CHECK(entry->users == 0)
          << "GlooCommunicators destroyed while a collective runs";
      entry->TakeContextLocked(probe, context);
    }
    probe.reset();
  }
}

int64_t GlooCommunicators::NumContexts() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(entries_.size());
}

absl::StatusOr<std::shared_ptr<GlooCommunicators::Entry>>
GlooCommunicators::Lookup(const ContextKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::shared_ptr<Entry>();
  Entry& entry = *it->second;
  absl::MutexLock entry_lock(&entry.mu);
  if (!entry.closed.ok()) {
    return absl::AbortedError(absl::StrCat(
        "the Gloo context of devices {", DeviceList(key.members),
        "} at epoch ", key.epoch, " of island ", key.island.value(),
        " was closed after an earlier failure (", entry.closed.message(),
        "); it opens again when the island moves to a new epoch"));
  }
  ++entry.users;
  return it->second;
}

absl::StatusOr<std::shared_ptr<GlooCommunicators::Entry>>
GlooCommunicators::Build(const ContextKey& key, int rank, GlooStore& store,
                         absl::Duration timeout) {
  const int size = static_cast<int>(key.members.size());
  GlooMeshOptions mesh;
  mesh.rank = rank;
  mesh.size = size;
  mesh.device = device_;
  mesh.hostname = options_.hostname;
  mesh.token = options_.auth_token;
  mesh.encrypt = options_.encrypt;
  // A pair's own timeout; every operation passes its own.
  mesh.pair_timeout = Millis(timeout / 5);
  mesh.deadline = absl::Now() + timeout;
  absl::Status status;
  auto entry = std::make_shared<Entry>();
  std::shared_ptr<::gloo::Context> context;
  std::unique_ptr<::gloo::transport::UnboundBuffer> probe;
  absl::StatusOr<std::shared_ptr<::gloo::Context>> connected =
      ConnectGlooMesh(mesh, store);
  if (connected.ok()) {
    context = *std::move(connected);
    // Aborted late, a peer may have given up after connecting.
    status = store.aborted();
  } else {
    status = connected.status();
  }
  if (status.ok()) {
    try {
      probe = context->createUnboundBuffer(&entry->probe_byte, 1);
      for (int peer = 0; peer < size; ++peer) {
        if (peer != rank) probe->recv(peer, kProbeSlot);
      }
    } catch (const std::exception& e) {
      status = absl::UnavailableError(
          absl::StrCat("connecting the Gloo context: ", e.what()));
    }
  }
  {
    absl::MutexLock entry_lock(&entry->mu);
    if (status.ok()) {
      entry->context = std::move(context);
      entry->probe = std::move(probe);
      entry->users = 1;
    } else {
      entry->closed = status;
    }
  }
  probe.reset();  // Before the context it belongs to (both null on success).
  context.reset();
  {
    absl::MutexLock lock(&mu_);
    entries_[key] = entry;
  }
  if (!status.ok()) return status;
  // Rendezvous keys are garbage once every rank has connected: each says
  // so, and rank 0 deletes the context's prefix when all have.
  KeyValueStore* kv = options_.store;
  const std::string prefix = store.prefix();
  kv->Set(absl::StrCat(prefix, "connected/", rank), "");
  if (rank == 0) {
    std::vector<Future<std::string>> connected;
    const absl::Time deadline = absl::Now() + timeout;
    for (int r = 0; r < size; ++r) {
      connected.push_back(kv->Get(absl::StrCat(prefix, "connected/", r),
                                  deadline));
    }
    JoinFutures(std::move(connected))
        .OnReady(InlineExecutor::Instance(),
                 [kv, prefix](
                     const absl::StatusOr<std::vector<std::string>>& all) {
                   // After an error the store may be shutting down.
                   if (all.ok()) kv->DeletePrefix(prefix);
                 });
  }
  return entry;
}

// Destroying a context closes its sockets and waits for Gloo's I/O thread:
// never under entry->mu. The probe goes first (it belongs to the context).
void GlooCommunicators::Entry::TakeContextLocked(
    std::unique_ptr<::gloo::transport::UnboundBuffer>& probe_out,
    std::shared_ptr<::gloo::Context>& context_out) {
  probe_out = std::move(probe);
  context_out = std::move(context);
}

void GlooCommunicators::Release(const std::shared_ptr<Entry>& entry) {
  std::unique_ptr<::gloo::transport::UnboundBuffer> probe;
  std::shared_ptr<::gloo::Context> context;
  {
    absl::MutexLock lock(&entry->mu);
    --entry->users;
    if (!entry->closed.ok() && entry->users == 0) {
      entry->TakeContextLocked(probe, context);
    }
  }
  probe.reset();
}

void GlooCommunicators::Close(const std::shared_ptr<Entry>& entry,
                              const absl::Status& status) {
  std::shared_ptr<::gloo::Context> context;
  std::unique_ptr<::gloo::transport::UnboundBuffer> unused_probe;
  std::shared_ptr<::gloo::Context> unused;
  {
    absl::MutexLock lock(&entry->mu);
    if (!entry->closed.ok()) return;
    entry->closed = status;
    context = entry->context;
    if (entry->users == 0) entry->TakeContextLocked(unused_probe, unused);
  }
  unused_probe.reset();
  if (context != nullptr) Abandon(*context);
  // An operation in the middle of a transfer on a pair that just broke is
  // not told by Gloo: wake it.
  WakeRunning(entry.get());
}

void GlooCommunicators::RetireEpochsBefore(IslandId island, DeviceId device,
                                           uint64_t epoch) {
  std::vector<std::shared_ptr<Entry>> retired;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      const ContextKey& key = it->first;
      bool unused = false;
      if (key.island == island && key.me == device && key.epoch < epoch) {
        absl::MutexLock entry_lock(&it->second->mu);
        unused = it->second->users == 0;
      }
      if (unused) {
        retired.push_back(std::move(it->second));
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Destroying a context closes its sockets (softly) outside our locks.
  for (auto& entry : retired) {
    std::unique_ptr<::gloo::transport::UnboundBuffer> probe;
    std::shared_ptr<::gloo::Context> context;
    {
      absl::MutexLock lock(&entry->mu);
      entry->TakeContextLocked(probe, context);
    }
    probe.reset();
  }
}

void GlooCommunicators::CloseLaunchAfterPublishing(GlooLaunch launch,
                                                   DeviceId me,
                                                   absl::Status status) {
  // The peers that fail when the connections close look here for why.
  const absl::Status published =
      options_.store
          ->Set(GlooCancelKey(launch.island, launch.epoch, launch.seq),
                EncodeStatus(status))
          .AwaitFor(absl::Seconds(5));
  if (!published.ok()) {
    CW_LOG(WARNING) << "publishing the cancellation of launch " << launch.seq
                    << ": " << published;
  }
  const std::set<DeviceId> devices(launch.devices.begin(),
                                   launch.devices.end());
  std::vector<std::shared_ptr<Entry>> affected;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, entry] : entries_) {
      if (key.island != launch.island || key.epoch != launch.epoch ||
          key.me != me) {
        continue;
      }
      const bool within = std::all_of(
          key.members.begin(), key.members.end(),
          [&](DeviceId member) { return devices.count(member) > 0; });
      if (within) affected.push_back(entry);
    }
  }
  for (const auto& entry : affected) Close(entry, status);
}

// --- GlooCollectives ---

struct GlooCollectives::Group {
  std::vector<int64_t> members;  // Grid indices, in group order.
  std::vector<int> rank_of;      // Gloo rank of members[i].
  int64_t my_index = 0;          // The caller's position in `members`.
  std::vector<DeviceId> sorted;  // The devices by rank.
  std::vector<int64_t> member_of_rank;  // Grid index of each rank.

  int64_t size() const { return static_cast<int64_t>(members.size()); }
  int my_rank() const { return rank_of[my_index]; }
  int64_t IndexOf(int64_t grid_index) const {
    return std::find(members.begin(), members.end(), grid_index) -
           members.begin();
  }
};

GlooCollectives::GlooCollectives(GlooCommunicators& communicators,
                                 GlooLaunch launch, int64_t me,
                                 Options options, LocalGroups local)
    : communicators_(communicators),
      launch_(std::move(launch)),
      me_(me),
      options_(options),
      local_(std::move(local)) {
  CW_CHECK(me_ >= 0 && me_ < static_cast<int64_t>(launch_.devices.size()));
}

GlooCollectives::~GlooCollectives() = default;

absl::Status GlooCollectives::Cancelled() const {
  {
    absl::MutexLock lock(&mu_);
    if (!cancelled_.ok()) return cancelled_;
  }
  // A local peer's failure reaches this participant through the memory it
  // shares with it.
  if (local_.collectives != nullptr) return local_.collectives->Cancelled();
  return absl::OkStatus();
}

bool GlooCollectives::LocalGroup(const std::vector<int64_t>& members) const {
  if (local_.collectives == nullptr) return false;
  const int64_t grid = static_cast<int64_t>(launch_.devices.size());
  return std::all_of(members.begin(), members.end(), [&](int64_t member) {
    return member >= 0 && member < grid &&
           local_.devices.count(launch_.devices[member]) > 0;
  });
}

absl::Status GlooCollectives::CheckNotCancelled(const exec::CollectiveOp& op) {
  absl::MutexLock lock(&mu_);
  return CheckNotCancelledLocked(op);
}

absl::Status GlooCollectives::CheckNotCancelledLocked(
    const exec::CollectiveOp& op) {
  if (cancelled_.ok()) return absl::OkStatus();
  return absl::Status(cancelled_.code(),
                      absl::StrCat(exec::DescribeCollective(op),
                                   " was cancelled: ", cancelled_.message()));
}

void GlooCollectives::Cancel(absl::Status status) {
  if (status.ok()) status = absl::CancelledError("collectives cancelled");
  {
    absl::MutexLock lock(&mu_);
    if (!cancelled_.ok()) return;
    cancelled_ = status;
    // The rendezvous store lives while `building_` points at it.
    if (building_ != nullptr) building_->Abort(status);
  }
  // The local peers waiting in memory for this participant fail at once.
  if (local_.collectives != nullptr) local_.collectives->Cancel(status);
  GlooCommunicators* communicators = &communicators_;
  communicators_.aborts_->Execute(
      [communicators, launch = launch_, me = launch_.devices[me_], status] {
        communicators->CloseLaunchAfterPublishing(launch, me, status);
      });
}

absl::StatusOr<GlooCollectives::Group> GlooCollectives::MakeGroup(
    const exec::CollectiveOp& op, std::vector<int64_t> members) const {
  const int64_t grid = static_cast<int64_t>(launch_.devices.size());
  if (op.device_index() != me_) {
    return absl::InvalidArgumentError(absl::StrCat(
        exec::DescribeCollective(op), ": called as device ", op.device_index(),
        " of the grid, but this participant is device ", me_));
  }
  Group group;
  std::vector<std::pair<DeviceId, int64_t>> by_device;
  for (int64_t member : members) {
    if (member < 0 || member >= grid) {
      return absl::InvalidArgumentError(absl::StrCat(
          exec::DescribeCollective(op), ": the group names device ", member,
          " of the grid, but the launch has ", grid, " devices"));
    }
    by_device.emplace_back(launch_.devices[member], member);
  }
  std::sort(by_device.begin(), by_device.end());
  for (size_t r = 0; r < by_device.size(); ++r) {
    if (r > 0 && by_device[r].first == by_device[r - 1].first) {
      return absl::InvalidArgumentError(absl::StrCat(
          exec::DescribeCollective(op), ": device ",
          by_device[r].first.value(), " appears twice in the launch"));
    }
    group.sorted.push_back(by_device[r].first);
    group.member_of_rank.push_back(by_device[r].second);
  }
  for (int64_t member : members) {
    const auto rank = std::find(group.member_of_rank.begin(),
                                group.member_of_rank.end(), member) -
                      group.member_of_rank.begin();
    group.rank_of.push_back(static_cast<int>(rank));
  }
  group.members = std::move(members);
  group.my_index = group.IndexOf(me_);
  if (group.my_index == group.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        exec::DescribeCollective(op), ": the caller is not in its own group"));
  }
  return group;
}

absl::StatusOr<std::shared_ptr<GlooCommunicators::Entry>>
GlooCollectives::Acquire(const exec::CollectiveOp& op, const Group& group) {
  CW_RETURN_IF_ERROR(CheckNotCancelled(op));
  const GlooCommunicators::ContextKey key{launch_.island, launch_.epoch,
                                          group.sorted, launch_.devices[me_]};
  CW_ASSIGN_OR_RETURN(std::shared_ptr<GlooCommunicators::Entry> entry,
                      communicators_.Lookup(key));
  if (entry != nullptr) return entry;

  GlooStore store(communicators_.store(),
                  absl::StrCat(GlooEpochPrefix(launch_.island, launch_.epoch),
                               "grp/", GroupName(group.sorted), "/"),
                  absl::Now() + options_.timeout);
  // A peer that gives up on the launch says so here: stop waiting for it.
  store.AbortWhenSet(
      GlooCancelKey(launch_.island, launch_.epoch, launch_.seq));
  {
    absl::MutexLock lock(&mu_);
    if (!cancelled_.ok()) return CheckNotCancelledLocked(op);
    building_ = &store;
  }
  absl::StatusOr<std::shared_ptr<GlooCommunicators::Entry>> built =
      communicators_.Build(key, group.my_rank(), store, options_.timeout);
  {
    absl::MutexLock lock(&mu_);
    building_ = nullptr;
  }
  if (!built.ok()) {
    CW_RETURN_IF_ERROR(CheckNotCancelled(op));
    const absl::Status& status = built.status();
    const std::string missing = store.missing_key();
    if (absl::IsDeadlineExceeded(status) && !missing.empty()) {
      // The mesh's keys are "mesh/<rank>" (gloo_mesh.h).
      int rank = -1;
      const std::string digits =
          absl::StartsWith(missing, "mesh/") ? missing.substr(5) : missing;
      if (absl::SimpleAtoi(digits, &rank) && rank >= 0 &&
          rank < group.size()) {
        return absl::DeadlineExceededError(absl::StrCat(
            exec::DescribeCollective(op), ": device ",
            group.sorted[rank].value(), " (grid index ",
            group.member_of_rank[rank], ") did not join the group of devices {",
            DeviceList(group.sorted), "} within ",
            absl::FormatDuration(options_.timeout), " (", op.key.ToString(),
            ")"));
      }
    }
    if (absl::IsCancelled(status) || absl::IsDeadlineExceeded(status)) {
      return absl::Status(status.code(),
                          absl::StrCat(exec::DescribeCollective(op), ": ",
                                       status.message()));
    }
    // A peer's published status (it aborted the rendezvous) keeps its code.
    return absl::Status(status.code(),
                        absl::StrCat(exec::DescribeCollective(op),
                                     " was cancelled: ", status.message()));
  }
  // A cancellation that came while the context was connecting may have
  // missed it: close it here.
  if (absl::Status cancelled = CheckNotCancelled(op); !cancelled.ok()) {
    communicators_.Close(*built, cancelled);
    communicators_.Release(*built);
    return cancelled;
  }
  return built;
}

absl::Status GlooCollectives::PublishedCancel() {
  absl::StatusOr<std::string> value =
      communicators_.store()
          .Get(GlooCancelKey(launch_.island, launch_.epoch, launch_.seq),
               absl::Now())
          .AwaitFor(std::min(options_.timeout, absl::Seconds(5)));
  if (!value.ok()) return absl::OkStatus();
  return DecodeStatus(*value);
}

absl::Status GlooCollectives::FailureOf(const exec::CollectiveOp& op,
                                        const Group& group,
                                        const std::string& what) {
  CW_RETURN_IF_ERROR(CheckNotCancelled(op));
  const std::string description = exec::DescribeCollective(op);
  if (absl::StrContains(what, "Timed out")) {
    return absl::DeadlineExceededError(absl::StrCat(
        description, ": the group of devices {", DeviceList(group.sorted),
        "} did not complete it within ",
        absl::FormatDuration(options_.timeout), " (", op.key.ToString(),
        "; ", what, ")"));
  }
  if (absl::Status published = PublishedCancel(); !published.ok()) {
    return absl::Status(published.code(),
                        absl::StrCat(description,
                                     " was cancelled: ", published.message()));
  }
  return absl::DataLossError(absl::StrCat(
      description, ": lost the connection to a peer among devices {",
      DeviceList(group.sorted), "} (", what, ")"));
}

template <typename Body>
absl::Status GlooCollectives::RunOnContext(const exec::CollectiveOp& op,
                                           const Group& group, Body&& body) {
  CW_ASSIGN_OR_RETURN(std::shared_ptr<GlooCommunicators::Entry> entry,
                      Acquire(op, group));
  std::shared_ptr<::gloo::Context> context;
  ::gloo::transport::UnboundBuffer* probe;
  {
    absl::MutexLock lock(&entry->mu);
    context = entry->context;
    probe = entry->probe.get();
  }
  absl::Status status;
  {
    GlooCommunicators::Transfers transfers(communicators_, *entry,
                                           std::move(context), probe,
                                           absl::Now() + options_.timeout);
    try {
      body(transfers);
    } catch (const ::gloo::IoException& e) {
      status = FailureOf(op, group, e.what());
    } catch (const std::exception& e) {
      status = CheckNotCancelled(op);
      if (status.ok()) {
        status = absl::InternalError(absl::StrCat(
            exec::DescribeCollective(op), ": Gloo failed: ", e.what()));
      }
    }
    if (!status.ok()) communicators_.Close(entry, status);
  }
  communicators_.Release(entry);
  return status;
}

// A ring all-reduce of `count` elements of `width` bytes at `data`, in
// place, over the ranks of `transfers`' context: a reduce-scatter (n - 1
// steps; after it, rank r holds the reduced chunk (r + 1) mod n), then an
// all-gather (n - 1 steps). Chunks are cut into segments of at most
// kSegmentBytes, each sent as soon as it is ready, so the transfer of one
// segment overlaps the reduction of the next; at most kWindow received
// segments wait to be reduced. Every rank cuts the same chunks and
// segments, and receives in the order its left neighbour sends (Gloo
// matches the receives of one pair and slot in order).
class GlooCollectives::Ring {
 public:
  static constexpr int64_t kSegmentBytes = 1 << 20;
  static constexpr int64_t kWindow = 4;

  Ring(GlooCommunicators::Transfers& transfers, uint64_t slot,
       exec::ElementwiseCombine combine, int64_t width, std::byte* data,
       int64_t count)
      : transfers_(transfers),
        slot_(slot),
        combine_(combine),
        width_(width),
        data_(data),
        n_(transfers.context->size),
        rank_(transfers.context->rank),
        left_((rank_ + n_ - 1) % n_),
        right_((rank_ + 1) % n_),
        segment_elements_(std::max<int64_t>(1, kSegmentBytes / width)) {
    for (int64_t c = 0; c <= n_; ++c) chunk_begin_.push_back(c * count / n_);
  }

  void Run() {
    const int64_t total = chunk_begin_[n_] * width_;
    if (total == 0) return;
    data_buffer_ = transfers_.Buffer(data_, static_cast<size_t>(total));
    ReduceScatter();
    AllGather();
  }

 private:
  struct Segment {
    int64_t begin = 0;  // First element.
    int64_t count = 0;  // Elements.
  };

  std::vector<Segment> SegmentsOf(int64_t chunk) const {
    chunk = ((chunk % n_) + n_) % n_;
    std::vector<Segment> segments;
    for (int64_t e = chunk_begin_[chunk]; e < chunk_begin_[chunk + 1];
         e += segment_elements_) {
      segments.push_back(
          {e, std::min(segment_elements_, chunk_begin_[chunk + 1] - e)});
    }
    return segments;
  }

  void Send(const Segment& segment, uint64_t slot) {
    data_buffer_->send(right_, slot,
                       static_cast<size_t>(segment.begin * width_),
                       static_cast<size_t>(segment.count * width_));
    ++sends_;
  }

  void WaitSends() {
    for (; sends_ > 0; --sends_) transfers_.WaitSend(data_buffer_);
  }

  // Step s receives chunk (r - s - 1) from the left into a window slot,
  // reduces it into its place and (but for the last step) sends it on.
  void ReduceScatter() {
    std::vector<Segment> incoming;  // Every segment received, in order.
    std::vector<int64_t> step_of;
    for (int64_t s = 0; s + 1 < n_; ++s) {
      for (const Segment& segment : SegmentsOf(rank_ - s - 1)) {
        incoming.push_back(segment);
        step_of.push_back(s);
      }
    }
    const int64_t slot_bytes = segment_elements_ * width_;
    const int64_t window = std::min<int64_t>(kWindow, incoming.size());
    const size_t scratch_bytes =
        static_cast<size_t>(std::max<int64_t>(1, window) * slot_bytes);
    std::byte* scratch = transfers_.Allocate(scratch_bytes);
    ::gloo::transport::UnboundBuffer* scratch_buffer =
        transfers_.Buffer(scratch, scratch_bytes);
    auto post = [&](size_t q) {
      scratch_buffer->recv(left_, slot_,
                           static_cast<size_t>((q % window) * slot_bytes),
                           static_cast<size_t>(incoming[q].count * width_));
    };
    for (const Segment& segment : SegmentsOf(rank_)) Send(segment, slot_);
    for (size_t q = 0; q < incoming.size() && q < static_cast<size_t>(window);
         ++q) {
      post(q);
    }
    for (size_t q = 0; q < incoming.size(); ++q) {
      transfers_.WaitRecv(scratch_buffer);
      const Segment& segment = incoming[q];
      std::byte* mine = data_ + segment.begin * width_;
      combine_(mine, mine, scratch + (q % window) * slot_bytes,
               segment.count);
      if (step_of[q] + 2 < n_) Send(segment, slot_);
      if (q + window < incoming.size()) post(q + window);
    }
    // The all-gather overwrites what these sends read.
    WaitSends();
  }

  // Step s receives the reduced chunk (r - s) from the left into its place
  // and (but for the last step) sends it on.
  void AllGather() {
    const uint64_t slot = slot_ + 1;
    std::vector<Segment> incoming;
    std::vector<int64_t> step_of;
    for (int64_t s = 0; s + 1 < n_; ++s) {
      for (const Segment& segment : SegmentsOf(rank_ - s)) {
        incoming.push_back(segment);
        step_of.push_back(s);
        data_buffer_->recv(left_, slot,
                           static_cast<size_t>(segment.begin * width_),
                           static_cast<size_t>(segment.count * width_));
      }
    }
    for (const Segment& segment : SegmentsOf(rank_ + 1)) Send(segment, slot);
    for (size_t q = 0; q < incoming.size(); ++q) {
      transfers_.WaitRecv(data_buffer_);
      if (step_of[q] + 2 < n_) Send(incoming[q], slot);
    }
    WaitSends();
  }

  GlooCommunicators::Transfers& transfers_;
  const uint64_t slot_;
  const exec::ElementwiseCombine combine_;
  const int64_t width_;
  std::byte* const data_;
  const int n_;
  const int rank_;
  const int left_;
  const int right_;
  const int64_t segment_elements_;
  std::vector<int64_t> chunk_begin_;  // n + 1 element offsets.
  ::gloo::transport::UnboundBuffer* data_buffer_ = nullptr;
  int64_t sends_ = 0;
};

absl::Status GlooCollectives::SendAndReceive(
    const exec::CollectiveOp& op, const Group& group, uint32_t tag,
    const std::vector<std::pair<int64_t, const Literal*>>& sends,
    const std::vector<std::pair<int64_t, Literal*>>& receives) {
  return RunOnContext(
      op, group, [&](GlooCommunicators::Transfers& transfers) {
        const uint64_t slot = SlotOf(tag);
        std::vector<::gloo::transport::UnboundBuffer*> in;
        std::vector<::gloo::transport::UnboundBuffer*> out;
        for (const auto& [member, value] : receives) {
          if (value->size_bytes() == 0) continue;
          in.push_back(transfers.Buffer(
              value->mutable_untyped_data(),
              static_cast<size_t>(value->size_bytes())));
          in.back()->recv(group.rank_of[member], slot);
        }
        for (const auto& [member, value] : sends) {
          if (value->size_bytes() == 0) continue;
          out.push_back(transfers.Buffer(
              SendPointer(*value), static_cast<size_t>(value->size_bytes())));
          out.back()->send(group.rank_of[member], slot);
        }
        for (auto* buffer : in) transfers.WaitRecv(buffer);
        for (auto* buffer : out) transfers.WaitSend(buffer);
      });
}

absl::StatusOr<std::vector<Literal>> GlooCollectives::Gather(
    const exec::CollectiveOp& op, const Group& group, const Literal& operand,
    int64_t part) {
  const int64_t n = group.size();
  std::vector<Literal> parts;
  parts.reserve(n);
  std::vector<std::pair<int64_t, const Literal*>> sends;
  std::vector<std::pair<int64_t, Literal*>> receives;
  for (int64_t i = 0; i < n; ++i) {
    parts.push_back(i == group.my_index
                        ? operand
                        : Literal::Uninitialized(operand.shape()));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (i == group.my_index) continue;
    sends.emplace_back(i, &operand);
    receives.emplace_back(i, &parts[i]);
  }
  CW_RETURN_IF_ERROR(SendAndReceive(
      op, group, TagOf(op, part, operand.size_bytes()), sends, receives));
  return parts;
}

absl::StatusOr<Literal> GlooCollectives::ReduceOne(
    const exec::CollectiveOp& op, const Group& group, Literal operand,
    int64_t part) {
  const hlo::Shape& shape = operand.shape();
  if (group.size() == 1 || !shape.IsArray()) {
    const Literal* inputs[] = {&operand};
    return exec::ReduceInputs(op, inputs);
  }
  const PrimitiveType type = shape.type();
  const exec::ElementwiseCombine combine = exec::PlainCombineOf(op, type);
  if (combine == nullptr || type == PrimitiveType::kBF16 ||
      type == PrimitiveType::kF16) {
    // Exact: every member reduces every operand in group order.
    CW_ASSIGN_OR_RETURN(std::vector<Literal> parts,
                        Gather(op, group, operand, part));
    std::vector<const Literal*> inputs;
    for (const Literal& value : parts) inputs.push_back(&value);
    return exec::ReduceInputs(op, inputs);
  }
  // The ring reduces in place: in the operand's own storage when the
  // caller gave it up (the evaluator does at its last use), else in a copy.
  const uint32_t tag = TagOf(op, part, operand.size_bytes());
  const int64_t count = shape.ElementCount();
  Literal out = std::move(operand);  // `shape` refers to the moved-from.
  std::byte* data = static_cast<std::byte*>(out.mutable_untyped_data());
  CW_RETURN_IF_ERROR(RunOnContext(
      op, group, [&](GlooCommunicators::Transfers& transfers) {
        Ring(transfers, SlotOf(tag), combine, hlo::ByteWidth(type), data,
             count)
            .Run();
      }));
  return out;
}

namespace {

// A tuple all-reduce's operands laid end to end in one array, when the ring
// can reduce them together: several arrays of one element type that the
// ring reduces (a plain reducer, not bf16/f16). Elementwise, a packed
// element meets the same values in the same ring as it would alone but for
// which chunk it falls in: every member still gets identical bits, and for
// two members (each element reduced once, a ⊕ b) the very bits of one ring
// per operand.
std::optional<Literal> Packed(const exec::CollectiveOp& op,
                              const std::vector<Literal>& operands,
                              int64_t group_size) {
  if (operands.size() < 2 || group_size < 2) return std::nullopt;
  const PrimitiveType type = operands[0].shape().IsArray()
                                 ? operands[0].shape().type()
                                 : PrimitiveType::kTuple;
  if (type == PrimitiveType::kTuple || type == PrimitiveType::kBF16 ||
      type == PrimitiveType::kF16 || exec::PlainCombineOf(op, type) == nullptr) {
    return std::nullopt;
  }
  int64_t count = 0;
  for (const Literal& operand : operands) {
    if (!operand.shape().IsArray() || operand.shape().type() != type) {
      return std::nullopt;
    }
    count += operand.shape().ElementCount();
  }
  Literal packed = Literal::Uninitialized(hlo::Shape(type, {count}));
  std::byte* at = static_cast<std::byte*>(packed.mutable_untyped_data());
  for (const Literal& operand : operands) {
    std::memcpy(at, operand.untyped_data(),
                static_cast<size_t>(operand.size_bytes()));
    at += operand.size_bytes();
  }
  return packed;
}

// `packed`'s elements back in the shapes of `operands`, as the
// all-reduce's tuple.
Literal Unpacked(const Literal& packed, const std::vector<Literal>& operands) {
  const std::byte* at = static_cast<const std::byte*>(packed.untyped_data());
  std::vector<Literal> elements;
  elements.reserve(operands.size());
  for (const Literal& operand : operands) {
    elements.push_back(Literal::Uninitialized(operand.shape()));
    std::memcpy(elements.back().mutable_untyped_data(), at,
                static_cast<size_t>(operand.size_bytes()));
    at += operand.size_bytes();
  }
  return Literal::MakeTuple(std::move(elements));
}

}  // namespace

absl::StatusOr<Literal> GlooCollectives::AllReduce(
    const exec::CollectiveOp& op, std::vector<Literal> operands) {
  auto run = [&]() -> absl::StatusOr<Literal> {
    CW_ASSIGN_OR_RETURN(std::vector<int64_t> members, exec::GroupOf(op));
    if (LocalGroup(members)) {
      return local_.collectives->AllReduce(op, std::move(operands));
    }
    CW_ASSIGN_OR_RETURN(Group group, MakeGroup(op, std::move(members)));
    if (std::optional<Literal> packed = Packed(op, operands, group.size())) {
      // One ring for the whole tuple (a step's gradients: tens of small
      // arrays), not one per operand with its own messages.
      CW_ASSIGN_OR_RETURN(Literal value,
                          ReduceOne(op, group, *std::move(packed), 0));
      return Unpacked(value, operands);
    }
    std::vector<Literal> reduced;
    for (size_t k = 0; k < operands.size(); ++k) {
      CW_ASSIGN_OR_RETURN(Literal value,
                          ReduceOne(op, group, std::move(operands[k]), k));
      reduced.push_back(std::move(value));
    }
    return Pack(std::move(reduced));
  };
  absl::StatusOr<Literal> result = run();
  if (!result.ok()) Cancel(result.status());
  return result;
}

absl::StatusOr<Literal> GlooCollectives::AllGather(
    const exec::CollectiveOp& op, std::vector<Literal> operands) {
  auto run = [&]() -> absl::StatusOr<Literal> {
    CW_ASSIGN_OR_RETURN(int64_t dimension, exec::CollectiveDimension(op));
    CW_ASSIGN_OR_RETURN(std::vector<int64_t> members, exec::GroupOf(op));
    if (LocalGroup(members)) {
      return local_.collectives->AllGather(op, std::move(operands));
    }
    CW_ASSIGN_OR_RETURN(Group group, MakeGroup(op, std::move(members)));
    std::vector<Literal> gathered;
    for (size_t k = 0; k < operands.size(); ++k) {
      std::vector<Literal> parts;
      if (group.size() == 1) {
        parts.push_back(operands[k]);
      } else {
        CW_ASSIGN_OR_RETURN(parts, Gather(op, group, operands[k], k));
      }
      std::vector<const Literal*> inputs;
      for (const Literal& value : parts) inputs.push_back(&value);
      CW_ASSIGN_OR_RETURN(Literal value,
                          exec::ConcatenateAlong(inputs, dimension));
      gathered.push_back(std::move(value));
    }
    return Pack(std::move(gathered));
  };
  absl::StatusOr<Literal> result = run();
  if (!result.ok()) Cancel(result.status());
  return result;
}

absl::StatusOr<Literal> GlooCollectives::ReduceScatter(
    const exec::CollectiveOp& op, std::vector<Literal> operands) {
  auto run = [&]() -> absl::StatusOr<Literal> {
    CW_ASSIGN_OR_RETURN(int64_t dimension, exec::CollectiveDimension(op));
    CW_ASSIGN_OR_RETURN(std::vector<int64_t> members, exec::GroupOf(op));
    if (LocalGroup(members)) {
      return local_.collectives->ReduceScatter(op, std::move(operands));
    }
    CW_ASSIGN_OR_RETURN(Group group, MakeGroup(op, std::move(members)));
    std::vector<Literal> blocks;
    for (size_t k = 0; k < operands.size(); ++k) {
      CW_ASSIGN_OR_RETURN(Literal reduced,
                          ReduceOne(op, group, std::move(operands[k]), k));
      CW_ASSIGN_OR_RETURN(Literal block,
                          exec::BlockAlong(reduced, dimension, group.size(),
                                           group.my_index));
      blocks.push_back(std::move(block));
    }
    return Pack(std::move(blocks));
  };
  absl::StatusOr<Literal> result = run();
  if (!result.ok()) Cancel(result.status());
  return result;
}

absl::StatusOr<Literal> GlooCollectives::AllToAll(
    const exec::CollectiveOp& op, std::vector<Literal> operands) {
  auto run = [&]() -> absl::StatusOr<Literal> {
    CW_ASSIGN_OR_RETURN(std::vector<int64_t> members, exec::GroupOf(op));
    if (LocalGroup(members)) {
      return local_.collectives->AllToAll(op, std::move(operands));
    }
    CW_ASSIGN_OR_RETURN(Group group, MakeGroup(op, std::move(members)));
    const int64_t n = group.size();
    CW_RETURN_IF_ERROR(exec::CheckAllToAllOperands(op, operands.size(),
                                                   static_cast<size_t>(n)));
    const bool array_form = !op.instruction->dimensions.empty();
    int64_t dimension = 0;
    std::vector<Literal> outgoing;  // Member j's, in group order.
    if (array_form) {
      CW_ASSIGN_OR_RETURN(dimension, exec::CollectiveDimension(op));
      for (int64_t j = 0; j < n; ++j) {
        CW_ASSIGN_OR_RETURN(Literal block,
                            exec::BlockAlong(operands[0], dimension, n, j));
        outgoing.push_back(std::move(block));
      }
    } else {
      outgoing = std::move(operands);
    }
    // Every member sends me a value shaped like the one I keep.
    const int64_t me = group.my_index;
    int64_t total_bytes = 0;
    for (const Literal& value : outgoing) total_bytes += value.size_bytes();
    std::vector<Literal> incoming;
    std::vector<std::pair<int64_t, const Literal*>> sends;
    std::vector<std::pair<int64_t, Literal*>> receives;
    incoming.reserve(n);
    for (int64_t i = 0; i < n; ++i) {
      incoming.push_back(i == me ? outgoing[me]
                                 : Literal::Uninitialized(
                                       outgoing[me].shape()));
    }
    for (int64_t i = 0; i < n; ++i) {
      if (i == me) continue;
      sends.emplace_back(i, &outgoing[i]);
      receives.emplace_back(i, &incoming[i]);
    }
    if (n > 1) {
      CW_RETURN_IF_ERROR(SendAndReceive(op, group, TagOf(op, 0, total_bytes),
                                        sends, receives));
    }
    if (!array_form) return Literal::MakeTuple(std::move(incoming));
    std::vector<const Literal*> parts;
    for (const Literal& value : incoming) parts.push_back(&value);
    return exec::ConcatenateAlong(parts, dimension);
  };
  absl::StatusOr<Literal> result = run();
  if (!result.ok()) Cancel(result.status());
  return result;
}

absl::StatusOr<Literal> GlooCollectives::CollectivePermute(
    const exec::CollectiveOp& op, Literal operand) {
  auto run = [&]() -> absl::StatusOr<Literal> {
    if (op.instruction == nullptr) {
      return absl::InvalidArgumentError("collective without an instruction");
    }
    std::vector<int64_t> domain = exec::PermuteDomainOf(op);
    if (LocalGroup(domain)) {
      return local_.collectives->CollectivePermute(op, std::move(operand));
    }
    CW_ASSIGN_OR_RETURN(exec::PermutePeers peers, exec::PermutePeersOf(op));
    CW_ASSIGN_OR_RETURN(Group group, MakeGroup(op, std::move(domain)));
    Literal result;
    std::vector<std::pair<int64_t, const Literal*>> sends;
    std::vector<std::pair<int64_t, Literal*>> receives;
    if (peers.source < 0) {
      result = Literal(operand.shape());  // Zeros.
    } else if (peers.source == me_) {
      result = operand;
    } else {
      result = Literal::Uninitialized(operand.shape());
      receives.emplace_back(group.IndexOf(peers.source), &result);
    }
    for (int64_t target : peers.targets) {
      if (target != me_) sends.emplace_back(group.IndexOf(target), &operand);
    }
    if (group.size() > 1) {
      CW_RETURN_IF_ERROR(SendAndReceive(
          op, group, TagOf(op, 0, operand.size_bytes()), sends, receives));
    }
    return result;
  };
  absl::StatusOr<Literal> result = run();
  if (!result.ok()) Cancel(result.status());
  return result;
}

}  // namespace causeway::transport
