#include "causeway/worker/worker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "causeway/base/lock_order.h"
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
using transport::PieceShape;
using transport::LaunchOp;
using transport::LoadProgramRequest;
using transport::BoxRuns;
using transport::PieceHeader;
using transport::PieceMessage;
using transport::PieceOrigin;
using transport::PieceWriter;
using transport::ProgramId;
using transport::PutBufferRequest;
using transport::ReceiveSpec;
using transport::SendSpec;
using transport::TakePieceValue;
using transport::UndeliveredPiece;
using transport::WorkerBatch;
using transport::WorkerStatus;

namespace {

std::string DescribeOrigin(const PieceOrigin& origin) {
  return origin.description.empty()
             ? absl::StrCat("device ", origin.device.value(), " (host ",
                            origin.host.value(), ")")
             : origin.description;
}

}  // namespace

struct Worker::PushReports {
  trace::EventSink* events;
  transport::WorkerListener* listener;

  absl::Mutex mu;
  bool stopped ABSL_GUARDED_BY(mu) = false;
  int64_t running ABSL_GUARDED_BY(mu) = 0;

  bool Enter() {
    absl::MutexLock lock(&mu);
    if (stopped) return false;
    ++running;
    return true;
  }
  void Exit() {
    absl::MutexLock lock(&mu);
    --running;
  }
  void Stop() {
    absl::MutexLock lock(&mu);
    stopped = true;
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return running == 0;
    };
    mu.Await(absl::Condition(&idle));
  }
};

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(WorkerOptions options) {
  SkipAbseilLockOrderGraph();
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
    if ((device.kind == "sim") != options.sim.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device ", device.id.value(), " is of kind '", device.kind,
          "' but the worker ", options.sim.has_value() ? "models" : "runs",
          " its programs: sim devices take a SimModel, and only they do"));
    }
  }
  return std::unique_ptr<Worker>(new Worker(std::move(options)));
}

Worker::Worker(WorkerOptions options)
    : options_(std::move(options)),
      events_(options_.events != nullptr ? options_.events
                                         : &NullEventSink()),
      op_dones_(options_.listener != nullptr
                    ? std::make_unique<OpDoneBatcher>(options_.listener)
                    : nullptr) {
  for (const DeviceInfo& info : options_.devices) {
    devices_.emplace(info.id, std::make_unique<Device>(Device::Options{
                                  .info = info,
                                  .events = events_,
                                  .listener = op_dones_.get(),
                                  .collectives = options_.collectives}));
  }
  transfers_ = std::make_unique<ThreadPool>(
      absl::StrCat("xfer", options_.host.value()), 1);
  reports_ = std::make_shared<PushReports>();
  reports_->events = events_;
  reports_->listener = options_.listener;
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
    program->has_collectives = hlo::HasCollectives(*module);
    if (options_.sim.has_value()) {
      CW_ASSIGN_OR_RETURN(program->sim,
                          SimProgram::Create(*module, *options_.sim));
    } else {
      CW_ASSIGN_OR_RETURN(program->evaluator,
                          exec::Evaluator::Create(*module, options_.evaluator));
    }
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
  if (op_dones_ != nullptr) {
    // Every op of a launch here is expected before the first can end.
    std::map<std::pair<IslandId, uint64_t>, int> ops;
    for (const LaunchOp& launch : batch.launches) {
      if (FindDevice(launch.device) != nullptr) ++ops[{launch.island, launch.seq}];
    }
    for (const auto& [launch, count] : ops) {
      op_dones_->Expect(launch.first, launch.second, count);
    }
  }
  for (LaunchOp& launch : batch.launches) EnqueueLaunch(std::move(launch));
  for (SendSpec& send : batch.sends) ArmSend(std::move(send));
  ReleaseBuffers(std::move(batch.releases));
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
  PendingReceive pending;
  pending.whole = spec.whole;
  pending.shape = spec.shape;
  for (const PieceOrigin& origin : spec.pieces) {
    if (!pending.pieces.emplace(origin.transfer_id, ExpectedPiece{origin})
             .second) {
      store
          .Fail(spec.buffer,
                absl::InvalidArgumentError(absl::StrCat(
                    "the receive of ", spec.buffer.ToString(), " on device ",
                    spec.device.value(), " lists transfer ",
                    origin.transfer_id, " twice")))
          .IgnoreError();
      store.Release(spec.buffer).IgnoreError();
      return;
    }
  }
  pending.unresolved = static_cast<int64_t>(pending.pieces.size());
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
  if (spec.pieces.empty()) {
    // Nothing will come (the zero fill was all of it).
    store.Release(spec.buffer).IgnoreError();
    return;
  }
  const BufferKey key(spec.device, spec.buffer);
  std::vector<PieceMessage> early;
  {
    absl::MutexLock lock(&mu_);
    if (!pending_receives_.emplace(key, std::move(pending)).second) {
      CW_LOG(ERROR) << "receive of " << spec.buffer.ToString()
                    << " on device " << spec.device << " announced twice";
    } else {
      auto [first, last] = early_pieces_.equal_range(key);
      for (auto it = first; it != last; ++it) {
        early.push_back(std::move(it->second));
      }
      early_pieces_.erase(first, last);
    }
  }
  for (PieceMessage& piece : early) AcceptPiece(std::move(piece));
}

