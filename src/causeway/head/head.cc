#include "causeway/head/head.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "causeway/base/lock_order.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/head/fetches.h"
#include "causeway/head/island_scheduler.h"
#include "causeway/head/launch_plan.h"
#include "causeway/head/status_report.h"
#include "causeway/head/uploads.h"
#include "causeway/head/worker_notices.h"
#include "causeway/hlo/sharding_util.h"

namespace causeway::head {

using transport::ControlChannel;
using transport::HostState;
using transport::LoadProgramRequest;
using transport::Topology;

template <typename T>
void Head::ResolveLater(std::shared_ptr<Promise<T>> promise,
                        internal::FutureResult<T> result) {
  outbox_.Post(
      [promise = std::move(promise), result = std::move(result)]() mutable {
        promise->Set(std::move(result));
      });
}

// ---------------------------------------------------------------------------
// Construction.

absl::StatusOr<std::unique_ptr<Head>> Head::Create(HeadOptions options) {
  SkipAbseilLockOrderGraph();
  if (options.heartbeat_interval > absl::ZeroDuration() &&
      options.heartbeat_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "the heartbeat timeout must be positive when heartbeats are on");
  }
  if (options.session_lease < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the session lease must not be negative");
  }
  return std::unique_ptr<Head>(new Head(std::move(options)));
}

Head::Head(HeadOptions options)
    : options_(std::move(options)),
      events_(options_.events != nullptr ? options_.events
                                         : &trace::NullEventSink()),
      membership_(options_.host_limits),
      programs_(options_.program_cache_bytes),
      arrays_(ArrayTable::Options{
          .max_arrays_per_session =
              options_.session_limits.max_arrays_per_session}),
      sessions_(SessionTable::Limits{
          .max_sessions = options_.session_limits.max_sessions,
          .max_name_length = options_.session_limits.max_name_length,
          .per_session = Session::Limits{
              .max_slices = options_.session_limits.max_slices_per_session,
              .max_executables =
                  options_.session_limits.max_executables_per_session}}) {
  resources_ = std::make_unique<ResourceManager>(
      membership_.topology(),
      ResourceManager::Options{
          .max_queued_requests = options_.max_queued_slice_requests,
          .wait_for_hosts = options_.slices_wait_for_hosts,
          .islands = options_.configured_islands,
          .island_devices = options_.configured_island_devices});
  dispatcher_ = std::make_unique<Dispatcher>(
      Dispatcher::Options{.max_inflight_launches_per_island =
                              options_.max_inflight_launches_per_island,
                          .events = events_,
                          .epoch_retired = options_.epoch_retired},
      &membership_, &outbox_);
  callbacks_ = std::make_unique<ThreadPool>("head-cb", 2);
  uploads_ = std::make_unique<Uploads>(&membership_, dispatcher_.get(),
                                       &arrays_, &outbox_, callbacks_.get());
  fetches_ = std::make_unique<Fetches>(&membership_, dispatcher_.get(),
                                       callbacks_.get());
  statuses_ =
      std::make_unique<WorkerStatusPoll>(&membership_, dispatcher_.get());
  resources_->AddListener(
      [this](const SliceEvent& event) { OnSliceEvent(event); });
  health_ = std::make_unique<HealthMonitor>(
      HealthMonitor::Options{.heartbeat_interval = options_.heartbeat_interval,
                             .heartbeat_timeout = options_.heartbeat_timeout,
                             .clock = nullptr},
      &membership_,
      HealthMonitor::Callbacks{
          .host_lost =
              [this](HostId host, const std::string& reason) {
                MarkHostDead(host, reason);
              },
          .lease_expired =
              [this](SessionId session, const std::string& reason) {
                CW_LOG(WARNING) << "session " << session << ": " << reason;
                EndSession(
                    session,
                    absl::CancelledError(absl::StrCat(
                        "session ", session.value(), " ended: ", reason)),
                    reason)
                    .IgnoreError();
              }});
  health_->Start();
}

Head::~Head() {
  Shutdown();
  for (SessionId session : sessions_.Ids()) {
    EndSession(session, absl::CancelledError("the head shut down"),
               "the head shut down")
        .IgnoreError();
  }
  outbox_.Drain();
  // Channels fail what they still have pending while the continuations'
  // threads are there; those queued run now, and may post more.
  membership_.DropChannels();
  callbacks_.reset();
  statuses_.reset();
  outbox_.Drain();
  dispatcher_.reset();
  resources_.reset();
  outbox_.Drain();
}

