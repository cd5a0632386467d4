#include "causeway/proxy/proxy_session.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "causeway/base/logging.h"
#include "causeway/base/status.h"
#include "causeway/client/sharding.h"
#include "causeway/hlo/literal.h"

namespace causeway::proxy {
namespace {

using xla::ifrt::proxy::IfrtRequest;
using xla::ifrt::proxy::IfrtResponse;

IfrtResponse ErrorResponse(const absl::Status& status) {
  IfrtResponse response;
  *response.mutable_response_metadata()->mutable_status() = StatusToProto(status);
  return response;
}

// The request's name in the protocol, for refusals.
std::string RequestName(const IfrtRequest& request) {
  const google::protobuf::FieldDescriptor* field =
      IfrtRequest::descriptor()->FindFieldByNumber(request.request_case());
  return field != nullptr ? field->name() : "an empty request";
}

xla::ifrt::AttributeMapProto::Value Int64Attribute(int64_t value) {
  xla::ifrt::AttributeMapProto::Value v;
  v.set_int64_value(value);
  return v;
}
xla::ifrt::AttributeMapProto::Value FloatAttribute(float value) {
  xla::ifrt::AttributeMapProto::Value v;
  v.set_float_value(value);
  return v;
}
xla::ifrt::AttributeMapProto::Value StringAttribute(std::string value) {
  xla::ifrt::AttributeMapProto::Value v;
  v.set_string_value(std::move(value));
  return v;
}
void AddAttribute(xla::ifrt::AttributeMapProto* map, std::string key,
                  xla::ifrt::AttributeMapProto::Value value) {
  auto* entry = map->add_attributes();
  entry->set_key(std::move(key));
  *entry->mutable_value() = std::move(value);
}

absl::Status CheckHandleCount(int count, const char* what) {
  if (count > kMaxHandlesPerRequest) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " names ", count, " handles (at most ", kMaxHandlesPerRequest, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ProxyDevice>> ProxyDevices(
    const client::Client& client, int spare_hosts_per_island) {
  if (spare_hosts_per_island < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a negative number of spare hosts (", spare_hosts_per_island, ")"));
  }
  std::vector<transport::DeviceInfo> infos = client.devices();
  // Each island's hosts, in id order: the last ones are its spares.
  std::map<int64_t, std::set<int64_t>> hosts_of_island;
  for (const transport::DeviceInfo& info : infos) {
    hosts_of_island[info.island.value()].insert(info.host.value());
  }
  std::set<int64_t> spare_hosts;
  for (const auto& [island, hosts] : hosts_of_island) {
    if (static_cast<int64_t>(hosts.size()) <= spare_hosts_per_island) {
      return absl::InvalidArgumentError(absl::StrCat(
          "island ", island, " has ", hosts.size(), " host(s): ",
          spare_hosts_per_island, " spare host(s) per island leave it no "
          "device for jax.devices()"));
    }
    auto spare = hosts.end();
    for (int k = 0; k < spare_hosts_per_island; ++k) spare_hosts.insert(*--spare);
  }
  std::sort(infos.begin(), infos.end(), [](const auto& a, const auto& b) {
    return std::make_pair(a.island.value(), a.id.value()) <
           std::make_pair(b.island.value(), b.id.value());
  });
  std::vector<ProxyDevice> devices;
  for (const transport::DeviceInfo& info : infos) {
    if (spare_hosts.contains(info.host.value())) continue;
    ProxyDevice device;
    device.id = static_cast<int32_t>(devices.size());
    device.island = info.island;
    device.kind = info.kind;
    device.memory_bytes = info.memory_bytes;
    devices.push_back(std::move(device));
  }
  return devices;
}

// The parent's shards fetched once for all the `views` shard views of one
// disassembly (np.asarray of a sharded array fetches every view): kept
// until each view has asked once, then dropped (a view asked again fetches
// anew).
class SharedShardFetch {
 public:
  SharedShardFetch(client::Array parent, int64_t views)
      : parent_(std::move(parent)), views_(views) {}
  Future<std::vector<hlo::Literal>> Get() {
    absl::MutexLock lock(&mu_);
    if (!fetch_.has_value()) fetch_ = parent_.ShardsToHost();
    Future<std::vector<hlo::Literal>> fetch = *fetch_;
    if (++asked_ >= views_) {
      fetch_.reset();
      asked_ = 0;
    }
    return fetch;
  }

 private:
  const client::Array parent_;
  const int64_t views_;
  absl::Mutex mu_;
  std::optional<Future<std::vector<hlo::Literal>>> fetch_ ABSL_GUARDED_BY(mu_);
  int64_t asked_ ABSL_GUARDED_BY(mu_) = 0;
};

struct ProxySession::ArrayEntry {
  hlo::Shape shape;  // Global.
  IfrtSharding sharding;
  client::Array array;  // Invalid for a shard view.
  // A shard view (DisassembleIntoSingleDeviceArrays): shard `shard_index`
  // of `parent`, read from it when needed (`fetch`, shared by the views of
  // one disassembly).
  client::Array parent;
  int64_t shard_index = -1;
  std::shared_ptr<SharedShardFetch> fetch;
  std::shared_ptr<std::atomic<bool>> deleted =
      std::make_shared<std::atomic<bool>>(false);
};


absl::StatusOr<std::shared_ptr<ProxySession>> ProxySession::Create(
    client::Client* client, CompileService* compiler, Executor* executor,
    Options options) {
  if (options.devices.empty()) {
    absl::StatusOr<std::vector<ProxyDevice>> devices = ProxyDevices(*client, 0);
    if (!devices.ok()) return devices.status();
    options.devices = *std::move(devices);
  }
  absl::StatusOr<client::Session> session =
      client->OpenSession(client::SessionOptions{options.name});
  if (!session.ok()) return session.status();
  return std::shared_ptr<ProxySession>(new ProxySession(
      compiler, executor, std::move(options), *std::move(session)));
}

ProxySession::ProxySession(CompileService* compiler, Executor* executor,
                           Options options, client::Session session)
    : compiler_(compiler),
      executor_(executor),
      options_(std::move(options)),
      devices_(options_.devices),
      host_buffers_(options_.host_buffer_limits),
      session_(std::move(session)) {}

ProxySession::~ProxySession() { Close(); }

void ProxySession::Close() {
  host_buffers_.Close();
  (void)session_.Close();
  // Dropped now, not when the last work still in flight lets the session
  // go; after the lock (the locals outlive it).
  std::map<std::vector<int32_t>, client::Slice> slices;
  std::map<uint64_t, ArrayFuture> arrays;
  std::map<uint64_t, Future<>> futures;
  std::map<uint64_t, std::shared_ptr<const ExecutableEntry>> executables;
  absl::MutexLock lock(&mu_);
  slices.swap(slices_);
  arrays.swap(arrays_);
  futures.swap(futures_);
  executables.swap(executables_);
}

void ProxySession::Process(const IfrtRequest& request, Respond respond) {
  const uint64_t op_id = request.request_metadata().op_id();
  // An answer ready at once is written by the stream's reader, one that
  // waits by the thread that completes it: no hop through the pool.
  Dispatch(request).OnReady(
      InlineExecutor::Instance(), [op_id, respond = std::move(respond)](
                      const absl::StatusOr<Response>& result) mutable {
        Response response = result.ok() ? *result : ErrorResponse(result.status());
        response.mutable_response_metadata()->set_op_id(op_id);
        std::move(respond)(std::move(response));
      });
}

Future<ProxySession::Response> ProxySession::Dispatch(const IfrtRequest& request) {
  auto ready = [](absl::StatusOr<Response> r) {
    return MakeReadyFuture<Response>(std::move(r));
  };
  switch (request.request_case()) {
    case IfrtRequest::kInitRequest:
      return ready(Init());
    case IfrtRequest::kCheckFutureRequest:
      return CheckFuture(request.check_future_request().future_handle());
    case IfrtRequest::kCheckValueReadyRequest:
      return CheckValueReady(request.check_value_ready_request());
    case IfrtRequest::kMakeArrayFromHostBufferRequest:
      return MakeArrayFromHostBuffer(request.make_array_from_host_buffer_request());
    case IfrtRequest::kMakeArraysFromHostBufferShardsRequest:
      return MakeArraysFromHostBufferShards(
          request.make_arrays_from_host_buffer_shards_request());
    case IfrtRequest::kCopyToHostBufferRequest:
      return CopyToHostBuffer(request.copy_to_host_buffer_request());
    case IfrtRequest::kAssembleArrayFromSingleDeviceArraysRequest:
      return AssembleArray(request.assemble_array_from_single_device_arrays_request());
    case IfrtRequest::kRemapArraysRequest:
      return RemapArrays(request.remap_arrays_request());
    case IfrtRequest::kReshardArraysRequest:
      return ReshardArrays(request.reshard_arrays_request());
    case IfrtRequest::kMakeErrorArraysRequest:
      return ready(MakeErrorArrays(request.make_error_arrays_request()));
    case IfrtRequest::kDisassembleIntoSingleDeviceArraysRequest:
      return DisassembleArray(
          request.disassemble_into_single_device_arrays_request());
    case IfrtRequest::kFullyReplicatedShardRequest:
      return FullyReplicatedShard(request.fully_replicated_shard_request());
    case IfrtRequest::kCopyArraysRequest:
      return CopyArrays(request.copy_arrays_request());
    case IfrtRequest::kDeleteArrayRequest:
      return ready(DeleteArrays(request.delete_array_request()));
    case IfrtRequest::kIsArrayDeletedRequest:
      return ready(IsArrayDeleted(request.is_array_deleted_request().array_handle()));
    case IfrtRequest::kDestructArrayRequest:
      return ready(DestructArrays(request.destruct_array_request()));
    case IfrtRequest::kGetDefaultDeviceAssignmentRequest:
      return ready(DefaultDeviceAssignment(
          request.get_default_device_assignment_request()));
    case IfrtRequest::kGetDefaultLayoutRequest:
      return ready(DefaultLayout(request.get_default_layout_request()));
    case IfrtRequest::kCompileRequest:
      return Compile(request.compile_request());
    case IfrtRequest::kLoadedExecutableMetadataRequest:
      return ready(ExecutableMetadata(
          request.loaded_executable_metadata_request().loaded_executable_handle()));
    case IfrtRequest::kLoadedExecutableCostAnalysisRequest:
      return ready(ExecutableCostAnalysis(
          request.loaded_executable_cost_analysis_request().loaded_executable_handle()));
    case IfrtRequest::kLoadedExecutableHumanReadableProgramTextRequest:
      return ready(ExecutableProgramText(
          request.loaded_executable_human_readable_program_text_request()
              .loaded_executable_handle()));
    case IfrtRequest::kLoadedExecutableExecuteRequest:
      return Execute(request.loaded_executable_execute_request());
    case IfrtRequest::kLoadedExecutableDestructRequest:
      return ready(DestructExecutable(
          request.loaded_executable_destruct_request().loaded_executable_handle()));
    default:
      return ready(absl::UnimplementedError(absl::StrCat(
          RequestName(request), " (request field ", request.request_case(),
          ") is not supported by Causeway's proxy")));
  }
}

IfrtResponse ProxySession::Init() {
  IfrtResponse response;
  auto* init = response.mutable_init_response();
  init->set_session_id(options_.session_id);
  init->set_platform_name("cpu");
  init->set_platform_version("causeway");
  init->set_platform_id(0);
  init->set_process_index(0);
  init->set_runtime_type("causeway");
  for (const ProxyDevice& device : devices_) {
    auto* d = init->add_all_devices();
    d->set_id(device.id);
    d->set_local_device_id(device.id);
    d->set_local_hardware_id(device.id);
    d->set_platform_name("cpu");
    d->set_device_kind(device.kind);
    d->set_default_memory_id(device.id);
    d->add_memory_ids(device.id);
    d->set_debug_string(absl::StrCat("causeway:", device.id, " (island ",
                                     device.island.value(), ")"));
    d->set_to_string(absl::StrCat("CausewayDevice(id=", device.id, ", island=",
                                  device.island.value(), ")"));
    AddAttribute(d->mutable_attributes(), "slice_index",
                 Int64Attribute(device.island.value()));
    AddAttribute(d->mutable_attributes(), "memory_bytes",
                 Int64Attribute(device.memory_bytes));
    init->add_primary_device_ids(device.id);
    init->add_addressable_device_ids(device.id);
    auto* memory = init->add_memories();
    memory->set_id(device.id);
    memory->set_memory_space_kind("device");
    memory->set_kind_id(0);
    memory->add_device_ids(device.id);
    memory->set_debug_string(absl::StrCat("device memory of causeway:", device.id));
    memory->set_to_string(absl::StrCat("MEMORY_SPACE_", device.id));
  }
  AddAttribute(init->mutable_client_attributes(), "runtime",
               StringAttribute("causeway"));
  return response;
}

std::pair<client::Array, int64_t> ProxySession::PieceOf(const ArrayEntry& entry) {
  if (entry.array.valid()) return {entry.array, 0};
  return {entry.parent, entry.shard_index};
}

absl::StatusOr<client::Array> ProxySession::Materialized(const ArrayEntry& entry) {
  if (entry.array.valid()) return entry.array;
  absl::StatusOr<client::Slice> slice = SliceFor(entry.sharding.devices);
  if (!slice.ok()) return slice.status();
  absl::StatusOr<client::Sharding> sharding =
      client::Sharding::FromHlo(entry.sharding.sharding);
  if (!sharding.ok()) return sharding.status();
  const std::pair<client::Array, int64_t> piece = PieceOf(entry);
  return session_.Assemble({&piece, 1}, entry.shape, *slice, *sharding);
}

int64_t ProxySession::held_futures() {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(futures_.size());
}

uint64_t ProxySession::MintHandle() {
  absl::MutexLock lock(&mu_);
  return next_handle_++;
}

absl::StatusOr<client::Slice> ProxySession::SliceFor(
    const std::vector<int32_t>& devices) {
  absl::MutexLock lock(&mu_);
  auto it = slices_.find(devices);
  if (it != slices_.end()) return it->second;
  const IslandId island = devices_.at(devices.front()).island;
  for (int32_t d : devices) {
    if (devices_.at(d).island != island) {
      return absl::UnimplementedError(absl::StrCat(
          "an array or program on devices of several islands (devices ",
          devices.front(), " and ", d, ") is not supported: Causeway runs a "
          "program on one island"));
    }
  }
  client::SliceOptions options;
  options.num_devices = static_cast<int64_t>(devices.size());
  options.island = island;
  options.shared = true;
  absl::StatusOr<client::Slice> slice = session_.CreateSlice(options);
  if (!slice.ok()) return slice.status();
  slices_.emplace(devices, *slice);
  return *slice;
}

ProxySession::ArrayFuture ProxySession::FindArray(uint64_t handle) {
  absl::MutexLock lock(&mu_);
  auto it = arrays_.find(handle);
  if (it == arrays_.end()) {
    return MakeReadyFuture<std::shared_ptr<const ArrayEntry>>(
        absl::NotFoundError(absl::StrCat("unknown array handle ", handle)));
  }
  return it->second;
}

absl::Status ProxySession::AddArray(uint64_t handle, ArrayFuture array,
                                    bool server_minted) {
  if (!server_minted && handle >= kServerHandlesStart) {
    return absl::InvalidArgumentError(absl::StrCat(
        "array handle ", handle, " is in the server's range (2^48 and up)"));
  }
  absl::MutexLock lock(&mu_);
  if (!arrays_.emplace(handle, std::move(array)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("array handle ", handle, " is in use"));
  }
  return absl::OkStatus();
}

Future<IfrtResponse> ProxySession::MakeArrayFromHostBuffer(
    const xla::ifrt::proxy::MakeArrayFromHostBufferRequest& request) {
  const uint64_t handle =
      request.has_array_handle() ? request.array_handle() : MintHandle();
  absl::StatusOr<hlo::Shape> shape =
      ArrayShapeFromProto(request.dtype(), request.shape());
  absl::StatusOr<IfrtSharding> sharding =
      shape.ok() ? ShardingFromProto(request.sharding(), devices_.size())
                 : absl::StatusOr<IfrtSharding>(shape.status());
  absl::Status status = sharding.status();
  absl::StatusOr<client::Sharding> causeway_sharding =
      status.ok() ? client::Sharding::FromHlo(sharding->sharding)
                  : absl::StatusOr<client::Sharding>(status);
  status = causeway_sharding.status();
  if (status.ok()) {
    status = causeway_sharding->Validate(*shape, sharding->devices.size());
  }
  std::optional<std::vector<int64_t>> strides;
  if (request.has_byte_strides()) {
    strides.emplace(request.byte_strides().strides().begin(),
                    request.byte_strides().strides().end());
  }
  absl::StatusOr<client::Slice> slice =
      status.ok() ? SliceFor(sharding->devices) : absl::StatusOr<client::Slice>(status);
  status = slice.status();
  const uint64_t buffer_handle = request.host_buffer_handle();
  ArrayFuture array;
  if (!status.ok()) {
    // The host buffer is not needed: drop it once it arrives.
    array = MakeReadyFuture<std::shared_ptr<const ArrayEntry>>(status);
    host_buffers_.Lookup(buffer_handle).OnReady(
        *executor_, [this, self = shared_from_this(),
                     buffer_handle](const absl::StatusOr<HostBuffer>& b) {
          if (b.ok()) (void)host_buffers_.Delete(buffer_handle);
        });
  } else {
    array = host_buffers_.Lookup(buffer_handle).Map(
        *executor_,
        [this, self = shared_from_this(),
         buffer_handle, strides, shape = *shape, sharding = *sharding,
         causeway_sharding = *causeway_sharding, slice = *slice](
            const HostBuffer& bytes)
            -> absl::StatusOr<std::shared_ptr<const ArrayEntry>> {
          (void)host_buffers_.Delete(buffer_handle);
          absl::StatusOr<hlo::Literal> literal =
              LiteralFromHostBuffer(bytes.literal(), shape, strides);
          if (!literal.ok()) {
            return absl::Status(literal.status().code(),
                                absl::StrCat("host buffer ", buffer_handle, ": ",
                                             literal.status().message()));
          }
          absl::StatusOr<client::Array> made =
              session_.FromHost(*literal, slice, causeway_sharding);
          if (!made.ok()) return made.status();
          auto entry = std::make_shared<ArrayEntry>();
          entry->shape = shape;
          entry->sharding = sharding;
          entry->array = *std::move(made);
          return std::shared_ptr<const ArrayEntry>(std::move(entry));
        });
  }
  if (absl::Status added = AddArray(handle, array); !added.ok()) {
    return MakeReadyFuture<IfrtResponse>(added);
  }
  return array.Map(InlineExecutor::Instance(),
                   [handle](const std::shared_ptr<const ArrayEntry>&) {
                     IfrtResponse response;
                     response.mutable_make_array_from_host_buffer_response()
                         ->set_array_handle(handle);
                     return response;
                   });
}

Future<IfrtResponse> ProxySession::MakeArraysFromHostBufferShards(
    const xla::ifrt::proxy::MakeArraysFromHostBufferShardsRequest& request) {
  if (request.specs_size() > kMaxHandlesPerRequest) {
    return MakeReadyFuture<IfrtResponse>(absl::InvalidArgumentError(absl::StrCat(
        "MakeArraysFromHostBufferShards names ", request.specs_size(), " arrays")));
  }
  if (request.array_handles_size() != 0 &&
      request.array_handles_size() != request.specs_size()) {
    return MakeReadyFuture<IfrtResponse>(absl::InvalidArgumentError(absl::StrCat(
        "MakeArraysFromHostBufferShards has ", request.specs_size(), " specs and ",
        request.array_handles_size(), " array handles")));
  }
  IfrtResponse response;
  std::vector<Future<>> made;
  for (int i = 0; i < request.specs_size(); ++i) {
    const uint64_t handle =
        request.array_handles_size() != 0 ? request.array_handles(i) : MintHandle();
    made.push_back(MakeArrayFromShards(handle, request.specs(i)));
    response.mutable_make_arrays_from_host_buffer_shards_response()->add_array_handles(
        handle);
  }
  return JoinFutures(std::move(made))
      .Map(InlineExecutor::Instance(), [response]() { return response; });
}

Future<> ProxySession::MakeArrayFromShards(
    uint64_t handle,
    const xla::ifrt::proxy::MakeArraysFromHostBufferShardsRequest::
        MakeArraysFromHostBufferShardsSpec& spec) {
  const xla::ifrt::ArraySpecProto& array_spec = spec.array_spec();
  absl::StatusOr<hlo::Shape> shape =
      ArrayShapeFromProto(array_spec.dtype(), array_spec.shape());
  absl::Status status = shape.status();
  absl::StatusOr<IfrtSharding> sharding =
      status.ok() ? ShardingFromProto(array_spec.sharding(), devices_.size())
                  : absl::StatusOr<IfrtSharding>(status);
  status = sharding.status();
  absl::StatusOr<client::Sharding> causeway_sharding =
      status.ok() ? client::Sharding::FromHlo(sharding->sharding)
                  : absl::StatusOr<client::Sharding>(status);
  status = causeway_sharding.status();
  const int64_t n = status.ok() ? static_cast<int64_t>(sharding->devices.size()) : 0;
  absl::StatusOr<hlo::Shape> shard_shape =
      status.ok() ? causeway_sharding->ShardShape(*shape, n)
                  : absl::StatusOr<hlo::Shape>(status);
  status = shard_shape.status();
  if (status.ok() && spec.host_buffers_size() != spec.addressable_shard_indices_size()) {
    status = absl::InvalidArgumentError(absl::StrCat(
        "an array spec with ", spec.host_buffers_size(), " host buffers and ",
        spec.addressable_shard_indices_size(), " lists of shard indices"));
  }
  // Which host buffer each device's shard comes from.
  std::vector<int> source(n, -1);
  for (int b = 0; status.ok() && b < spec.host_buffers_size(); ++b) {
    const auto& buffer = spec.host_buffers(b);
    absl::StatusOr<hlo::Shape> buffer_shape =
        ArrayShapeFromProto(buffer.dtype(), buffer.shape());
    if (!buffer_shape.ok()) {
      status = buffer_shape.status();
    } else if (!buffer_shape->Compatible(*shard_shape)) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "host buffer ", buffer.host_buffer_handle(), " is ",
          buffer_shape->ToString(false), "; the shards are ",
          shard_shape->ToString(false)));
    }
    for (int64_t index : spec.addressable_shard_indices(b).indices()) {
      if (!status.ok()) break;
      if (index < 0 || index >= n || source[index] != -1) {
        status = absl::InvalidArgumentError(absl::StrCat(
            "shard index ", index, " is out of range or given twice (", n,
            " shards)"));
        break;
      }
      source[index] = b;
    }
  }
  if (status.ok() && std::find(source.begin(), source.end(), -1) != source.end()) {
    status = absl::InvalidArgumentError("an array spec leaves a shard without data");
  }
  absl::StatusOr<client::Slice> slice =
      status.ok() ? SliceFor(sharding->devices) : absl::StatusOr<client::Slice>(status);
  status = slice.status();
  std::vector<Future<HostBuffer>> buffers;
  std::vector<uint64_t> buffer_handles;
  std::vector<std::optional<std::vector<int64_t>>> buffer_strides;
  for (const auto& buffer : spec.host_buffers()) {
    buffer_handles.push_back(buffer.host_buffer_handle());
    buffer_strides.push_back(
        buffer.has_byte_strides()
            ? std::optional<std::vector<int64_t>>(std::vector<int64_t>(
                  buffer.byte_strides().strides().begin(),
                  buffer.byte_strides().strides().end()))
            : std::nullopt);
    buffers.push_back(host_buffers_.Lookup(buffer.host_buffer_handle()));
  }
  ArrayFuture array;
  if (!status.ok()) {
    array = MakeReadyFuture<std::shared_ptr<const ArrayEntry>>(status);
    for (size_t b = 0; b < buffers.size(); ++b) {
      buffers[b].OnReady(*executor_, [this, self = shared_from_this(),
                                      h = buffer_handles[b]](
                                          const absl::StatusOr<HostBuffer>& r) {
        if (r.ok()) (void)host_buffers_.Delete(h);
      });
    }
  } else {
    array = JoinFutures(std::move(buffers))
                .Map(*executor_,
                     [this, self = shared_from_this(),
                      buffer_handles, buffer_strides, source, shape = *shape,
                      shard_shape = *shard_shape, sharding = *sharding,
                      causeway_sharding = *causeway_sharding, slice = *slice](
                         const std::vector<HostBuffer>& bytes)
                         -> absl::StatusOr<std::shared_ptr<const ArrayEntry>> {
                       for (uint64_t h : buffer_handles) (void)host_buffers_.Delete(h);
                       std::vector<hlo::Literal> literals;
                       for (size_t b = 0; b < bytes.size(); ++b) {
                         absl::StatusOr<hlo::Literal> literal = LiteralFromHostBuffer(
                             bytes[b].literal(), shard_shape, buffer_strides[b]);
                         if (!literal.ok()) {
                           return absl::Status(
                               literal.status().code(),
                               absl::StrCat("host buffer ", buffer_handles[b], ": ",
                                            literal.status().message()));
                         }
                         literals.push_back(*std::move(literal));
                       }
                       std::vector<hlo::Literal> shards;
                       for (int b : source) shards.push_back(literals[b]);
                       absl::StatusOr<client::Array> made = session_.FromShards(
                           std::move(shards), shape, slice, causeway_sharding);
                       if (!made.ok()) return made.status();
                       auto entry = std::make_shared<ArrayEntry>();
                       entry->shape = shape;
                       entry->sharding = sharding;
                       entry->array = *std::move(made);
                       return std::shared_ptr<const ArrayEntry>(std::move(entry));
                     });
  }
  if (absl::Status added = AddArray(handle, array); !added.ok()) {
    return MakeReadyFuture(added);
  }
  return array.Map(InlineExecutor::Instance(),
                   [](const std::shared_ptr<const ArrayEntry>&) {});
}

