#include "causeway/worker/device.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "causeway/base/logging.h"

namespace causeway::worker {

using trace::NullEventSink;
using trace::OpEvent;
using trace::WaitEvent;
using transport::DeviceStatus;
using transport::LaunchInput;
using transport::LaunchOp;
using transport::LaunchOutput;
using transport::OpDone;
using transport::OpStatus;

namespace {

// "array 5 shard 0 <- <where it comes from>", built only for a status.
std::string DescribeInput(const LaunchOp& op, size_t input) {
  std::string text = op.inputs[input].buffer.ToString();
  const std::string source = transport::DescribeInputSource(op, input);
  if (!source.empty()) absl::StrAppend(&text, " <- ", source);
  return text;
}

// The collectives' view of the caller of `op`.
transport::LaunchMember MemberOf(const LaunchOp& op) {
  return transport::LaunchMember{.island = op.island,
                                 .epoch = op.epoch,
                                 .seq = op.seq,
                                 .partition = op.partition,
                                 .devices = op.devices};
}

// A launch with collectives must name its peers: every device, in
// partition order, this one at its partition.
absl::Status CheckCollectivePeers(const LaunchOp& op) {
  const int64_t count = static_cast<int64_t>(op.devices.size());
  if (count != op.num_partitions || op.partition < 0 ||
      op.partition >= count || op.devices[op.partition] != op.device) {
    return absl::InvalidArgumentError(absl::StrCat(
        "program '", op.program_name, "' (seq ", op.seq,
        ") has collectives, but its launch names ", count, " devices for ",
        op.num_partitions, " partitions, with partition ", op.partition,
        " not on device ", op.device.value()));
  }
  return absl::OkStatus();
}

// The island's collectives for one run, timed: each call's time, from
// entering it to leaving it (waiting for the peers included), is added up
// for the op's OpFinished event. Called from the run's thread only.
class TimedCollectives final : public exec::Collectives {
 public:
  explicit TimedCollectives(exec::Collectives* inner) : inner_(inner) {}

  absl::StatusOr<hlo::Literal> AllReduce(
      const exec::CollectiveOp& op,
      std::vector<hlo::Literal> operands) override {
    return Timed([&] { return inner_->AllReduce(op, std::move(operands)); });
  }
  absl::StatusOr<hlo::Literal> AllGather(
      const exec::CollectiveOp& op,
      std::vector<hlo::Literal> operands) override {
    return Timed([&] { return inner_->AllGather(op, std::move(operands)); });
  }
  absl::StatusOr<hlo::Literal> ReduceScatter(
      const exec::CollectiveOp& op,
      std::vector<hlo::Literal> operands) override {
    return Timed(
        [&] { return inner_->ReduceScatter(op, std::move(operands)); });
  }
  absl::StatusOr<hlo::Literal> AllToAll(
      const exec::CollectiveOp& op,
      std::vector<hlo::Literal> operands) override {
    return Timed([&] { return inner_->AllToAll(op, std::move(operands)); });
  }
  absl::StatusOr<hlo::Literal> CollectivePermute(
      const exec::CollectiveOp& op, hlo::Literal operand) override {
    return Timed(
        [&] { return inner_->CollectivePermute(op, std::move(operand)); });
  }
  absl::Status Cancelled() const override { return inner_->Cancelled(); }

  absl::Duration time() const { return time_; }
  int64_t calls() const { return calls_; }

 private:
  template <typename Call>
  absl::StatusOr<hlo::Literal> Timed(Call call) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<hlo::Literal> result = call();
    time_ += absl::FromChrono(std::chrono::steady_clock::now() - start);
    ++calls_;
    return result;
  }

  exec::Collectives* const inner_;
  absl::Duration time_;
  int64_t calls_ = 0;
};

}  // namespace

Device::Device(Options options)
    : options_(std::move(options)),
      recording_(options_.events != &NullEventSink()),
      store_(options_.info.id, options_.info.memory_bytes) {
  CW_CHECK(options_.events != nullptr);
  CW_CHECK(options_.collectives != nullptr);
  thread_ = std::thread([this] { Loop(); });
  // For profilers and debuggers (at most 15 characters).
  pthread_setname_np(thread_.native_handle(),
                     absl::StrCat("dev", id().value()).substr(0, 15).c_str());
}

Device::~Device() {
  bool stopped;
  {
    absl::MutexLock lock(&mu_);
    stopped = stopping_;
  }
  if (!stopped) {
    Stop(absl::DataLossError(
        absl::StrCat("device ", id().value(), " was shut down")));
  }
}

WaitEvent Device::MakeWaitEvent(const LaunchOp& op, WaitEvent::Reason reason,
                                std::string detail) const {
  WaitEvent wait;
  wait.time = absl::Now();
  wait.device = id();
  wait.host = options_.info.host;
  wait.seq = op.seq;
  wait.program = op.program_name;
  wait.reason = reason;
  wait.detail = std::move(detail);
  return wait;
}