void Head::Shutdown() {
  sessions_.Shutdown();
  health_->Stop();
}

std::shared_ptr<const Topology> Head::topology() const {
  return membership_.topology();
}

// ---------------------------------------------------------------------------
// Sessions.

absl::StatusOr<SessionId> Head::OpenSession(
    const transport::OpenSessionRequest& request,
    transport::SessionLease lease) {
  // Not positive (or NaN): the default; beyond the bounds: clamped.
  const double weight = request.weight > 0 ? request.weight : 1.0;
  const bool leased = lease == transport::SessionLease::kLeased &&
                      options_.session_lease > absl::ZeroDuration();
  CW_ASSIGN_OR_RETURN(
      SessionTable::Opened opened,
      sessions_.Open(request.name, weight, request.priority, leased));
  events_->SessionOpened(
      trace::SessionEvent{absl::Now(), opened.id, opened.name, ""});
  dispatcher_->SetWeight(opened.id, weight);
  if (leased) health_->WatchSession(opened.id, options_.session_lease);
  return opened.id;
}

Future<> Head::CloseSession(SessionId session_id) {
  std::string name;
  sessions_
      .WithSession(session_id, [&](Session& session) { name = session.name(); })
      .IgnoreError();
  absl::Status ended = EndSession(
      session_id,
      absl::CancelledError(absl::StrCat("session '", name, "' was closed")),
      "it was closed");
  return ended.ok() ? MakeReadyFuture() : MakeErrorFuture(std::move(ended));
}

absl::Status Head::EndSession(SessionId session_id, const absl::Status& status,
                              const std::string& why) {
  Outbox::Flush flush(outbox_);
  CW_ASSIGN_OR_RETURN(std::string name, sessions_.End(session_id, status, why));
  // Nothing of the session can add arrays any more.
  std::vector<std::shared_ptr<const ArrayRecord>> arrays =
      arrays_.RemoveSession(session_id);
  health_->ForgetSession(session_id);
  {
    Dispatcher::Batch batch(*dispatcher_);  // One message per worker.
    for (const auto& record : arrays) {
      if (record->buffers != nullptr) dispatcher_->Delete(record->buffers);
    }
  }
  resources_->ReleaseSession(session_id);
  dispatcher_->EndSession(session_id, status);
  UnloadUnusedPrograms();
  events_->SessionEnded(
      trace::SessionEvent{absl::Now(), session_id, std::move(name), why});
  return absl::OkStatus();
}

absl::Status Head::AwaitSessionEnded(SessionId session, absl::Time deadline) {
  return sessions_.AwaitEnded(session, deadline);
}

void Head::Touch(SessionId session) { health_->Touch(session); }

absl::Status Head::ForClient(SessionId session_id,
                             absl::FunctionRef<void(Session&)> work) {
  return sessions_.WithSession(session_id, [&](Session& session) {
    if (session.leased()) health_->Touch(session_id);
    work(session);
  });
}

// ---------------------------------------------------------------------------
// Slices.

Future<transport::SliceInfo> Head::RequestSlice(
    SessionId session_id, transport::SliceRequest request) {
  Outbox::Flush flush(outbox_);
  SliceRequest wanted;
  absl::Status added;
  absl::Status open = ForClient(session_id, [&](Session& session) {
    absl::StatusOr<SliceRecord*> record = session.AddSlice(request);
    added = record.status();
    wanted.session = session_id;
    wanted.num_devices = request.num_devices;
    wanted.mesh_shape = request.mesh_shape;
    wanted.island = request.island;
    wanted.priority = request.priority.value_or(session.priority());
    wanted.allow_smaller = request.allow_smaller;
    wanted.shared = request.shared;
  });
  if (!open.ok()) return MakeErrorFuture<transport::SliceInfo>(open);
  if (!added.ok()) return MakeErrorFuture<transport::SliceInfo>(added);
  SliceTicket ticket = resources_->RequestSlice(std::move(wanted));
  if (!sessions_.SliceQueued(session_id, request.handle, ticket.id)) {
    resources_->Release(ticket.id).IgnoreError();
    return MakeErrorFuture<transport::SliceInfo>(sessions_.NotOpen(session_id));
  }
  auto [promise, future] = MakePromise<transport::SliceInfo>();
  auto shared =
      std::make_shared<Promise<transport::SliceInfo>>(std::move(promise));
  const SliceHandle handle = request.handle;
  ticket.grant.OnReady(
      *callbacks_, [this, session_id, handle,
                    shared](const absl::StatusOr<SliceGrant>& grant) {
        Outbox::Flush flush(outbox_);
        if (grant.ok()) {
          ResolveLater(shared, OnSliceGranted(session_id, handle, *grant));
          return;
        }
        sessions_
            .WithSession(session_id,
                         [&](Session& session) {
                           session.SliceFailed(handle, grant.status());
                           Dispatcher::Batch batch(*dispatcher_);
                           session.DrainDeferred();
                         })
            .IgnoreError();
        ResolveLater(shared,
                     absl::StatusOr<transport::SliceInfo>(grant.status()));
      });
  return future;
}