Future<IfrtResponse> ProxySession::CopyToHostBuffer(
    const xla::ifrt::proxy::CopyToHostBufferRequest& request) {
  const uint64_t buffer_handle = request.host_buffer_handle();
  std::vector<int64_t> strides;
  if (request.has_byte_strides()) {
    strides.assign(request.byte_strides().strides().begin(),
                   request.byte_strides().strides().end());
  }
  const bool has_strides = request.has_byte_strides();
  // Answered as soon as the array is known and the copy is possible, before
  // its value comes: jaxlib's client sends its HostBufferLookup on this
  // answer, and the lookup waits in the store for the value, so that its
  // round trip overlaps the fetch from the cluster instead of following it.
  // A fetch that fails fails the lookup with its status (the error jaxlib
  // raises is the same). The value is stored on the thread that receives it
  // (storing does not copy).
  return FindArray(request.array_handle())
      .Map(InlineExecutor::Instance(),
           [this, self = shared_from_this(), has_strides, strides,
            buffer_handle](const std::shared_ptr<const ArrayEntry>& entry)
               -> absl::StatusOr<IfrtResponse> {
             if (entry->deleted->load()) {
               return absl::FailedPreconditionError("the array has been deleted");
             }
             // A shard view's shape is the shard's.
             if (has_strides && !IsDenseRowMajor(entry->shape, strides)) {
               return absl::UnimplementedError(
                   "copying to a host buffer that is not dense and row-major is "
                   "not supported");
             }
             CW_RETURN_IF_ERROR(host_buffers_.CheckSize(entry->shape.ByteSize()));
             CW_RETURN_IF_ERROR(host_buffers_.CheckUnused(buffer_handle));
             Future<hlo::Literal> literal;
             if (entry->shard_index >= 0) {
               const int64_t index = entry->shard_index;
               literal = entry->fetch->Get().Map(
                   InlineExecutor::Instance(),
                   [index](const std::vector<hlo::Literal>& shards) {
                     return shards.at(index);
                   });
             } else {
               literal = entry->array.ToHost();
             }
             literal.OnReady(InlineExecutor::Instance(),
                             [this, self, buffer_handle](
                                 const absl::StatusOr<hlo::Literal>& value) {
                               absl::Status stored =
                                   value.ok() ? host_buffers_.Store(
                                                    buffer_handle, HostBuffer(*value))
                                              : value.status();
                               if (!stored.ok()) {
                                 host_buffers_.Fail(buffer_handle, std::move(stored));
                               }
                             });
             IfrtResponse response;
             response.mutable_copy_to_host_buffer_response();
             return response;
           });
}

