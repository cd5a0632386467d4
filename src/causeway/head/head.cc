#include "causeway/head/head.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/exec/evaluator.h"
#include "causeway/head/island_scheduler.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/printer.h"
#include "causeway/hlo/sharding_util.h"
#include "causeway/hlo/verifier.h"

namespace causeway::head {

using trace::HostEvent;
using trace::LaunchEvent;
using trace::NullEventSink;
using transport::ControlChannel;
using transport::DeviceBuffer;
using transport::DeviceStatus;
using transport::LaunchInput;
using transport::LaunchOp;
using transport::LaunchOutput;
using transport::LoadProgramRequest;
using transport::OpDone;
using transport::OpStatus;
using transport::PieceOrigin;
using transport::ProgramId;
using transport::PutBufferRequest;
using transport::ReceiveSpec;
using transport::SendSpec;
using transport::WorkerStatus;

namespace {

hlo::Sharding Replicated() { return hlo::Sharding(); }

std::string ShardingText(const hlo::Sharding& sharding) {
  return hlo::PrintSharding(sharding);
}

bool HasCollectives(const hlo::Module& module) {
  for (const auto& computation : module.computations()) {
    for (const auto& instruction : computation->instructions()) {
      if (hlo::IsCollective(instruction->opcode)) return true;
    }
  }
  return false;
}

absl::Status CheckShardingSupported(const hlo::Sharding& sharding,
                                    const std::string& what) {
  switch (sharding.kind) {
    case hlo::Sharding::Kind::kReplicated:
    case hlo::Sharding::Kind::kMaximal:
    case hlo::Sharding::Kind::kTiled:
      return absl::OkStatus();
    default:
      return absl::UnimplementedError(
          absl::StrCat(what, " has sharding ", ShardingText(sharding),
                       "; only replicated, maximal and tiled shardings are "
                       "supported for program inputs and outputs"));
  }
}

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(&out, "\\u00", absl::Hex(c, absl::kZeroPad2));
        } else {
          out += c;
        }
    }
  }
  out += "\"";
  return out;
}

// A worker that does not answer has lost the buffers it held.
absl::Status LostIfUnreachable(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kUnavailable) return status;
  return absl::DataLossError(status.message());
}

absl::Status WithContext(const absl::Status& status,
                         const std::string& context) {
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

}  // namespace

// ---------------------------------------------------------------------------
// Head-side records.

struct Head::CompiledProgram {
  ProgramId id;
  std::string name;
  std::string text;
  std::shared_ptr<const hlo::Module> module;
  int64_t num_partitions = 1;
  bool has_collectives = false;
  std::vector<hlo::Shape> parameter_shapes;
  std::vector<std::optional<hlo::Sharding>> parameter_shardings;
  std::vector<hlo::Shape> output_shapes;
  std::vector<std::optional<hlo::Sharding>> output_shardings;
};

// How far an array's buffers have got towards the workers. Guarded by
// dispatch_mu_.
struct Head::ArrayState {
  // The messages that create the buffers are sent (or in the open batch).
  bool released = false;
  bool deleted = false;
  bool buffers_released = false;
  // Launches prepared at the head, not yet sent, that read the buffers.
  int64_t pending_uses = 0;
  // Sends from this array planned before it was released.
  std::vector<std::pair<HostId, SendSpec>> pending_sends;
  // Waiters for the buffers to exist (OK), or for the news that they never
  // will (`dropped`).
  std::vector<std::function<void(absl::Status)>> on_released;
  absl::Status dropped;
  std::vector<std::pair<HostId, DeviceBuffer>> buffers;
};

struct Head::ArrayRecord {
  ArrayHandle handle;    // The client's.
  ArrayHandle internal;  // Names its buffers on the workers.
  SliceHandle slice;
  ArrayPlacement placement;
  absl::Status error;    // An error array (no buffers), or DATA_LOSS.
  std::string producer;  // "output 0 of 'f'", for the status view.
  std::shared_ptr<ArrayState> state;  // Null for error arrays.
};

struct Head::SliceRecord {
  enum class State { kRequesting, kQueued, kGranted, kBroken, kReleased,
                     kFailed };
  SliceHandle handle;
  SliceId id;
  transport::SliceRequest request;
  State state = State::kRequesting;
  absl::Status failure;
  IslandId island;
  std::vector<DeviceId> devices;
  std::vector<int64_t> mesh_shape;
  uint64_t generation = 0;
};

struct Head::Executable {
  ExecutableHandle handle;
  SliceHandle slice;
  std::shared_ptr<const CompiledProgram> program;
  int64_t num_devices = 1;
  std::vector<hlo::Sharding> parameter_shardings;
  std::vector<hlo::Sharding> output_shardings;
};

struct Head::Deferred {
  std::function<bool()> blocked;
  std::function<void()> run;
  std::function<void(absl::Status)> cancel;
};

struct Head::Session {
  SessionId id;
  std::string name;
  double weight = 1.0;
  int priority = 0;
  std::map<SliceHandle, std::shared_ptr<SliceRecord>> slices;
  std::map<ExecutableHandle, std::shared_ptr<Executable>> executables;
  std::map<ArrayHandle, std::shared_ptr<ArrayRecord>> arrays;
  std::deque<Deferred> deferred;
};

// A launch ready to go once its island's scheduler gives it a sequence
// number. Immutable once submitted except through ReleaseLaunch.
struct Head::PreparedLaunch {
  IslandId island;
  SessionId session;
  std::string program;
  std::string session_name;
  std::vector<std::pair<HostId, LaunchOp>> ops;
  // Sends that fill the staging inputs, grouped by source array.
  std::vector<std::pair<std::shared_ptr<ArrayState>,
                        std::vector<std::pair<HostId, SendSpec>>>>
      source_sends;
  std::vector<std::shared_ptr<ArrayState>> used;
  std::vector<std::shared_ptr<ArrayState>> outputs;
  std::vector<DeviceId> devices;
  std::set<HostId> hosts;
};

// ---------------------------------------------------------------------------
// Construction.

absl::StatusOr<std::unique_ptr<Head>> Head::Create(HeadOptions options) {
  // Debian's abseil is built with its debug-mode lock-order checker on: it
  // records every Mutex acquisition in a global graph, which cost ~25% of
  // all CPU time in a dispatch profile (futures and launches create and
  // lock many short-lived mutexes). The runtime's lock order is documented
  // and checked by its tests instead.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (options.topology == nullptr) {
    return absl::InvalidArgumentError("the head needs a topology");
  }
  if (static_cast<int64_t>(options.workers.size()) !=
      options.topology->num_hosts()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the head needs one control channel per host: the topology has ",
        options.topology->num_hosts(), " hosts, got ", options.workers.size(),
        " channels"));
  }
  for (size_t h = 0; h < options.workers.size(); ++h) {
    if (options.workers[h] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("no control channel for host ", h));
    }
  }
  return std::unique_ptr<Head>(new Head(std::move(options)));
}

Head::Head(HeadOptions options)
    : options_(std::move(options)),
      events_(options_.events != nullptr ? options_.events
                                         : &NullEventSink()) {
  resources_ = std::make_unique<ResourceManager>(options_.topology);
  for (int64_t i = 0; i < options_.topology->num_islands(); ++i) {
    IslandScheduler::Options scheduler;
    scheduler.max_in_flight =
        std::max<int64_t>(1, options_.max_inflight_launches_per_island);
    scheduler.name = absl::StrCat("island ", i);
    schedulers_.push_back(std::make_unique<IslandScheduler>(scheduler));
  }
  callbacks_ = std::make_unique<ThreadPool>("head-cb", 2);
  {
    absl::MutexLock lock(&dispatch_mu_);
    live_workers_ = options_.workers;
  }
  resources_->AddListener(
      [this](const SliceEvent& event) { OnSliceEvent(event); });
  if (options_.heartbeat_interval > absl::ZeroDuration()) {
    health_thread_ = std::thread([this] { HealthLoop(); });
  }
}

Head::~Head() {
  Shutdown();
  // Drop queued launches while everything they touch still exists, then
  // drain the continuations.
  std::vector<SessionId> sessions;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, session] : sessions_) sessions.push_back(id);
  }
  for (SessionId session : sessions) {
    for (auto& scheduler : schedulers_) scheduler->RemoveSession(session);
    // Queued slice requests fail now; their continuations run on callbacks_.
    resources_->ReleaseSession(session);
  }
  callbacks_.reset();
  resources_.reset();
}

void Head::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
  }
  {
    absl::MutexLock lock(&health_mu_);
    health_stop_ = true;
  }
  if (health_thread_.joinable()) health_thread_.join();
}

// ---------------------------------------------------------------------------
// Sessions.

Head::Session* Head::FindSessionLocked(SessionId session) {
  auto it = sessions_.find(session);
  return it == sessions_.end() ? nullptr : it->second.get();
}

