#include "causeway/client/internal.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"

namespace causeway::client::internal {
namespace {

std::atomic<uint64_t> next_array_handle{0};
std::atomic<uint64_t> next_slice_handle{0};
std::atomic<uint64_t> next_executable_handle{0};

}  // namespace

ArrayHandle MintArrayHandle() {
  return ArrayHandle(next_array_handle.fetch_add(1) + 1);
}
SliceHandle MintSliceHandle() {
  return SliceHandle(next_slice_handle.fetch_add(1) + 1);
}
ExecutableHandle MintExecutableHandle() {
  return ExecutableHandle(next_executable_handle.fetch_add(1) + 1);
}

absl::Status SessionCore::CheckOpen() const {
  if (closed()) {
    return absl::FailedPreconditionError(
        absl::StrCat("session '", name_, "' is closed"));
  }
  return absl::OkStatus();
}

void SessionCore::DropArray(ArrayHandle handle) {
  if (closed()) return;  // Closing released everything.
  channel_->Delete({handle});
}

SliceState::~SliceState() {
  if (session->closed() || released.exchange(true)) return;
  // Nothing waits on the reply: the head releases the devices when it can.
  session->channel().ReleaseSlice(handle);
}

ArrayState::~ArrayState() {
  // An abandoned or never-submitted array is unknown to the head.
  if (abandoned.load() || pending_trace.load() != 0) return;
  if (deleted.load()) return;
  session->DropArray(handle);
}

absl::Status ArrayState::CheckUsable(uint64_t trace_id) const {
  CW_RETURN_IF_ERROR(session->CheckOpen());
  if (deleted.load()) {
    return absl::FailedPreconditionError(
        absl::StrCat("array ", handle.value(), " was deleted"));
  }
  if (abandoned.load()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "array ", handle.value(),
        " came from a ProgramTrace that was destroyed without Submit()"));
  }
  uint64_t pending = pending_trace.load();
  if (pending != 0 && pending != trace_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "array ", handle.value(),
        " is the output of a ProgramTrace that is not submitted yet: call "
        "Submit() before using it outside the trace"));
  }
  if (slice.state()->released.load()) {
    return absl::FailedPreconditionError(
        absl::StrCat("array ", handle.value(), " lives on ", slice.ToString(),
                     ", which was released"));
  }
  return absl::OkStatus();
}

namespace {

Array NewArray(const std::shared_ptr<SessionCore>& session, const Slice& slice,
               hlo::Shape shape, Sharding sharding, uint64_t trace_id) {
  auto state = std::make_shared<ArrayState>(
      session, slice, MintArrayHandle(), std::move(shape), std::move(sharding));
  state->pending_trace.store(trace_id);
  return Array(std::move(state));
}

transport::ArraySpec SpecOf(const Array& array) {
  return transport::ArraySpec{array.handle(), array.shape(),
                              array.sharding().hlo(), array.slice().handle()};
}

absl::Status CheckSameSession(const std::shared_ptr<SessionCore>& session,
                              const Array& array) {
  if (array.state()->session != session) {
    return absl::InvalidArgumentError(
        absl::StrCat(array.ToString(), " belongs to session '",
                     array.state()->session->name(), "', not to '",
                     session->name(), "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Array> AppendCopy(const std::shared_ptr<SessionCore>& session,
                                 const Array& array, const Slice& slice,
                                 const Sharding& sharding, uint64_t trace_id,
                                 std::vector<GraphOp>* ops) {
  if (!array.valid()) {
    return absl::InvalidArgumentError("Copy of an invalid (default) Array");
  }
  if (!slice.valid()) {
    return absl::InvalidArgumentError("Copy to an invalid (default) Slice");
  }
  CW_RETURN_IF_ERROR(CheckSameSession(session, array));
  CW_RETURN_IF_ERROR(array.state()->CheckUsable(trace_id));
  if (slice.state()->session != session) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Copy to ", slice.ToString(), " of another session"));
  }
  if (slice.state()->released.load()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Copy to ", slice.ToString(), ", which was released"));
  }
  CW_RETURN_IF_ERROR(sharding.Validate(array.shape(), slice.num_devices()));
  Array copy = NewArray(session, slice, array.shape(), sharding, trace_id);
  ops->push_back(transport::CopyOp{array.handle(), SpecOf(copy), {}});
  return copy;
}

absl::StatusOr<Array> AppendAssemble(
    const std::shared_ptr<SessionCore>& session,
    absl::Span<const std::pair<Array, int64_t>> pieces,
    const hlo::Shape& global_shape, const Slice& slice,
    const Sharding& sharding, std::vector<GraphOp>* ops) {
  if (!slice.valid()) {
    return absl::InvalidArgumentError("Assemble to an invalid (default) Slice");
  }
  if (slice.state()->session != session) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Assemble to ", slice.ToString(), " of another session"));
  }
  if (!global_shape.IsArray()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Assemble makes an array, not ", global_shape.ToString(false)));
  }
  CW_ASSIGN_OR_RETURN(hlo::Shape shard_shape,
                      sharding.ShardShape(global_shape, slice.num_devices()));
  if (static_cast<int64_t>(pieces.size()) != slice.num_devices()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Assemble got ", pieces.size(), " pieces for ",
                     slice.ToString(), ": one per device"));
  }
  transport::CopyOp op;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto& [array, shard] = pieces[i];
    auto fail = [&](const absl::Status& status) {
      return absl::Status(status.code(), absl::StrCat("Assemble: piece ", i,
                                                      ": ", status.message()));
    };
    if (!array.valid()) return fail(absl::InvalidArgumentError("invalid Array"));
    if (absl::Status s = CheckSameSession(session, array); !s.ok()) return fail(s);
    if (absl::Status s = array.state()->CheckUsable(0); !s.ok()) return fail(s);
    const int64_t n = array.slice().num_devices();
    if (shard < 0 || shard >= n) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat(array.ToString(), " has no shard ", shard)));
    }
    absl::StatusOr<hlo::Shape> piece_shape =
        array.sharding().ShardShape(array.shape(), n);
    if (!piece_shape.ok()) return fail(piece_shape.status());
    if (!piece_shape->Compatible(shard_shape)) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "its shards are ", piece_shape->ToString(false), "; ",
          global_shape.ToString(false), " sharded ", sharding.ToString(),
          " has shards of ", shard_shape.ToString(false))));
    }
    op.pieces.push_back(transport::CopyOp::Piece{array.handle(), shard});
  }
  Array assembled = NewArray(session, slice, global_shape, sharding, 0);
  op.destination = SpecOf(assembled);
  ops->push_back(std::move(op));
  return assembled;
}