absl::StatusOr<transport::SliceInfo> Head::OnSliceGranted(
    SessionId session_id, SliceHandle handle, const SliceGrant& grant) {
  absl::StatusOr<transport::SliceInfo> info;
  CW_RETURN_IF_ERROR(sessions_.WithSession(session_id, [&](Session& session) {
    SliceRecord* slice = session.FindSlice(handle);
    if (slice == nullptr) {
      info = absl::CancelledError(
          absl::StrCat("slice ", handle.value(), " was released"));
      return;
    }
    if (session.SliceOnDevices(*slice, grant.island, grant.devices,
                               grant.mesh_shape, grant.generation)) {
      SliceMoved(session, *slice);
    }
    info = slice->Info();
  }));
  return info;
}

void Head::OnSliceEvent(const SliceEvent& event) {
  if (event.kind == SliceEvent::Kind::kGranted) return;  // Via the ticket.
  Outbox::Flush flush(outbox_);
  sessions_.WithSliceOwner(
      event.slice, [&](Session& session, SliceRecord& slice) {
        switch (event.kind) {
          case SliceEvent::Kind::kRemapped:
            if (session.SliceOnDevices(slice, event.island, event.new_devices,
                                       event.mesh_shape, event.generation)) {
              SliceMoved(session, slice);
            }
            return;
          case SliceEvent::Kind::kBroken:
            session.SliceBroken(slice, event.generation);
            return;
          case SliceEvent::Kind::kReleased:
            session.SliceReleased(slice.handle);
            return;
          case SliceEvent::Kind::kGranted:
            return;
        }
      });
  if (event.kind == SliceEvent::Kind::kReleased) {
    sessions_.ForgetSlice(event.slice);
  }
}

void Head::SliceMoved(Session& session, const SliceRecord& slice) {
  // Executables follow their slice (reloaded on the new devices).
  for (const ExecutableRecord* executable :
       session.ExecutablesOn(slice.handle)) {
    LoadProgram(*executable->bound.program, slice.devices);
  }
  Dispatcher::Batch batch(*dispatcher_);
  session.DrainDeferred();
}

void Head::UnloadUnusedPrograms() {
  std::vector<transport::ProgramId> unused = programs_.TakeUnused();
  if (unused.empty()) return;
  const std::shared_ptr<const Topology> topology = membership_.topology();
  for (int64_t h = 0; h < topology->num_hosts(); ++h) {
    dispatcher_->Call(HostId(h), [unused](ControlChannel* worker) {
      if (worker == nullptr) return;  // Lost: it holds nothing any more.
      for (transport::ProgramId program : unused) {
        worker->UnloadProgram(program);
      }
    });
  }
}

void Head::LoadProgram(const CompiledProgram& program,
                       const std::vector<DeviceId>& devices) {
  const std::shared_ptr<const Topology> topology = membership_.topology();
  std::set<HostId> hosts;
  for (DeviceId device : devices) hosts.insert(topology->HostOf(device));
  for (HostId host : hosts) {
    LoadProgramRequest request;
    request.program = program.id;
    request.name = program.name;
    request.module = program.module;
    request.hlo_text = program.text;
    dispatcher_->Call(
        host, [request = std::move(request), host,
               callbacks = callbacks_.get()](ControlChannel* worker) mutable {
          if (worker == nullptr) return;  // Lost: its slices move anyway.
          const std::string name = request.name;
          worker->LoadProgram(std::move(request))
              .OnReady(*callbacks, [name, host](const absl::Status& status) {
                if (!status.ok()) {
                  CW_LOG(WARNING) << "loading '" << name << "' on host " << host
                                  << ": " << status;
                }
              });
        });
  }
}