Future<IfrtResponse> ProxySession::CheckFuture(uint64_t handle) {
  Future<> future;
  {
    absl::MutexLock lock(&mu_);
    auto it = futures_.find(handle);
    if (it == futures_.end()) {
      return MakeReadyFuture<IfrtResponse>(
          absl::NotFoundError(absl::StrCat("unknown future handle ", handle)));
    }
    future = std::move(it->second);
    futures_.erase(it);
  }
  return future.Map(InlineExecutor::Instance(), [] {
    IfrtResponse response;
    response.mutable_check_future_response();
    return response;
  });
}

Future<IfrtResponse> ProxySession::CheckValueReady(
    const xla::ifrt::proxy::CheckValueReadyRequest& request) {
  if (absl::Status s = CheckHandleCount(request.value_handles_size(),
                                        "CheckValueReady");
      !s.ok()) {
    return MakeReadyFuture<IfrtResponse>(s);
  }
  std::vector<Future<>> ready;
  for (uint64_t handle : request.value_handles()) {
    ready.push_back(FindArray(handle).AndThen(
        *executor_, [](const std::shared_ptr<const ArrayEntry>& entry) {
          return entry->shard_index >= 0 ? entry->parent.Ready()
                                         : entry->array.Ready();
        }));
  }
  return JoinFutures(std::move(ready)).Map(InlineExecutor::Instance(), [] {
    IfrtResponse response;
    response.mutable_check_value_ready_response();
    return response;
  });
}