absl::StatusOr<std::vector<Array>> AppendExecute(
    const ExecutableState& executable, absl::Span<const Array> args,
    uint64_t trace_id, std::vector<GraphOp>* ops,
    std::vector<Array>* temporaries) {
  const std::shared_ptr<SessionCore>& session = executable.session;
  CW_RETURN_IF_ERROR(session->CheckOpen());
  const size_t num_params = executable.parameter_shapes.size();
  if (args.size() != num_params) {
    return absl::InvalidArgumentError(
        absl::StrCat("program '", executable.name, "' takes ", num_params,
                     " arguments, got ", args.size()));
  }
  const size_t first_op = ops->size();
  const size_t first_temporary = temporaries->size();
  transport::ExecuteOp execute;
  execute.executable = executable.info.handle;
  for (size_t i = 0; i < args.size(); ++i) {
    const Array& arg = args[i];
    auto fail = [&](absl::Status status) {
      // Leave nothing half-recorded.
      ops->resize(first_op);
      for (size_t t = first_temporary; t < temporaries->size(); ++t) {
        (*temporaries)[t].state()->abandoned.store(true);
      }
      temporaries->resize(first_temporary);
      return absl::Status(
          status.code(), absl::StrCat("program '", executable.name,
                                      "' argument ", i, ": ", status.message()));
    };
    if (!arg.valid()) return fail(absl::InvalidArgumentError("invalid Array"));
    if (absl::Status s = CheckSameSession(session, arg); !s.ok()) return fail(s);
    if (absl::Status s = arg.state()->CheckUsable(trace_id); !s.ok()) {
      return fail(s);
    }
    const hlo::Shape& want = executable.parameter_shapes[i];
    if (!arg.shape().Compatible(want)) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("expected ", want.ToString(false), ", got ",
                       arg.shape().ToString(false))));
    }
    const Sharding& want_sharding = executable.parameter_shardings[i];
    const bool same_slice = arg.slice() == executable.slice;
    if (same_slice && arg.sharding().IsEquivalent(want_sharding, want,
                                                  executable.slice.num_devices())) {
      execute.arguments.push_back(arg.handle());
      continue;
    }
    // Moved (or resharded) into place first, in the same submission.
    absl::StatusOr<Array> moved = AppendCopy(session, arg, executable.slice,
                                             want_sharding, trace_id, ops);
    if (!moved.ok()) return fail(moved.status());
    execute.arguments.push_back(moved->handle());
    temporaries->push_back(*std::move(moved));
  }
  std::vector<Array> outputs;
  outputs.reserve(executable.output_shapes.size());
  for (size_t i = 0; i < executable.output_shapes.size(); ++i) {
    outputs.push_back(NewArray(session, executable.slice,
                               executable.output_shapes[i],
                               executable.output_shardings[i], trace_id));
    execute.outputs.push_back(SpecOf(outputs.back()));
  }
  ops->push_back(std::move(execute));
  return outputs;
}

void SendOps(SessionCore& session, std::vector<GraphOp> ops) {
  if (ops.empty()) return;
  if (ops.size() == 1) {
    if (auto* execute = std::get_if<transport::ExecuteOp>(&ops[0])) {
      session.channel().Execute(std::move(*execute));
    } else {
      session.channel().Copy(std::get<transport::CopyOp>(std::move(ops[0])));
    }
    return;
  }
  session.channel().Submit(transport::ProgramGraph{std::move(ops)});
}

}  // namespace causeway::client::internal