Future<transport::SliceInfo> Head::GetSlice(SessionId session_id,
                                            SliceHandle handle) {
  absl::StatusOr<transport::SliceInfo> info;
  absl::Status open = ForClient(session_id, [&](Session& session) {
    absl::StatusOr<SliceRecord*> slice = session.GetSlice(handle);
    if (!slice.ok()) {
      info = slice.status();
    } else if ((*slice)->state == SliceRecord::State::kFailed) {
      info = (*slice)->failure;
    } else {
      info = (*slice)->Info();
    }
  });
  if (!open.ok()) return MakeErrorFuture<transport::SliceInfo>(open);
  if (!info.ok()) return MakeErrorFuture<transport::SliceInfo>(info.status());
  return MakeReadyFuture(*std::move(info));
}

Future<> Head::ReleaseSlice(SessionId session_id, SliceHandle handle) {
  Outbox::Flush flush(outbox_);
  std::optional<SliceId> id;
  absl::Status found;
  absl::Status open = ForClient(session_id, [&](Session& session) {
    found = session.GetSlice(handle).status();
    id = session.SliceReleased(handle);
  });
  if (!open.ok()) return MakeErrorFuture(open);
  if (!found.ok()) return MakeErrorFuture(found);
  if (id.has_value()) resources_->Release(*id).IgnoreError();
  return MakeReadyFuture();
}

// ---------------------------------------------------------------------------
// Compile.

Future<transport::CompileInfo> Head::Compile(
    SessionId session_id, transport::CompileRequest request) {
  Outbox::Flush flush(outbox_);
  if (request.hlo_text.size() > options_.session_limits.max_program_bytes) {
    return MakeErrorFuture<transport::CompileInfo>(
        absl::ResourceExhaustedError(absl::StrCat(
            "the program is ", request.hlo_text.size(),
            " bytes of HLO text; at most ",
            options_.session_limits.max_program_bytes,
            " (the limit max_program_bytes, causeway head "
            "--max-program-bytes)")));
  }
  int64_t num_devices = 0;
  absl::Status checked;
  absl::Status open = ForClient(session_id, [&](Session& session) {
    const SliceRecord* slice = session.FindSlice(request.slice);
    if (slice == nullptr) {
      checked = absl::NotFoundError(
          absl::StrCat("Compile: unknown slice handle ", request.slice.value(),
                       " (request the slice first)"));
      return;
    }
    checked = session.CheckNewExecutable(request.handle);
    num_devices = slice->state == SliceRecord::State::kGranted
                      ? static_cast<int64_t>(slice->devices.size())
                      : slice->request.num_devices;
  });
  if (!open.ok()) return MakeErrorFuture<transport::CompileInfo>(open);
  if (!checked.ok()) return MakeErrorFuture<transport::CompileInfo>(checked);
  // Parsing and verifying can take a while: outside the lock.
  absl::StatusOr<std::shared_ptr<const CompiledProgram>> compiled =
      programs_.GetOrCompile(request.hlo_text);
  // The cache may have let go of older programs to keep this one.
  UnloadUnusedPrograms();
  if (!compiled.ok()) {
    return MakeErrorFuture<transport::CompileInfo>(compiled.status());
  }
  absl::StatusOr<BoundProgram> bound = BindProgram(*compiled, num_devices);
  if (!bound.ok()) {
    return MakeErrorFuture<transport::CompileInfo>(bound.status());
  }
  const CompiledProgram& program = **compiled;
  transport::CompileInfo info;
  info.handle = request.handle;
  info.num_partitions = num_devices;
  info.parameter_shapes = program.parameter_shapes;
  info.parameter_shardings = bound->parameter_shardings;
  info.output_shapes = program.output_shapes;
  info.output_shardings = bound->output_shardings;
  auto executable = std::make_shared<ExecutableRecord>();
  executable->handle = request.handle;
  executable->slice = request.slice;
  executable->bound = *std::move(bound);
  absl::Status added;
  open = sessions_.WithSession(session_id, [&](Session& session) {
    added = session.AddExecutable(executable);
    const SliceRecord* slice = session.FindSlice(request.slice);
    if (added.ok() && slice != nullptr &&
        slice->state == SliceRecord::State::kGranted) {
      LoadProgram(program, slice->devices);
    }
  });
  if (!open.ok()) return MakeErrorFuture<transport::CompileInfo>(open);
  if (!added.ok()) return MakeErrorFuture<transport::CompileInfo>(added);
  return MakeReadyFuture(std::move(info));
}

// ---------------------------------------------------------------------------
// Arrays.

Future<> Head::PutArray(SessionId session_id, transport::ArraySpec spec,
                        hlo::Literal global) {
  return Upload(session_id, std::move(spec),
                UploadSource::Global(std::move(global)));
}

