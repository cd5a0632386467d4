#include "causeway/client/testing/fake_session_channel.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/sharding_util.h"
#include "causeway/hlo/verifier.h"

namespace causeway::client {
namespace {

absl::Status WithProgram(const std::string& program, const absl::Status& s) {
  return absl::Status(s.code(),
                      absl::StrCat("program '", program, "': ", s.message()));
}

// The root's value flattened one level, with its shardings.
void Outputs(const hlo::Instruction& root, transport::CompileInfo* info) {
  auto sharding_of = [&](size_t i) {
    if (!root.sharding.has_value()) return hlo::Sharding();
    if (root.sharding->kind == hlo::Sharding::Kind::kTuple) {
      return i < root.sharding->tuple_elements.size()
                 ? root.sharding->tuple_elements[i]
                 : hlo::Sharding();
    }
    return *root.sharding;
  };
  if (root.shape.IsTuple()) {
    for (size_t i = 0; i < root.shape.tuple_shapes().size(); ++i) {
      info->output_shapes.push_back(root.shape.tuple_shape(i));
      info->output_shardings.push_back(sharding_of(i));
    }
  } else {
    info->output_shapes.push_back(root.shape);
    info->output_shardings.push_back(sharding_of(0));
  }
}

}  // namespace

FakeSessionChannel::FakeSessionChannel(Options options)
    : options_(options),
      worker_(std::make_unique<ThreadPool>("fake-head", 1)) {}

FakeSessionChannel::~FakeSessionChannel() {
  GrantHeldSlices();  // Queued ops may wait for a grant.
  worker_.reset();
}

void FakeSessionChannel::Log(std::string call) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(std::move(call));
}

std::vector<std::string> FakeSessionChannel::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

std::vector<transport::ProgramGraph> FakeSessionChannel::graphs() const {
  absl::MutexLock lock(&mu_);
  return graphs_;
}

int64_t FakeSessionChannel::num_live_arrays() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(arrays_.size());
}

void FakeSessionChannel::Drain() {
  auto [promise, future] = MakePromise<>();
  worker_->Execute([promise = std::move(promise)]() mutable { promise.Set(); });
  future.Await().IgnoreError();
}

void FakeSessionChannel::GrantHeldSlices() {
  std::vector<std::pair<Promise<transport::SliceInfo>, transport::SliceInfo>>
      grants;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [handle, slice] : slices_) {
      if (slice->grant.IsValid()) {
        grants.emplace_back(std::move(slice->grant), slice->info);
        slice->grant = Promise<transport::SliceInfo>();
      }
    }
  }
  for (auto& [promise, info] : grants) promise.Set(info);
}

Future<SessionId> FakeSessionChannel::OpenSession(
    transport::OpenSessionRequest request) {
  Log("OpenSession");
  return MakeReadyFuture(SessionId(1));
}

Future<> FakeSessionChannel::CloseSession() {
  Log("CloseSession");
  std::vector<Promise<transport::SliceInfo>> cancelled;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    for (auto& [handle, slice] : slices_) {
      if (slice->grant.IsValid()) cancelled.push_back(std::move(slice->grant));
    }
    slices_.clear();
    arrays_.clear();
    array_layouts_.clear();
  }
  for (auto& promise : cancelled) {
    promise.Set(absl::CancelledError("the session closed"));
  }
  Drain();
  return MakeReadyFuture();
}

Future<transport::SliceInfo> FakeSessionChannel::RequestSlice(
    transport::SliceRequest request) {
  Log("RequestSlice");
  if (request.num_devices > options_.max_slice_devices) {
    return MakeErrorFuture<transport::SliceInfo>(absl::ResourceExhaustedError(
        absl::StrCat("slice of ", request.num_devices,
                     " devices can never fit (the fake has ",
                     options_.max_slice_devices, ")")));
  }
  auto slice = std::make_shared<SliceEntry>();
  slice->num_devices = request.num_devices;
  slice->info.handle = request.handle;
  slice->info.island = request.island.value_or(IslandId(0));
  slice->info.mesh_shape = request.mesh_shape;
  auto [promise, future] = MakePromise<transport::SliceInfo>();
  slice->granted = future;
  absl::MutexLock lock(&mu_);
  for (int64_t i = 0; i < request.num_devices; ++i) {
    slice->info.devices.push_back(DeviceId(next_device_++));
  }
  if (options_.hold_slices) {
    slice->grant = std::move(promise);
  } else {
    promise.Set(slice->info);
  }
  slices_[request.handle] = slice;
  return future;
}

