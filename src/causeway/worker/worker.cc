#include "causeway/worker/worker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/exec/evaluator.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/verifier.h"

namespace causeway::worker {

using trace::NullEventSink;
using trace::TransferEvent;
using transport::Box;
using transport::DeviceBuffer;
using transport::DeviceInfo;
using transport::ExtractPiece;
using transport::LaunchOp;
using transport::LoadProgramRequest;
using transport::PieceMessage;
using transport::PieceOrigin;
using transport::ProgramId;
using transport::PutBufferRequest;
using transport::ReceiveSpec;
using transport::SendSpec;
using transport::WorkerBatch;
using transport::WorkerStatus;

namespace {

bool HasCollectives(const hlo::Module& module) {
  for (const auto& computation : module.computations()) {
    for (const auto& instruction : computation->instructions()) {
      if (hlo::IsCollective(instruction->opcode)) return true;
    }
  }
  return false;
}

std::string DescribeOrigins(const std::vector<PieceOrigin>& origins) {
  std::vector<std::string> parts;
  for (const PieceOrigin& origin : origins) {
    parts.push_back(origin.description.empty()
                        ? absl::StrCat("device ", origin.device.value(),
                                       " (host ", origin.host.value(), ")")
                        : origin.description);
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(WorkerOptions options) {
  if (options.devices.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker for host ", options.host.value(), " has no devices"));
  }
  if (options.data_plane == nullptr || options.collectives == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker for host ", options.host.value(),
        " needs a data plane and the island's collectives"));
  }
  for (const DeviceInfo& device : options.devices) {
    if (device.host != options.host) {
      return absl::InvalidArgumentError(
          absl::StrCat("device ", device.id.value(), " belongs to host ",
                       device.host.value(), ", not to host ",
                       options.host.value()));
    }
  }
  return std::unique_ptr<Worker>(new Worker(std::move(options)));
}

Worker::Worker(WorkerOptions options)
    : options_(std::move(options)),
      events_(options_.events != nullptr ? options_.events
                                         : &NullEventSink()) {
  for (const DeviceInfo& info : options_.devices) {
    devices_.emplace(info.id, std::make_unique<Device>(Device::Options{
                                  .info = info,
                                  .events = events_,
                                  .listener = options_.listener,
                                  .collectives = options_.collectives}));
  }
  transfers_ = std::make_unique<ThreadPool>(
      absl::StrCat("xfer", options_.host.value()), 1);
}

Worker::~Worker() { Stop(); }

bool Worker::Enter() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return false;
  ++active_calls_;
  return true;
}

void Worker::Exit() {
  absl::MutexLock lock(&mu_);
  --active_calls_;
}

bool Worker::stopped() const {
  absl::MutexLock lock(&mu_);
  return stopped_;
}

absl::Status Worker::StoppedError() const {
  return absl::UnavailableError(
      absl::StrCat("host ", options_.host.value(), " is stopped"));
}

Device* Worker::FindDevice(DeviceId device) {
  auto it = devices_.find(device);
  return it == devices_.end() ? nullptr : it->second.get();
}

Future<> Worker::LoadProgram(LoadProgramRequest request) {
  if (!Enter()) return MakeErrorFuture(StoppedError());
  auto load = [&]() -> absl::Status {
    {
      absl::MutexLock lock(&mu_);
      if (programs_.contains(request.program)) return absl::OkStatus();
    }
    std::shared_ptr<const hlo::Module> module = request.module;
    if (module == nullptr) {
      CW_ASSIGN_OR_RETURN(std::unique_ptr<hlo::Module> parsed,
                          hlo::ParseModule(request.hlo_text));
      CW_RETURN_IF_ERROR(hlo::VerifyModule(*parsed));
      module = std::move(parsed);
    }
    auto program = std::make_shared<LoadedProgram>();
    program->id = request.program;
    program->name = request.name.empty() ? module->name() : request.name;
    program->module = module;
    program->has_collectives = HasCollectives(*module);
    CW_ASSIGN_OR_RETURN(program->evaluator, exec::Evaluator::Create(*module));
    absl::MutexLock lock(&mu_);
    programs_.emplace(request.program, std::move(program));
    return absl::OkStatus();
  };
  absl::Status status = load();
  Exit();
  return MakeReadyFuture(std::move(status));
}

void Worker::UnloadProgram(ProgramId program) {
  absl::MutexLock lock(&mu_);
  programs_.erase(program);  // Queued launches keep their own reference.
}

void Worker::Dispatch(WorkerBatch batch) {
  if (!Enter()) return;
  for (const ReceiveSpec& receive : batch.receives) SetUpReceive(receive);
  for (LaunchOp& launch : batch.launches) EnqueueLaunch(std::move(launch));
  for (SendSpec& send : batch.sends) ArmSend(std::move(send));
  for (const DeviceBuffer& release : batch.releases) {
    if (Device* device = FindDevice(release.device)) {
      device->store().Release(release.buffer).IgnoreError();
    }
  }
  Exit();
}

void Worker::SetUpReceive(const ReceiveSpec& spec) {
  Device* device = FindDevice(spec.device);
  if (device == nullptr) {
    CW_LOG(ERROR) << "receive for device " << spec.device << " on host "
                  << options_.host << ", which does not have it";
    return;
  }
  ObjectStore& store = device->store();
  // The owner's reference (the array, or the launch that stages it) ...
  store.Reserve(spec.buffer, spec.shape);
  // ... and the receive's own, dropped when the last piece is in.
  if (!store.AddRef(spec.buffer).ok()) return;
  if (!spec.whole) {
    store
        .ExpectPieces(spec.buffer, static_cast<int64_t>(spec.pieces.size() +
                                                        spec.zero_fill.size()))
        .IgnoreError();  // A failed buffer stays failed; pieces are ignored.
    for (const Box& box : spec.zero_fill) {
      store
          .WritePiece(spec.buffer, box.offsets,
                      hlo::Literal(hlo::Shape(spec.shape.type(), box.dims)))
          .IgnoreError();
    }
  }
  const BufferKey key(spec.device, spec.buffer);
  std::vector<PieceMessage> early;
  {
    absl::MutexLock lock(&mu_);
    if (spec.pieces.empty()) {
      // Nothing will come (the zero fill was all of it).
    } else {
      PendingReceive& pending = pending_receives_[key];
      pending.remaining = static_cast<int64_t>(spec.pieces.size());
      pending.whole = spec.whole;
      pending.origins = spec.pieces;
      auto [first, last] = early_pieces_.equal_range(key);
      for (auto it = first; it != last; ++it) {
        early.push_back(std::move(it->second));
      }
      early_pieces_.erase(first, last);
    }
  }
  if (spec.pieces.empty()) {
    store.Release(spec.buffer).IgnoreError();
    return;
  }
  for (PieceMessage& piece : early) AcceptPiece(std::move(piece));
}

void Worker::ReceivePiece(PieceMessage piece) {
  if (!Enter()) return;
  AcceptPiece(std::move(piece));
  Exit();
}

void Worker::AcceptPiece(PieceMessage piece) {
  Device* device = FindDevice(piece.destination_device);
  if (device == nullptr) {
    CW_LOG(ERROR) << "piece for device " << piece.destination_device
                  << " on host " << options_.host << ", which lacks it";
    return;
  }
  const BufferKey key(piece.destination_device, piece.destination);
  bool last = false;
  bool already_failed = false;
  bool whole = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_receives_.find(key);
    if (it == pending_receives_.end()) {
      early_pieces_.emplace(key, std::move(piece));
      return;
    }
    PendingReceive& pending = it->second;
    already_failed = pending.failed;
    whole = pending.whole;
    if (!piece.data.ok()) pending.failed = true;
    last = --pending.remaining <= 0;
    if (last) pending_receives_.erase(it);
  }
  if (already_failed) return;  // Its reference is gone already.
  ObjectStore& store = device->store();
  absl::Status written;
  if (!piece.data.ok()) {
    written = piece.data.status();
    store.Fail(piece.destination, written).IgnoreError();
  } else if (whole) {
    written = store.Fulfill(piece.destination, *std::move(piece.data));
  } else {
    written = store.WritePiece(piece.destination, piece.offsets,
                               *std::move(piece.data));
  }
  if (!written.ok() && !last) {
    // The buffer failed (the store fails it on a rejected write): later
    // pieces are dropped.
    absl::MutexLock lock(&mu_);
    auto it = pending_receives_.find(key);
    if (it != pending_receives_.end()) it->second.failed = true;
  }
  if (!written.ok() || last) store.Release(piece.destination).IgnoreError();
}