absl::StatusOr<IfrtResponse> ProxySession::DeleteArrays(
    const xla::ifrt::proxy::DeleteArrayRequest& request) {
  if (absl::Status s = CheckHandleCount(request.array_handle_size(), "DeleteArray");
      !s.ok()) {
    return s;
  }
  std::vector<Future<>> deletions;
  for (uint64_t handle : request.array_handle()) {
    deletions.push_back(FindArray(handle).Map(
        *executor_, [](const std::shared_ptr<const ArrayEntry>& entry) {
          entry->deleted->store(true);
          if (entry->array.valid()) entry->array.Delete();
        }));
  }
  const uint64_t future_handle = MintHandle();
  {
    absl::MutexLock lock(&mu_);
    futures_.emplace(future_handle, JoinFutures(std::move(deletions)));
  }
  IfrtResponse response;
  response.mutable_delete_array_response()->set_deletion_future_handle(future_handle);
  return response;
}

absl::StatusOr<IfrtResponse> ProxySession::IsArrayDeleted(uint64_t handle) {
  ArrayFuture array = FindArray(handle);
  // Deletion marks a made array; one still being made is not deleted.
  IfrtResponse response;
  const absl::StatusOr<std::shared_ptr<const ArrayEntry>>* result =
      array.IsReady() ? &array.Await() : nullptr;
  if (result != nullptr && !result->ok() &&
      result->status().code() == absl::StatusCode::kNotFound) {
    return result->status();
  }
  response.mutable_is_array_deleted_response()->set_deleted(
      result != nullptr && result->ok() && (**result)->deleted->load());
  return response;
}

absl::StatusOr<IfrtResponse> ProxySession::DestructArrays(
    const xla::ifrt::proxy::DestructArrayRequest& request) {
  if (absl::Status s = CheckHandleCount(request.array_handle_size(), "DestructArray");
      !s.ok()) {
    return s;
  }
  std::vector<ArrayFuture> dropped;  // Released outside the lock.
  {
    absl::MutexLock lock(&mu_);
    for (uint64_t handle : request.array_handle()) {
      // The client dropped its last reference; an unknown handle (one whose
      // making was refused) has nothing to release.
      auto it = arrays_.find(handle);
      if (it == arrays_.end()) continue;
      dropped.push_back(std::move(it->second));
      arrays_.erase(it);
    }
  }
  IfrtResponse response;
  response.mutable_destruct_array_response();
  return response;
}

Future<IfrtResponse> ProxySession::CopyArrays(
    const xla::ifrt::proxy::CopyArraysRequest& request) {
  if (absl::Status s = CheckHandleCount(request.array_handles_size(), "CopyArrays");
      !s.ok()) {
    return MakeReadyFuture<IfrtResponse>(s);
  }
  if (request.result_handles_size() != request.array_handles_size()) {
    return MakeReadyFuture<IfrtResponse>(absl::InvalidArgumentError(absl::StrCat(
        "CopyArrays names ", request.array_handles_size(), " arrays and ",
        request.result_handles_size(), " result handles")));
  }
  std::vector<int32_t> devices(request.device_ids().begin(),
                               request.device_ids().end());
  for (int32_t d : devices) {
    if (d < 0 || d >= static_cast<int32_t>(devices_.size())) {
      return MakeReadyFuture<IfrtResponse>(absl::InvalidArgumentError(
          absl::StrCat("CopyArrays names device ", d, ", which does not exist")));
    }
  }
  absl::StatusOr<client::Slice> slice = SliceFor(devices);
  if (!slice.ok()) return MakeReadyFuture<IfrtResponse>(slice.status());
  IfrtResponse response;
  std::vector<Future<>> made;
  for (int i = 0; i < request.array_handles_size(); ++i) {
    const uint64_t result = request.result_handles(i);
    ArrayFuture copy = FindArray(request.array_handles(i)).Map(
        *executor_,
        [this, self = shared_from_this(),
         devices, slice = *slice](const std::shared_ptr<const ArrayEntry>& entry)
            -> absl::StatusOr<std::shared_ptr<const ArrayEntry>> {
          if (entry->sharding.devices.size() != devices.size()) {
            return absl::InvalidArgumentError(absl::StrCat(
                "CopyArrays from ", entry->sharding.devices.size(),
                " devices to ", devices.size()));
          }
          absl::StatusOr<client::Array> copied;
          if (entry->array.valid()) {
            copied = session_.Copy(entry->array, slice, entry->array.sharding());
          } else {
            // A shard view (one device): its shard moves out of the parent.
            const std::pair<client::Array, int64_t> piece = PieceOf(*entry);
            absl::StatusOr<client::Sharding> one =
                client::Sharding::FromHlo(entry->sharding.sharding);
            if (!one.ok()) return one.status();
            copied = session_.Assemble({&piece, 1}, entry->shape, slice, *one);
          }
          if (!copied.ok()) return copied.status();
          auto out = std::make_shared<ArrayEntry>();
          out->shape = entry->shape;
          out->sharding = entry->sharding;
          out->sharding.devices = devices;
          out->array = *std::move(copied);
          return std::shared_ptr<const ArrayEntry>(std::move(out));
        });
    if (absl::Status s = AddArray(result, copy); !s.ok()) {
      return MakeReadyFuture<IfrtResponse>(s);
    }
    made.push_back(copy.Map(InlineExecutor::Instance(),
                            [](const std::shared_ptr<const ArrayEntry>&) {}));
    response.mutable_copy_arrays_response()->add_array_handles(result);
  }
  return JoinFutures(std::move(made))
      .Map(InlineExecutor::Instance(), [response]() { return response; });
}

Future<IfrtResponse> ProxySession::FullyReplicatedShard(
    const xla::ifrt::proxy::FullyReplicatedShardRequest& request) {
  const uint64_t result = request.result_handle();
  ArrayFuture shard = FindArray(request.array_handle()).Map(
      InlineExecutor::Instance(),
      [](const std::shared_ptr<const ArrayEntry>& entry)
          -> absl::StatusOr<std::shared_ptr<const ArrayEntry>> {
        if (entry->sharding.devices.size() == 1) return entry;
        if (entry->sharding.sharding.kind != hlo::Sharding::Kind::kReplicated) {
          return absl::FailedPreconditionError(
              "FullyReplicatedShard of an array that is not fully replicated");
        }
        // Every device holds the whole array: the first device's copy.
        auto out = std::make_shared<ArrayEntry>();
        out->shape = entry->shape;
        out->sharding.devices = {entry->sharding.devices.front()};
        out->sharding.sharding.kind = hlo::Sharding::Kind::kReplicated;
        out->parent = entry->array;
        out->shard_index = 0;
        out->fetch = std::make_shared<SharedShardFetch>(entry->array, 1);
        out->deleted = entry->deleted;
        return std::shared_ptr<const ArrayEntry>(std::move(out));
      });
  if (absl::Status s = AddArray(result, shard); !s.ok()) {
    return MakeReadyFuture<IfrtResponse>(s);
  }
  return shard.Map(InlineExecutor::Instance(),
                   [result](const std::shared_ptr<const ArrayEntry>&) {
                     IfrtResponse response;
                     response.mutable_fully_replicated_shard_response()->set_array_handle(
                         result);
                     return response;
                   });
}