Future<> Head::PutShards(SessionId session_id, transport::ArraySpec spec,
                         std::vector<hlo::Literal> shards) {
  return Upload(session_id, std::move(spec),
                UploadSource::Shards(std::move(shards)));
}

Future<> Head::Upload(SessionId session_id, transport::ArraySpec spec,
                      std::shared_ptr<UploadSource> source) {
  Outbox::Flush flush(outbox_);
  auto [promise, future] = MakePromise<>();
  auto shared = std::make_shared<Promise<>>(std::move(promise));
  const SliceHandle slice = spec.slice;
  absl::Status open = ForClient(session_id, [&](Session& session) {
    session.RunOrDefer(
        slice,
        [this, spec = std::move(spec), source = std::move(source),
         shared](Session& session) mutable {
          uploads_->Place(session, spec, std::move(source), shared);
        },
        [this, shared](const absl::Status& status) {
          ResolveLater(shared, status);
        });
  });
  if (!open.ok()) return MakeErrorFuture(open);
  return future;
}

template <typename T>
Future<T> Head::ReadArray(
    SessionId session_id, ArrayHandle handle,
    void (Fetches::*read)(std::shared_ptr<const ArrayRecord>,
                          std::shared_ptr<Promise<T>>)) {
  Outbox::Flush flush(outbox_);
  auto [promise, future] = MakePromise<T>();
  auto shared = std::make_shared<Promise<T>>(std::move(promise));
  auto cancel = [this, shared](const absl::Status& status) {
    ResolveLater(shared, internal::FutureResult<T>(status));
  };
  absl::Status open = ForClient(session_id, [&](Session& session) {
    session.RunOrDefer(
        {},
        [this, handle, read, shared, cancel](Session& session) {
          absl::StatusOr<std::shared_ptr<const ArrayRecord>> found =
              arrays_.Find(session.id(), handle, [] { return std::string(); });
          if (!found.ok()) return cancel(found.status());
          (fetches_.get()->*read)(*std::move(found), shared);
        },
        cancel);
  });
  if (!open.ok()) return MakeErrorFuture<T>(open);
  return future;
}

Future<> Head::ArrayReady(SessionId session_id, ArrayHandle handle) {
  return ReadArray<void>(session_id, handle, &Fetches::Ready);
}

Future<hlo::Literal> Head::Fetch(SessionId session_id, ArrayHandle handle) {
  return ReadArray<hlo::Literal>(session_id, handle, &Fetches::Fetch);
}

Future<std::vector<hlo::Literal>> Head::FetchShards(SessionId session_id,
                                                    ArrayHandle handle) {
  return ReadArray<std::vector<hlo::Literal>>(session_id, handle,
                                              &Fetches::FetchShards);
}

void Head::Delete(SessionId session_id, std::vector<ArrayHandle> arrays) {
  Outbox::Flush flush(outbox_);
  if (arrays.size() > options_.session_limits.max_handles_per_call) {
    CW_LOG(WARNING) << "Delete of " << arrays.size()
                    << " arrays in one call refused (at most "
                    << options_.session_limits.max_handles_per_call << ")";
    return;
  }
  ForClient(session_id, [&](Session& session) {
    session.RunOrDefer(
        {},
        [this, arrays = std::move(arrays)](Session& session) {
          Dispatcher::Batch batch(*dispatcher_);
          for (ArrayHandle handle : arrays) {
            std::shared_ptr<const ArrayRecord> record =
                arrays_.Remove(session.id(), handle);
            if (record != nullptr && record->buffers != nullptr) {
              dispatcher_->Delete(record->buffers);
            }
          }
        },
        [](const absl::Status&) {});
  }).IgnoreError();
}

// ---------------------------------------------------------------------------
// Execute and Copy.

void Head::Execute(SessionId session_id, transport::ExecuteOp op) {
  transport::ProgramGraph graph;
  graph.ops.push_back(std::move(op));
  Submit(session_id, std::move(graph));
}

void Head::Copy(SessionId session_id, transport::CopyOp op) {
  transport::ProgramGraph graph;
  graph.ops.push_back(std::move(op));
  Submit(session_id, std::move(graph));
}