void Worker::ReceivePiece(PieceMessage piece) {
  if (!Enter()) return;
  AcceptPiece(std::move(piece));
  Exit();
}

void Worker::ForgetLocked(std::map<BufferKey, PendingReceive>::iterator it) {
  // Anything still held for it came twice.
  early_pieces_.erase(it->first);
  pending_receives_.erase(it);
}

void Worker::AcceptPiece(PieceMessage piece) {
  Device* device = FindDevice(piece.destination_device);
  if (device == nullptr) {
    CW_LOG(ERROR) << "piece for device " << piece.destination_device
                  << " on host " << options_.host << ", which lacks it";
    return;
  }
  const BufferKey key(piece.destination_device, piece.destination);
  bool already_failed = false;
  bool whole = false;
  bool release = false;  // Drop the receive's reference (once, by whoever
                         // fails the buffer or brings its last piece).
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_receives_.find(key);
    if (it == pending_receives_.end()) {
      early_pieces_.emplace(key, std::move(piece));
      return;
    }
    PendingReceive& pending = it->second;
    auto expected = pending.pieces.find(piece.transfer_id);
    if (expected == pending.pieces.end() ||
        expected->second.state != PieceState::kWaiting) {
      // Accounted for already (a duplicate, or reported undelivered by a
      // sender whose piece did arrive), or no piece of this receive.
      return;
    }
    already_failed = pending.failed;
    whole = pending.whole;
    if (!piece.data.ok() && !pending.failed) {
      pending.failed = true;
      release = true;
    }
    expected->second.state = PieceState::kDone;
    if (--pending.unresolved == 0) {
      if (!pending.failed) release = true;
      ForgetLocked(it);
    }
  }
  if (already_failed) return;  // Its reference is gone already.
  ObjectStore& store = device->store();
  const BufferId destination = piece.destination;
  const std::vector<int64_t> offsets = piece.offsets;
  absl::StatusOr<hlo::Literal> value = TakePieceValue(std::move(piece));
  absl::Status written;
  if (!value.ok()) {
    written = value.status();
    store.Fail(destination, written).IgnoreError();
  } else if (whole) {
    written = store.Fulfill(destination, *std::move(value));
  } else {
    written = store.WritePiece(destination, offsets, *std::move(value));
  }
  if (!written.ok() && !release) {
    // The store failed the buffer on the rejected write (or the box did
    // not fit its source): later pieces are dropped.
    absl::MutexLock lock(&mu_);
    auto it = pending_receives_.find(key);
    if (it != pending_receives_.end() && !it->second.failed) {
      it->second.failed = true;
      release = true;
    }
  }
  if (release) store.Release(destination).IgnoreError();
}