OpEvent Device::MakeOpEvent(const LaunchOp& op) const {
  OpEvent event;
  event.time = absl::Now();
  event.device = id();
  event.host = options_.info.host;
  event.island = options_.info.island;
  event.seq = op.seq;
  event.session = op.session;
  event.session_name = op.session_name;
  event.program = op.program_name;
  event.partition = op.partition;
  event.num_partitions = op.num_partitions;
  return event;
}

void Device::Enqueue(LaunchOp op, std::shared_ptr<const LoadedProgram> program,
                     absl::Status error) {
  auto launch = std::make_shared<QueuedLaunch>();
  launch->op = std::move(op);
  launch->program = std::move(program);
  launch->error = std::move(error);
  launch->ready = absl::Now();
  const LaunchOp& spec = launch->op;
  if (launch->error.ok() && launch->program != nullptr &&
      launch->program->has_collectives) {
    launch->error = CheckCollectivePeers(spec);
  }
  launch->input_referenced.reserve(spec.inputs.size());
  launch->input_values.reserve(spec.inputs.size());
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    absl::Status referenced = store_.AddRef(spec.inputs[i].buffer);
    launch->input_referenced.push_back(referenced.ok());
    if (referenced.ok()) {
      launch->input_values.push_back(store_.Get(spec.inputs[i].buffer));
    } else {
      absl::Status missing = absl::NotFoundError(
          absl::StrCat("input ", i, " of program '", spec.program_name,
                       "' (seq ", spec.seq, "): ", referenced.message()));
      launch->input_values.push_back(MakeErrorFuture<hlo::Literal>(missing));
      if (launch->error.ok()) launch->error = missing;
    }
  }
  launch->output_reservations.reserve(spec.outputs.size());
  for (const LaunchOutput& output : spec.outputs) {
    // Reserve's reference is the owner's (the head's array); the launch
    // holds one more until it has written the buffer, so deleting the
    // array early cannot pull the buffer from under it.
    launch->output_reservations.push_back(
        store_.Reserve(output.buffer, output.shape));
    store_.AddRef(output.buffer).IgnoreError();
  }
  if (!launch->error.ok()) {
    // Known to fail: its dependants need not wait for its turn.
    for (const LaunchOutput& output : spec.outputs) {
      store_.Fail(output.buffer, launch->error).IgnoreError();
    }
  }
  if (recording_) options_.events->OpEnqueued(MakeOpEvent(spec));
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  queue_.push_back(std::move(launch));
}

void Device::Loop() {
  while (true) {
    std::shared_ptr<QueuedLaunch> launch;
    {
      absl::MutexLock lock(&mu_);
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&has_work));
      if (stopping_) return;
      launch = queue_.front();
      front_state_ = FrontState::kWaiting;
    }
    RunFront(*launch);
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    queue_.pop_front();
    front_state_ = FrontState::kWaiting;
    front_waits_for_memory_ = false;
    ++completed_;
  }
}

void Device::RunFront(QueuedLaunch& launch) {
  absl::Status status = launch.error;
  auto abandoned = [&]() {
    absl::MutexLock lock(&mu_);
    return launch.abandoned;
  };
  if (status.ok()) status = AwaitInputs(launch);
  if (status.ok()) status = abandoned();
  if (status.ok()) {
    status = AwaitOutputs(launch);
    if (!status.ok()) {
      status = absl::Status(
          status.code(),
          absl::StrCat("program '", launch.op.program_name, "' (seq ",
                       launch.op.seq, ") on device ", id().value(),
                       ": cannot reserve its outputs: ", status.message()));
    }
  }
  if (status.ok()) status = abandoned();
  std::vector<hlo::Literal> outputs;
  if (status.ok()) {
    status = Execute(launch, &outputs);
  } else if (launch.program != nullptr && launch.program->has_collectives) {
    // Peers must not wait in a collective for this partition.
    options_.collectives->Cancel(MemberOf(launch.op), status);
  }
  Finish(launch, std::move(status), std::move(outputs));
}

absl::Status Device::AwaitInputs(QueuedLaunch& launch) {
  auto first_pending = std::find_if(
      launch.input_values.begin(), launch.input_values.end(),
      [](const Future<hlo::Literal>& value) { return !value.IsReady(); });
  if (first_pending != launch.input_values.end()) {
    const size_t index = first_pending - launch.input_values.begin();
    WaitEvent wait = MakeWaitEvent(launch.op, WaitEvent::Reason::kInputs,
                                   DescribeInput(launch.op, index));
    options_.events->WaitStarted(wait);
    for (const Future<hlo::Literal>& value : launch.input_values) {
      value.Await();
    }
    wait.time = absl::Now();
    launch.ready = wait.time;
    options_.events->WaitFinished(wait);
  }
  for (const Future<hlo::Literal>& value : launch.input_values) {
    if (!value.Await().ok()) return value.Await().status();
  }
  return absl::OkStatus();
}