void Worker::EnqueueLaunch(LaunchOp op) {
  Device* device = FindDevice(op.device);
  if (device == nullptr) {
    CW_LOG(ERROR) << "launch for device " << op.device << " sent to host "
                  << options_.host << ", which does not have it";
    return;
  }
  for (const ReceiveSpec& receive : op.staging) SetUpReceive(receive);
  std::shared_ptr<const LoadedProgram> program;
  absl::Status error = op.abandoned;
  {
    absl::MutexLock lock(&mu_);
    auto it = programs_.find(op.program);
    if (it != programs_.end()) program = it->second;
  }
  if (!error.ok()) {
    // Abandoned by the head.
  } else if (program == nullptr) {
    error = absl::FailedPreconditionError(
        absl::StrCat("program '", op.program_name, "' is not loaded on host ",
                     options_.host.value()));
  } else if (static_cast<int64_t>(op.inputs.size()) !=
             program->module->entry()->parameter_count()) {
    error = absl::InvalidArgumentError(absl::StrCat(
        "program '", op.program_name, "' takes ",
        program->module->entry()->parameter_count(), " arguments, the launch "
        "passes ", op.inputs.size()));
  }
  device->Enqueue(std::move(op), std::move(program), std::move(error));
}

void Worker::ArmSend(SendSpec spec) {
  Device* device = FindDevice(spec.device);
  absl::Status referenced =
      device == nullptr
          ? absl::NotFoundError(absl::StrCat("host ", options_.host.value(),
                                             " has no device ",
                                             spec.device.value()))
          : device->store().AddRef(spec.source);
  if (!referenced.ok()) {
    Send(spec, absl::NotFoundError(absl::StrCat(
                   "transfer source missing: ", referenced.message())));
    return;
  }
  device->store().Get(spec.source).OnReady(
      *transfers_, [this, device, spec = std::move(spec)](
                       const absl::StatusOr<hlo::Literal>& value) {
        Send(spec, value);
        device->store().Release(spec.source).IgnoreError();
      });
}