void Head::Submit(SessionId session_id, transport::ProgramGraph graph) {
  Outbox::Flush flush(outbox_);
  if (graph.ops.size() > options_.session_limits.max_ops_per_graph) {
    const absl::Status refused = absl::InvalidArgumentError(
        absl::StrCat("a program graph of ", graph.ops.size(), " ops; at most ",
                     options_.session_limits.max_ops_per_graph));
    ForClient(session_id, [&](Session&) {
      for (auto& node : graph.ops) {
        if (auto* execute = std::get_if<transport::ExecuteOp>(&node)) {
          arrays_.AddErrors(session_id, execute->outputs, refused);
        } else {
          arrays_.AddErrors(session_id,
                            {std::get<transport::CopyOp>(node).destination},
                            refused);
        }
      }
    }).IgnoreError();
    return;
  }
  ForClient(session_id, [&](Session& session) {
    // All nodes at once: every launch released meanwhile joins one batch,
    // so each worker gets one message for the whole graph.
    Dispatcher::Batch batch(*dispatcher_);
    for (auto& node : graph.ops) {
      if (auto* execute = std::get_if<transport::ExecuteOp>(&node)) {
        EnqueueExecute(session, std::move(*execute));
      } else {
        EnqueueCopy(session, std::move(std::get<transport::CopyOp>(node)));
      }
    }
  }).IgnoreError();
}

void Head::EnqueueExecute(Session& session, transport::ExecuteOp op) {
  auto shared = std::make_shared<transport::ExecuteOp>(std::move(op));
  session.RunOrDefer(
      shared->executable,
      [this, shared](Session& session) { ExecuteNow(session, *shared); },
      [this, id = session.id(), shared](const absl::Status& status) {
        arrays_.AddErrors(id, shared->outputs, status);
      });
}

void Head::EnqueueCopy(Session& session, transport::CopyOp op) {
  auto shared = std::make_shared<transport::CopyOp>(std::move(op));
  session.RunOrDefer(
      shared->destination.slice,
      [this, shared](Session& session) { CopyNow(session, *shared); },
      [this, id = session.id(), shared](const absl::Status& status) {
        arrays_.AddErrors(id, {shared->destination}, status);
      });
}

PlanContext Head::PlanContextFor(const Session& session,
                                 const SliceRecord& slice,
                                 const Topology& topology) {
  return PlanContext{.session = session.id(),
                     .session_name = session.name(),
                     .island = slice.island,
                     .devices = slice.devices,
                     .topology = &topology,
                     .arrays = &arrays_,
                     .next_transfer_id = sessions_.transfer_ids()};
}

void Head::ExecuteNow(Session& session, const transport::ExecuteOp& op) {
  const SessionLimits& limits = options_.session_limits;
  if (op.arguments.size() > limits.max_handles_per_call ||
      op.outputs.size() > limits.max_handles_per_call) {
    CW_LOG(WARNING) << "Execute in session '" << session.name()
                    << "' dropped: too many handles";
    return;
  }
  if (absl::Status fresh = arrays_.CheckNewHandles(session.id(), op.outputs);
      !fresh.ok()) {
    CW_LOG(WARNING) << "Execute in session '" << session.name()
                    << "' dropped: " << fresh;
    arrays_.AddErrors(session.id(), op.outputs, fresh);
    return;
  }
  auto fail = [&](const absl::Status& status) {
    arrays_.AddErrors(session.id(), op.outputs, status);
  };
  const ExecutableRecord* found = session.FindExecutable(op.executable);
  if (found == nullptr) {
    return fail(absl::NotFoundError(absl::StrCat(
        "Execute: unknown executable handle ", op.executable.value(),
        " (not compiled in this session)")));
  }
  const ExecutableRecord& executable = *found;
  const std::string& name = executable.bound.program->name;
  const SliceRecord& slice = *session.FindSlice(executable.slice);
  if (slice.state != SliceRecord::State::kGranted) {
    return fail(absl::UnavailableError(
        absl::StrCat("program '", name, "': its slice ", slice.handle.value(),
                     slice.state == SliceRecord::State::kBroken
                         ? " lost devices and waits for spares"
                         : " has no devices (released or refused)")));
  }
  for (const transport::ArraySpec& spec : op.outputs) {
    if (absl::Status shape = ValidateArrayShape(
            spec.global_shape,
            absl::StrCat("output array ", spec.handle.value()));
        !shape.ok()) {
      return fail(shape);
    }
  }
  const std::shared_ptr<const Topology> topology = membership_.topology();
  const PlanContext context = PlanContextFor(session, slice, *topology);
  absl::StatusOr<LaunchPlan> plan =
      PlanExecute(context, executable.bound, executable.slice, op);
  if (!plan.ok()) return fail(plan.status());
  for (const auto& output : plan->outputs) arrays_.Add(output);
  absl::Status scheduled = dispatcher_->Schedule(plan->launch);
  if (!scheduled.ok()) {
    // Never sent: the outputs are errors without buffers.
    for (const auto& output : plan->outputs) {
      arrays_.Fail(session.id(), output->handle, scheduled);
    }
  }
}