absl::Status Device::AwaitOutputs(QueuedLaunch& launch) {
  auto first_pending = std::find_if(
      launch.output_reservations.begin(), launch.output_reservations.end(),
      [](const Future<>& reservation) { return !reservation.IsReady(); });
  if (first_pending != launch.output_reservations.end()) {
    const size_t index = first_pending - launch.output_reservations.begin();
    {
      absl::MutexLock lock(&mu_);
      front_waits_for_memory_ = true;
    }
    WaitEvent wait = MakeWaitEvent(
        launch.op, WaitEvent::Reason::kMemory,
        absl::StrCat(launch.op.outputs[index].buffer.ToString(), " (",
                     launch.op.outputs[index].shape.ByteSize(), " bytes)"));
    options_.events->WaitStarted(wait);
    for (const Future<>& reservation : launch.output_reservations) {
      reservation.Await();
    }
    wait.time = absl::Now();
    launch.ready = wait.time;
    options_.events->WaitFinished(wait);
    absl::MutexLock lock(&mu_);
    front_waits_for_memory_ = false;
  }
  for (const Future<>& reservation : launch.output_reservations) {
    if (!reservation.Await().ok()) return reservation.Await();
  }
  return absl::OkStatus();
}

absl::Status Device::Execute(QueuedLaunch& launch,
                             std::vector<hlo::Literal>* outputs) {
  const LaunchOp& op = launch.op;
  const LoadedProgram& program = *launch.program;
  {
    absl::MutexLock lock(&mu_);
    front_state_ = FrontState::kRunning;
  }
  if (recording_) options_.events->OpStarted(MakeOpEvent(op));
  std::vector<hlo::Literal> arguments;
  arguments.reserve(launch.input_values.size());
  for (const Future<hlo::Literal>& value : launch.input_values) {
    arguments.push_back(*value.Await());
  }
  exec::RunContext context;
  context.partition_id = op.partition;
  context.replica_id = 0;
  context.run_id = op.seq;
  std::optional<TimedCollectives> timed;
  // Built once: it copies the launch's device list (2,048 ids at scale).
  std::optional<transport::LaunchMember> member;
  if (program.has_collectives) {
    member = MemberOf(op);
    timed.emplace(options_.collectives->Join(*member));
    context.collectives = &*timed;
  }
  context.cancelled = &launch.cancel;
  // The run's working memory is bounded by the device's budget.
  context.memory_limit_bytes = options_.info.memory_bytes;
  absl::StatusOr<hlo::Literal> result;
  if (program.sim != nullptr) {
    // Modelled from when the device and the launch were both ready (never
    // later than now): a device thread woken late does not add its delay.
    const absl::Time start =
        std::min(absl::Now(), std::max(launch.ready, sim_free_at_));
    result = program.sim->Run(context, start, &sim_free_at_);
  } else {
    result = program.evaluator->Run(arguments, context);
  }
  arguments.clear();
  if (timed.has_value()) {
    launch.collective_time = timed->time();
    launch.collectives = timed->calls();
  }
  absl::Status status;
  if (launch.cancel.load()) {
    absl::MutexLock lock(&mu_);
    status = launch.abandoned;  // Why it was stopped, whatever Run said.
  } else if (!result.ok()) {
    const std::string prefix = absl::StrCat("program '", op.program_name, "'");
    if (absl::StrContains(result.status().message(), prefix)) {
      status = result.status();  // A peer's error, already named.
    } else {
      status =
          absl::Status(result.status().code(),
                       absl::StrCat(prefix, " (seq ", op.seq, ", partition ",
                                    op.partition, " on device ", id().value(),
                                    "): ", result.status().message()));
    }
  }
  if (program.has_collectives) {
    if (!status.ok()) options_.collectives->Abort(*member, status);
    options_.collectives->Leave(*member);
  }
  if (!status.ok()) return status;
  hlo::Literal root = *std::move(result);
  if (root.shape().IsTuple()) {
    *outputs = std::move(root.mutable_elements());
  } else {
    outputs->push_back(std::move(root));
  }
  if (outputs->size() != op.outputs.size()) {
    return absl::InternalError(absl::StrCat(
        "program '", op.program_name, "' produced ", outputs->size(),
        " outputs but the launch expects ", op.outputs.size()));
  }
  return absl::OkStatus();
}