absl::StatusOr<std::shared_ptr<Head::ArrayRecord>> Head::FindArrayLocked(
    const Session& session, ArrayHandle handle,
    absl::FunctionRef<std::string()> context) const {
  auto it = session.arrays.find(handle);
  if (it == session.arrays.end()) {
    const std::string prefix = context();
    return absl::NotFoundError(absl::StrCat(
        prefix, prefix.empty() ? "" : ": ", "unknown array handle ",
        handle.value(), " (never created in this session, or deleted)"));
  }
  if (!it->second->error.ok()) return it->second->error;
  return it->second;
}

namespace {
absl::Status NoSession(SessionId session) {
  return absl::FailedPreconditionError(absl::StrCat(
      "session ", session.value(),
      " is not open (call OpenSession first; a closed session's handles are "
      "gone)"));
}
}  // namespace

absl::StatusOr<SessionId> Head::OpenSession(
    const transport::OpenSessionRequest& request) {
  SessionId id;
  double weight = request.weight > 0 ? request.weight : 1.0;
  {
    absl::MutexLock lock(&mu_);
    id = SessionId(next_session_++);
    auto session = std::make_unique<Session>();
    session->id = id;
    session->name = request.name.empty() ? absl::StrCat("session ", id.value())
                                         : request.name;
    session->weight = weight;
    session->priority = request.priority;
    sessions_.emplace(id, std::move(session));
  }
  for (auto& scheduler : schedulers_) {
    absl::Status set = scheduler->SetWeight(
        id, std::clamp(weight, IslandScheduler::kMinWeight,
                       IslandScheduler::kMaxWeight));
    if (!set.ok()) {
      CW_LOG(WARNING) << "session weight: " << set;
    }
  }
  return id;
}

Future<> Head::CloseSession(SessionId session_id) {
  absl::Status closed;
  {
    absl::MutexLock lock(&mu_);
    Session* session = FindSessionLocked(session_id);
    if (session == nullptr) return MakeErrorFuture(NoSession(session_id));
    closed = absl::CancelledError(
        absl::StrCat("session '", session->name, "' was closed"));
    std::deque<Deferred> deferred;
    deferred.swap(session->deferred);
    for (Deferred& op : deferred) op.cancel(closed);
    std::vector<ArrayHandle> arrays;
    for (const auto& [handle, record] : session->arrays) {
      arrays.push_back(handle);
    }
    for (ArrayHandle handle : arrays) DeleteArrayLocked(*session, handle);
    for (const auto& [handle, slice] : session->slices) {
      slices_by_id_.erase(slice->id);
    }
    sessions_.erase(session_id);
  }
  resources_->ReleaseSession(session_id);
  for (auto& scheduler : schedulers_) scheduler->RemoveSession(session_id);
  // Its launches already on devices stop (a program may loop forever):
  // after anything already batched, so none slips past.
  std::function<void()> notify_now;
  {
    absl::MutexLock dispatch_lock(&dispatch_mu_);
    auto notify = [live = live_workers_, session_id, closed] {
      for (ControlChannel* worker : live) {
        if (worker != nullptr) worker->CancelSession(session_id, closed);
      }
    };
    if (open_batch_ != nullptr) {
      open_batch_->AfterSend(std::move(notify));
    } else {
      notify_now = std::move(notify);
    }
  }
  if (notify_now) notify_now();
  return MakeReadyFuture();
}

void Head::RunOrDeferLocked(Session& session, std::function<bool()> blocked,
                            std::function<void()> run,
                            std::function<void(absl::Status)> cancel) {
  if (session.deferred.empty() && !blocked()) {
    run();
    return;
  }
  session.deferred.push_back(
      Deferred{std::move(blocked), std::move(run), std::move(cancel)});
}

void Head::DrainDeferredLocked(Session& session) {
  Batched([&] {
    while (!session.deferred.empty() && !session.deferred.front().blocked()) {
      Deferred op = std::move(session.deferred.front());
      session.deferred.pop_front();
      op.run();
    }
  });
}

bool Head::SliceBlockedLocked(Session& session, SliceHandle slice) {
  auto it = session.slices.find(slice);
  if (it == session.slices.end()) return false;  // Fails when it runs.
  const SliceRecord::State state = it->second->state;
  return state == SliceRecord::State::kRequesting ||
         state == SliceRecord::State::kQueued;
}

bool Head::ExecutableBlockedLocked(Session& session,
                                   ExecutableHandle executable) {
  auto it = session.executables.find(executable);
  if (it == session.executables.end()) return false;
  return SliceBlockedLocked(session, it->second->slice);
}

// ---------------------------------------------------------------------------
// Slices.

transport::SliceInfo Head::InfoOf(const SliceRecord& slice) {
  transport::SliceInfo info;
  info.handle = slice.handle;
  info.island = slice.island;
  info.devices = slice.devices;
  info.mesh_shape = slice.mesh_shape;
  info.generation = slice.generation;
  return info;
}

Future<transport::SliceInfo> Head::RequestSlice(
    SessionId session_id, transport::SliceRequest request) {
  SliceRequest wanted;
  {
    absl::MutexLock lock(&mu_);
    Session* session = FindSessionLocked(session_id);
    if (session == nullptr) {
      return MakeErrorFuture<transport::SliceInfo>(NoSession(session_id));
    }
    if (session->slices.contains(request.handle)) {
      return MakeErrorFuture<transport::SliceInfo>(
          absl::AlreadyExistsError(absl::StrCat(
              "slice handle ", request.handle.value(),
              " is already used in this session")));
    }
    auto record = std::make_shared<SliceRecord>();
    record->handle = request.handle;
    record->request = request;
    session->slices.emplace(request.handle, record);
    wanted.session = session_id;
    wanted.num_devices = request.num_devices;
    wanted.mesh_shape = request.mesh_shape;
    wanted.island = request.island;
    wanted.priority = request.priority.value_or(session->priority);
    wanted.allow_smaller = request.allow_smaller;
    wanted.shared = request.shared;
  }
  SliceTicket ticket = resources_->RequestSlice(std::move(wanted));
  bool orphaned = false;
  {
    absl::MutexLock lock(&mu_);
    Session* session = FindSessionLocked(session_id);
    if (session == nullptr) {
      orphaned = true;
    } else {
      SliceRecord& record = *session->slices.at(request.handle);
      record.id = ticket.id;
      if (record.state == SliceRecord::State::kRequesting) {
        record.state = SliceRecord::State::kQueued;
      }
      slices_by_id_[ticket.id] = {session_id, request.handle};
    }
  }
  if (orphaned) {
    resources_->Release(ticket.id).IgnoreError();
    return MakeErrorFuture<transport::SliceInfo>(NoSession(session_id));
  }
  auto [promise, future] = MakePromise<transport::SliceInfo>();
  auto shared = std::make_shared<Promise<transport::SliceInfo>>(
      std::move(promise));
  const SliceHandle handle = request.handle;
  ticket.grant.OnReady(
      *callbacks_, [this, session_id, handle, shared](
                       const absl::StatusOr<SliceGrant>& grant) {
        if (grant.ok()) {
          shared->Set(OnSliceGranted(session_id, handle, *grant));
          return;
        }
        {
          absl::MutexLock lock(&mu_);
          if (Session* session = FindSessionLocked(session_id)) {
            auto it = session->slices.find(handle);
            if (it != session->slices.end()) {
              it->second->state = SliceRecord::State::kFailed;
              it->second->failure = grant.status();
            }
            DrainDeferredLocked(*session);
          }
        }
        shared->Set(grant.status());
      });
  return future;
}

absl::StatusOr<transport::SliceInfo> Head::OnSliceGranted(
    SessionId session_id, SliceHandle handle, const SliceGrant& grant) {
  absl::MutexLock lock(&mu_);
  Session* session = FindSessionLocked(session_id);
  if (session == nullptr) return NoSession(session_id);
  auto it = session->slices.find(handle);
  if (it == session->slices.end()) {
    return absl::CancelledError(
        absl::StrCat("slice ", handle.value(), " was released"));
  }
  SliceRecord& record = *it->second;
  if (record.state == SliceRecord::State::kRequesting ||
      record.state == SliceRecord::State::kQueued ||
      grant.generation > record.generation) {
    record.state = SliceRecord::State::kGranted;
    record.island = grant.island;
    record.devices = grant.devices;
    record.mesh_shape = grant.mesh_shape;
    record.generation = grant.generation;
    LoadExecutablesLocked(*session, record);
    DrainDeferredLocked(*session);
  }
  return InfoOf(record);
}

void Head::OnSliceEvent(const SliceEvent& event) {
  if (event.kind == SliceEvent::Kind::kGranted) return;  // Via the ticket.
  absl::MutexLock lock(&mu_);
  auto by_id = slices_by_id_.find(event.slice);
  if (by_id == slices_by_id_.end()) return;
  Session* session = FindSessionLocked(by_id->second.first);
  if (session == nullptr) return;
  auto it = session->slices.find(by_id->second.second);
  if (it == session->slices.end()) return;
  SliceRecord& record = *it->second;
  switch (event.kind) {
    case SliceEvent::Kind::kRemapped:
      if (event.generation <= record.generation) return;
      record.state = SliceRecord::State::kGranted;
      record.island = event.island;
      record.devices = event.new_devices;
      record.mesh_shape = event.mesh_shape;
      record.generation = event.generation;
      // Executables follow their slice (reloaded on the new devices).
      LoadExecutablesLocked(*session, record);
      DrainDeferredLocked(*session);
      return;
    case SliceEvent::Kind::kBroken:
      record.state = SliceRecord::State::kBroken;
      record.generation = std::max(record.generation, event.generation);
      return;
    case SliceEvent::Kind::kReleased:
      record.state = SliceRecord::State::kReleased;
      slices_by_id_.erase(by_id);
      return;
    case SliceEvent::Kind::kGranted:
      return;
  }
}