void Worker::Send(const SendSpec& spec,
                  const absl::StatusOr<hlo::Literal>& source) {
  if (stopped()) return;
  PieceMessage piece;
  piece.transfer_id = spec.transfer_id;
  piece.source_device = spec.device;
  piece.source_host = options_.host;
  piece.destination_device = spec.destination_device;
  piece.destination = spec.destination;
  piece.offsets = spec.destination_offsets;
  piece.whole = spec.whole;
  if (!source.ok()) {
    piece.data = source.status();
  } else if (spec.whole) {
    piece.data = *source;
  } else {
    piece.data = ExtractPiece(*source, spec.region.offsets, spec.region.dims);
  }
  TransferEvent event;
  event.time = absl::Now();
  event.transfer_id = spec.transfer_id;
  event.source_device = spec.device;
  event.source_host = options_.host;
  event.destination_device = spec.destination_device;
  event.destination_host = spec.destination_host;
  event.bytes = piece.data.ok() ? piece.data->size_bytes() : 0;
  event.description = absl::StrCat(spec.source.ToString(), " -> ",
                                   spec.destination.ToString());
  events_->TransferStarted(event);
  absl::Status pushed =
      options_.data_plane->Push(spec.destination_host, std::move(piece));
  event.time = absl::Now();
  events_->TransferFinished(event, pushed);
}

Future<> Worker::PutBuffer(PutBufferRequest request) {
  if (!Enter()) return MakeErrorFuture(StoppedError());
  Device* device = FindDevice(request.device);
  Future<> put =
      device == nullptr
          ? MakeErrorFuture(absl::NotFoundError(
                absl::StrCat("host ", options_.host.value(),
                             " has no device ", request.device.value())))
          : device->store().Put(request.buffer, std::move(request.value));
  Exit();
  return put;
}