void Device::Finish(QueuedLaunch& launch, absl::Status status,
                    std::vector<hlo::Literal> outputs) {
  const LaunchOp& op = launch.op;
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    if (status.ok()) {
      // A rejected value fails the buffer itself, so readers see why.
      absl::Status written =
          store_.Fulfill(op.outputs[i].buffer, std::move(outputs[i]));
      if (!written.ok()) {
        CW_LOG(WARNING) << "output " << i << " of '" << op.program_name
                        << "': " << written;
      }
    } else {
      store_.Fail(op.outputs[i].buffer, status).IgnoreError();
    }
  }
  for (const LaunchOutput& output : op.outputs) {
    store_.Release(output.buffer).IgnoreError();
  }
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (launch.input_referenced[i]) {
      store_.Release(op.inputs[i].buffer).IgnoreError();
      // The staging buffer's own reference goes too.
      if (op.inputs[i].release_after_use) {
        store_.Release(op.inputs[i].buffer).IgnoreError();
      }
    }
  }
  bool stopping;
  {
    absl::MutexLock lock(&mu_);
    stopping = stopping_;
  }
  if (recording_) {
    OpEvent finished = MakeOpEvent(op);
    finished.collective_time = launch.collective_time;
    finished.collectives = launch.collectives;
    options_.events->OpFinished(finished, status);
  }
  if (!stopping && options_.listener != nullptr) {
    options_.listener->OnOpDone(OpDone{.host = options_.info.host,
                                       .device = id(),
                                       .island = op.island,
                                       .seq = op.seq,
                                       .status = status});
  }
}

void Device::AbandonLaunchesOnHost(HostId host, const absl::Status& status) {
  AbandonLaunches(
      [host](const QueuedLaunch& launch) {
        const std::vector<HostId>& hosts = launch.op.participant_hosts;
        return std::find(hosts.begin(), hosts.end(), host) != hosts.end();
      },
      status, /*stop_running=*/false);
}

void Device::CancelSession(SessionId session, const absl::Status& status) {
  AbandonLaunches(
      [session](const QueuedLaunch& launch) {
        return launch.op.session == session;
      },
      status, /*stop_running=*/true);
}

void Device::AbandonLaunches(
    absl::FunctionRef<bool(const QueuedLaunch&)> matches,
    const absl::Status& status, bool stop_running) {
  std::vector<BufferId> to_fail;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < queue_.size(); ++i) {
      QueuedLaunch& launch = *queue_[i];
      if (!matches(launch) || !launch.abandoned.ok()) continue;
      launch.abandoned = status;
      if (i == 0 && front_state_ == FrontState::kRunning) {
        if (stop_running) launch.cancel.store(true);
        if (launch.program != nullptr && launch.program->has_collectives) {
          options_.collectives->Abort(MemberOf(launch.op), status);
        }
        continue;
      }
      for (const LaunchOutput& output : launch.op.outputs) {
        to_fail.push_back(output.buffer);
      }
    }
  }
  // Dependants fail now; a front launch waiting for memory wakes up.
  for (const BufferId& buffer : to_fail) {
    store_.Fail(buffer, status).IgnoreError();
  }
}

void Device::Stop(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    if (!queue_.empty() && front_state_ == FrontState::kRunning) {
      QueuedLaunch& front = *queue_.front();
      // A program may loop forever: it stops at its next iteration, so
      // that joining the thread below cannot hang.
      if (front.abandoned.ok()) front.abandoned = status;
      front.cancel.store(true);
      if (front.program != nullptr && front.program->has_collectives) {
        options_.collectives->Abort(MemberOf(front.op), status);
      }
    }
  }
  // Wakes a front launch that waits for data or memory.
  store_.FailAll(status);
  if (thread_.joinable()) thread_.join();
}

OpStatus Device::MakeOpStatus(const QueuedLaunch& launch) const {
  OpStatus status;
  status.seq = launch.op.seq;
  status.island = launch.op.island;
  status.program = launch.op.program_name;
  status.session = launch.op.session_name;
  status.partition = launch.op.partition;
  for (size_t i = 0; i < launch.input_values.size(); ++i) {
    if (!launch.input_values[i].IsReady()) {
      status.waiting_for.push_back(DescribeInput(launch.op, i));
    }
  }
  return status;
}

DeviceStatus Device::Status() const {
  DeviceStatus status;
  status.device = id();
  status.memory = store_.Stats();
  absl::MutexLock lock(&mu_);
  status.ops_completed = completed_;
  for (size_t i = 0; i < queue_.size(); ++i) {
    OpStatus op = MakeOpStatus(*queue_[i]);
    if (i == 0) {
      if (front_state_ == FrontState::kRunning) {
        status.running = std::move(op);
        continue;
      }
      op.waiting_for_memory = front_waits_for_memory_;
    }
    status.queued.push_back(std::move(op));
  }
  return status;
}

}  // namespace causeway::worker