absl::StatusOr<std::unique_ptr<PieceWriter>> Worker::BeginPiece(
    const PieceHeader& header) {
  if (!Enter()) return StoppedError();
  auto begin = [&]() -> absl::StatusOr<std::unique_ptr<PieceWriter>> {
    Device* device = FindDevice(header.destination_device);
    if (device == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("piece for device ", header.destination_device.value(),
                       " on host ", options_.host.value(), ", which lacks it"));
    }
    const BufferKey key(header.destination_device, header.destination);
    const uint64_t transfer = header.transfer_id;
    bool release = false;
    std::vector<int64_t> buffer_dims;
    {
      absl::MutexLock lock(&mu_);
      auto it = pending_receives_.find(key);
      if (it == pending_receives_.end()) return nullptr;  // Not announced.
      PendingReceive& pending = it->second;
      auto expected = pending.pieces.find(transfer);
      if (expected == pending.pieces.end() ||
          expected->second.state != PieceState::kWaiting) {
        return absl::AlreadyExistsError(absl::StrCat(
            "transfer ", transfer, " to ", header.destination.ToString(),
            " is accounted for already"));
      }
      if (pending.failed) {
        // Its bytes are of no use: count the piece, drop them.
        expected->second.state = PieceState::kDone;
        if (--pending.unresolved == 0) ForgetLocked(it);
        return absl::FailedPreconditionError(absl::StrCat(
            header.destination.ToString(), " has failed already"));
      }
      expected->second.state = PieceState::kWriting;
      buffer_dims = pending.shape.dims();
    }
    ObjectStore& store = device->store();
    absl::StatusOr<std::byte*> base =
        store.BeginWrite(header.destination, header.offsets, header.shape);
    if (!base.ok()) {
      bool through_literal = false;
      {
        absl::MutexLock lock(&mu_);
        auto it = pending_receives_.find(key);
        if (it != pending_receives_.end()) {
          PendingReceive& pending = it->second;
          auto expected = pending.pieces.find(transfer);
          if (expected != pending.pieces.end() &&
              expected->second.state == PieceState::kWriting) {
            if (base.status().code() == absl::StatusCode::kUnavailable) {
              // Its memory is not granted yet: it comes as a literal.
              expected->second.state = PieceState::kWaiting;
              through_literal = true;
            } else {
              // The store refused the piece and failed the buffer.
              expected->second.state = PieceState::kDone;
              if (!pending.failed) {
                pending.failed = true;
                release = true;
              }
              if (--pending.unresolved == 0) ForgetLocked(it);
            }
          }
        }
      }
      if (release) store.Release(header.destination).IgnoreError();
      if (through_literal) return nullptr;
      return base.status();
    }
    return std::make_unique<PieceWriter>(
        *base,
        BoxRuns(buffer_dims, header.offsets, header.shape.dims(),
                hlo::ByteWidth(header.shape.type())),
        [this, key, transfer](absl::Status written) {
          FinishPiece(key, transfer, std::move(written));
        });
  };
  absl::StatusOr<std::unique_ptr<PieceWriter>> writer = begin();
  Exit();
  return writer;
}

void Worker::FinishPiece(BufferKey key, uint64_t transfer,
                         absl::Status written) {
  ObjectStore& store = FindDevice(key.first)->store();
  store.EndWrite(key.second, written);
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_receives_.find(key);
    if (it == pending_receives_.end()) return;
    PendingReceive& pending = it->second;
    auto expected = pending.pieces.find(transfer);
    if (expected == pending.pieces.end() ||
        expected->second.state != PieceState::kWriting) {
      return;  // Accounted for meanwhile (its host was lost).
    }
    if (written.ok()) {
      expected->second.state = PieceState::kDone;
      if (--pending.unresolved == 0) {
        if (!pending.failed) release = true;
        ForgetLocked(it);
      }
    } else {
      // Lost on the way: its sender reports it undelivered, or its host is
      // declared lost; either accounts for it.
      expected->second.state = PieceState::kWaiting;
      if (!pending.failed) {
        pending.failed = true;
        release = true;
      }
    }
  }
  if (release) store.Release(key.second).IgnoreError();
}

void Worker::FailReceivesFrom(HostId host, const absl::Status& status,
                              bool resolve) {
  struct Lost {
    BufferKey key;
    std::string origins;
  };
  std::vector<Lost> lost;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = pending_receives_.begin(); it != pending_receives_.end();) {
      PendingReceive& pending = it->second;
      std::vector<std::string> origins;
      bool from_host = false;
      for (auto& [transfer, piece] : pending.pieces) {
        if (piece.state == PieceState::kDone) continue;
        origins.push_back(DescribeOrigin(piece.origin));
        if (piece.origin.host != host) continue;
        from_host = true;
        if (resolve) {
          piece.state = PieceState::kDone;
          --pending.unresolved;
        }
      }
      if (from_host && !pending.failed) {
        pending.failed = true;
        lost.push_back({it->first, absl::StrJoin(origins, ", ")});
      }
      if (pending.unresolved == 0) {
        auto done = it++;
        ForgetLocked(done);
      } else {
        ++it;
      }
    }
  }
  for (const Lost& receive : lost) {
    ObjectStore& store = FindDevice(receive.key.first)->store();
    store
        .Fail(receive.key.second,
              absl::Status(status.code(),
                           absl::StrCat(status.message(), "; ",
                                        receive.key.second.ToString(),
                                        " was to receive data from ",
                                        receive.origins)))
        .IgnoreError();
    store.Release(receive.key.second).IgnoreError();
  }
}

void Worker::ConnectionLost(HostId peer, absl::Status status) {
  if (!Enter()) return;
  // The peer may still be alive: its pieces still come, or are reported.
  FailReceivesFrom(peer, status, /*resolve=*/false);
  Exit();
}

