#include "causeway/worker/sim_program.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "causeway/base/status.h"

namespace causeway::worker {
namespace {

constexpr char kTimeAttribute[] = "causeway_sim_us=\"";

// Bytes of `shape`'s arrays (tuples summed).
double Bytes(const hlo::Shape& shape) {
  return static_cast<double>(shape.ByteSize());
}

double Elements(const hlo::Shape& shape) {
  if (shape.IsTuple()) {
    double total = 0;
    for (const hlo::Shape& element : shape.tuple_shapes()) {
      total += Elements(element);
    }
    return total;
  }
  return shape.IsArray() ? static_cast<double>(shape.ElementCount()) : 0;
}

double Flops(const hlo::Instruction& instruction) {
  if (instruction.opcode == hlo::Opcode::kDot &&
      instruction.operand_count() == 2) {
    double contracted = 1;
    const hlo::Shape& lhs = instruction.operand(0)->shape;
    for (int64_t dim : instruction.dot_dimension_numbers.lhs_contracting_dims) {
      if (dim >= 0 && dim < lhs.rank()) contracted *= lhs.dim(dim);
    }
    return 2 * Elements(instruction.shape) * contracted;
  }
  switch (instruction.opcode) {
    case hlo::Opcode::kParameter:
    case hlo::Opcode::kConstant:
    case hlo::Opcode::kTuple:
    case hlo::Opcode::kGetTupleElement:
    case hlo::Opcode::kBitcast:
      return 0;
    default:
      return Elements(instruction.shape);
  }
}

// The instruction's `causeway_sim_us="N"` frontend attribute, if any.
absl::StatusOr<absl::Duration> AttributeTime(
    const hlo::Instruction& instruction) {
  for (const auto& [name, value] : instruction.raw_attributes) {
    if (name != "frontend_attributes") continue;
    const size_t at = value.find(kTimeAttribute);
    if (at == std::string::npos) continue;
    const size_t begin = at + sizeof(kTimeAttribute) - 1;
    const size_t end = value.find('"', begin);
    int64_t micros = -1;
    if (end == std::string::npos ||
        !absl::SimpleAtoi(value.substr(begin, end - begin), &micros) ||
        micros < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", instruction.line, ": instruction '", instruction.name,
          "': causeway_sim_us must be a non-negative integer (microseconds), "
          "in ", value));
    }
    return absl::Microseconds(micros);
  }
  return absl::ZeroDuration();
}

absl::Duration Seconds(double seconds) {
  return absl::Nanoseconds(std::llround(seconds * 1e9));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SimProgram>> SimProgram::Create(
    const hlo::Module& module, const SimModel& model) {
  if (module.entry() == nullptr) {
    return absl::InvalidArgumentError("the module has no entry computation");
  }
  absl::Duration time = model.program_time;
  double flops = 0;
  double collective_bytes = 0;
  int64_t collective_count = 0;
  std::vector<const hlo::Instruction*> collectives;
  for (const auto& computation : module.computations()) {
    for (const auto& instruction : computation->instructions()) {
      flops += Flops(*instruction);
      if (hlo::IsCollective(instruction->opcode)) {
        collectives.push_back(instruction.get());
        ++collective_count;
        for (const hlo::Instruction* operand : instruction->operands) {
          collective_bytes += Bytes(operand->shape);
        }
      }
      if (computation.get() == module.entry()) {
        CW_ASSIGN_OR_RETURN(absl::Duration fixed, AttributeTime(*instruction));
        time += fixed;
      }
    }
  }
  double memory_bytes = Bytes(module.entry()->root()->shape);
  for (const auto& instruction : module.entry()->instructions()) {
    if (instruction->opcode == hlo::Opcode::kParameter) {
      memory_bytes += Bytes(instruction->shape);
    }
  }
  if (model.peak_flops > 0) time += Seconds(flops / model.peak_flops);
  if (model.memory_bandwidth > 0) {
    time += Seconds(memory_bytes / model.memory_bandwidth);
  }
  const double devices = static_cast<double>(
      std::max<int64_t>(1, module.num_partitions() * module.replica_count()));
  time += collective_count * model.collective_latency;
  if (model.interconnect_bandwidth > 0) {
    time += Seconds(2 * (devices - 1) / devices * collective_bytes /
                    model.interconnect_bandwidth);
  }
  return std::unique_ptr<SimProgram>(
      new SimProgram(module, time, std::move(collectives)));
}

SimProgram::SimProgram(const hlo::Module& module, absl::Duration time,
                       std::vector<const hlo::Instruction*> collectives)
    : module_(module),
      time_(time),
      collectives_(std::move(collectives)),
      zeros_(module.entry()->root()->shape) {}

absl::StatusOr<hlo::Literal> SimProgram::Run(const exec::RunContext& context,
                                             absl::Time start,
                                             absl::Time* end) const {
  *end = start + time_;
  for (const hlo::Instruction* instruction : collectives_) {
    if (context.collectives == nullptr) {
      return absl::FailedPreconditionError(
          "the program has collectives but the run has no peers to meet");
    }
    exec::CollectiveOp op;
    op.instruction = instruction;
    op.partition_id = context.partition_id;
    op.replica_id = context.replica_id;
    op.num_partitions = module_.num_partitions();
    op.replica_count = module_.replica_count();
    op.key.run_id = context.run_id;
    op.key.instruction_id = instruction->unique_id;
    std::vector<hlo::Literal> operands;
    for (const hlo::Instruction* operand : instruction->operands) {
      operands.emplace_back(operand->shape);
    }
    absl::StatusOr<hlo::Literal> met;
    switch (instruction->opcode) {
      case hlo::Opcode::kAllReduce:
        met = context.collectives->AllReduce(op, std::move(operands));
        break;
      case hlo::Opcode::kAllGather:
        met = context.collectives->AllGather(op, std::move(operands));
        break;
      case hlo::Opcode::kReduceScatter:
        met = context.collectives->ReduceScatter(op, std::move(operands));
        break;
      case hlo::Opcode::kAllToAll:
        met = context.collectives->AllToAll(op, std::move(operands));
        break;
      default:
        met = context.collectives->CollectivePermute(op,
                                                     std::move(operands[0]));
        break;
    }
    if (!met.ok()) return met.status();
  }
  // Peers that came late hold the device past its own time.
  if (!collectives_.empty()) *end = std::max(*end, absl::Now());
  // Held until the modelled end, in slices, so that a cancelled launch lets
  // its device go soon.
  for (absl::Time now = absl::Now(); now < *end; now = absl::Now()) {
    if (context.cancelled != nullptr && context.cancelled->load()) {
      return absl::CancelledError("the launch was cancelled");
    }
    absl::SleepFor(std::min(*end - now, absl::Milliseconds(10)));
  }
  return zeros_;
}

}  // namespace causeway::worker