Future<> Worker::AwaitBuffers(std::vector<DeviceBuffer> buffers) {
  if (!Enter()) return MakeErrorFuture(StoppedError());
  std::vector<Future<>> ready;
  ready.reserve(buffers.size());
  for (const DeviceBuffer& buffer : buffers) {
    Device* device = FindDevice(buffer.device);
    if (device == nullptr) {
      ready.push_back(MakeErrorFuture(absl::NotFoundError(
          absl::StrCat("host ", options_.host.value(), " has no device ",
                       buffer.device.value()))));
      continue;
    }
    ready.push_back(device->store().Get(buffer.buffer).Map(
        InlineExecutor::Instance(), [](const hlo::Literal&) {}));
  }
  Exit();
  return JoinFutures(std::move(ready));
}

Future<hlo::Literal> Worker::FetchBuffer(DeviceBuffer buffer) {
  if (!Enter()) return MakeErrorFuture<hlo::Literal>(StoppedError());
  Device* device = FindDevice(buffer.device);
  Future<hlo::Literal> value =
      device == nullptr
          ? MakeErrorFuture<hlo::Literal>(absl::NotFoundError(
                absl::StrCat("host ", options_.host.value(),
                             " has no device ", buffer.device.value())))
          : device->store().Get(buffer.buffer);
  Exit();
  return value;
}

void Worker::ReleaseBuffers(std::vector<DeviceBuffer> buffers) {
  if (!Enter()) return;
  for (const DeviceBuffer& buffer : buffers) {
    if (Device* device = FindDevice(buffer.device)) {
      device->store().Release(buffer.buffer).IgnoreError();
    }
  }
  Exit();
}

void Worker::CancelSession(SessionId session, absl::Status status) {
  if (!Enter()) return;
  for (auto& [id, device] : devices_) device->CancelSession(session, status);
  Exit();
}

void Worker::PeerLost(HostId host, absl::Status status) {
  if (!Enter()) return;
  struct Lost {
    BufferKey key;
    bool failed;
    std::string origins;
  };
  std::vector<Lost> lost;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = pending_receives_.begin(); it != pending_receives_.end();) {
      const std::vector<PieceOrigin>& origins = it->second.origins;
      const bool from_host =
          std::any_of(origins.begin(), origins.end(),
                      [&](const PieceOrigin& o) { return o.host == host; });
      if (!from_host) {
        ++it;
        continue;
      }
      lost.push_back({it->first, it->second.failed,
                      DescribeOrigins(it->second.origins)});
      it = pending_receives_.erase(it);
    }
  }
  for (const Lost& receive : lost) {
    Device* device = FindDevice(receive.key.first);
    if (!receive.failed) {
      device->store()
          .Fail(receive.key.second,
                absl::Status(status.code(),
                             absl::StrCat(status.message(), "; ",
                                          receive.key.second.ToString(),
                                          " was to receive data from ",
                                          receive.origins)))
          .IgnoreError();
      device->store().Release(receive.key.second).IgnoreError();
    }
  }
  for (auto& [id, device] : devices_) {
    device->AbandonLaunchesOnHost(host, status);
  }
  Exit();
}

Future<> Worker::Heartbeat() {
  if (!Enter()) return MakeErrorFuture(StoppedError());
  Exit();
  return MakeReadyFuture();
}

Future<WorkerStatus> Worker::GetStatus() {
  if (!Enter()) return MakeErrorFuture<WorkerStatus>(StoppedError());
  WorkerStatus status;
  status.host = options_.host;
  for (auto& [id, device] : devices_) {
    status.devices.push_back(device->Status());
  }
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, pending] : pending_receives_) {
      if (pending.failed) continue;
      status.pending_receives.push_back(absl::StrCat(
          key.second.ToString(), " on device ", key.first.value(), ": ",
          pending.remaining, " piece", pending.remaining == 1 ? "" : "s",
          " to come from ", DescribeOrigins(pending.origins)));
    }
  }
  Exit();
  return MakeReadyFuture(std::move(status));
}

void Worker::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return active_calls_ == 0;
    };
    mu_.Await(absl::Condition(&idle));
  }
  const absl::Status lost = absl::DataLossError(
      absl::StrCat("host ", options_.host.value(), " stopped"));
  for (auto& [id, device] : devices_) device->Stop(lost);
  // Sends armed on buffers that just failed drain here (and push nothing).
  transfers_.reset();
  absl::MutexLock lock(&mu_);
  pending_receives_.clear();
  early_pieces_.clear();
  programs_.clear();
}

}  // namespace causeway::worker