void Worker::FailBuffers(std::vector<UndeliveredPiece> pieces) {
  if (!Enter()) return;
  for (UndeliveredPiece& undelivered : pieces) {
    PieceMessage piece;
    piece.transfer_id = undelivered.transfer_id;
    piece.source_device = undelivered.source_device;
    piece.source_host = undelivered.source_host;
    piece.destination_device = undelivered.destination.device;
    piece.destination = undelivered.destination.buffer;
    piece.data = undelivered.status.ok()
                     ? absl::DataLossError(absl::StrCat(
                           "transfer ", undelivered.transfer_id,
                           " was not delivered"))
                     : std::move(undelivered.status);
    AcceptPiece(std::move(piece));
  }
  Exit();
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
  piece.data = source;  // Shared, never copied here.
  if (source.ok() && !spec.whole &&
      spec.region.dims != source->shape().dims()) {
    // A box of the source: the data plane takes it from there.
    piece.source_offsets = spec.region.offsets;
    piece.dims = spec.region.dims;
  }
  TransferEvent event;
  event.time = absl::Now();
  event.transfer_id = spec.transfer_id;
  event.source_device = spec.device;
  event.source_host = options_.host;
  event.destination_device = spec.destination_device;
  event.destination_host = spec.destination_host;
  absl::StatusOr<hlo::Shape> shape = PieceShape(piece);
  event.bytes = shape.ok() ? shape->ByteSize() : 0;
  event.description = absl::StrCat(spec.source.ToString(), " -> ",
                                   spec.destination.ToString());
  events_->TransferStarted(event);
  UndeliveredPiece report;
  report.transfer_id = spec.transfer_id;
  report.source_host = options_.host;
  report.source_device = spec.device;
  report.destination_host = spec.destination_host;
  report.destination = DeviceBuffer{spec.destination_device, spec.destination};
  // Resolves on a data-plane thread once the destination took the piece,
  // or if it never will: then the head must fail the destination.
  options_.data_plane->Push(spec.destination_host, std::move(piece))
      .OnReady(InlineExecutor::Instance(),
               [reports = reports_, event, report = std::move(report)](
                   const absl::Status& pushed) mutable {
                 if (!reports->Enter()) return;
                 event.time = absl::Now();
                 reports->events->TransferFinished(event, pushed);
                 if (!pushed.ok()) {
                   report.status = absl::DataLossError(absl::StrCat(
                       "transfer ", report.transfer_id, " from device ",
                       report.source_device.value(), " (host ",
                       report.source_host.value(), ") to ",
                       report.destination.buffer.ToString(), " on device ",
                       report.destination.device.value(), " (host ",
                       report.destination_host.value(),
                       ") was not delivered: ", pushed.message()));
                   CW_LOG(WARNING) << report.status.message();
                   if (reports->listener != nullptr) {
                     reports->listener->OnPushFailed(report);
                   }
                 }
                 reports->Exit();
               });
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
  {
    // The head is done with them: nothing held for them is wanted.
    absl::MutexLock lock(&mu_);
    for (const DeviceBuffer& buffer : buffers) {
      early_pieces_.erase(BufferKey(buffer.device, buffer.buffer));
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
  // The host is gone for good: its pieces will never come.
  FailReceivesFrom(host, status, /*resolve=*/true);
  for (auto& [id, device] : devices_) {
    device->AbandonLaunchesOnHost(host, status);
  }
  Exit();
}

void Worker::UpdateMembership(transport::MembershipUpdate update) {
  if (!Enter()) return;
  bool newer = false;
  {
    absl::MutexLock lock(&mu_);
    if (update.version > membership_.version) {
      membership_ = update;
      newer = true;
    }
  }
  if (newer && options_.on_membership) options_.on_membership(update);
  Exit();
}

transport::MembershipUpdate Worker::membership() const {
  absl::MutexLock lock(&mu_);
  return membership_;
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
      std::vector<std::string> origins;
      for (const auto& [transfer, piece] : pending.pieces) {
        if (piece.state != PieceState::kDone) {
          origins.push_back(DescribeOrigin(piece.origin));
        }
      }
      status.pending_receives.push_back(absl::StrCat(
          key.second.ToString(), " on device ", key.first.value(), ": ",
          pending.unresolved, " piece", pending.unresolved == 1 ? "" : "s",
          " to come from ", absl::StrJoin(origins, ", ")));
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
  // Sends armed on buffers that just failed drain here (and push nothing);
  // pushes that ended meanwhile have reported.
  transfers_.reset();
  reports_->Stop();  // No push reports from now on.
  absl::MutexLock lock(&mu_);
  pending_receives_.clear();
  early_pieces_.clear();
  programs_.clear();
}

}  // namespace causeway::worker