void Head::LoadExecutablesLocked(Session& session, const SliceRecord& slice) {
  for (const auto& [handle, executable] : session.executables) {
    if (executable->slice == slice.handle) {
      LoadProgramLocked(*executable->program, slice.devices);
    }
  }
}

void Head::LoadProgramLocked(const CompiledProgram& program,
                             const std::vector<DeviceId>& devices) {
  std::set<HostId> hosts;
  for (DeviceId device : devices) {
    hosts.insert(options_.topology->HostOf(device));
  }
  for (HostId host : hosts) {
    if (dead_hosts_.contains(host)) continue;
    LoadProgramRequest request;
    request.program = program.id;
    request.name = program.name;
    request.module = program.module;
    request.hlo_text = program.text;
    const std::string name = program.name;
    options_.workers[host.value()]->LoadProgram(std::move(request))
        .OnReady(*callbacks_, [name, host](const absl::Status& status) {
          if (!status.ok()) {
            CW_LOG(WARNING) << "loading '" << name << "' on host " << host
                            << ": " << status;
          }
        });
  }
}

Future<transport::SliceInfo> Head::GetSlice(SessionId session_id,
                                            SliceHandle handle) {
  absl::MutexLock lock(&mu_);
  Session* session = FindSessionLocked(session_id);
  if (session == nullptr) {
    return MakeErrorFuture<transport::SliceInfo>(NoSession(session_id));
  }
  auto it = session->slices.find(handle);
  if (it == session->slices.end()) {
    return MakeErrorFuture<transport::SliceInfo>(absl::NotFoundError(
        absl::StrCat("unknown slice handle ", handle.value())));
  }
  const SliceRecord& record = *it->second;
  if (record.state == SliceRecord::State::kFailed) {
    return MakeErrorFuture<transport::SliceInfo>(record.failure);
  }
  return MakeReadyFuture(InfoOf(record));
}

Future<> Head::ReleaseSlice(SessionId session_id, SliceHandle handle) {
  SliceId id;
  {
    absl::MutexLock lock(&mu_);
    Session* session = FindSessionLocked(session_id);
    if (session == nullptr) return MakeErrorFuture(NoSession(session_id));
    auto it = session->slices.find(handle);
    if (it == session->slices.end()) {
      return MakeErrorFuture(absl::NotFoundError(
          absl::StrCat("unknown slice handle ", handle.value())));
    }
    it->second->state = SliceRecord::State::kReleased;
    id = it->second->id;
  }
  if (id.value() >= 0) resources_->Release(id).IgnoreError();
  return MakeReadyFuture();
}

// ---------------------------------------------------------------------------
// Compile.

absl::StatusOr<std::shared_ptr<const Head::CompiledProgram>>
Head::GetOrCompile(const std::string& hlo_text) {
  const uint64_t fingerprint = std::hash<std::string>()(hlo_text);
  {
    absl::MutexLock lock(&compile_mu_);
    auto it = compiled_.find(fingerprint);
    if (it != compiled_.end()) {
      if (auto program = it->second.lock();
          program != nullptr && program->text == hlo_text) {
        return program;
      }
    }
  }
  CW_ASSIGN_OR_RETURN(std::unique_ptr<hlo::Module> module,
                      hlo::ParseModule(hlo_text));
  CW_RETURN_IF_ERROR(hlo::VerifyModule(*module));
  if (module->replica_count() != 1) {
    return absl::UnimplementedError(absl::StrCat(
        "module '", module->name(), "' has replica_count=",
        module->replica_count(),
        "; only programs of one replica (JAX's jit) can run here"));
  }
  // Refuses unsupported ops (name and line) before any worker sees them.
  CW_RETURN_IF_ERROR(exec::Evaluator::Create(*module).status());
  auto program = std::make_shared<CompiledProgram>();
  program->id = ProgramId(fingerprint);
  program->name = module->name();
  program->text = hlo_text;
  program->num_partitions = module->num_partitions();
  program->has_collectives = HasCollectives(*module);
  const hlo::Computation& entry = *module->entry();
  for (const hlo::Instruction* parameter : entry.parameters()) {
    if (!parameter->shape.IsArray()) {
      return absl::UnimplementedError(absl::StrCat(
          "parameter ", parameter->parameter_number, " ('", parameter->name,
          "') of '", module->name(), "' has shape ",
          parameter->shape.ToString(false),
          "; only array parameters are supported"));
    }
    program->parameter_shapes.push_back(parameter->shape);
    program->parameter_shardings.push_back(parameter->sharding);
  }
  const hlo::Instruction& root = *entry.root();
  if (root.shape.IsTuple()) {
    for (size_t i = 0; i < root.shape.tuple_shapes().size(); ++i) {
      const hlo::Shape& element = root.shape.tuple_shape(i);
      if (!element.IsArray()) {
        return absl::UnimplementedError(absl::StrCat(
            "output ", i, " of '", module->name(), "' has shape ",
            element.ToString(false),
            "; nested tuple and token outputs are not supported"));
      }
      program->output_shapes.push_back(element);
      if (root.sharding.has_value() &&
          root.sharding->kind == hlo::Sharding::Kind::kTuple &&
          i < root.sharding->tuple_elements.size()) {
        program->output_shardings.push_back(root.sharding->tuple_elements[i]);
      } else if (root.sharding.has_value() &&
                 root.sharding->kind != hlo::Sharding::Kind::kTuple) {
        program->output_shardings.push_back(root.sharding);
      } else {
        program->output_shardings.push_back(std::nullopt);
      }
    }
  } else if (root.shape.IsArray()) {
    program->output_shapes.push_back(root.shape);
    program->output_shardings.push_back(root.sharding);
  } else {
    return absl::UnimplementedError(
        absl::StrCat("the root of '", module->name(), "' has shape ",
                     root.shape.ToString(false), "; it must be an array or "
                     "a tuple of arrays"));
  }
  program->module = std::move(module);
  std::shared_ptr<const CompiledProgram> shared = std::move(program);
  absl::MutexLock lock(&compile_mu_);
  auto& slot = compiled_[fingerprint];
  if (slot.expired()) slot = shared;
  return shared;
}

Future<transport::CompileInfo> Head::Compile(
    SessionId session_id, transport::CompileRequest request) {
  int64_t num_devices = 0;
  {
    absl::MutexLock lock(&mu_);
    Session* session = FindSessionLocked(session_id);
    if (session == nullptr) {
      return MakeErrorFuture<transport::CompileInfo>(NoSession(session_id));
    }
    auto slice = session->slices.find(request.slice);
    if (slice == session->slices.end()) {
      return MakeErrorFuture<transport::CompileInfo>(absl::NotFoundError(
          absl::StrCat("Compile: unknown slice handle ", request.slice.value(),
                       " (request the slice first)")));
    }
    if (session->executables.contains(request.handle)) {
      return MakeErrorFuture<transport::CompileInfo>(
          absl::AlreadyExistsError(absl::StrCat(
              "executable handle ", request.handle.value(),
              " is already used in this session")));
    }
    const SliceRecord& record = *slice->second;
    num_devices = record.state == SliceRecord::State::kGranted
                      ? static_cast<int64_t>(record.devices.size())
                      : record.request.num_devices;
  }
  absl::StatusOr<std::shared_ptr<const CompiledProgram>> compiled =
      GetOrCompile(request.hlo_text);
  if (!compiled.ok()) {
    return MakeErrorFuture<transport::CompileInfo>(compiled.status());
  }
  const CompiledProgram& program = **compiled;
  const bool independent_copies =
      program.num_partitions == 1 && !program.has_collectives;
  if (program.num_partitions != num_devices && !independent_copies) {
    return MakeErrorFuture<transport::CompileInfo>(
        absl::InvalidArgumentError(absl::StrCat(
            "module '", program.name, "' was compiled for ",
            program.num_partitions, " partition(s) but slice ",
            request.slice.value(), " has ", num_devices, " device(s)")));
  }
  auto executable = std::make_shared<Executable>();
  executable->handle = request.handle;
  executable->slice = request.slice;
  executable->program = *compiled;
  executable->num_devices = num_devices;
  transport::CompileInfo info;
  info.handle = request.handle;
  info.num_partitions = num_devices;
  // The program's own shardings when it was partitioned for these devices;
  // a one-partition program copied onto each device sees whole arrays.
  const bool partitioned = program.num_partitions == num_devices;
  // Parameters and outputs alike: the sharding each gets, checked.
  auto take_shardings =
      [&](const char* what, const std::vector<hlo::Shape>& shapes,
          const std::vector<std::optional<hlo::Sharding>>& declared,
          std::vector<hlo::Sharding>& executable_shardings,
          std::vector<hlo::Shape>& info_shapes,
          std::vector<hlo::Sharding>& info_shardings) -> absl::Status {
    for (size_t i = 0; i < shapes.size(); ++i) {
      hlo::Sharding sharding = partitioned && declared[i].has_value()
                                   ? *declared[i]
                                   : Replicated();
      CW_RETURN_IF_ERROR(CheckShardingSupported(
          sharding, absl::StrCat(what, " ", i, " of '", program.name, "'")));
      executable_shardings.push_back(sharding);
      info_shapes.push_back(shapes[i]);
      info_shardings.push_back(std::move(sharding));
    }
    return absl::OkStatus();
  };
  absl::Status taken = take_shardings(
      "parameter", program.parameter_shapes, program.parameter_shardings,
      executable->parameter_shardings, info.parameter_shapes,
      info.parameter_shardings);
  if (taken.ok()) {
    taken = take_shardings("output", program.output_shapes,
                           program.output_shardings,
                           executable->output_shardings, info.output_shapes,
                           info.output_shardings);
  }
  if (!taken.ok()) return MakeErrorFuture<transport::CompileInfo>(taken);
  absl::MutexLock lock(&mu_);
  Session* session = FindSessionLocked(session_id);
  if (session == nullptr) {
    return MakeErrorFuture<transport::CompileInfo>(NoSession(session_id));
  }
  if (!session->executables.emplace(request.handle, executable).second) {
    return MakeErrorFuture<transport::CompileInfo>(absl::AlreadyExistsError(
        absl::StrCat("executable handle ", request.handle.value(),
                     " is already used in this session")));
  }
  auto slice = session->slices.find(request.slice);
  if (slice != session->slices.end() &&
      slice->second->state == SliceRecord::State::kGranted) {
    LoadProgramLocked(program, slice->second->devices);
  }
  return MakeReadyFuture(std::move(info));
}