Future<IfrtResponse> ProxySession::AssembleArray(
    const xla::ifrt::proxy::AssembleArrayFromSingleDeviceArraysRequest& request) {
  auto fail = [](absl::Status s) { return MakeReadyFuture<IfrtResponse>(std::move(s)); };
  if (absl::Status s = CheckHandleCount(request.single_device_array_handles_size(),
                                        "AssembleArrayFromSingleDeviceArrays");
      !s.ok()) {
    return fail(s);
  }
  absl::StatusOr<IfrtSharding> sharding =
      ShardingFromProto(request.sharding(), devices_.size());
  if (!sharding.ok()) return fail(sharding.status());
  absl::StatusOr<client::Sharding> causeway_sharding =
      client::Sharding::FromHlo(sharding->sharding);
  if (!causeway_sharding.ok()) return fail(causeway_sharding.status());
  if (static_cast<size_t>(request.single_device_array_handles_size()) !=
      sharding->devices.size()) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "AssembleArrayFromSingleDeviceArrays names ",
        request.single_device_array_handles_size(), " arrays for a sharding over ",
        sharding->devices.size(), " devices")));
  }
  absl::StatusOr<client::Slice> slice = SliceFor(sharding->devices);
  if (!slice.ok()) return fail(slice.status());
  std::vector<ArrayFuture> parts;
  for (uint64_t h : request.single_device_array_handles()) parts.push_back(FindArray(h));
  const uint64_t result = request.result_handle() != 0 ? request.result_handle() : MintHandle();
  const bool has_dtype = request.has_dtype();
  ArrayFuture assembled =
      JoinFutures(std::move(parts))
          .Map(
              *executor_,
              [this, self = shared_from_this(),
               request_shape = request.shape(), dtype = request.dtype(), has_dtype,
               sharding = *sharding, causeway_sharding = *causeway_sharding,
               slice = *slice](const std::vector<std::shared_ptr<const ArrayEntry>>& parts)
                  -> absl::StatusOr<std::shared_ptr<const ArrayEntry>> {
                absl::StatusOr<xla::ifrt::DTypeProto> type =
                    has_dtype ? absl::StatusOr<xla::ifrt::DTypeProto>(dtype)
                              : DTypeToProto(parts.front()->shape.type());
                if (!type.ok()) return type.status();
                absl::StatusOr<hlo::Shape> shape = ArrayShapeFromProto(*type, request_shape);
                if (!shape.ok()) return shape.status();
                absl::StatusOr<hlo::Shape> shard_shape = causeway_sharding.ShardShape(
                    *shape, static_cast<int64_t>(sharding.devices.size()));
                if (!shard_shape.ok()) return shard_shape.status();
                for (size_t i = 0; i < parts.size(); ++i) {
                  const ArrayEntry& part = *parts[i];
                  if (part.deleted->load()) {
                    return absl::FailedPreconditionError(
                        absl::StrCat("single-device array ", i, " has been deleted"));
                  }
                  if (part.sharding.devices != std::vector<int32_t>{sharding.devices[i]} ||
                      !part.shape.Compatible(*shard_shape)) {
                    return absl::InvalidArgumentError(absl::StrCat(
                        "single-device array ", i, " is ", part.shape.ToString(false),
                        " on ", part.sharding.devices.size(), " device(s); the sharding wants ",
                        shard_shape->ToString(false), " on device ", sharding.devices[i]));
                  }
                }
                // Worker to worker: each device's piece moves to its shard
                // (a piece already there stays put).
                std::vector<std::pair<client::Array, int64_t>> pieces;
                for (const auto& part : parts) pieces.push_back(PieceOf(*part));
                absl::StatusOr<client::Array> made =
                    session_.Assemble(pieces, *shape, slice, causeway_sharding);
                if (!made.ok()) return made.status();
                auto e = std::make_shared<ArrayEntry>();
                e->shape = *shape;
                e->sharding = sharding;
                e->array = *std::move(made);
                return std::shared_ptr<const ArrayEntry>(std::move(e));
              });
  if (absl::Status s = AddArray(result, assembled, request.result_handle() == 0); !s.ok()) {
    return fail(s);
  }
  IfrtResponse response;
  response.mutable_assemble_array_from_single_device_arrays_response()->set_array_handle(
      result);
  return MakeReadyFuture<IfrtResponse>(std::move(response));
}

namespace {

// The shard indices an interval list names: [start, end) by step, each
// interval in turn. InvalidArgument for a malformed interval or more than
// `limit` indices.
absl::StatusOr<std::vector<int64_t>> ShardIndices(
    const google::protobuf::RepeatedField<int64_t>& starts,
    const google::protobuf::RepeatedField<int64_t>& ends,
    const google::protobuf::RepeatedField<int64_t>& steps, int64_t limit,
    const char* what) {
  if (starts.size() != ends.size() || starts.size() != steps.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a remap mapping's ", what, " intervals have ", starts.size(), " starts, ",
        ends.size(), " ends and ", steps.size(), " steps"));
  }
  std::vector<int64_t> indices;
  for (int i = 0; i < starts.size(); ++i) {
    if (starts[i] < 0 || ends[i] < starts[i] || steps[i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a remap mapping's ", what, " interval ", starts[i], ":", ends[i], ":",
          steps[i], " is malformed"));
    }
    for (int64_t k = starts[i]; k < ends[i]; k += steps[i]) {
      if (static_cast<int64_t>(indices.size()) >= limit) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a remap mapping names more than ", limit, " ", what, " shards"));
      }
      indices.push_back(k);
    }
  }
  return indices;
}

}  // namespace

absl::StatusOr<hlo::Sharding> ProxySession::MovedSharding(
    const std::vector<std::shared_ptr<const ArrayEntry>>& inputs,
    const std::vector<std::pair<int, int64_t>>& sources) {
  // Output position j holds input position sources[j].second: the input's
  // tile assignment with every position p renamed to the j that took it.
  const int input = sources.front().first;
  const ArrayEntry& entry = *inputs[input];
  const size_t n = entry.sharding.devices.size();
  std::vector<int64_t> renamed(n, -1);
  for (size_t j = 0; j < sources.size(); ++j) {
    const int64_t p = sources[j].second;
    if (sources[j].first != input || sources.size() != n || p < 0 ||
        p >= static_cast<int64_t>(n) || renamed[p] >= 0) {
      return absl::UnimplementedError(
          "RemapArrays into an output whose sharding is not given (a "
          "ConcreteEvenSharding) is supported only as a permutation of one "
          "input's shards");
    }
    renamed[p] = static_cast<int64_t>(j);
  }
  hlo::Sharding sharding = entry.sharding.sharding;
  sharding.iota.reset();
  if (sharding.kind == hlo::Sharding::Kind::kMaximal) {
    sharding.maximal_device = renamed.at(sharding.maximal_device);
  }
  for (int64_t& device : sharding.tile_devices) device = renamed.at(device);
  return sharding;
}

Future<IfrtResponse> ProxySession::RemapArrays(
    const xla::ifrt::proxy::RemapArraysRequest& request) {
  auto fail = [](absl::Status s) { return MakeReadyFuture<IfrtResponse>(std::move(s)); };
  const xla::ifrt::RemapPlanProto& plan = request.plan();
  for (int count : {request.array_handles_size(), request.result_handles_size(),
                    plan.input_specs_size(), plan.output_specs_size(),
                    plan.mappings_size()}) {
    if (absl::Status s = CheckHandleCount(count, "RemapArrays"); !s.ok()) return fail(s);
  }
  if (request.array_handles_size() != plan.input_specs_size()) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "RemapArrays names ", request.array_handles_size(), " arrays for a plan of ",
        plan.input_specs_size(), " inputs")));
  }
  if (request.result_handles_size() != 0 &&
      request.result_handles_size() != plan.output_specs_size()) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "RemapArrays names ", request.result_handles_size(), " results for a plan of ",
        plan.output_specs_size(), " outputs")));
  }
  // Each output: its spec and, per shard, the (input, input shard) it takes.
  struct Output {
    hlo::Shape shape;
    IfrtSharding sharding;
    client::Sharding causeway_sharding;
    client::Slice slice;
    std::vector<std::pair<int, int64_t>> sources;
  };
  std::vector<Output> outputs;
  for (const xla::ifrt::ArraySpecProto& spec : plan.output_specs()) {
    absl::StatusOr<hlo::Shape> shape = ArrayShapeFromProto(spec.dtype(), spec.shape());
    if (!shape.ok()) return fail(shape.status());
    // An unplaced output (a ConcreteEvenSharding: what xc.reorder_shards
    // sends) takes its input's layout, its shards moved as the plan says.
    absl::StatusOr<IfrtSharding> sharding =
        ShardingFromProto(spec.sharding(), devices_.size(), /*allow_unplaced=*/true);
    if (!sharding.ok()) return fail(sharding.status());
    absl::StatusOr<client::Slice> slice = SliceFor(sharding->devices);
    if (!slice.ok()) return fail(slice.status());
    const size_t n = sharding->devices.size();
    outputs.push_back(Output{*shape, *sharding, client::Sharding::Replicated(), *slice,
                             std::vector<std::pair<int, int64_t>>(n, {-1, -1})});
  }
  const int64_t limit = static_cast<int64_t>(devices_.size());
  for (const auto& mapping : plan.mappings()) {
    if (mapping.in_array() < 0 || mapping.in_array() >= plan.input_specs_size() ||
        mapping.out_array() < 0 || mapping.out_array() >= plan.output_specs_size()) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "a remap mapping from input ", mapping.in_array(), " to output ",
          mapping.out_array(), " (the plan has ", plan.input_specs_size(),
          " inputs and ", plan.output_specs_size(), " outputs)")));
    }
    absl::StatusOr<std::vector<int64_t>> from = ShardIndices(
        mapping.from_start(), mapping.from_end(), mapping.from_step(), limit, "input");
    if (!from.ok()) return fail(from.status());
    absl::StatusOr<std::vector<int64_t>> to = ShardIndices(
        mapping.to_start(), mapping.to_end(), mapping.to_step(), limit, "output");
    if (!to.ok()) return fail(to.status());
    if (from->size() != to->size()) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "a remap mapping moves ", from->size(), " input shards into ", to->size(),
          " output shards")));
    }
    Output& out = outputs[mapping.out_array()];
    for (size_t k = 0; k < to->size(); ++k) {
      const int64_t j = (*to)[k];
      if (j >= static_cast<int64_t>(out.sources.size()) || out.sources[j].first >= 0) {
        return fail(absl::InvalidArgumentError(absl::StrCat(
            "output ", mapping.out_array(), " shard ", j,
            " is out of range or given twice")));
      }
      out.sources[j] = {mapping.in_array(), (*from)[k]};
    }
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    for (const auto& source : outputs[o].sources) {
      if (source.first < 0) {
        return fail(absl::InvalidArgumentError(
            absl::StrCat("the remap plan leaves a shard of output ", o, " without data")));
      }
    }
  }
  std::vector<ArrayFuture> inputs;
  for (uint64_t h : request.array_handles()) inputs.push_back(FindArray(h));
  const bool donate = request.copy_semantics() ==
                      xla::ifrt::proto::ARRAY_COPY_SEMANTICS_DONATE_INPUT;
  using Entries = std::vector<std::shared_ptr<const ArrayEntry>>;
  Future<Entries> made = JoinFutures(std::move(inputs))
      .Map(*executor_, [this, self = shared_from_this(),
                        outputs, donate](const Entries& entries)
                           -> absl::StatusOr<Entries> {
        Entries results;
        for (Output out : outputs) {
          if (!out.sharding.placed) {
            absl::StatusOr<hlo::Sharding> moved = MovedSharding(entries, out.sources);
            if (!moved.ok()) return moved.status();
            out.sharding.sharding = *std::move(moved);
            out.sharding.placed = true;
          }
          absl::StatusOr<client::Sharding> causeway_sharding =
              client::Sharding::FromHlo(out.sharding.sharding);
          if (!causeway_sharding.ok()) return causeway_sharding.status();
          out.causeway_sharding = *std::move(causeway_sharding);
          std::vector<std::pair<client::Array, int64_t>> pieces;
          for (const auto& [input, shard] : out.sources) {
            const ArrayEntry& entry = *entries[input];
            if (entry.deleted->load()) {
              return absl::FailedPreconditionError(
                  absl::StrCat("RemapArrays: input ", input, " has been deleted"));
            }
            const int64_t shards = static_cast<int64_t>(entry.sharding.devices.size());
            if (shard >= shards) {
              return absl::InvalidArgumentError(absl::StrCat(
                  "RemapArrays: input ", input, " has ", shards, " shards, not ",
                  shard + 1));
            }
            std::pair<client::Array, int64_t> piece = PieceOf(entry);
            piece.second += shard;  // A shard view has one shard.
            pieces.push_back(std::move(piece));
          }
          absl::StatusOr<client::Array> array =
              session_.Assemble(pieces, out.shape, out.slice, out.causeway_sharding);
          if (!array.ok()) return array.status();
          auto e = std::make_shared<ArrayEntry>();
          e->shape = out.shape;
          e->sharding = out.sharding;
          e->array = *std::move(array);
          results.push_back(std::move(e));
        }
        if (donate) {
          for (const auto& entry : entries) {
            entry->deleted->store(true);
            if (entry->array.valid()) entry->array.Delete();
          }
        }
        return results;
      });
  IfrtResponse response;
  for (size_t o = 0; o < outputs.size(); ++o) {
    const bool minted = request.result_handles_size() == 0;
    const uint64_t handle = minted ? MintHandle() : request.result_handles(o);
    ArrayFuture output = made.Map(InlineExecutor::Instance(), [o](const Entries& e) {
      return e[o];
    });
    if (absl::Status s = AddArray(handle, output, minted); !s.ok()) return fail(s);
    response.mutable_remap_arrays_response()->add_array_handles(handle);
  }
  return MakeReadyFuture<IfrtResponse>(std::move(response));
}

