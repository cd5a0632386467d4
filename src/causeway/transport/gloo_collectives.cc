#include "causeway/transport/gloo_collectives.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/transport/gloo_store.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/context.h"
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

// The same bytes as a new (unshared) literal of `shape`.
Literal CopyOf(const hlo::Shape& shape, const std::byte* bytes) {
  Literal value = Literal::Uninitialized(shape);
  if (value.size_bytes() > 0) {
    std::memcpy(value.mutable_untyped_data(), bytes,
                static_cast<size_t>(value.size_bytes()));
  }
  return value;
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

std::string GlooCancelKey(IslandId island, uint64_t epoch, uint64_t seq) {
  return absl::StrCat(GlooEpochPrefix(island, epoch), "seq/", seq, "/cancel");
}

// --- GlooCommunicators ---

GlooCommunicators::GlooCommunicators(Options options)
    : options_(std::move(options)),
      aborts_(std::make_unique<ThreadPool>("gloo-abort", 1)) {}

absl::StatusOr<std::unique_ptr<GlooCommunicators>> GlooCommunicators::Create(
    Options options) {
  if (options.store == nullptr) {
    return absl::InvalidArgumentError(
        "GlooCommunicators needs a key-value store for its rendezvous");
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
    entries.swap(entries_);
  }
  for (auto& [key, entry] : entries) {
    absl::MutexLock lock(&entry->mu);
    CW_CHECK(entry->users == 0)
        << "GlooCommunicators destroyed while a collective runs";
    entry->context.reset();
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
  auto context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
  context->setTimeout(Millis(timeout));
  absl::Status status;
  try {
    context->connectFullMesh(store, device_);
  } catch (const std::exception& e) {
    status = store.failure();
    if (status.ok()) {
      status = absl::UnavailableError(
          absl::StrCat("connecting the Gloo context: ", e.what()));
    }
  }
  auto entry = std::make_shared<Entry>();
  {
    absl::MutexLock entry_lock(&entry->mu);
    if (status.ok()) {
      entry->context = std::move(context);
      entry->users = 1;
    } else {
      entry->closed = status;
    }
  }
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

void GlooCommunicators::Release(const std::shared_ptr<Entry>& entry) {
  std::shared_ptr<::gloo::Context> closed;
  {
    absl::MutexLock lock(&entry->mu);
    --entry->users;
    if (!entry->closed.ok() && entry->users == 0) {
      closed = std::move(entry->context);
    }
  }
}

void GlooCommunicators::Close(const std::shared_ptr<Entry>& entry,
                              const absl::Status& status) {
  std::shared_ptr<::gloo::Context> context;
  {
    absl::MutexLock lock(&entry->mu);
    if (!entry->closed.ok()) return;
    entry->closed = status;
    context = entry->context;
    if (entry->users == 0) entry->context.reset();
  }
  if (context != nullptr) Abandon(*context);
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
  // Destroying a context closes its sockets (softly) outside our lock.
  for (auto& entry : retired) {
    absl::MutexLock lock(&entry->mu);
    entry->context.reset();
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
                                 Options options)
    : communicators_(communicators),
      launch_(std::move(launch)),
      me_(me),
      options_(options) {
  CW_CHECK(me_ >= 0 && me_ < static_cast<int64_t>(launch_.devices.size()));
}

GlooCollectives::~GlooCollectives() = default;

absl::Status GlooCollectives::Cancelled(const exec::CollectiveOp& op) {
  absl::MutexLock lock(&mu_);
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
  CW_RETURN_IF_ERROR(Cancelled(op));
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
    if (!cancelled_.ok()) return Cancelled(op);
    building_ = &store;
  }
  absl::StatusOr<std::shared_ptr<GlooCommunicators::Entry>> built =
      communicators_.Build(key, group.my_rank(), store, options_.timeout);
  {
    absl::MutexLock lock(&mu_);
    building_ = nullptr;
  }
  if (!built.ok()) {
    CW_RETURN_IF_ERROR(Cancelled(op));
    const absl::Status& status = built.status();
    const std::string missing = store.missing_key();
    if (absl::IsDeadlineExceeded(status) && !missing.empty()) {
      // Gloo's keys are "<rank>" and "rank_<rank>".
      int rank = -1;
      const std::string digits =
          absl::StartsWith(missing, "rank_") ? missing.substr(5) : missing;
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
  if (absl::Status cancelled = Cancelled(op); !cancelled.ok()) {
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
  CW_RETURN_IF_ERROR(Cancelled(op));
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
  {
    absl::MutexLock lock(&entry->mu);
    context = entry->context;
  }
  absl::Status status;
  try {
    body(context);
  } catch (const ::gloo::IoException& e) {
    status = FailureOf(op, group, e.what());
  } catch (const std::exception& e) {
    status = Cancelled(op);
    if (status.ok()) {
      status = absl::InternalError(absl::StrCat(
          exec::DescribeCollective(op), ": Gloo failed: ", e.what()));
    }
  }
  if (!status.ok()) communicators_.Close(entry, status);
  communicators_.Release(entry);
  return status;
}

absl::StatusOr<std::vector<Literal>> GlooCollectives::Gather(
    const exec::CollectiveOp& op, const Group& group, const Literal& operand,
    int64_t part) {
  const int64_t bytes = operand.size_bytes();
  const int64_t n = group.size();
  std::unique_ptr<std::byte[]> gathered(
      new std::byte[static_cast<size_t>(std::max<int64_t>(bytes * n, 1))]);
  CW_RETURN_IF_ERROR(RunOnContext(
      op, group, [&](const std::shared_ptr<::gloo::Context>& context) {
        if (bytes == 0) return;
        ::gloo::AllgatherOptions options(context);
        options.setInput(static_cast<uint8_t*>(SendPointer(operand)),
                         static_cast<size_t>(bytes));
        options.setOutput(reinterpret_cast<uint8_t*>(gathered.get()),
                          static_cast<size_t>(bytes * n));
        options.setTag(TagOf(op, part, bytes));
        options.setTimeout(Millis(options_.timeout));
        ::gloo::allgather(options);
      }));
  std::vector<Literal> parts;
  parts.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    parts.push_back(
        CopyOf(operand.shape(), gathered.get() + group.rank_of[i] * bytes));
  }
  return parts;
}

absl::StatusOr<Literal> GlooCollectives::ReduceOne(
    const exec::CollectiveOp& op, const Group& group, const Literal& operand,
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
  Literal out = Literal::Uninitialized(shape);
  const int64_t n = shape.ElementCount();
  CW_RETURN_IF_ERROR(RunOnContext(
      op, group, [&](const std::shared_ptr<::gloo::Context>& context) {
        if (n == 0) return;
        ::gloo::AllreduceOptions options(context);
        hlo::VisitType(type, [&](auto tag) {
          using T = decltype(tag);
          options.setInput(static_cast<T*>(SendPointer(operand)),
                           static_cast<size_t>(n));
          options.setOutput(static_cast<T*>(out.mutable_untyped_data()),
                            static_cast<size_t>(n));
        });
        options.setAlgorithm(::gloo::AllreduceOptions::Algorithm::RING);
        options.setReduceFunction(
            [combine](void* dst, const void* a, const void* b, size_t count) {
              combine(dst, a, b, static_cast<int64_t>(count));
            });
        options.setTag(TagOf(op, part, operand.size_bytes()));
        options.setTimeout(Millis(options_.timeout));
        ::gloo::allreduce(options);
      }));
  return out;
}

absl::StatusOr<Literal> GlooCollectives::AllReduce(
    const exec::CollectiveOp& op, std::vector<Literal> operands) {
  auto run = [&]() -> absl::StatusOr<Literal> {
    CW_ASSIGN_OR_RETURN(std::vector<int64_t> members, exec::GroupOf(op));
    CW_ASSIGN_OR_RETURN(Group group, MakeGroup(op, std::move(members)));
    std::vector<Literal> reduced;
    for (size_t k = 0; k < operands.size(); ++k) {
      CW_ASSIGN_OR_RETURN(Literal value,
                          ReduceOne(op, group, operands[k], k));
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
    CW_ASSIGN_OR_RETURN(Group group, MakeGroup(op, std::move(members)));
    std::vector<Literal> blocks;
    for (size_t k = 0; k < operands.size(); ++k) {
      CW_ASSIGN_OR_RETURN(Literal reduced,
                          ReduceOne(op, group, operands[k], k));
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

absl::Status GlooCollectives::SendAndReceive(
    const exec::CollectiveOp& op, const Group& group, uint32_t tag,
    const std::vector<std::pair<int64_t, const Literal*>>& sends,
    const std::vector<std::pair<int64_t, Literal*>>& receives) {
  return RunOnContext(
      op, group, [&](const std::shared_ptr<::gloo::Context>& context) {
        const uint64_t slot = SlotOf(tag);
        const std::chrono::milliseconds timeout = Millis(options_.timeout);
        std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> in;
        std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> out;
        for (const auto& [member, value] : receives) {
          if (value->size_bytes() == 0) continue;
          in.push_back(context->createUnboundBuffer(
              value->mutable_untyped_data(),
              static_cast<size_t>(value->size_bytes())));
          in.back()->recv(group.rank_of[member], slot);
        }
        for (const auto& [member, value] : sends) {
          if (value->size_bytes() == 0) continue;
          out.push_back(context->createUnboundBuffer(
              SendPointer(*value), static_cast<size_t>(value->size_bytes())));
          out.back()->send(group.rank_of[member], slot);
        }
        for (auto& buffer : in) {
          if (!buffer->waitRecv(timeout)) {
            throw ::gloo::IoException("a receive was aborted");
          }
        }
        for (auto& buffer : out) {
          if (!buffer->waitSend(timeout)) {
            throw ::gloo::IoException("a send was aborted");
          }
        }
      });
}

absl::StatusOr<Literal> GlooCollectives::AllToAll(
    const exec::CollectiveOp& op, std::vector<Literal> operands) {
  auto run = [&]() -> absl::StatusOr<Literal> {
    CW_ASSIGN_OR_RETURN(std::vector<int64_t> members, exec::GroupOf(op));
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
    CW_ASSIGN_OR_RETURN(exec::PermutePeers peers, exec::PermutePeersOf(op));
    CW_ASSIGN_OR_RETURN(Group group,
                        MakeGroup(op, exec::PermuteDomainOf(op)));
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