// ---------------------------------------------------------------------------
// Arrays.

ArrayHandle Head::NewInternalHandle() {
  return ArrayHandle(next_internal_handle_++);
}

std::shared_ptr<Head::ArrayRecord> Head::AddArrayLocked(
    Session& session, const transport::ArraySpec& spec,
    ArrayPlacement placement, absl::Status error, std::string producer) {
  auto record = std::make_shared<ArrayRecord>();
  record->handle = spec.handle;
  record->slice = spec.slice;
  record->placement = std::move(placement);
  record->error = std::move(error);
  record->producer = std::move(producer);
  if (record->error.ok()) {
    record->internal = NewInternalHandle();
    record->state = std::make_shared<ArrayState>();
    for (size_t i = 0; i < record->placement.devices.size(); ++i) {
      const DeviceId device = record->placement.devices[i];
      record->state->buffers.emplace_back(
          options_.topology->HostOf(device),
          DeviceBuffer{device, BufferId{record->internal,
                                        static_cast<int64_t>(i)}});
    }
  }
  session.arrays[spec.handle] = record;
  return record;
}

void Head::AddErrorArraysLocked(Session& session,
                                const std::vector<transport::ArraySpec>& specs,
                                const absl::Status& error) {
  for (const transport::ArraySpec& spec : specs) {
    if (session.arrays.contains(spec.handle)) continue;  // Never clobber.
    AddArrayLocked(session, spec, ArrayPlacement{spec.global_shape,
                                                 spec.sharding, {}},
                   error, "");
  }
}

absl::Status Head::CheckNewHandlesLocked(
    Session& session, const std::vector<transport::ArraySpec>& specs) {
  std::set<ArrayHandle> seen;
  for (const transport::ArraySpec& spec : specs) {
    if (session.arrays.contains(spec.handle) ||
        !seen.insert(spec.handle).second) {
      return absl::AlreadyExistsError(absl::StrCat(
          "array handle ", spec.handle.value(),
          " is already in use in this session (mint a fresh handle for "
          "every result)"));
    }
  }
  return absl::OkStatus();
}

void Head::DeleteArrayLocked(Session& session, ArrayHandle handle) {
  auto it = session.arrays.find(handle);
  if (it == session.arrays.end()) return;
  std::shared_ptr<ArrayRecord> record = std::move(it->second);
  session.arrays.erase(it);
  if (record->state == nullptr) return;
  absl::MutexLock lock(&dispatch_mu_);
  record->state->deleted = true;
  DispatchBatch local;
  DispatchBatch& batch = BatchLocked(&local);
  MaybeReleaseBuffersLocked(*record, batch);
  SendIfLocalLocked(batch, &local);
}

void Head::MaybeReleaseBuffersLocked(ArrayRecord& record,
                                     DispatchBatch& batch) {
  ArrayState& state = *record.state;
  if (!state.deleted || !state.released || state.pending_uses > 0 ||
      state.buffers_released) {
    return;
  }
  state.buffers_released = true;
  for (const auto& [host, buffer] : state.buffers) {
    batch.AddRelease(host, buffer);
  }
}

void Head::WhenPlacedLocked(ArrayRecord& record,
                            std::function<void(absl::Status)> callback) {
  absl::MutexLock lock(&dispatch_mu_);
  ArrayState& state = *record.state;
  if (!state.dropped.ok()) {
    callback(state.dropped);
  } else if (!state.released) {
    state.on_released.push_back(std::move(callback));
  } else if (open_batch_ != nullptr) {
    open_batch_->AfterSend(
        [callback = std::move(callback)] { callback(absl::OkStatus()); });
  } else {
    callback(absl::OkStatus());
  }
}

Future<> Head::PutArray(SessionId session_id, transport::ArraySpec spec,
                        hlo::Literal global) {
  auto [promise, future] = MakePromise<>();
  auto shared = std::make_shared<Promise<>>(std::move(promise));
  auto value = std::make_shared<hlo::Literal>(std::move(global));
  absl::MutexLock lock(&mu_);
  Session* session = FindSessionLocked(session_id);
  if (session == nullptr) return MakeErrorFuture(NoSession(session_id));
  auto run = [this, session, spec, value, shared]()
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Status fresh = CheckNewHandlesLocked(*session, {spec});
    if (!fresh.ok()) {
      shared->Set(fresh);
      return;
    }
    auto fail = [&](absl::Status status) {
      AddErrorArraysLocked(*session, {spec}, status);
      shared->Set(std::move(status));
    };
    auto slice = session->slices.find(spec.slice);
    if (slice == session->slices.end()) {
      return fail(absl::NotFoundError(absl::StrCat(
          "PutArray: unknown slice handle ", spec.slice.value())));
    }
    const SliceRecord& record = *slice->second;
    if (record.state != SliceRecord::State::kGranted) {
      return fail(absl::UnavailableError(absl::StrCat(
          "PutArray: slice ", spec.slice.value(), " has no devices now")));
    }
    if (!value->shape().IsArray() ||
        !value->shape().Compatible(spec.global_shape)) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "PutArray: the value is ", value->shape().ToString(false),
          " but the array spec says ", spec.global_shape.ToString(false))));
    }
    const int64_t n = static_cast<int64_t>(record.devices.size());
    absl::StatusOr<hlo::Shape> shard_shape =
        hlo::ShardShape(spec.sharding, spec.global_shape, n);
    if (!shard_shape.ok()) {
      return fail(WithContext(shard_shape.status(), "PutArray"));
    }
    for (DeviceId device : record.devices) {
      const int64_t budget = options_.topology->device(device).memory_bytes;
      if (shard_shape->ByteSize() > budget) {
        return fail(absl::ResourceExhaustedError(absl::StrCat(
            "PutArray: a shard of array ", spec.handle.value(), " needs ",
            shard_shape->ByteSize(), " bytes but device ", device.value(),
            " has a memory budget of ", budget, " bytes")));
      }
    }
    absl::StatusOr<std::vector<hlo::Literal>> shards =
        hlo::SplitGlobal(*value, spec.sharding, n);
    if (!shards.ok()) return fail(WithContext(shards.status(), "PutArray"));
    std::shared_ptr<ArrayRecord> array = AddArrayLocked(
        *session, spec,
        ArrayPlacement{spec.global_shape, spec.sharding, record.devices},
        absl::OkStatus(), "uploaded by the client");
    std::vector<Future<>> puts;
    for (int64_t i = 0; i < n; ++i) {
      const auto& [host, buffer] = array->state->buffers[i];
      if (dead_hosts_.contains(host)) {
        puts.push_back(MakeErrorFuture(absl::DataLossError(
            absl::StrCat("host ", host.value(), " was lost"))));
        continue;
      }
      puts.push_back(options_.workers[host.value()]->PutBuffer(
          PutBufferRequest{buffer.device, buffer.buffer,
                           std::move((*shards)[i])}));
    }
    {
      absl::MutexLock dispatch_lock(&dispatch_mu_);
      array->state->released = true;
    }
    JoinFutures(std::move(puts))
        .OnReady(*callbacks_,
                 [shared](const absl::Status& status) { shared->Set(status); });
  };
  RunOrDeferLocked(
      *session,
      [this, session, slice = spec.slice]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
          mu_) { return SliceBlockedLocked(*session, slice); },
      std::move(run), [shared](absl::Status status) { shared->Set(status); });
  return future;
}