Future<IfrtResponse> ProxySession::ReshardArrays(
    const xla::ifrt::proxy::ReshardArraysRequest& request) {
  auto fail = [](absl::Status s) { return MakeReadyFuture<IfrtResponse>(std::move(s)); };
  if (absl::Status s = CheckHandleCount(request.array_handles_size(), "ReshardArrays");
      !s.ok()) {
    return fail(s);
  }
  if (request.array_specs_size() != request.array_handles_size() ||
      (request.result_handles_size() != 0 &&
       request.result_handles_size() != request.array_handles_size())) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "ReshardArrays names ", request.array_handles_size(), " arrays, ",
        request.array_specs_size(), " specs and ", request.result_handles_size(),
        " results")));
  }
  const bool donate = request.copy_semantics() ==
                      xla::ifrt::proto::ARRAY_COPY_SEMANTICS_DONATE_INPUT;
  IfrtResponse response;
  for (int i = 0; i < request.array_handles_size(); ++i) {
    const xla::ifrt::ArraySpecProto& spec = request.array_specs(i);
    absl::StatusOr<hlo::Shape> shape = ArrayShapeFromProto(spec.dtype(), spec.shape());
    if (!shape.ok()) return fail(shape.status());
    absl::StatusOr<IfrtSharding> sharding =
        ShardingFromProto(spec.sharding(), devices_.size());
    if (!sharding.ok()) return fail(sharding.status());
    absl::StatusOr<client::Sharding> causeway_sharding =
        client::Sharding::FromHlo(sharding->sharding);
    if (!causeway_sharding.ok()) return fail(causeway_sharding.status());
    absl::StatusOr<client::Slice> slice = SliceFor(sharding->devices);
    if (!slice.ok()) return fail(slice.status());
    ArrayFuture copy = FindArray(request.array_handles(i)).Map(
        *executor_,
        [this, self = shared_from_this(),
         shape = *shape, sharding = *sharding, causeway_sharding = *causeway_sharding,
         slice = *slice, donate](const std::shared_ptr<const ArrayEntry>& entry)
            -> absl::StatusOr<std::shared_ptr<const ArrayEntry>> {
          if (entry->deleted->load()) {
            return absl::FailedPreconditionError("ReshardArrays of a deleted array");
          }
          if (!entry->shape.Compatible(shape)) {
            return absl::InvalidArgumentError(absl::StrCat(
                "ReshardArrays of ", entry->shape.ToString(false), " into ",
                shape.ToString(false)));
          }
          absl::StatusOr<client::Array> source = Materialized(*entry);
          if (!source.ok()) return source.status();
          absl::StatusOr<client::Array> copied =
              session_.Copy(*source, slice, causeway_sharding);
          if (!copied.ok()) return copied.status();
          if (donate) {
            entry->deleted->store(true);
            if (entry->array.valid()) entry->array.Delete();
          }
          auto out = std::make_shared<ArrayEntry>();
          out->shape = shape;
          out->sharding = sharding;
          out->array = *std::move(copied);
          return std::shared_ptr<const ArrayEntry>(std::move(out));
        });
    const bool minted = request.result_handles_size() == 0;
    const uint64_t handle = minted ? MintHandle() : request.result_handles(i);
    if (absl::Status s = AddArray(handle, copy, minted); !s.ok()) return fail(s);
    response.mutable_reshard_arrays_response()->add_array_handles(handle);
  }
  return MakeReadyFuture<IfrtResponse>(std::move(response));
}

absl::StatusOr<IfrtResponse> ProxySession::MakeErrorArrays(
    const xla::ifrt::proxy::MakeErrorArraysRequest& request) {
  if (absl::Status s = CheckHandleCount(request.array_handles_size(), "MakeErrorArrays");
      !s.ok()) {
    return s;
  }
  const int code = request.error().code();
  absl::Status error(
      static_cast<absl::StatusCode>(code >= 1 && code <= 16 ? code : 2),
      request.error().message());
  if (error.ok()) error = absl::UnknownError("MakeErrorArrays without an error");
  IfrtResponse response;
  for (uint64_t handle : request.array_handles()) {
    CW_RETURN_IF_ERROR(
        AddArray(handle, MakeReadyFuture<std::shared_ptr<const ArrayEntry>>(error)));
    response.mutable_make_error_arrays_response()->add_array_handles(handle);
  }
  return response;
}

Future<IfrtResponse> ProxySession::DisassembleArray(
    const xla::ifrt::proxy::DisassembleIntoSingleDeviceArraysRequest& request) {
  if (absl::Status s = CheckHandleCount(request.result_handles_size(),
                                        "DisassembleIntoSingleDeviceArrays");
      !s.ok()) {
    return MakeReadyFuture<IfrtResponse>(s);
  }
  ArrayFuture parent = FindArray(request.array_handle());
  std::vector<uint64_t> results(request.result_handles().begin(),
                                request.result_handles().end());
  // Shard i of the parent, as a single-device array (read from the parent
  // when needed).
  // One fetch of the parent's shards for all the views (made with the first).
  auto fetch = std::make_shared<std::shared_ptr<SharedShardFetch>>();
  auto fetch_mu = std::make_shared<absl::Mutex>();
  auto shard_of = [fetch, fetch_mu](const std::shared_ptr<const ArrayEntry>& entry,
                                    size_t i, size_t expected)
      -> absl::StatusOr<std::shared_ptr<const ArrayEntry>> {
    const size_t n = entry->sharding.devices.size();
    if (expected != 0 && expected != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DisassembleIntoSingleDeviceArrays names ", expected,
          " result handles for an array on ", n, " devices"));
    }
    if (!entry->array.valid()) {
      if (n == 1) return entry;
      return absl::UnimplementedError("disassembling a shard view is not supported");
    }
    absl::StatusOr<client::Sharding> sharding =
        client::Sharding::FromHlo(entry->sharding.sharding);
    if (!sharding.ok()) return sharding.status();
    absl::StatusOr<hlo::Shape> shard_shape =
        sharding->ShardShape(entry->shape, static_cast<int64_t>(n));
    if (!shard_shape.ok()) return shard_shape.status();
    auto shard = std::make_shared<ArrayEntry>();
    shard->shape = *shard_shape;
    shard->sharding.devices = {entry->sharding.devices[i]};
    shard->sharding.sharding.kind = hlo::Sharding::Kind::kReplicated;
    shard->parent = entry->array;
    shard->shard_index = static_cast<int64_t>(i);
    {
      absl::MutexLock lock(fetch_mu.get());
      if (*fetch == nullptr) {
        *fetch = std::make_shared<SharedShardFetch>(entry->array, static_cast<int64_t>(n));
      }
      shard->fetch = *fetch;
    }
    return std::shared_ptr<const ArrayEntry>(std::move(shard));
  };
  if (!results.empty()) {
    // Client-minted results: registered at once, so that later requests
    // may name them before the parent is made.
    IfrtResponse response;
    std::vector<Future<>> made;
    for (size_t i = 0; i < results.size(); ++i) {
      ArrayFuture shard = parent.Map(
          InlineExecutor::Instance(),
          [shard_of, i, n = results.size()](const std::shared_ptr<const ArrayEntry>& e) {
            return shard_of(e, i, n);
          });
      if (absl::Status s = AddArray(results[i], shard); !s.ok()) {
        return MakeReadyFuture<IfrtResponse>(s);
      }
      made.push_back(shard.Map(InlineExecutor::Instance(),
                               [](const std::shared_ptr<const ArrayEntry>&) {}));
      response.mutable_disassemble_into_single_device_arrays_response()
          ->add_array_handles(results[i]);
    }
    return JoinFutures(std::move(made))
        .Map(InlineExecutor::Instance(), [response]() { return response; });
  }
  return parent.Map(
      *executor_,
      [this, self = shared_from_this(),
       shard_of](const std::shared_ptr<const ArrayEntry>& entry)
          -> absl::StatusOr<IfrtResponse> {
        IfrtResponse response;
        auto* out = response.mutable_disassemble_into_single_device_arrays_response();
        for (size_t i = 0; i < entry->sharding.devices.size(); ++i) {
          absl::StatusOr<std::shared_ptr<const ArrayEntry>> shard = shard_of(entry, i, 0);
          if (!shard.ok()) return shard.status();
          const uint64_t handle = MintHandle();
          if (absl::Status s = AddArray(
                  handle, MakeReadyFuture<std::shared_ptr<const ArrayEntry>>(*shard),
                  /*server_minted=*/true);
              !s.ok()) {
            return s;
          }
          out->add_array_handles(handle);
        }
        return response;
      });
}

