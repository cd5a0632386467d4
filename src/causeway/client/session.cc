#include "causeway/client/session.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/status.h"
#include "causeway/client/internal.h"
#include "causeway/hlo/sharding_util.h"

namespace causeway::client {
namespace {

// The module's name from its header line ("HloModule jit_f, ..."), for
// messages; the head parses the text properly.
std::string ModuleName(std::string_view text) {
  size_t pos = text.find("HloModule");
  if (pos == std::string_view::npos) return "module";
  pos += 9;
  while (pos < text.size() && absl::ascii_isspace(text[pos])) ++pos;
  size_t end = pos;
  while (end < text.size() && !absl::ascii_isspace(text[end]) &&
         text[end] != ',') {
    ++end;
  }
  return end > pos ? std::string(text.substr(pos, end - pos)) : "module";
}

absl::Status CheckSliceOf(const internal::SessionCore& session,
                          const Slice& slice) {
  if (!slice.valid()) {
    return absl::InvalidArgumentError("invalid (default) Slice");
  }
  if (slice.state()->session.get() != &session) {
    return absl::InvalidArgumentError(absl::StrCat(
        slice.ToString(), " belongs to another session than '",
        session.name(), "'"));
  }
  if (slice.state()->released.load()) {
    return absl::FailedPreconditionError(
        absl::StrCat(slice.ToString(), " was released"));
  }
  return absl::OkStatus();
}

// Global shapes and client shardings of one side (parameters or outputs)
// of a compiled program.
absl::Status GlobalSide(const std::string& program, const char* side,
                        const std::vector<hlo::Shape>& shard_shapes,
                        const std::vector<hlo::Sharding>& shardings,
                        int64_t num_devices, std::vector<hlo::Shape>* shapes,
                        std::vector<Sharding>* out_shardings) {
  for (size_t i = 0; i < shard_shapes.size(); ++i) {
    hlo::Sharding hlo_sharding;  // None given: replicated.
    if (i < shardings.size()) hlo_sharding = shardings[i];
    absl::StatusOr<Sharding> sharding = Sharding::FromHlo(hlo_sharding);
    if (!sharding.ok()) {
      return absl::Status(sharding.status().code(),
                          absl::StrCat("program '", program, "' ", side, " ",
                                       i, ": ", sharding.status().message()));
    }
    absl::StatusOr<hlo::Shape> global = hlo::GlobalShapeFromShard(
        sharding->hlo(), shard_shapes[i], num_devices);
    if (!global.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("program '", program, "' ", side, " ", i, ": ",
                       global.status().message()));
    }
    shapes->push_back(*std::move(global));
    out_shardings->push_back(*std::move(sharding));
  }
  return absl::OkStatus();
}

}  // namespace

Session::Session(std::shared_ptr<internal::SessionCore> core)
    : core_(std::move(core)) {}

Session& Session::operator=(Session&& other) {
  if (this != &other) {
    if (core_ != nullptr) Close().IgnoreError();
    core_ = std::move(other.core_);
  }
  return *this;
}

Session::~Session() {
  if (core_ != nullptr) Close().IgnoreError();
}

absl::StatusOr<Session> Session::Open(
    std::unique_ptr<transport::SessionChannel> channel,
    SessionOptions options) {
  if (channel == nullptr) {
    return absl::InvalidArgumentError("Session::Open needs a channel");
  }
  if (!(options.weight > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "session weight must be positive, got ", options.weight));
  }
  transport::OpenSessionRequest request{options.name, options.weight,
                                        options.priority};
  Future<SessionId> opened = channel->OpenSession(std::move(request));
  CW_ASSIGN_OR_RETURN(SessionId id, opened.Await());
  auto core = std::make_shared<internal::SessionCore>(std::move(channel),
                                                      options.name);
  core->set_id(id);
  return Session(std::move(core));
}

SessionId Session::id() const {
  return core_ != nullptr ? core_->id() : SessionId();
}
const std::string& Session::name() const {
  static const std::string* const kNone = new std::string();
  return core_ != nullptr ? core_->name() : *kNone;
}