Future<> Head::ArrayReady(SessionId session_id, ArrayHandle handle) {
  auto [promise, future] = MakePromise<>();
  auto shared = std::make_shared<Promise<>>(std::move(promise));
  absl::MutexLock lock(&mu_);
  Session* session = FindSessionLocked(session_id);
  if (session == nullptr) return MakeErrorFuture(NoSession(session_id));
  auto run = [this, session, handle, shared]()
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<std::shared_ptr<ArrayRecord>> found =
        FindArrayLocked(*session, handle, [] { return std::string(); });
    if (!found.ok()) {
      shared->Set(found.status());
      return;
    }
    std::shared_ptr<ArrayRecord> record = *std::move(found);
    WhenPlacedLocked(*record, [this, record, shared](absl::Status placed) {
      if (!placed.ok()) {
        shared->Set(placed);
        return;
      }
      std::map<HostId, std::vector<DeviceBuffer>> by_host;
      for (const auto& [host, buffer] : record->state->buffers) {
        by_host[host].push_back(buffer);
      }
      std::vector<Future<>> ready;
      for (auto& [host, buffers] : by_host) {
        ready.push_back(
            options_.workers[host.value()]->AwaitBuffers(std::move(buffers)));
      }
      JoinFutures(std::move(ready))
          .OnReady(*callbacks_, [shared](const absl::Status& status) {
            shared->Set(LostIfUnreachable(status));
          });
    });
  };
  RunOrDeferLocked(
      *session, [] { return false; }, std::move(run),
      [shared](absl::Status status) { shared->Set(status); });
  return future;
}

Future<hlo::Literal> Head::Fetch(SessionId session_id, ArrayHandle handle) {
  auto [promise, future] = MakePromise<hlo::Literal>();
  auto shared = std::make_shared<Promise<hlo::Literal>>(std::move(promise));
  absl::MutexLock lock(&mu_);
  Session* session = FindSessionLocked(session_id);
  if (session == nullptr) {
    return MakeErrorFuture<hlo::Literal>(NoSession(session_id));
  }
  auto run = [this, session, handle, shared]()
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<std::shared_ptr<ArrayRecord>> found =
        FindArrayLocked(*session, handle, [] { return std::string(); });
    if (!found.ok()) {
      shared->Set(found.status());
      return;
    }
    std::shared_ptr<ArrayRecord> record = *std::move(found);
    absl::StatusOr<std::vector<hlo::ShardRegion>> regions =
        RegionsOf(record->placement);
    if (!regions.ok()) {
      shared->Set(regions.status());
      return;
    }
    WhenPlacedLocked(*record, [this, record, shared,
                               regions = *std::move(regions)](
                                  absl::Status placed) {
      if (!placed.ok()) {
        shared->Set(placed);
        return;
      }
      // Only the primary replica of each tile travels.
      std::vector<Future<hlo::Literal>> shards;
      std::vector<int64_t> fetched;
      for (size_t i = 0; i < regions.size(); ++i) {
        if (!regions[i].primary) continue;
        const auto& [host, buffer] = record->state->buffers[i];
        shards.push_back(
            options_.workers[host.value()]->FetchBuffer(buffer));
        fetched.push_back(static_cast<int64_t>(i));
      }
      JoinFutures(std::move(shards))
          .OnReady(*callbacks_,
                   [record, shared, fetched, regions](
                       const absl::StatusOr<std::vector<hlo::Literal>>&
                           values) {
                     if (!values.ok()) {
                       shared->Set(LostIfUnreachable(values.status()));
                       return;
                     }
                     std::vector<hlo::Literal> all(regions.size());
                     for (size_t k = 0; k < fetched.size(); ++k) {
                       all[fetched[k]] = (*values)[k];
                     }
                     for (size_t i = 0; i < all.size(); ++i) {
                       if (all[i].shape().IsArray()) continue;
                       for (const hlo::Literal& value : *values) {
                         if (value.shape().dims() == regions[i].dims) {
                           all[i] = value;  // A stand-in; not read.
                           break;
                         }
                       }
                     }
                     shared->Set(hlo::AssembleGlobal(
                         all, record->placement.sharding,
                         record->placement.global_shape));
                   });
    });
  };
  RunOrDeferLocked(
      *session, [] { return false; }, std::move(run),
      [shared](absl::Status status) { shared->Set(status); });
  return future;
}

void Head::Delete(SessionId session_id, std::vector<ArrayHandle> arrays) {
  absl::MutexLock lock(&mu_);
  Session* session = FindSessionLocked(session_id);
  if (session == nullptr) return;
  RunOrDeferLocked(
      *session, [] { return false; },
      [this, session, arrays = std::move(arrays)]()
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            for (ArrayHandle handle : arrays) {
              DeleteArrayLocked(*session, handle);
            }
          },
      [](absl::Status) {});
}

// ---------------------------------------------------------------------------
// Dispatch.

void Head::Batched(const std::function<void()>& body) {
  {
    absl::MutexLock lock(&dispatch_mu_);
    if (open_depth_++ == 0) open_batch_ = &batch_storage_;
  }
  body();
  absl::MutexLock lock(&dispatch_mu_);
  if (--open_depth_ == 0) {
    open_batch_ = nullptr;
    batch_storage_.Send(live_workers_);
  }
}

DispatchBatch& Head::BatchLocked(DispatchBatch* local) {
  return open_batch_ != nullptr ? *open_batch_ : *local;
}

void Head::SendIfLocalLocked(DispatchBatch& batch, DispatchBatch* local) {
  if (&batch == local) local->Send(live_workers_);
}

void Head::Execute(SessionId session_id, transport::ExecuteOp op) {
  absl::MutexLock lock(&mu_);
  Session* session = FindSessionLocked(session_id);
  if (session == nullptr) return;
  Batched([&] { EnqueueExecuteLocked(*session, std::move(op)); });
}

void Head::Copy(SessionId session_id, transport::CopyOp op) {
  absl::MutexLock lock(&mu_);
  Session* session = FindSessionLocked(session_id);
  if (session == nullptr) return;
  Batched([&] { EnqueueCopyLocked(*session, std::move(op)); });
}

void Head::Submit(SessionId session_id, transport::ProgramGraph graph) {
  absl::MutexLock lock(&mu_);
  Session* session = FindSessionLocked(session_id);
  if (session == nullptr) return;
  // All nodes at once: every launch released meanwhile joins one batch, so
  // each worker gets one message for the whole graph.
  Batched([&] {
    for (auto& node : graph.ops) {
      if (auto* execute = std::get_if<transport::ExecuteOp>(&node)) {
        EnqueueExecuteLocked(*session, std::move(*execute));
      } else {
        EnqueueCopyLocked(*session,
                          std::move(std::get<transport::CopyOp>(node)));
      }
    }
  });
}

void Head::EnqueueExecuteLocked(Session& session, transport::ExecuteOp op) {
  auto shared = std::make_shared<transport::ExecuteOp>(std::move(op));
  Session* s = &session;
  RunOrDeferLocked(
      session,
      [this, s, executable = shared->executable]()
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return ExecutableBlockedLocked(*s, executable);
          },
      [this, s, shared]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        ExecuteLocked(*s, *shared);
      },
      [this, s, shared](absl::Status status)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            AddErrorArraysLocked(*s, shared->outputs, status);
          });
}

void Head::EnqueueCopyLocked(Session& session, transport::CopyOp op) {
  auto shared = std::make_shared<transport::CopyOp>(std::move(op));
  Session* s = &session;
  RunOrDeferLocked(
      session,
      [this, s, slice = shared->destination.slice]()
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return SliceBlockedLocked(*s, slice);
          },
      [this, s, shared]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        CopyLocked(*s, *shared);
      },
      [this, s, shared](absl::Status status)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            AddErrorArraysLocked(*s, {shared->destination}, status);
          });
}