absl::StatusOr<IfrtResponse> ProxySession::DefaultDeviceAssignment(
    const xla::ifrt::proxy::GetDefaultDeviceAssignmentRequest& request) {
  const uint64_t replicas = request.num_replicas();
  const uint64_t partitions = request.num_partitions();
  if (replicas == 0 || partitions == 0 || replicas > devices_.size() ||
      partitions > devices_.size() || replicas * partitions > devices_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a device assignment of ", replicas, " replicas x ", partitions,
        " partitions does not fit the cluster's ", devices_.size(), " devices"));
  }
  IfrtResponse response;
  auto* assignment =
      response.mutable_get_default_device_assignment_response()->mutable_device_assignment();
  assignment->set_replica_count(static_cast<int32_t>(replicas));
  assignment->set_computation_count(static_cast<int32_t>(partitions));
  for (uint64_t c = 0; c < partitions; ++c) {
    auto* computation = assignment->add_computation_devices();
    for (uint64_t r = 0; r < replicas; ++r) {
      computation->add_replica_device_ids(static_cast<int64_t>(c * replicas + r));
    }
  }
  return response;
}

absl::StatusOr<IfrtResponse> ProxySession::DefaultLayout(
    const xla::ifrt::proxy::GetDefaultLayoutRequest& request) {
  absl::StatusOr<hlo::PrimitiveType> type = DTypeFromProto(request.dtype());
  if (!type.ok()) return type.status();
  if (request.device_id() < 0 ||
      static_cast<size_t>(request.device_id()) >= devices_.size()) {
    return absl::NotFoundError(
        absl::StrCat("no device ", request.device_id(), " for a default layout (the cluster has ",
                     devices_.size(), ")"));
  }
  if (request.dims_size() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a default layout of rank ", request.dims_size(), " (at most ", kMaxRank, ")"));
  }
  // Dense row-major, as every Causeway array is; sub-byte types say their
  // width, as XLA's CPU client does.
  std::string layout = "{";
  for (int d = request.dims_size() - 1; d >= 0; --d) {
    absl::StrAppend(&layout, d, d > 0 ? "," : "");
  }
  if (const int64_t bits = hlo::BitWidth(*type); bits < 8) {
    absl::StrAppend(&layout, ":E(", bits, ")");
  }
  layout += "}";
  IfrtResponse response;
  response.mutable_get_default_layout_response()->set_serialized_pjrt_layout(
      std::move(layout));
  return response;
}

namespace {

// The program's devices (JAX ids, partition order) from its compile options.
absl::StatusOr<std::vector<int32_t>> ProgramDevices(const std::string& options_bytes,
                                                    int64_t num_devices) {
  xla::ifrt::XlaCompileOptionsProto options;
  if (!options.ParseFromString(options_bytes)) {
    return absl::InvalidArgumentError("the compile options do not parse");
  }
  const xla::ExecutableBuildOptionsProto& build =
      options.compile_options().executable_build_options();
  const xla::DeviceAssignmentProto& assignment = build.device_assignment();
  if (!build.has_device_assignment()) {
    return absl::InvalidArgumentError(
        "the compile options assign no devices (Causeway's proxy compiles "
        "for a device assignment)");
  }
  const int64_t replicas = assignment.replica_count();
  const int64_t computations = assignment.computation_count();
  if (replicas < 1 || computations < 1 || replicas * computations > num_devices ||
      assignment.computation_devices_size() != computations) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a device assignment of ", replicas, " replicas x ", computations,
        " partitions for a cluster of ", num_devices, " devices"));
  }
  if (replicas > 1 && computations > 1) {
    return absl::UnimplementedError(
        "programs with both replicas and partitions are not supported");
  }
  std::vector<int32_t> devices;
  // Logical device i: partition i (SPMD), or replica i (pmap).
  for (int64_t r = 0; r < replicas; ++r) {
    for (int64_t c = 0; c < computations; ++c) {
      const auto& ids = assignment.computation_devices(c);
      if (ids.replica_device_ids_size() != replicas) {
        return absl::InvalidArgumentError("a ragged device assignment");
      }
      const int64_t id = ids.replica_device_ids(r);
      if (id < 0 || id >= num_devices) {
        return absl::InvalidArgumentError(
            absl::StrCat("the device assignment names device ", id));
      }
      devices.push_back(static_cast<int32_t>(id));
    }
  }
  return devices;
}

}  // namespace

struct ProxySession::ExecutableEntry {
  client::Executable executable;
  std::vector<int32_t> devices;
  // What the compile service gave: its text, name, donated inputs and
  // XLA's cost analysis.
  std::shared_ptr<const CompiledProgram> program;
};

Future<IfrtResponse> ProxySession::Compile(
    const xla::ifrt::proxy::CompileRequest& request) {
  if (request.host_callbacks_size() > 0) {
    return MakeReadyFuture<IfrtResponse>(absl::UnimplementedError(
        "host callbacks (jax.debug.print, jax.pure_callback) are not supported "
        "by Causeway's proxy yet"));
  }
  absl::StatusOr<std::vector<int32_t>> devices =
      ProgramDevices(request.compile_options().data(), devices_.size());
  if (!devices.ok()) return MakeReadyFuture<IfrtResponse>(devices.status());
  absl::StatusOr<client::Slice> slice = SliceFor(*devices);
  if (!slice.ok()) return MakeReadyFuture<IfrtResponse>(slice.status());
  CompileJob job;
  job.program_type = request.program().type_name();
  job.program = request.program().data();
  job.options_type = request.compile_options().type_name();
  job.options = request.compile_options().data();
  job.num_devices = static_cast<int64_t>(devices->size());
  const uint64_t handle = MintHandle();
  const uint64_t ready_handle = MintHandle();
  const absl::Time asked = absl::Now();
  Future<std::shared_ptr<const ExecutableEntry>> loaded =
      compiler_->Compile(std::move(job))
          .Map(*executor_,
               [this, self = shared_from_this(),
                handle, devices = *devices, slice = *slice, asked](
                   const std::shared_ptr<const CompiledProgram>& program)
                   -> absl::StatusOr<std::shared_ptr<const ExecutableEntry>> {
                 absl::StatusOr<client::Executable> executable =
                     session_.Compile(program->hlo_text, slice);
                 if (!executable.ok()) return executable.status();
                 // One line per compile: what an operator reads to see
                 // whether a program came from the caches.
                 CW_LOG(INFO) << "proxy: session " << id() << " compiled "
                              << program->name << " for " << devices.size()
                              << " devices in "
                              << absl::FDivDuration(absl::Now() - asked,
                                                    absl::Milliseconds(1))
                              << " ms";
                 auto entry = std::make_shared<ExecutableEntry>();
                 entry->executable = *std::move(executable);
                 entry->devices = devices;
                 entry->program = program;
                 std::shared_ptr<const ExecutableEntry> shared = std::move(entry);
                 absl::MutexLock lock(&mu_);
                 executables_[handle] = shared;
                 return shared;
               });
  {
    absl::MutexLock lock(&mu_);
    futures_.emplace(ready_handle,
                     loaded.Map(InlineExecutor::Instance(),
                                [](const std::shared_ptr<const ExecutableEntry>&) {}));
  }
  return loaded.Map(
      InlineExecutor::Instance(),
      [handle, ready_handle](const std::shared_ptr<const ExecutableEntry>& entry) {
        IfrtResponse response;
        auto* out = response.mutable_compile_response();
        out->set_loaded_executable_handle(handle);
        out->set_name(entry->program->name);
        out->set_num_devices(static_cast<int32_t>(entry->devices.size()));
        for (int32_t d : entry->devices) {
          out->add_device_ids(d);
          out->add_addressable_device_ids(d);
        }
        out->set_fingerprint_value(absl::StrCat(entry->program->name, ":", handle));
        out->set_ready_future_handle(ready_handle);
        return response;
      });
}

absl::StatusOr<std::shared_ptr<const ProxySession::ExecutableEntry>>
ProxySession::FindExecutable(uint64_t handle) {
  absl::MutexLock lock(&mu_);
  auto it = executables_.find(handle);
  if (it == executables_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown executable handle ", handle));
  }
  return it->second;
}