void Head::CopyNow(Session& session, const transport::CopyOp& op) {
  const transport::ArraySpec& spec = op.destination;
  if (absl::Status fresh = arrays_.CheckNewHandles(session.id(), {spec});
      !fresh.ok()) {
    CW_LOG(WARNING) << "Copy in session '" << session.name()
                    << "' dropped: " << fresh;
    return;
  }
  auto fail = [&](const absl::Status& status) {
    arrays_.AddErrors(session.id(), {spec}, status);
  };
  if (absl::Status shape = ValidateArrayShape(spec.global_shape, "Copy");
      !shape.ok()) {
    return fail(shape);
  }
  const SliceRecord* found = session.FindSlice(spec.slice);
  if (found == nullptr) {
    return fail(absl::NotFoundError(
        absl::StrCat("Copy: unknown slice handle ", spec.slice.value())));
  }
  const SliceRecord& slice = *found;
  if (slice.state != SliceRecord::State::kGranted) {
    return fail(absl::UnavailableError(absl::StrCat(
        "Copy: slice ", spec.slice.value(), " has no devices now")));
  }
  const std::shared_ptr<const Topology> topology = membership_.topology();
  const PlanContext context = PlanContextFor(session, slice, *topology);
  absl::StatusOr<CopyPlan> plan = PlanCopy(context, op);
  if (!plan.ok()) return fail(plan.status());
  arrays_.Add(plan->destination);
  for (auto& [transfer, source] : plan->transfers) {
    dispatcher_->Transfer(std::move(transfer), source,
                          plan->destination->buffers);
  }
}

// ---------------------------------------------------------------------------
// Membership and failure.

absl::StatusOr<HostAssignment> Head::RegisterHost(
    const HostRegistration& registration) {
  CW_ASSIGN_OR_RETURN(HostAssignment assignment,
                      membership_.Register(registration));
  events_->HostStateChanged(trace::HostEvent{
      absl::Now(), assignment.host,
      absl::StrCat("joining island ", assignment.island.value())});
  return assignment;
}

absl::Status Head::ActivateHost(HostId host,
                                std::shared_ptr<ControlChannel> channel) {
  Outbox::Flush flush(outbox_);
  CW_RETURN_IF_ERROR(membership_.Activate(host, std::move(channel)));
  health_->WatchHost(host);
  events_->HostStateChanged(trace::HostEvent{absl::Now(), host, "alive"});
  // Every alive worker, this one included, learns the new membership.
  dispatcher_->MembershipChanged();
  // Its devices join the pool: queued and broken slices may be granted.
  CW_RETURN_IF_ERROR(resources_->AddHost(membership_.topology(), host));
  return absl::OkStatus();
}

bool Head::IsHostAlive(HostId host) const {
  const std::shared_ptr<const Topology> topology = membership_.topology();
  return topology->HasHost(host) && topology->IsAlive(host);
}

absl::Status Head::AwaitHostDead(HostId host, absl::Time deadline) {
  return membership_.AwaitDeathHandled(host, deadline);
}

void Head::MarkHostDead(HostId host, const std::string& reason) {
  Outbox::Flush flush(outbox_);
  const HostState before = membership_.MarkDead(host, reason);
  if (before == HostState::kDead) return;  // Unknown, or dead already.
  health_->ForgetHost(host);
  const absl::Status lost = absl::DataLossError(
      absl::StrCat("host ", host.value(), " was lost (", reason, ")"));
  const std::shared_ptr<const Topology> topology = membership_.topology();
  std::vector<std::shared_ptr<const ArrayRecord>> failed;
  // Serialized with the session service's planning.
  sessions_.Exclusive(
      [&] { failed = arrays_.FailArraysOnHost(host, *topology, lost); });
  {
    // Their shards on other hosts go back, one message per worker.
    Dispatcher::Batch batch(*dispatcher_);
    for (const auto& record : failed) dispatcher_->Delete(record->buffers);
  }
  // Live workers fail what waits for the host; launches in flight stop
  // waiting for it.
  dispatcher_->HostLost(host, lost);
  dispatcher_->MembershipChanged();
  events_->HostStateChanged(
      trace::HostEvent{absl::Now(), host, absl::StrCat("dead: ", reason)});
  if (before == HostState::kAlive) {
    // Slices there move to spare devices (OnSliceEvent reloads their
    // executables).
    absl::Status marked = resources_->MarkHostDead(host);
    if (!marked.ok()) {
      CW_LOG(WARNING) << "MarkHostDead: " << marked;
    }
  }
  CW_LOG(WARNING) << lost.message();
  membership_.DeathHandled(host);
}