void Head::ExecuteLocked(Session& session, const transport::ExecuteOp& op) {
  if (absl::Status fresh = CheckNewHandlesLocked(session, op.outputs);
      !fresh.ok()) {
    CW_LOG(WARNING) << "Execute in session '" << session.name
                    << "' dropped: " << fresh;
    AddErrorArraysLocked(session, op.outputs, fresh);
    return;
  }
  auto fail = [&](absl::Status status) {
    AddErrorArraysLocked(session, op.outputs, status);
  };
  auto executable_it = session.executables.find(op.executable);
  if (executable_it == session.executables.end()) {
    return fail(absl::NotFoundError(absl::StrCat(
        "Execute: unknown executable handle ", op.executable.value(),
        " (not compiled in this session)")));
  }
  const Executable& executable = *executable_it->second;
  const CompiledProgram& program = *executable.program;
  const std::string& name = program.name;
  const SliceRecord& slice = *session.slices.at(executable.slice);
  if (slice.state != SliceRecord::State::kGranted) {
    return fail(absl::UnavailableError(absl::StrCat(
        "program '", name, "': its slice ", slice.handle.value(),
        slice.state == SliceRecord::State::kBroken
            ? " lost devices and waits for spares"
            : " has no devices (released or refused)")));
  }
  const int64_t n = static_cast<int64_t>(slice.devices.size());
  if (n != executable.num_devices) {
    return fail(absl::FailedPreconditionError(absl::StrCat(
        "program '", name, "' was compiled for ", executable.num_devices,
        " devices but its slice now has ", n, "; compile it again")));
  }
  if (op.arguments.size() != program.parameter_shapes.size()) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "program '", name, "' takes ", program.parameter_shapes.size(),
        " argument(s); Execute passed ", op.arguments.size())));
  }
  if (op.outputs.size() != program.output_shapes.size()) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "program '", name, "' has ", program.output_shapes.size(),
        " output(s); Execute named ", op.outputs.size())));
  }
  // Outputs: the client's specs must describe what the program produces.
  std::vector<ArrayPlacement> outputs;
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    const transport::ArraySpec& spec = op.outputs[i];
    // Built only for a message.
    auto what = [&] {
      return absl::StrCat("output ", i, " of program '", name, "'");
    };
    if (spec.slice != executable.slice) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          what(), ": its spec names slice ", spec.slice.value(),
          " but the program runs on slice ", executable.slice.value())));
    }
    ArrayPlacement placement{spec.global_shape, spec.sharding, slice.devices};
    absl::StatusOr<hlo::Shape> shard =
        hlo::ShardShape(spec.sharding, spec.global_shape, n);
    if (!shard.ok()) return fail(WithContext(shard.status(), what()));
    if (!shard->Compatible(program.output_shapes[i])) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          what(), " is ", program.output_shapes[i].ToString(false),
          " per device, but its spec (", spec.global_shape.ToString(false),
          " sharded ", ShardingText(spec.sharding), ") gives ",
          shard->ToString(false))));
    }
    ArrayPlacement expected{spec.global_shape,
                            executable.output_shardings[i], slice.devices};
    absl::StatusOr<bool> same = SamePlacement(placement, expected);
    if (!same.ok()) return fail(WithContext(same.status(), what()));
    if (!*same) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          what(), ": the spec's sharding ", ShardingText(spec.sharding),
          " is not the program's output sharding ",
          ShardingText(executable.output_shardings[i]))));
    }
    outputs.push_back(std::move(placement));
  }
  // Arguments: direct when already where and how the program wants them,
  // otherwise staged by a transfer.
  auto launch = std::make_shared<PreparedLaunch>();
  launch->island = slice.island;
  launch->session = session.id;
  launch->program = name;
  launch->session_name = session.name;
  launch->devices = slice.devices;
  std::vector<std::vector<LaunchInput>> inputs(n);
  std::vector<std::vector<ReceiveSpec>> staging(n);
  for (size_t a = 0; a < op.arguments.size(); ++a) {
    // Built only for a message.
    auto what = [&] {
      return absl::StrCat("argument ", a, " of program '", name, "'");
    };
    absl::StatusOr<std::shared_ptr<ArrayRecord>> found =
        FindArrayLocked(session, op.arguments[a], what);
    if (!found.ok()) return fail(found.status());
    const ArrayRecord& record = **found;
    const hlo::Shape& parameter = program.parameter_shapes[a];
    ArrayPlacement wanted{record.placement.global_shape,
                          executable.parameter_shardings[a], slice.devices};
    absl::StatusOr<hlo::Shape> shard =
        hlo::ShardShape(wanted.sharding, wanted.global_shape, n);
    if (!shard.ok() || !shard->Compatible(parameter)) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat(what(), ": array ", op.arguments[a].value(), " is ",
                       record.placement.global_shape.ToString(false),
                       ", which the program's sharding ",
                       ShardingText(wanted.sharding), " cuts into ",
                       shard.ok() ? shard->ToString(false)
                                  : std::string(shard.status().message()),
                       " per device, but parameter ", a, " is ",
                       parameter.ToString(false))));
    }
    absl::StatusOr<bool> same = SamePlacement(record.placement, wanted);
    if (!same.ok()) return fail(WithContext(same.status(), what()));
    launch->used.push_back(record.state);
    if (*same) {
      const std::string source =
          absl::StrCat("array ", op.arguments[a].value(), " (",
                       record.producer, ") on this device");
      for (int64_t i = 0; i < n; ++i) {
        inputs[i].push_back(
            LaunchInput{BufferId{record.internal, i}, false, source});
      }
      continue;
    }
    const ArrayHandle staged = NewInternalHandle();
    absl::StatusOr<TransferPlan> plan =
        PlanTransfer(record.internal, record.placement, staged, wanted,
                     *options_.topology, &next_transfer_id_);
    if (!plan.ok()) return fail(WithContext(plan.status(), what()));
    for (auto& [host, receive] : plan->receives) {
      const int64_t i = receive.buffer.shard;
      std::vector<std::string> origins;
      for (const PieceOrigin& origin : receive.pieces) {
        origins.push_back(absl::StrCat("device ", origin.device.value(),
                                       " (host ", origin.host.value(), ")"));
      }
      inputs[i].push_back(LaunchInput{
          BufferId{staged, i}, true,
          absl::StrCat("transfer of array ", op.arguments[a].value(), " (",
                       record.producer, ") from ",
                       origins.empty() ? std::string("nowhere (padding)")
                                       : absl::StrJoin(origins, ", "))});
      staging[i].push_back(std::move(receive));
    }
    launch->source_sends.emplace_back(record.state, std::move(plan->sends));
  }
  // A launch holds its inputs and outputs at once: if they cannot fit in a
  // device's memory even when it is otherwise empty, it could never run.
  {
    int64_t bytes = 0;
    for (const hlo::Shape& shape : program.parameter_shapes) {
      bytes += shape.ByteSize();
    }
    for (const hlo::Shape& shape : program.output_shapes) {
      bytes += shape.ByteSize();
    }
    for (DeviceId device : slice.devices) {
      const int64_t budget = options_.topology->device(device).memory_bytes;
      if (bytes > budget) {
        return fail(absl::ResourceExhaustedError(absl::StrCat(
            "program '", name, "' needs ", bytes,
            " bytes per device for its inputs and outputs, but device ",
            device.value(), " has a memory budget of ", budget, " bytes")));
      }
    }
  }
  // Valid: the outputs exist from now on.
  std::vector<std::shared_ptr<ArrayRecord>> output_records;
  for (size_t k = 0; k < op.outputs.size(); ++k) {
    output_records.push_back(AddArrayLocked(
        session, op.outputs[k], outputs[k], absl::OkStatus(),
        absl::StrCat("output ", k, " of '", name, "'")));
    launch->outputs.push_back(output_records.back()->state);
  }
  std::vector<HostId> participant_hosts;
  for (DeviceId device : slice.devices) {
    launch->hosts.insert(options_.topology->HostOf(device));
  }
  participant_hosts.assign(launch->hosts.begin(), launch->hosts.end());
  for (int64_t i = 0; i < n; ++i) {
    LaunchOp launch_op;
    launch_op.device = slice.devices[i];
    launch_op.island = slice.island;
    launch_op.program = program.id;
    launch_op.program_name = name;
    launch_op.session = session.id;
    launch_op.session_name = session.name;
    launch_op.partition = i;
    launch_op.num_partitions = n;
    launch_op.participant_hosts = participant_hosts;
    launch_op.staging = std::move(staging[i]);
    launch_op.inputs = std::move(inputs[i]);
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      launch_op.outputs.push_back(LaunchOutput{
          BufferId{output_records[k]->internal, i}, program.output_shapes[k]});
    }
    launch->ops.emplace_back(options_.topology->HostOf(slice.devices[i]),
                             std::move(launch_op));
  }
  {
    absl::MutexLock lock(&dispatch_mu_);
    for (const auto& state : launch->used) ++state->pending_uses;
  }
  Launch scheduled;
  scheduled.session = session.id;
  scheduled.devices = slice.devices;
  scheduled.release = [this, launch](uint64_t seq) {
    ReleaseLaunch(launch, seq);
  };
  scheduled.on_drop = [this, launch](absl::Status) { DropLaunch(launch); };
  absl::Status submitted = schedulers_[slice.island.value()]->Submit(
      std::move(scheduled));
  if (!submitted.ok()) {
    // Never sent: the outputs are errors without buffers.
    for (const auto& record : output_records) {
      record->error =
          WithContext(submitted, absl::StrCat("program '", name, "'"));
    }
    DropLaunch(launch);
    for (const auto& record : output_records) record->state = nullptr;
  }
}