absl::Status Session::CheckOpen() const {
  if (core_ == nullptr) {
    return absl::FailedPreconditionError("a moved-from Session");
  }
  return core_->CheckOpen();
}

absl::StatusOr<Slice> Session::CreateSlice(SliceOptions options) {
  CW_RETURN_IF_ERROR(CheckOpen());
  if (options.num_devices < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a slice needs at least one device, got ", options.num_devices));
  }
  if (options.mesh_shape.empty()) options.mesh_shape = {options.num_devices};
  CW_ASSIGN_OR_RETURN(Mesh mesh, Mesh::Create(options.mesh_shape,
                                              std::move(options.axis_names)));
  if (mesh.num_devices() != options.num_devices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mesh shape [", absl::StrJoin(options.mesh_shape, ","), "] has ",
        mesh.num_devices(), " devices, not ", options.num_devices));
  }
  auto state = std::make_shared<internal::SliceState>(
      core_, internal::MintSliceHandle(), mesh, options.island);
  transport::SliceRequest request;
  request.handle = state->handle;
  request.num_devices = options.num_devices;
  request.mesh_shape = mesh.shape();
  request.island = options.island;
  request.priority = options.priority;
  request.allow_smaller = options.allow_smaller;
  request.shared = options.shared;
  state->granted = core_->channel().RequestSlice(std::move(request));
  return Slice(std::move(state));
}

absl::StatusOr<Slice> Session::CreateSlice(int64_t num_devices,
                                           std::vector<int64_t> mesh_shape,
                                           std::optional<IslandId> island) {
  SliceOptions options;
  options.num_devices = num_devices;
  options.mesh_shape = std::move(mesh_shape);
  options.island = island;
  return CreateSlice(std::move(options));
}

absl::StatusOr<Executable> Session::Compile(std::string_view hlo_text,
                                            const Slice& slice) {
  CW_RETURN_IF_ERROR(CheckOpen());
  CW_RETURN_IF_ERROR(CheckSliceOf(*core_, slice));
  transport::CompileRequest request{internal::MintExecutableHandle(),
                                    std::string(hlo_text), slice.handle()};
  Future<transport::CompileInfo> compiled =
      core_->channel().Compile(std::move(request));
  CW_ASSIGN_OR_RETURN(transport::CompileInfo info, compiled.Await());

  auto state = std::make_shared<internal::ExecutableState>();
  state->session = core_;
  state->slice = slice;
  state->name = ModuleName(hlo_text);
  const int64_t n = slice.num_devices();
  if (info.num_partitions != 1 && info.num_partitions != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "program '", state->name, "' is partitioned for ",
        info.num_partitions, " devices but ", slice.ToString(), " has ", n));
  }
  CW_RETURN_IF_ERROR(GlobalSide(state->name, "parameter",
                                info.parameter_shapes,
                                info.parameter_shardings, n,
                                &state->parameter_shapes,
                                &state->parameter_shardings));
  CW_RETURN_IF_ERROR(GlobalSide(state->name, "output", info.output_shapes,
                                info.output_shardings, n,
                                &state->output_shapes,
                                &state->output_shardings));
  state->info = std::move(info);
  return Executable(std::move(state));
}

absl::StatusOr<Array> Session::FromHost(const hlo::Literal& value,
                                        const Slice& slice,
                                        const Sharding& sharding) {
  CW_RETURN_IF_ERROR(CheckOpen());
  CW_RETURN_IF_ERROR(CheckSliceOf(*core_, slice));
  if (!value.shape().IsArray()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FromHost takes an array value, not ", value.shape().ToString(false)));
  }
  CW_RETURN_IF_ERROR(sharding.Validate(value.shape(), slice.num_devices()));
  auto state = std::make_shared<internal::ArrayState>(
      core_, slice, internal::MintArrayHandle(), value.shape(), sharding);
  transport::ArraySpec spec{state->handle, value.shape(), sharding.hlo(),
                            slice.handle()};
  state->uploaded = core_->channel().PutArray(std::move(spec), value);
  return Array(std::move(state));
}