void Head::CheckHealthNow() { health_->CheckNow(); }

void Head::OnOpDone(const transport::OpDone& done) {
  Outbox::Flush flush(outbox_);
  if (!OpDoneIsFromItsDevice(*membership_.topology(), done)) {
    CW_LOG(WARNING) << "OpDone from host " << done.host << " for device "
                    << done.device << ", which is not its own: ignored";
    return;
  }
  dispatcher_->OnOpDone(done);
}

void Head::OnPushFailed(const transport::UndeliveredPiece& piece) {
  Outbox::Flush flush(outbox_);
  if (!BothEndsAlive(*membership_.topology(), piece)) return;
  dispatcher_->AfterSent([membership = &membership_, piece] {
    if (std::shared_ptr<ControlChannel> destination =
            membership->Channel(piece.destination_host)) {
      destination->FailBuffers({piece});
    }
  });
}

void Head::OnWorkerDisconnected(HostId host, absl::Status why) {
  MarkHostDead(host, absl::StrCat("its connection broke: ", why.message()));
}

void Head::OnTraceEvents(HostId host, std::vector<trace::EventRecord> events,
                         absl::Duration clock_offset) {
  if (!membership_.topology()->HasHost(host)) return;
  absl::StatusOr<std::vector<trace::EventRecord>> own =
      OwnTraceEvents(host, std::move(events), clock_offset);
  if (!own.ok()) {
    CW_LOG(WARNING) << own.status().message() << ": dropped";
    return;
  }
  trace::Replay(*own, clock_offset, *events_);
}

// ---------------------------------------------------------------------------
// Status and trace.

Future<WorkerStatuses> Head::GetWorkerStatuses(absl::Duration timeout) {
  Outbox::Flush flush(outbox_);
  return statuses_->Ask(timeout);
}

Future<transport::StatusReport> Head::GetStatus() {
  auto inputs = std::make_shared<StatusInputs>();
  inputs->topology = membership_.topology();
  inputs->deaths = membership_.Deaths();
  sessions_.ForEach([&](const Session& session) {
    inputs->sessions.push_back(
        SessionSummary{session.id(), session.name(),
                       static_cast<int64_t>(session.slices().size()),
                       session.num_executables(), arrays_.Count(session.id()),
                       session.num_deferred(), session.leased()});
  });
  inputs->resources = resources_->DebugString();
  inputs->scheduling = dispatcher_->DebugString();
  auto [promise, future] = MakePromise<transport::StatusReport>();
  GetWorkerStatuses(absl::Seconds(5))
      .OnReady(InlineExecutor::Instance(),
               [inputs, promise = std::move(promise)](
                   const absl::StatusOr<WorkerStatuses>& workers) mutable {
                 if (workers.ok()) inputs->workers = *workers;
                 promise.Set(BuildStatusReport(*inputs));
               });
  return future;
}

ClusterView Head::View() const {
  ClusterView view;
  view.topology = membership_.topology();
  view.deaths = membership_.Deaths();
  sessions_.ForEach([&](const Session& session) {
    SessionView out;
    out.id = session.id();
    out.name = session.name();
    out.leased = session.leased();
    out.priority = session.priority();
    out.weight = session.weight();
    out.executables = session.num_executables();
    out.arrays = arrays_.Count(session.id());
    out.deferred = session.num_deferred();
    for (const auto& [handle, record] : session.slices()) {
      SessionView::Slice slice;
      slice.handle = handle;
      slice.state = SliceStateName(record->state);
      slice.requested_devices = record->request.num_devices;
      slice.requested_island = record->request.island;
      slice.island = record->island;
      slice.devices = record->devices;
      slice.mesh_shape = record->mesh_shape;
      slice.generation = record->generation;
      if (!record->failure.ok()) {
        slice.failure = std::string(record->failure.message());
      }
      out.slices.push_back(std::move(slice));
    }
    view.sessions.push_back(std::move(out));
  });
  view.slices = resources_->ListSlices();
  view.heartbeat_ages = health_->HeartbeatAges();
  return view;
}

Future<std::string> Head::GetTrace() {
  return MakeReadyFuture(events_->ExportChromeTrace());
}

}  // namespace causeway::head