void Head::DropLaunch(const std::shared_ptr<PreparedLaunch>& launch) {
  absl::MutexLock lock(&dispatch_mu_);
  DispatchBatch local;
  DispatchBatch& batch = BatchLocked(&local);
  for (const auto& state : launch->used) {
    --state->pending_uses;
    if (state->deleted && state->released && state->pending_uses == 0 &&
        !state->buffers_released) {
      state->buffers_released = true;
      for (const auto& [host, buffer] : state->buffers) {
        batch.AddRelease(host, buffer);
      }
    }
  }
  for (const auto& state : launch->outputs) {
    state->buffers_released = true;  // They were never created.
    // Sends parked on an output that will never exist go out anyway: the
    // source worker does not find the buffer and pushes that error, so the
    // receivers waiting for them fail instead of holding memory forever.
    state->released = true;
    for (auto& [host, send] : state->pending_sends) {
      batch.AddSend(host, std::move(send));
    }
    state->pending_sends.clear();
    state->dropped = absl::CancelledError(absl::StrCat(
        "program '", launch->program,
        "' was never run (its session ended before its turn)"));
    for (auto& callback : state->on_released) callback(state->dropped);
    state->on_released.clear();
  }
  SendIfLocalLocked(batch, &local);
}

void Head::ReleaseLaunch(const std::shared_ptr<PreparedLaunch>& launch,
                         uint64_t seq) {
  std::set<DeviceId> running;
  {
    absl::MutexLock lock(&dispatch_mu_);
    DispatchBatch local;
    DispatchBatch& batch = BatchLocked(&local);
    absl::Status abandoned;
    for (HostId host : launch->hosts) {
      if (dead_for_dispatch_.contains(host)) {
        abandoned = absl::DataLossError(absl::StrCat(
            "program '", launch->program, "' (seq ", seq,
            ") needs host ", host.value(), ", which was lost"));
        break;
      }
    }
    for (auto& [host, op] : launch->ops) {
      op.seq = seq;
      op.abandoned = abandoned;
      if (dead_for_dispatch_.contains(host)) continue;
      running.insert(op.device);
      batch.AddLaunch(host, std::move(op));
    }
    for (auto& [source, sends] : launch->source_sends) {
      for (auto& [host, send] : sends) {
        if (source->released) {
          batch.AddSend(host, std::move(send));
        } else {
          source->pending_sends.emplace_back(host, std::move(send));
        }
      }
    }
    for (const auto& state : launch->outputs) {
      state->released = true;
      for (auto& [host, send] : state->pending_sends) {
        batch.AddSend(host, std::move(send));
      }
      state->pending_sends.clear();
      for (auto& callback : state->on_released) {
        batch.AfterSend(
            [callback = std::move(callback)] { callback(absl::OkStatus()); });
      }
      state->on_released.clear();
    }
    // Outputs deleted before they were sent, and inputs nothing else waits
    // for, go back now (after the launch in the same message).
    auto release_if_done = [&](ArrayState& state) {
      if (!state.deleted || !state.released || state.pending_uses > 0 ||
          state.buffers_released) {
        return;
      }
      state.buffers_released = true;
      for (const auto& [host, buffer] : state.buffers) {
        batch.AddRelease(host, buffer);
      }
    };
    for (const auto& state : launch->used) {
      --state->pending_uses;
      release_if_done(*state);
    }
    for (const auto& state : launch->outputs) release_if_done(*state);
    if (!running.empty()) {
      absl::MutexLock inflight_lock(&inflight_mu_);
      inflight_[{launch->island, seq}] = running;
    }
    LaunchEvent event;
    event.time = absl::Now();
    event.island = launch->island;
    event.seq = seq;
    event.session = launch->session;
    event.session_name = launch->session_name;
    event.program = launch->program;
    event.devices = launch->devices;
    events_->LaunchDispatched(event);
    SendIfLocalLocked(batch, &local);
  }
  if (running.empty()) {
    const IslandId island = launch->island;
    callbacks_->Execute([this, island, seq] { LaunchFinished(island, seq); });
  }
}

void Head::CopyLocked(Session& session, const transport::CopyOp& op) {
  const transport::ArraySpec& spec = op.destination;
  if (absl::Status fresh = CheckNewHandlesLocked(session, {spec});
      !fresh.ok()) {
    CW_LOG(WARNING) << "Copy in session '" << session.name
                    << "' dropped: " << fresh;
    return;
  }
  auto fail = [&](absl::Status status) {
    AddErrorArraysLocked(session, {spec}, status);
  };
  absl::StatusOr<std::shared_ptr<ArrayRecord>> found =
      FindArrayLocked(session, op.source, [] { return std::string("Copy"); });
  if (!found.ok()) return fail(found.status());
  const ArrayRecord& source = **found;
  auto slice_it = session.slices.find(spec.slice);
  if (slice_it == session.slices.end()) {
    return fail(absl::NotFoundError(
        absl::StrCat("Copy: unknown slice handle ", spec.slice.value())));
  }
  const SliceRecord& slice = *slice_it->second;
  if (slice.state != SliceRecord::State::kGranted) {
    return fail(absl::UnavailableError(absl::StrCat(
        "Copy: slice ", spec.slice.value(), " has no devices now")));
  }
  ArrayPlacement to{spec.global_shape, spec.sharding, slice.devices};
  const ArrayHandle internal(next_internal_handle_);  // AddArrayLocked's.
  absl::StatusOr<TransferPlan> plan =
      PlanTransfer(source.internal, source.placement, internal, to,
                   *options_.topology, &next_transfer_id_);
  if (!plan.ok()) return fail(WithContext(plan.status(), "Copy"));
  std::shared_ptr<ArrayRecord> record = AddArrayLocked(
      session, spec, std::move(to), absl::OkStatus(),
      absl::StrCat("copy of array ", op.source.value()));
  CW_CHECK(record->internal == internal);
  absl::MutexLock lock(&dispatch_mu_);
  DispatchBatch local;
  DispatchBatch& batch = BatchLocked(&local);
  for (auto& [host, receive] : plan->receives) {
    batch.AddReceive(host, std::move(receive));
  }
  for (auto& [host, send] : plan->sends) {
    if (source.state->released) {
      batch.AddSend(host, std::move(send));
    } else {
      source.state->pending_sends.emplace_back(host, std::move(send));
    }
  }
  record->state->released = true;
  SendIfLocalLocked(batch, &local);
}

void Head::LaunchFinished(IslandId island, uint64_t seq) {
  absl::Status completed = schedulers_[island.value()]->OnLaunchComplete(seq);
  if (!completed.ok()) {
    CW_LOG(WARNING) << "launch complete: " << completed;
  }
}

void Head::OnOpDone(const OpDone& done) {
  bool finished = false;
  {
    absl::MutexLock lock(&inflight_mu_);
    auto it = inflight_.find({done.island, done.seq});
    if (it == inflight_.end()) return;
    it->second.erase(done.device);
    if (it->second.empty()) {
      inflight_.erase(it);
      finished = true;
    }
  }
  if (finished) LaunchFinished(done.island, done.seq);
}

void Head::OnPushFailed(const transport::UndeliveredPiece& piece) {
  {
    absl::MutexLock lock(&mu_);
    if (dead_hosts_.contains(piece.source_host) ||
        dead_hosts_.contains(piece.destination_host)) {
      return;
    }
  }
  ControlChannel* destination = nullptr;
  {
    absl::MutexLock lock(&dispatch_mu_);
    const int64_t host = piece.destination_host.value();
    if (host >= 0 && host < static_cast<int64_t>(live_workers_.size())) {
      destination = live_workers_[host];
    }
  }
  // Outside the locks: over a network this is a message to a worker.
  if (destination != nullptr) destination->FailBuffers({piece});
}

// ---------------------------------------------------------------------------
// Failure.

bool Head::IsHostAlive(HostId host) const {
  absl::MutexLock lock(&mu_);
  return !dead_hosts_.contains(host);
}

absl::Status Head::AwaitHostDead(HostId host, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto dead = [this, host]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return handled_dead_hosts_.contains(host);
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&dead), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "host ", host.value(), " was not declared dead in time"));
  }
  return absl::OkStatus();
}