Future<transport::SliceInfo> FakeSessionChannel::GetSlice(SliceHandle slice) {
  Log("GetSlice");
  absl::MutexLock lock(&mu_);
  auto it = slices_.find(slice);
  if (it == slices_.end()) {
    return MakeErrorFuture<transport::SliceInfo>(
        absl::NotFoundError(absl::StrCat("no slice ", slice.value())));
  }
  return it->second->granted;
}

Future<> FakeSessionChannel::ReleaseSlice(SliceHandle slice) {
  Log("ReleaseSlice");
  Promise<transport::SliceInfo> cancelled;
  {
    absl::MutexLock lock(&mu_);
    auto it = slices_.find(slice);
    if (it == slices_.end()) return MakeReadyFuture();
    cancelled = std::move(it->second->grant);
    slices_.erase(it);
  }
  if (cancelled.IsValid()) {
    cancelled.Set(absl::CancelledError("the slice was released"));
  }
  return MakeReadyFuture();
}

Future<transport::CompileInfo> FakeSessionChannel::Compile(
    transport::CompileRequest request) {
  Log("Compile");
  int64_t num_devices = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = slices_.find(request.slice);
    if (it == slices_.end()) {
      return MakeErrorFuture<transport::CompileInfo>(absl::NotFoundError(
          absl::StrCat("no slice ", request.slice.value())));
    }
    num_devices = it->second->num_devices;
  }
  absl::StatusOr<std::unique_ptr<hlo::Module>> module =
      hlo::ParseModule(request.hlo_text);
  if (!module.ok()) {
    return MakeErrorFuture<transport::CompileInfo>(module.status());
  }
  auto entry = std::make_shared<ExecutableEntry>();
  entry->name = (*module)->name();
  for (const std::string& failing : options_.failing_programs) {
    if (failing == entry->name) entry->fails = true;
  }
  entry->slice = request.slice;
  transport::CompileInfo& info = entry->info;
  info.handle = request.handle;
  info.num_partitions = (*module)->num_partitions();
  const hlo::Computation& main = *(*module)->entry();
  for (const hlo::Instruction* parameter : main.parameters()) {
    info.parameter_shapes.push_back(parameter->shape);
    info.parameter_shardings.push_back(
        parameter->sharding.value_or(hlo::Sharding()));
  }
  Outputs(*main.root(), &info);
  if (absl::Status verified = hlo::VerifyModule(**module); !verified.ok()) {
    return MakeErrorFuture<transport::CompileInfo>(verified);
  }
  if (num_devices > 1) {
    for (const auto& computation : (*module)->computations()) {
      for (const auto& instruction : computation->instructions()) {
        if (hlo::IsCollective(instruction->opcode)) {
          return MakeErrorFuture<transport::CompileInfo>(
              absl::UnimplementedError(absl::StrCat(
                  "the fake head runs partitions one after another and "
                  "cannot run collective '",
                  instruction->name, "' across ", num_devices,
                  " devices; use a LocalCluster")));
        }
      }
    }
  }
  absl::StatusOr<std::unique_ptr<exec::Evaluator>> evaluator =
      exec::Evaluator::Create(**module);
  if (!evaluator.ok()) {
    return MakeErrorFuture<transport::CompileInfo>(evaluator.status());
  }
  entry->num_partitions = num_devices;
  entry->module = *std::move(module);
  entry->evaluator = *std::move(evaluator);
  absl::MutexLock lock(&mu_);
  executables_[request.handle] = entry;
  return MakeReadyFuture(entry->info);
}

Future<> FakeSessionChannel::PutArray(transport::ArraySpec spec,
                                      hlo::Literal global) {
  Log("PutArray");
  absl::MutexLock lock(&mu_);
  auto slice = slices_.find(spec.slice);
  if (slice == slices_.end()) {
    return MakeErrorFuture(
        absl::NotFoundError(absl::StrCat("no slice ", spec.slice.value())));
  }
  absl::StatusOr<std::vector<hlo::Literal>> shards =
      hlo::SplitGlobal(global, spec.sharding, slice->second->num_devices);
  if (!shards.ok()) return MakeErrorFuture(shards.status());
  arrays_[spec.handle] = MakeReadyFuture(std::move(global));
  RecordLayoutLocked(spec);
  return MakeReadyFuture();
}

