#include "causeway/head/launch_plan.h"

#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/hlo/printer.h"
#include "causeway/hlo/sharding_util.h"

namespace causeway::head {
namespace {

using transport::ArraySpec;
using transport::LaunchInput;
using transport::LaunchOp;
using transport::LaunchOutput;
using transport::ReceiveSpec;

std::string ShardingText(const hlo::Sharding& sharding) {
  return hlo::PrintSharding(sharding);
}

absl::Status WithContext(const absl::Status& status,
                         const std::string& context) {
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

std::shared_ptr<const ArrayRecord> NewRecord(const PlanContext& context,
                                             const ArraySpec& spec,
                                             ArrayPlacement placement,
                                             ArrayHandle internal,
                                             std::string producer) {
  // One string per array, shared by every launch that reads it.
  auto record = std::make_shared<ArrayRecord>();
  record->session = context.session;
  record->handle = spec.handle;
  record->internal = internal;
  record->slice = spec.slice;
  record->buffers = NewArrayBuffers(internal, placement, *context.topology);
  record->placement = std::move(placement);
  record->producer = std::make_shared<const std::string>(std::move(producer));
  return record;
}

}  // namespace

absl::StatusOr<LaunchPlan> PlanExecute(const PlanContext& context,
                                       const BoundProgram& bound,
                                       SliceHandle program_slice,
                                       const transport::ExecuteOp& op) {
  const CompiledProgram& program = *bound.program;
  const std::string& name = program.name;
  const std::vector<DeviceId>& devices = context.devices;
  const int64_t n = static_cast<int64_t>(devices.size());
  if (n != bound.num_devices) {
    return absl::FailedPreconditionError(absl::StrCat(
        "program '", name, "' was compiled for ", bound.num_devices,
        " devices but its slice now has ", n, "; compile it again"));
  }
  if (op.arguments.size() != program.parameter_shapes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "program '", name, "' takes ", program.parameter_shapes.size(),
        " argument(s); Execute passed ", op.arguments.size()));
  }
  if (op.outputs.size() != program.output_shapes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("program '", name, "' has ", program.output_shapes.size(),
                     " output(s); Execute named ", op.outputs.size()));
  }
  // Outputs: the client's specs must describe what the program produces.
  std::vector<ArrayPlacement> outputs;
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    const ArraySpec& spec = op.outputs[i];
    // Built only for a message.
    auto what = [&] {
      return absl::StrCat("output ", i, " of program '", name, "'");
    };
    if (spec.slice != program_slice) {
      return absl::InvalidArgumentError(absl::StrCat(
          what(), ": its spec names slice ", spec.slice.value(),
          " but the program runs on slice ", program_slice.value()));
    }
    ArrayPlacement placement{spec.global_shape, spec.sharding, devices};
    absl::StatusOr<hlo::Shape> shard =
        hlo::ShardShape(spec.sharding, spec.global_shape, n);
    if (!shard.ok()) return WithContext(shard.status(), what());
    if (!shard->Compatible(program.output_shapes[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          what(), " is ", program.output_shapes[i].ToString(false),
          " per device, but its spec (", spec.global_shape.ToString(false),
          " sharded ", ShardingText(spec.sharding), ") gives ",
          shard->ToString(false)));
    }
    ArrayPlacement expected{spec.global_shape, bound.output_shardings[i],
                            devices};
    absl::StatusOr<bool> same = SamePlacement(placement, expected);
    if (!same.ok()) return WithContext(same.status(), what());
    if (!*same) {
      return absl::InvalidArgumentError(absl::StrCat(
          what(), ": the spec's sharding ", ShardingText(spec.sharding),
          " is not the program's output sharding ",
          ShardingText(bound.output_shardings[i])));
    }
    outputs.push_back(std::move(placement));
  }
  // Arguments: direct when already where and how the program wants them,
  // otherwise staged by a transfer.
  auto launch = std::make_shared<PreparedLaunch>();
  launch->island = context.island;
  launch->session = context.session;
  launch->program = name;
  launch->session_name = context.session_name;
  launch->devices = devices;
  std::vector<std::vector<LaunchInput>> inputs(n);
  for (std::vector<LaunchInput>& list : inputs) {
    list.reserve(op.arguments.size());
  }
  std::vector<std::vector<ReceiveSpec>> staging(n);
  for (size_t a = 0; a < op.arguments.size(); ++a) {
    // Built only for a message.
    auto what = [&] {
      return absl::StrCat("argument ", a, " of program '", name, "'");
    };
    CW_ASSIGN_OR_RETURN(
        std::shared_ptr<const ArrayRecord> record,
        context.arrays->Find(context.session, op.arguments[a], what));
    const hlo::Shape& parameter = program.parameter_shapes[a];
    ArrayPlacement wanted{record->placement.global_shape,
                          bound.parameter_shardings[a], devices};
    absl::StatusOr<hlo::Shape> shard =
        hlo::ShardShape(wanted.sharding, wanted.global_shape, n);
    if (!shard.ok() || !shard->Compatible(parameter)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what(), ": array ", op.arguments[a].value(), " is ",
          record->placement.global_shape.ToString(false),
          ", which the program's sharding ", ShardingText(wanted.sharding),
          " cuts into ",
          shard.ok() ? shard->ToString(false)
                     : std::string(shard.status().message()),
          " per device, but parameter ", a, " is ", parameter.ToString(false)));
    }
    absl::StatusOr<bool> same = SamePlacement(record->placement, wanted);
    if (!same.ok()) return WithContext(same.status(), what());
    launch->used.push_back(record->buffers);
    if (*same) {
      for (int64_t i = 0; i < n; ++i) {
        inputs[i].push_back(LaunchInput{BufferId{record->internal, i}, false,
                                        op.arguments[a], record->producer});
      }
      continue;
    }
    const ArrayHandle staged = context.arrays->NewInternalHandle();
    absl::StatusOr<TransferPlan> plan =
        PlanTransfer(record->internal, record->placement, staged, wanted,
                     *context.topology, context.next_transfer_id);
    if (!plan.ok()) return WithContext(plan.status(), what());
    for (auto& [host, receive] : plan->receives) {
      const int64_t i = receive.buffer.shard;
      inputs[i].push_back(LaunchInput{BufferId{staged, i}, true,
                                      op.arguments[a], record->producer});
      staging[i].push_back(std::move(receive));
    }
    launch->source_sends.emplace_back(record->buffers, std::move(plan->sends));
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
    for (DeviceId device : devices) {
      const int64_t budget = context.topology->device(device).memory_bytes;
      if (bytes > budget) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "program '", name, "' needs ", bytes,
            " bytes per device for its inputs and outputs, but device ",
            device.value(), " has a memory budget of ", budget, " bytes"));
      }
    }
  }
  // Valid: the outputs exist from now on.
  LaunchPlan result;
  for (size_t k = 0; k < op.outputs.size(); ++k) {
    result.outputs.push_back(
        NewRecord(context, op.outputs[k], std::move(outputs[k]),
                  context.arrays->NewInternalHandle(),
                  absl::StrCat("output ", k, " of '", name, "'")));
    launch->outputs.push_back(result.outputs.back()->buffers);
  }
  for (DeviceId device : devices) {
    launch->hosts.insert(context.topology->HostOf(device));
  }
  const std::vector<HostId> participant_hosts(launch->hosts.begin(),
                                              launch->hosts.end());
  // Once per launch: its ops' peers then travel once per stream.
  const uint64_t peers_key = transport::PeersKey(devices, participant_hosts);
  launch->ops.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    LaunchOp launch_op;
    launch_op.device = devices[i];
    launch_op.island = context.island;
    launch_op.program = program.id;
    launch_op.program_name = name;
    launch_op.session = context.session;
    launch_op.session_name = context.session_name;
    launch_op.partition = i;
    launch_op.num_partitions = n;
    launch_op.devices = devices;
    launch_op.participant_hosts = participant_hosts;
    launch_op.peers_key = peers_key;
    launch_op.staging = std::move(staging[i]);
    launch_op.inputs = std::move(inputs[i]);
    launch_op.outputs.reserve(op.outputs.size());
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      launch_op.outputs.push_back(LaunchOutput{
          BufferId{result.outputs[k]->internal, i}, program.output_shapes[k]});
    }
    launch->ops.emplace_back(context.topology->HostOf(devices[i]),
                             std::move(launch_op));
  }
  result.launch = std::move(launch);
  return result;
}