void Head::MarkHostDead(HostId host, const std::string& reason) {
  if (!options_.topology->HasHost(host)) return;
  const absl::Status lost = absl::DataLossError(
      absl::StrCat("host ", host.value(), " was lost (", reason, ")"));
  {
    absl::MutexLock lock(&mu_);
    if (!dead_hosts_.insert(host).second) return;
    {
      absl::MutexLock dispatch_lock(&dispatch_mu_);
      dead_for_dispatch_.insert(host);
      live_workers_[host.value()] = nullptr;
    }
    // Every array with a shard there is lost; its other shards go back.
    for (auto& [id, session] : sessions_) {
      for (auto& [handle, record] : session->arrays) {
        if (!record->error.ok() || record->state == nullptr) continue;
        int64_t shard = -1;
        for (size_t i = 0; i < record->placement.devices.size(); ++i) {
          if (options_.topology->HostOf(record->placement.devices[i]) ==
              host) {
            shard = static_cast<int64_t>(i);
            break;
          }
        }
        if (shard < 0) continue;
        record->error = absl::DataLossError(absl::StrCat(
            "array ", handle.value(), " lost shard ", shard, " on device ",
            record->placement.devices[shard].value(), ": ", lost.message()));
        absl::MutexLock dispatch_lock(&dispatch_mu_);
        record->state->deleted = true;
        DispatchBatch local;
        DispatchBatch& batch = BatchLocked(&local);
        MaybeReleaseBuffersLocked(*record, batch);
        SendIfLocalLocked(batch, &local);
      }
    }
    // Live workers fail what waits for the host: after anything already
    // batched, so launches sent before the death are abandoned too.
    absl::MutexLock dispatch_lock(&dispatch_mu_);
    std::vector<ControlChannel*> live = live_workers_;
    auto notify = [live, host, lost] {
      for (ControlChannel* worker : live) {
        if (worker != nullptr) worker->PeerLost(host, lost);
      }
    };
    if (open_batch_ != nullptr) {
      open_batch_->AfterSend(std::move(notify));
    } else {
      notify();
    }
  }
  events_->HostStateChanged(
      HostEvent{absl::Now(), host, absl::StrCat("dead: ", reason)});
  // Launches that were running there are done as far as the host goes.
  std::vector<std::pair<IslandId, uint64_t>> finished;
  {
    absl::MutexLock lock(&inflight_mu_);
    for (auto it = inflight_.begin(); it != inflight_.end();) {
      for (auto d = it->second.begin(); d != it->second.end();) {
        d = options_.topology->HostOf(*d) == host ? it->second.erase(d)
                                                  : std::next(d);
      }
      if (it->second.empty()) {
        finished.push_back(it->first);
        it = inflight_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [island, seq] : finished) LaunchFinished(island, seq);
  // Slices there move to spare devices (OnSliceEvent reloads executables).
  absl::Status marked = resources_->MarkHostDead(host);
  if (!marked.ok()) {
    CW_LOG(WARNING) << "MarkHostDead: " << marked;
  }
  CW_LOG(WARNING) << lost.message();
  absl::MutexLock lock(&mu_);
  handled_dead_hosts_.insert(host);
}

void Head::CheckHealthNow() {
  std::vector<HostId> hosts;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    for (int64_t h = 0; h < options_.topology->num_hosts(); ++h) {
      if (!dead_hosts_.contains(HostId(h))) hosts.push_back(HostId(h));
    }
  }
  std::vector<Future<>> beats;
  for (HostId host : hosts) {
    beats.push_back(options_.workers[host.value()]->Heartbeat());
  }
  const absl::Time deadline = absl::Now() + options_.heartbeat_timeout;
  for (size_t i = 0; i < hosts.size(); ++i) {
    absl::Status beat = beats[i].AwaitUntil(deadline);
    if (!beat.ok()) {
      MarkHostDead(hosts[i], absl::StrCat("missed its heartbeat deadline: ",
                                          beat.message()));
    }
  }
}

void Head::HealthLoop() {
  while (true) {
    {
      absl::MutexLock lock(&health_mu_);
      if (health_mu_.AwaitWithTimeout(absl::Condition(&health_stop_),
                                      options_.heartbeat_interval)) {
        return;
      }
    }
    CheckHealthNow();
  }
}

// ---------------------------------------------------------------------------
// Status and trace.

Future<transport::StatusReport> Head::GetStatus() {
  std::vector<HostId> hosts;
  {
    absl::MutexLock lock(&mu_);
    for (int64_t h = 0; h < options_.topology->num_hosts(); ++h) {
      hosts.push_back(HostId(h));
    }
  }
  std::vector<Future<WorkerStatus>> reports;
  for (HostId host : hosts) {
    reports.push_back(IsHostAlive(host)
                          ? options_.workers[host.value()]->GetStatus()
                          : MakeErrorFuture<WorkerStatus>(absl::DataLossError(
                                absl::StrCat("host ", host.value(),
                                             " is dead"))));
  }
  auto [promise, future] = MakePromise<transport::StatusReport>();
  auto shared =
      std::make_shared<Promise<transport::StatusReport>>(std::move(promise));
  callbacks_->Execute([this, reports = std::move(reports), shared] {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    std::vector<absl::StatusOr<WorkerStatus>> results;
    for (const Future<WorkerStatus>& report : reports) {
      results.push_back(report.AwaitUntil(deadline));
    }
    shared->Set(BuildStatus(results));
  });
  return future;
}

transport::StatusReport Head::BuildStatus(
    const std::vector<absl::StatusOr<WorkerStatus>>& workers) {
  std::string text;
  std::string json = "{\"hosts\":[";
  auto op_text = [](const OpStatus& op) {
    std::string line = absl::StrCat("'", op.program, "' seq ", op.seq,
                                    " partition ", op.partition, " [",
                                    op.session, "]");
    if (op.waiting_for_memory) absl::StrAppend(&line, " waits for memory");
    if (!op.waiting_for.empty()) {
      absl::StrAppend(&line, " waits for ",
                      absl::StrJoin(op.waiting_for, "; "));
    }
    return line;
  };
  auto op_json = [](const OpStatus& op) {
    std::vector<std::string> waits;
    for (const std::string& wait : op.waiting_for) {
      waits.push_back(JsonString(wait));
    }
    return absl::StrCat(
        "{\"program\":", JsonString(op.program), ",\"seq\":", op.seq,
        ",\"island\":", op.island.value(), ",\"partition\":", op.partition,
        ",\"session\":", JsonString(op.session), ",\"waiting_for\":[",
        absl::StrJoin(waits, ","), "],\"waiting_for_memory\":",
        op.waiting_for_memory ? "true" : "false", "}");
  };
  for (size_t h = 0; h < workers.size(); ++h) {
    const HostId host(static_cast<int64_t>(h));
    if (h > 0) json += ",";
    absl::StrAppend(&json, "{\"host\":", h, ",\"island\":",
                    options_.topology->IslandOfHost(host).value(),
                    ",\"alive\":", workers[h].ok() ? "true" : "false");
    if (!workers[h].ok()) {
      absl::StrAppend(&text, "host ", h, ": ", workers[h].status().message(),
                      "\n");
      absl::StrAppend(&json, ",\"error\":",
                      JsonString(workers[h].status().message()), "}");
      continue;
    }
    const WorkerStatus& worker = *workers[h];
    absl::StrAppend(&text, "host ", h, " (island ",
                    options_.topology->IslandOfHost(host).value(), ")\n");
    json += ",\"devices\":[";
    for (size_t d = 0; d < worker.devices.size(); ++d) {
      const DeviceStatus& device = worker.devices[d];
      absl::StrAppend(&text, "  device ", device.device.value(), ": ",
                      device.running.has_value()
                          ? absl::StrCat("running ", op_text(*device.running))
                          : std::string("idle"),
                      "; ", device.queued.size(), " queued, ",
                      device.ops_completed, " done; memory ",
                      device.memory.used_bytes, "/",
                      device.memory.budget_bytes, " bytes",
                      device.memory.num_waiting > 0
                          ? absl::StrCat(", ", device.memory.num_waiting,
                                         " waiting reservation(s)")
                          : std::string(),
                      "\n");
      for (const OpStatus& op : device.queued) {
        absl::StrAppend(&text, "    queued ", op_text(op), "\n");
      }
      if (d > 0) json += ",";
      std::vector<std::string> queued;
      for (const OpStatus& op : device.queued) queued.push_back(op_json(op));
      absl::StrAppend(
          &json, "{\"device\":", device.device.value(), ",\"running\":",
          device.running.has_value() ? op_json(*device.running) : "null",
          ",\"queued\":[", absl::StrJoin(queued, ","),
          "],\"ops_completed\":", device.ops_completed,
          ",\"memory\":{\"budget_bytes\":", device.memory.budget_bytes,
          ",\"used_bytes\":", device.memory.used_bytes,
          ",\"waiting_bytes\":", device.memory.waiting_bytes,
          ",\"num_waiting\":", device.memory.num_waiting, "}}");
    }
    json += "],\"pending_receives\":[";
    std::vector<std::string> receives;
    for (const std::string& receive : worker.pending_receives) {
      absl::StrAppend(&text, "  receive ", receive, "\n");
      receives.push_back(JsonString(receive));
    }
    absl::StrAppend(&json, absl::StrJoin(receives, ","), "]}");
  }
  json += "],\"sessions\":[";
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> sessions;
    for (const auto& [id, session] : sessions_) {
      absl::StrAppend(&text, "session ", id.value(), " '", session->name,
                      "': ", session->slices.size(), " slices, ",
                      session->executables.size(), " executables, ",
                      session->arrays.size(), " arrays",
                      session->deferred.empty()
                          ? std::string()
                          : absl::StrCat(", ", session->deferred.size(),
                                         " ops waiting for a slice"),
                      "\n");
      sessions.push_back(absl::StrCat(
          "{\"session\":", id.value(), ",\"name\":",
          JsonString(session->name), ",\"slices\":", session->slices.size(),
          ",\"executables\":", session->executables.size(),
          ",\"arrays\":", session->arrays.size(),
          ",\"deferred\":", session->deferred.size(), "}"));
    }
    absl::StrAppend(&json, absl::StrJoin(sessions, ","), "]");
  }
  const std::string resources = resources_->DebugString();
  absl::StrAppend(&text, resources);
  absl::StrAppend(&json, ",\"resources\":", JsonString(resources), "}");
  return transport::StatusReport{std::move(text), std::move(json)};
}

Future<std::string> Head::GetTrace() {
  return MakeReadyFuture(events_->ExportChromeTrace());
}

}  // namespace causeway::head