Future<> FakeSessionChannel::PutShards(transport::ArraySpec spec,
                                       std::vector<hlo::Literal> shards) {
  Log("PutShards");
  absl::StatusOr<hlo::Literal> global =
      hlo::AssembleGlobal(shards, spec.sharding, spec.global_shape);
  if (!global.ok()) return MakeErrorFuture(global.status());
  absl::MutexLock lock(&mu_);
  if (!slices_.contains(spec.slice)) {
    return MakeErrorFuture(
        absl::NotFoundError(absl::StrCat("no slice ", spec.slice.value())));
  }
  arrays_[spec.handle] = MakeReadyFuture(*std::move(global));
  RecordLayoutLocked(spec);
  return MakeReadyFuture();
}

void FakeSessionChannel::RecordLayoutLocked(const transport::ArraySpec& spec) {
  auto slice = slices_.find(spec.slice);
  array_layouts_[spec.handle] = {
      spec.sharding, slice == slices_.end() ? 1 : slice->second->num_devices};
}

Future<hlo::Literal> FakeSessionChannel::LookupLocked(
    ArrayHandle handle) const {
  auto it = arrays_.find(handle);
  if (it == arrays_.end()) {
    return MakeErrorFuture<hlo::Literal>(absl::NotFoundError(
        absl::StrCat("array ", handle.value(), " is unknown to the head")));
  }
  return it->second;
}

void FakeSessionChannel::EnqueueExecuteLocked(transport::ExecuteOp op) {
  std::vector<Promise<hlo::Literal>> outputs;
  for (const transport::ArraySpec& spec : op.outputs) {
    auto [promise, future] = MakePromise<hlo::Literal>();
    arrays_[spec.handle] = future;
    RecordLayoutLocked(spec);
    outputs.push_back(std::move(promise));
  }
  std::vector<Future<hlo::Literal>> args;
  for (ArrayHandle arg : op.arguments) args.push_back(LookupLocked(arg));
  std::shared_ptr<ExecutableEntry> exe;
  std::shared_ptr<SliceEntry> slice;
  if (auto it = executables_.find(op.executable); it != executables_.end()) {
    exe = it->second;
    if (auto s = slices_.find(exe->slice); s != slices_.end())
      slice = s->second;
  }
  worker_->Execute([exe, slice, args = std::move(args),
                    outputs = std::move(outputs),
                    specs = std::move(op.outputs)]() mutable {
    auto fail = [&](const absl::Status& status) {
      for (auto& promise : outputs) promise.Set(status);
    };
    if (exe == nullptr || slice == nullptr) {
      return fail(absl::NotFoundError("unknown executable or released slice"));
    }
    if (absl::StatusOr<transport::SliceInfo> granted = slice->granted.Await();
        !granted.ok()) {
      return fail(WithProgram(exe->name, granted.status()));
    }
    const int64_t n = exe->num_partitions;
    if (exe->fails) {
      return fail(WithProgram(exe->name,
                              absl::InternalError(absl::StrCat(
                                  "injected failure at op '",
                                  exe->module->entry()->root()->name, "'"))));
    }
    std::vector<std::vector<hlo::Literal>> per_partition(n);
    for (size_t i = 0; i < args.size(); ++i) {
      const absl::StatusOr<hlo::Literal>& value = args[i].Await();
      if (!value.ok()) return fail(value.status());
      absl::StatusOr<std::vector<hlo::Literal>> shards =
          hlo::SplitGlobal(*value, exe->info.parameter_shardings[i], n);
      if (!shards.ok()) return fail(WithProgram(exe->name, shards.status()));
      for (int64_t p = 0; p < n; ++p) {
        per_partition[p].push_back(std::move((*shards)[p]));
      }
    }
    std::vector<std::vector<hlo::Literal>> results(n);
    for (int64_t p = 0; p < n; ++p) {
      absl::StatusOr<hlo::Literal> root = exe->evaluator->Run(
          per_partition[p], exec::RunContext{.partition_id = p});
      if (!root.ok()) return fail(WithProgram(exe->name, root.status()));
      if (root->shape().IsTuple()) {
        results[p] = std::move(root->mutable_elements());
      } else {
        results[p].push_back(*std::move(root));
      }
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      std::vector<hlo::Literal> shards;
      for (int64_t p = 0; p < n; ++p) shards.push_back(results[p][o]);
      absl::StatusOr<hlo::Literal> global = hlo::AssembleGlobal(
          shards, exe->info.output_shardings[o], specs[o].global_shape);
      outputs[o].Set(global.ok() ? std::move(global)
                                 : absl::StatusOr<hlo::Literal>(WithProgram(
                                       exe->name, global.status())));
    }
  });
}