namespace {

absl::StatusOr<CopyPlan> PlanAssemblyCopy(const PlanContext& context,
                                          const transport::CopyOp& op) {
  const ArraySpec& spec = op.destination;
  ArrayPlacement to{spec.global_shape, spec.sharding, context.devices};
  const ArrayHandle internal = context.arrays->NewInternalHandle();
  CopyPlan plan;
  std::vector<AssemblyPiece> pieces;
  // Each source array's sends go with its own buffers (sent once it is
  // placed); the pieces' sends are split per source below.
  std::map<ArrayHandle, std::shared_ptr<ArrayBuffers>> sources;
  for (size_t i = 0; i < op.pieces.size(); ++i) {
    const transport::CopyOp::Piece& piece = op.pieces[i];
    auto what = [&] { return absl::StrCat("Assemble: piece ", i); };
    CW_ASSIGN_OR_RETURN(std::shared_ptr<const ArrayRecord> source,
                        context.arrays->Find(context.session, piece.array, what));
    absl::StatusOr<std::vector<hlo::ShardRegion>> regions =
        RegionsOf(source->placement);
    if (!regions.ok()) return WithContext(regions.status(), what());
    if (piece.shard < 0 || piece.shard >= static_cast<int64_t>(regions->size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what(), ": array ", piece.array.value(), " has no shard ",
                       piece.shard, " (it has ", regions->size(), ")"));
    }
    pieces.push_back(AssemblyPiece{BufferId{source->internal, piece.shard},
                                   source->placement.devices[piece.shard],
                                   (*regions)[piece.shard]});
    sources.emplace(source->internal, source->buffers);
  }
  absl::StatusOr<TransferPlan> transfer = PlanAssembly(
      pieces, internal, to, *context.topology, context.next_transfer_id);
  if (!transfer.ok()) return WithContext(transfer.status(), "Assemble");
  // Receives go with the first source's transfer; every send with its own
  // source's.
  std::map<ArrayHandle, TransferPlan> by_source;
  for (auto& [host, send] : transfer->sends) {
    by_source[send.source.array].sends.emplace_back(host, std::move(send));
  }
  by_source.begin()->second.receives = std::move(transfer->receives);
  by_source.begin()->second.bytes = transfer->bytes;
  for (auto& [array, part] : by_source) {
    plan.transfers.emplace_back(std::move(part), sources.at(array));
  }
  plan.destination = NewRecord(context, spec, std::move(to), internal,
                               absl::StrCat("assembled from ", op.pieces.size(),
                                            " arrays"));
  return plan;
}

}  // namespace

absl::StatusOr<CopyPlan> PlanCopy(const PlanContext& context,
                                  const transport::CopyOp& op) {
  if (!op.pieces.empty()) return PlanAssemblyCopy(context, op);
  CW_ASSIGN_OR_RETURN(std::shared_ptr<const ArrayRecord> source,
                      context.arrays->Find(context.session, op.source,
                                           [] { return std::string("Copy"); }));
  const ArraySpec& spec = op.destination;
  ArrayPlacement to{spec.global_shape, spec.sharding, context.devices};
  const ArrayHandle internal = context.arrays->NewInternalHandle();
  absl::StatusOr<TransferPlan> transfer =
      PlanTransfer(source->internal, source->placement, internal, to,
                   *context.topology, context.next_transfer_id);
  if (!transfer.ok()) return WithContext(transfer.status(), "Copy");
  CopyPlan plan;
  plan.transfers.emplace_back(*std::move(transfer), source->buffers);
  plan.destination =
      NewRecord(context, spec, std::move(to), internal,
                absl::StrCat("copy of array ", op.source.value()));
  return plan;
}

}  // namespace causeway::head