absl::StatusOr<Array> Session::FromShards(std::vector<hlo::Literal> shards,
                                          const hlo::Shape& global_shape,
                                          const Slice& slice,
                                          const Sharding& sharding) {
  CW_RETURN_IF_ERROR(CheckOpen());
  CW_RETURN_IF_ERROR(CheckSliceOf(*core_, slice));
  if (!global_shape.IsArray()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FromShards makes an array, not ", global_shape.ToString(false)));
  }
  CW_ASSIGN_OR_RETURN(hlo::Shape shard_shape,
                      sharding.ShardShape(global_shape, slice.num_devices()));
  if (static_cast<int64_t>(shards.size()) != slice.num_devices()) {
    return absl::InvalidArgumentError(
        absl::StrCat("FromShards got ", shards.size(), " shards for ",
                     slice.ToString(), ": one per device"));
  }
  for (size_t i = 0; i < shards.size(); ++i) {
    if (!shards[i].shape().IsArray() ||
        !shards[i].shape().Compatible(shard_shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FromShards: shard ", i, " is ", shards[i].shape().ToString(false),
          " but ", global_shape.ToString(false), " sharded ",
          sharding.ToString(), " has shards of ", shard_shape.ToString(false)));
    }
  }
  auto state = std::make_shared<internal::ArrayState>(
      core_, slice, internal::MintArrayHandle(), global_shape, sharding);
  transport::ArraySpec spec{state->handle, global_shape, sharding.hlo(),
                            slice.handle()};
  state->uploaded =
      core_->channel().PutShards(std::move(spec), std::move(shards));
  return Array(std::move(state));
}

absl::StatusOr<Array> Session::Copy(const Array& array, const Slice& slice,
                                    const Sharding& sharding) {
  CW_RETURN_IF_ERROR(CheckOpen());
  std::vector<internal::GraphOp> ops;
  CW_ASSIGN_OR_RETURN(Array copy, internal::AppendCopy(core_, array, slice,
                                                       sharding, 0, &ops));
  internal::SendOps(*core_, std::move(ops));
  return copy;
}

absl::StatusOr<Array> Session::Assemble(
    absl::Span<const std::pair<Array, int64_t>> pieces,
    const hlo::Shape& global_shape, const Slice& slice,
    const Sharding& sharding) {
  CW_RETURN_IF_ERROR(CheckOpen());
  CW_RETURN_IF_ERROR(CheckSliceOf(*core_, slice));
  std::vector<internal::GraphOp> ops;
  CW_ASSIGN_OR_RETURN(Array assembled,
                      internal::AppendAssemble(core_, pieces, global_shape,
                                               slice, sharding, &ops));
  internal::SendOps(*core_, std::move(ops));
  return assembled;
}

absl::StatusOr<Array> Session::Reshard(const Array& array,
                                       const Sharding& sharding) {
  if (!array.valid()) {
    return absl::InvalidArgumentError("Reshard of an invalid (default) Array");
  }
  return Copy(array, array.slice(), sharding);
}

Future<transport::StatusReport> Session::Status() {
  if (absl::Status open = CheckOpen(); !open.ok()) {
    return MakeErrorFuture<transport::StatusReport>(open);
  }
  return core_->channel().GetStatus();
}

Future<std::string> Session::Trace() {
  if (absl::Status open = CheckOpen(); !open.ok()) {
    return MakeErrorFuture<std::string>(open);
  }
  return core_->channel().GetTrace();
}

absl::Status Session::Close() {
  if (core_ == nullptr) {
    return absl::FailedPreconditionError("Close of a moved-from Session");
  }
  if (!core_->MarkClosed()) return absl::OkStatus();
  return core_->channel().CloseSession().Await();
}

bool Session::closed() const { return core_ == nullptr || core_->closed(); }

}  // namespace causeway::client