void FakeSessionChannel::EnqueueCopyLocked(transport::CopyOp op) {
  auto [promise, future] = MakePromise<hlo::Literal>();
  arrays_[op.destination.handle] = future;
  RecordLayoutLocked(op.destination);
  Future<hlo::Literal> source = LookupLocked(op.source);
  worker_->Execute([source, promise = std::move(promise),
                    spec = std::move(op.destination)]() mutable {
    const absl::StatusOr<hlo::Literal>& value = source.Await();
    if (value.ok() && !value->shape().Compatible(spec.global_shape)) {
      promise.Set(absl::InvalidArgumentError("copy changes the shape"));
      return;
    }
    promise.Set(value);
  });
}

void FakeSessionChannel::Execute(transport::ExecuteOp op) {
  Log("Execute");
  absl::MutexLock lock(&mu_);
  EnqueueExecuteLocked(std::move(op));
}

void FakeSessionChannel::Copy(transport::CopyOp op) {
  Log("Copy");
  absl::MutexLock lock(&mu_);
  EnqueueCopyLocked(std::move(op));
}

void FakeSessionChannel::Submit(transport::ProgramGraph graph) {
  Log(absl::StrCat("Submit(", graph.ops.size(), ")"));
  absl::MutexLock lock(&mu_);
  graphs_.push_back(graph);
  for (auto& op : graph.ops) {
    if (auto* execute = std::get_if<transport::ExecuteOp>(&op)) {
      EnqueueExecuteLocked(std::move(*execute));
    } else {
      EnqueueCopyLocked(std::get<transport::CopyOp>(std::move(op)));
    }
  }
}

Future<> FakeSessionChannel::ArrayReady(ArrayHandle array) {
  Log("ArrayReady");
  absl::MutexLock lock(&mu_);
  return LookupLocked(array).Map(InlineExecutor::Instance(),
                                 [](const hlo::Literal&) {});
}

Future<hlo::Literal> FakeSessionChannel::Fetch(ArrayHandle array) {
  Log("Fetch");
  absl::MutexLock lock(&mu_);
  return LookupLocked(array);
}

Future<std::vector<hlo::Literal>> FakeSessionChannel::FetchShards(
    ArrayHandle array) {
  Log("FetchShards");
  Future<hlo::Literal> global;
  hlo::Sharding sharding;
  int64_t num_devices = 0;
  {
    absl::MutexLock lock(&mu_);
    global = LookupLocked(array);
    auto it = array_layouts_.find(array);
    if (it != array_layouts_.end()) {
      sharding = it->second.first;
      num_devices = it->second.second;
    }
  }
  return global.Map(InlineExecutor::Instance(),
                    [sharding, num_devices](const hlo::Literal& value)
                        -> absl::StatusOr<std::vector<hlo::Literal>> {
                      return hlo::SplitGlobal(
                          value, sharding, std::max<int64_t>(num_devices, 1));
                    });
}

void FakeSessionChannel::Delete(std::vector<ArrayHandle> arrays) {
  Log(absl::StrCat("Delete(", arrays.size(), ")"));
  absl::MutexLock lock(&mu_);
  for (ArrayHandle handle : arrays) {
    arrays_.erase(handle);
    array_layouts_.erase(handle);
  }
}

Future<transport::StatusReport> FakeSessionChannel::GetStatus() {
  Log("GetStatus");
  absl::MutexLock lock(&mu_);
  transport::StatusReport report;
  report.text = absl::StrCat("fake head: ", arrays_.size(), " arrays, ",
                             slices_.size(), " slices\n");
  report.json = absl::StrCat("{\"arrays\":", arrays_.size(),
                             ",\"slices\":", slices_.size(), "}");
  return MakeReadyFuture(std::move(report));
}

Future<std::string> FakeSessionChannel::GetTrace() {
  Log("GetTrace");
  return MakeErrorFuture<std::string>(
      absl::UnimplementedError("the fake head records no trace"));
}

}  // namespace causeway::client