absl::StatusOr<IfrtResponse> ProxySession::ExecutableMetadata(uint64_t handle) {
  absl::StatusOr<std::shared_ptr<const ExecutableEntry>> found = FindExecutable(handle);
  if (!found.ok()) return found.status();
  const std::shared_ptr<const ExecutableEntry>& entry = *found;
  IfrtResponse response;
  auto* out = response.mutable_loaded_executable_metadata_response();
  for (const client::Sharding& s : entry->executable.parameter_shardings()) {
    *out->mutable_parameter_shardings()->add_shardings() = ShardingToOpSharding(s.hlo());
  }
  for (const client::Sharding& s : entry->executable.output_shardings()) {
    *out->mutable_output_shardings()->add_shardings() = ShardingToOpSharding(s.hlo());
  }
  auto* kinds = out->mutable_output_memory_kinds();
  auto* list = kinds->add_memory_kind_lists();
  for (size_t i = 0; i < entry->executable.output_shapes().size(); ++i) {
    list->add_memory_kinds("device");
  }
  *out->mutable_parameter_layouts_error() = StatusToProto(
      absl::UnimplementedError("Causeway's proxy reports no layouts (row-major)"));
  *out->mutable_output_layouts_error() = StatusToProto(
      absl::UnimplementedError("Causeway's proxy reports no layouts (row-major)"));
  for (int32_t d : entry->program->donated_inputs) {
    out->mutable_donated_input_indices()->add_donated_input_indices(d);
  }
  if (entry->program->donated_inputs.empty()) out->mutable_donated_input_indices();
  *out->mutable_compiled_memory_stats_error() = StatusToProto(
      absl::UnimplementedError("Causeway's proxy reports no compiled memory stats"));
  return response;
}

// XLA's cost analysis of the program as the compile worker compiled it
// (what `jax.stages.Compiled.cost_analysis()` reads), or why there is none.
absl::StatusOr<IfrtResponse> ProxySession::ExecutableCostAnalysis(uint64_t handle) {
  absl::StatusOr<std::shared_ptr<const ExecutableEntry>> entry = FindExecutable(handle);
  if (!entry.ok()) return entry.status();
  IfrtResponse response;
  auto* out = response.mutable_loaded_executable_cost_analysis_response();
  const CompiledProgram& program = *(*entry)->program;
  if (program.cost_analysis.empty()) {
    *out->mutable_status() = StatusToProto(absl::UnavailableError(absl::StrCat(
        "XLA gave no cost analysis for ", program.name)));
    return response;
  }
  auto* attributes = out->mutable_attributes();
  for (const auto& [name, value] : program.cost_analysis) {
    AddAttribute(attributes, name, FloatAttribute(static_cast<float>(value)));
  }
  return response;
}

// The partitioned module Causeway runs (`Compiled.as_text()`).
absl::StatusOr<IfrtResponse> ProxySession::ExecutableProgramText(uint64_t handle) {
  absl::StatusOr<std::shared_ptr<const ExecutableEntry>> entry = FindExecutable(handle);
  if (!entry.ok()) return entry.status();
  IfrtResponse response;
  response.mutable_loaded_executable_human_readable_program_text_response()
      ->set_human_readable_program_text((*entry)->program->hlo_text);
  return response;
}

Future<IfrtResponse> ProxySession::Execute(
    const xla::ifrt::proxy::LoadedExecutableExecuteRequest& request) {
  absl::StatusOr<std::shared_ptr<const ExecutableEntry>> found =
      FindExecutable(request.loaded_executable_handle());
  if (!found.ok()) return MakeReadyFuture<IfrtResponse>(found.status());
  const std::shared_ptr<const ExecutableEntry>& entry = *found;
  if (absl::Status s = CheckHandleCount(request.args_handles_size(), "Execute"); !s.ok()) {
    return MakeReadyFuture<IfrtResponse>(s);
  }
  const client::Executable& executable = entry->executable;
  const size_t num_outputs = executable.output_shapes().size();
  if (request.result_array_handle_size() != 0 &&
      static_cast<size_t>(request.result_array_handle_size()) != num_outputs) {
    return MakeReadyFuture<IfrtResponse>(absl::InvalidArgumentError(absl::StrCat(
        "Execute names ", request.result_array_handle_size(),
        " result handles for a program of ", num_outputs, " outputs")));
  }
  std::vector<uint64_t> results;
  for (size_t i = 0; i < num_outputs; ++i) {
    results.push_back(request.result_array_handle_size() != 0
                          ? request.result_array_handle(i)
                          : MintHandle());
  }
  // The execution's status future exists only when the client asked for it
  // (fill_status, or a status handle of its own): since protocol version 6
  // a client that did not never reads it, and each one would cost a
  // readiness call to the head per output and stay in futures_ for good.
  const bool wants_status = request.execute_options().fill_status() ||
                            request.result_status_handle() != 0;
  const uint64_t status_handle =
      request.result_status_handle() != 0 ? request.result_status_handle()
      : wants_status                      ? MintHandle()
                                          : 0;
  std::vector<ArrayFuture> args;
  for (uint64_t h : request.args_handles()) args.push_back(FindArray(h));
  Future<std::vector<std::shared_ptr<const ArrayEntry>>> inputs =
      JoinFutures(std::move(args));
  // The outputs, once every argument is made and the launch is sent: at
  // once when the arguments are there (a chained step's are), else on the
  // pool once they come (so that a chain of launches waiting on one slow
  // upload does not run nested on the thread that completes it).
  Executor& launcher =
      inputs.IsReady() ? static_cast<Executor&>(InlineExecutor::Instance()) : *executor_;
  Future<std::vector<client::Array>> launched =
      std::move(inputs)
          .Map(launcher,
               [this, self = shared_from_this(),
                entry, non_donatable = std::vector<int32_t>(
                           request.execute_options().non_donatable_input_indices().begin(),
                           request.execute_options().non_donatable_input_indices().end())](
                   const std::vector<std::shared_ptr<const ArrayEntry>>& arrays)
                   -> absl::StatusOr<std::vector<client::Array>> {
                 std::vector<client::Array> inputs;
                 for (const auto& a : arrays) {
                   if (a->deleted->load()) {
                     return absl::FailedPreconditionError(
                         "an argument of the execution has been deleted");
                   }
                   // A shard view is copied out of its parent first.
                   absl::StatusOr<client::Array> input = Materialized(*a);
                   if (!input.ok()) return input.status();
                   inputs.push_back(*std::move(input));
                 }
                 absl::StatusOr<std::vector<client::Array>> outputs =
                     entry->executable.Execute(inputs);
                 if (!outputs.ok()) return outputs.status();
                 // Donated arguments are freed once the launch has read them
                 // (JAX marks them deleted on its side).
                 for (int32_t d : entry->program->donated_inputs) {
                   if (d < 0 || static_cast<size_t>(d) >= arrays.size()) continue;
                   if (std::find(non_donatable.begin(), non_donatable.end(), d) !=
                       non_donatable.end()) {
                     continue;
                   }
                   arrays[d]->deleted->store(true);
                   arrays[d]->array.Delete();
                 }
                 return outputs;
               });
  std::vector<Future<>> done;
  IfrtResponse response;
  auto* out = response.mutable_loaded_executable_execute_response();
  // jaxlib's client wants a status handle back only when it asked for the
  // status (fill_status) and did not mint one itself.
  if (request.result_status_handle() == 0 && wants_status) {
    out->set_status_handle(status_handle);
  }
  for (size_t i = 0; i < num_outputs; ++i) {
    IfrtSharding sharding;
    sharding.devices = entry->devices;
    sharding.sharding = executable.output_shardings()[i].hlo();
    const hlo::Shape shape = executable.output_shapes()[i];
    ArrayFuture output = launched.Map(
        InlineExecutor::Instance(),
        [i, shape, sharding](const std::vector<client::Array>& outputs)
            -> absl::StatusOr<std::shared_ptr<const ArrayEntry>> {
          auto e = std::make_shared<ArrayEntry>();
          e->shape = shape;
          e->sharding = sharding;
          e->array = outputs.at(i);
          return std::shared_ptr<const ArrayEntry>(std::move(e));
        });
    if (absl::Status s = AddArray(results[i], output,
                                  request.result_array_handle_size() == 0);
        !s.ok()) {
      return MakeReadyFuture<IfrtResponse>(s);
    }
    if (wants_status) {
      done.push_back(output.AndThen(InlineExecutor::Instance(),
                                    [](const std::shared_ptr<const ArrayEntry>& e) {
                                      return e->array.Ready();
                                    }));
    }
    auto* o = out->add_outputs();
    absl::StatusOr<xla::ifrt::DTypeProto> dtype = DTypeToProto(shape.type());
    if (!dtype.ok()) return MakeReadyFuture<IfrtResponse>(dtype.status());
    *o->mutable_dtype() = *dtype;
    *o->mutable_shape() = ShapeToProto(shape);
    *o->mutable_sharding() = ShardingToProto(sharding);
    o->set_array_handle(results[i]);
  }
  if (wants_status) {
    absl::MutexLock lock(&mu_);
    futures_[status_handle] = JoinFutures(std::move(done));
  }
  return MakeReadyFuture<IfrtResponse>(std::move(response));
}

absl::StatusOr<IfrtResponse> ProxySession::DestructExecutable(uint64_t handle) {
  absl::MutexLock lock(&mu_);
  if (executables_.erase(handle) == 0) {
    return absl::NotFoundError(absl::StrCat("unknown executable handle ", handle));
  }
  IfrtResponse response;
  response.mutable_loaded_executable_destruct_response();
  return response;
}

}  // namespace causeway::proxy
