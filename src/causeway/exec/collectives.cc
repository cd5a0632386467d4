#include "causeway/exec/collectives.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/status.h"
#include "causeway/exec/scalar_computation.h"

namespace causeway::exec {
namespace {

using hlo::CollectiveGroupMode;
using hlo::Literal;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

std::string Str(std::string_view s) { return std::string(s); }

enum class ReducerKind {
  kAdd,
  kMultiply,
  kMaximum,
  kMinimum,
  kAnd,
  kOr,
  kXor,
  kGeneric
};

ReducerKind ClassifyReducer(const hlo::Computation* computation) {
  if (computation == nullptr || computation->parameter_count() != 2) {
    return ReducerKind::kGeneric;
  }
  const hlo::Instruction* root = computation->root();
  if (root == nullptr || root->operand_count() != 2) {
    return ReducerKind::kGeneric;
  }
  const hlo::Instruction* a = root->operand(0);
  const hlo::Instruction* b = root->operand(1);
  if (a->opcode != Opcode::kParameter || b->opcode != Opcode::kParameter ||
      a->parameter_number == b->parameter_number) {
    return ReducerKind::kGeneric;
  }
  if (!root->shape.IsArray() || root->shape.rank() != 0 ||
      a->shape.type() != root->shape.type() ||
      b->shape.type() != root->shape.type()) {
    return ReducerKind::kGeneric;
  }
  switch (root->opcode) {
    case Opcode::kAdd:
      return ReducerKind::kAdd;
    case Opcode::kMultiply:
      return ReducerKind::kMultiply;
    case Opcode::kMaximum:
      return ReducerKind::kMaximum;
    case Opcode::kMinimum:
      return ReducerKind::kMinimum;
    case Opcode::kAnd:
      return ReducerKind::kAnd;
    case Opcode::kOr:
      return ReducerKind::kOr;
    case Opcode::kXor:
      return ReducerKind::kXor;
    default:
      return ReducerKind::kGeneric;
  }
}

template <typename T>
constexpr bool kIsHalf =
    std::is_same_v<T, hlo::BF16> || std::is_same_v<T, hlo::F16>;

// One step of a reduction on a native (non-16-bit-float) type.
template <ReducerKind kKind, typename T>
inline T Combine(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    if constexpr (kKind == ReducerKind::kAdd || kKind == ReducerKind::kOr ||
                  kKind == ReducerKind::kMaximum) {
      return a || b;
    } else if constexpr (kKind == ReducerKind::kXor) {
      return a != b;
    } else {
      return a && b;
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    if constexpr (kKind == ReducerKind::kAdd) return a + b;
    if constexpr (kKind == ReducerKind::kMultiply) return a * b;
    if constexpr (kKind == ReducerKind::kMaximum) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return a > b ? a : b;
    }
    if constexpr (kKind == ReducerKind::kMinimum) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return a < b ? a : b;
    }
    return a;  // Bitwise ops on floats are refused before this.
  } else {
    using U = std::make_unsigned_t<T>;
    if constexpr (kKind == ReducerKind::kAdd) {
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    }
    if constexpr (kKind == ReducerKind::kMultiply) {
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    }
    if constexpr (kKind == ReducerKind::kMaximum) return a > b ? a : b;
    if constexpr (kKind == ReducerKind::kMinimum) return a < b ? a : b;
    if constexpr (kKind == ReducerKind::kAnd) return a & b;
    if constexpr (kKind == ReducerKind::kOr) return a | b;
    if constexpr (kKind == ReducerKind::kXor) return a ^ b;
    return a;
  }
}

// dst[i] = a[i] ⊕ b[i]: the one typed loop every reduction uses.
template <ReducerKind kKind, typename T>
void CombineArrays(void* dst, const void* a, const void* b, int64_t n) {
  T* out = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  if constexpr (hlo::kIsComplex<T>) {
    // Sums part by part; products as XLA's fused loops compute them.
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (kKind == ReducerKind::kMultiply) {
        out[i] = ComplexMultiply(x[i], y[i]);
      } else {
        out[i] = T(x[i].real() + y[i].real(), x[i].imag() + y[i].imag());
      }
    }
  } else if constexpr (hlo::kIsMinifloat<T> || hlo::kIsNarrowInt<T>) {
    // In the compute type, rounded (or wrapped) after every step.
    using C = ComputeType<T>;
    for (int64_t i = 0; i < n; ++i) {
      out[i] = FromCompute<T>(
          Combine<kKind, C>(ToCompute(x[i]), ToCompute(y[i])));
    }
  } else if constexpr (kIsHalf<T>) {
    // Compute in float and round after every step, as the reducer would.
    for (int64_t i = 0; i < n; ++i) {
      out[i] = T(Combine<kKind, float>(static_cast<float>(x[i]),
                                       static_cast<float>(y[i])));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = Combine<kKind, T>(x[i], y[i]);
  }
}

template <typename T>
ElementwiseCombine CombineFor(ReducerKind kind) {
  const bool bitwise = kind == ReducerKind::kAnd || kind == ReducerKind::kOr ||
                       kind == ReducerKind::kXor;
  if (bitwise && (std::is_floating_point_v<T> || kIsHalf<T> ||
                  hlo::kIsMinifloat<T> || hlo::kIsComplex<T>)) {
    return nullptr;
  }
  if (hlo::kIsComplex<T> && kind != ReducerKind::kAdd &&
      kind != ReducerKind::kMultiply) {
    return nullptr;
  }
  switch (kind) {
    case ReducerKind::kAdd:
      return &CombineArrays<ReducerKind::kAdd, T>;
    case ReducerKind::kMultiply:
      return &CombineArrays<ReducerKind::kMultiply, T>;
    case ReducerKind::kMaximum:
      return &CombineArrays<ReducerKind::kMaximum, T>;
    case ReducerKind::kMinimum:
      return &CombineArrays<ReducerKind::kMinimum, T>;
    case ReducerKind::kAnd:
      return &CombineArrays<ReducerKind::kAnd, T>;
    case ReducerKind::kOr:
      return &CombineArrays<ReducerKind::kOr, T>;
    case ReducerKind::kXor:
      return &CombineArrays<ReducerKind::kXor, T>;
    case ReducerKind::kGeneric:
      break;
  }
  return nullptr;
}

absl::Status ReduceGeneric(const CollectiveOp& op,
                           std::span<const Literal* const> inputs,
                           Literal& out) {
  const hlo::Computation* reducer = op.instruction->to_apply();
  if (reducer == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeCollective(op), " has no to_apply reducer"));
  }
  const ComputationRunner missing_runner =
      [&](const hlo::Computation& computation,
          std::span<const Literal>) -> absl::StatusOr<Literal> {
    return absl::FailedPreconditionError(
        absl::StrCat(DescribeCollective(op), ": reducer '", computation.name(),
                     "' needs a computation runner, and none was given"));
  };
  const bool has_runner =
      op.run_computation != nullptr && static_cast<bool>(*op.run_computation);
  // Scalar reducers compile to a flat program; others run per element
  // through the evaluator.
  ScalarFunction function(*reducer,
                          has_runner ? *op.run_computation : missing_runner);
  const PrimitiveType type = out.shape().type();
  const PrimitiveType params[] = {type, type};
  const PrimitiveType results[] = {type};
  CW_RETURN_IF_ERROR(function.CheckSignature(params, results, "all-reduce"));
  const int64_t width = hlo::ByteWidth(type);
  const int64_t n = out.shape().ElementCount();
  void* dst = out.mutable_untyped_data();
  uint64_t args[2];
  uint64_t result[1];
  for (int64_t i = 0; i < n; ++i) {
    args[0] = LoadBits(dst, width, i);
    for (size_t k = 1; k < inputs.size(); ++k) {
      args[1] = LoadBits(inputs[k]->untyped_data(), width, i);
      CW_RETURN_IF_ERROR(function.Call(args, result));
      args[0] = result[0];
    }
    StoreBits(dst, width, i, args[0]);
  }
  return absl::OkStatus();
}

}  // namespace

std::string CollectiveInstanceKey::ToString() const {
  return absl::StrCat("run ", run_id, ", instruction ", instruction_id,
                      ", execution ", execution_count);
}

std::string DescribeCollective(const CollectiveOp& op) {
  if (op.instruction == nullptr) return "collective";
  return absl::StrCat(Str(hlo::OpcodeName(op.instruction->opcode)), " '",
                      op.instruction->name, "' (line ", op.instruction->line,
                      ")");
}

absl::StatusOr<std::vector<int64_t>> GroupOf(const CollectiveOp& op) {
  if (op.instruction == nullptr) {
    return absl::InvalidArgumentError("collective without an instruction");
  }
  const int64_t num_partitions = op.num_partitions;
  const int64_t replica_count = op.replica_count;
  if (num_partitions < 1 || replica_count < 1 || op.partition_id < 0 ||
      op.partition_id >= num_partitions || op.replica_id < 0 ||
      op.replica_id >= replica_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        DescribeCollective(op), ": participant (replica ", op.replica_id,
        ", partition ", op.partition_id, ") is outside the device grid of ",
        replica_count, " replicas × ", num_partitions, " partitions"));
  }
  const CollectiveGroupMode mode = hlo::GetCollectiveGroupMode(*op.instruction);
  // The id space the groups are written in, and my id in it.
  int64_t id_count = 0;
  int64_t my_id = 0;
  switch (mode) {
    case CollectiveGroupMode::kCrossReplica:
    case CollectiveGroupMode::kCrossReplicaAndPartition:
      id_count = replica_count;
      my_id = op.replica_id;
      break;
    case CollectiveGroupMode::kCrossPartition:
      id_count = num_partitions;
      my_id = op.partition_id;
      break;
    case CollectiveGroupMode::kFlattenedId:
      id_count = replica_count * num_partitions;
      my_id = op.device_index();
      break;
  }
  // Groups written as an iota are expanded here; listed ones are read in
  // place (this runs for every collective a program executes).
  const hlo::ReplicaGroups& written = op.instruction->replica_groups;
  std::vector<std::vector<int64_t>> expanded;
  if (written.groups.empty() && written.iota.has_value()) {
    absl::StatusOr<std::vector<std::vector<int64_t>>> from_iota =
        hlo::ExpandReplicaGroups(written);
    if (!from_iota.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          DescribeCollective(op), ": ", from_iota.status().message()));
    }
    expanded = *std::move(from_iota);
  }
  const std::vector<std::vector<int64_t>>& groups =
      expanded.empty() ? written.groups : expanded;
  std::vector<int64_t> ids;
  if (groups.empty()) {
    for (int64_t i = 0; i < id_count; ++i) ids.push_back(i);
  } else {
    for (const auto& group : groups) {
      for (int64_t id : group) {
        if (id < 0 || id >= id_count) {
          return absl::InvalidArgumentError(absl::StrCat(
              DescribeCollective(op), ": replica_groups name id ", id,
              ", but there are only ", id_count,
              mode == CollectiveGroupMode::kCrossPartition ? " partitions"
              : mode == CollectiveGroupMode::kFlattenedId  ? " devices"
                                                           : " replicas"));
        }
      }
      if (std::find(group.begin(), group.end(), my_id) != group.end()) {
        ids = group;
        break;
      }
    }
    if (ids.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(DescribeCollective(op), ": id ", my_id,
                       " is in none of the replica_groups"));
    }
  }
  std::vector<int64_t> devices;
  switch (mode) {
    case CollectiveGroupMode::kCrossReplica:
      for (int64_t r : ids)
        devices.push_back(r * num_partitions + op.partition_id);
      break;
    case CollectiveGroupMode::kCrossPartition:
      for (int64_t p : ids)
        devices.push_back(op.replica_id * num_partitions + p);
      break;
    case CollectiveGroupMode::kCrossReplicaAndPartition:
      for (int64_t r : ids) {
        for (int64_t p = 0; p < num_partitions; ++p) {
          devices.push_back(r * num_partitions + p);
        }
      }
      break;
    case CollectiveGroupMode::kFlattenedId:
      devices = std::move(ids);
      break;
  }
  return devices;
}

absl::StatusOr<PermutePeers> PermutePeersOf(const CollectiveOp& op) {
  if (op.instruction == nullptr) {
    return absl::InvalidArgumentError("collective without an instruction");
  }
  const bool cross_partition = op.instruction->channel_id.has_value();
  const int64_t id_count =
      cross_partition ? op.num_partitions : op.replica_count;
  const int64_t my_id = cross_partition ? op.partition_id : op.replica_id;
  auto device_of = [&](int64_t id) {
    return cross_partition ? op.replica_id * op.num_partitions + id
                           : id * op.num_partitions + op.partition_id;
  };
  PermutePeers peers;
  for (const auto& [source, target] : op.instruction->source_target_pairs) {
    if (source < 0 || source >= id_count || target < 0 || target >= id_count) {
      return absl::InvalidArgumentError(
          absl::StrCat(DescribeCollective(op), ": source_target_pairs name {",
                       source, ",", target, "}, but there are only ", id_count,
                       cross_partition ? " partitions" : " replicas"));
    }
    if (target == my_id) {
      if (peers.source != -1) {
        return absl::InvalidArgumentError(
            absl::StrCat(DescribeCollective(op), ": ",
                         cross_partition ? "partition " : "replica ", my_id,
                         " is the target of more than one source"));
      }
      peers.source = device_of(source);
    }
    if (source == my_id) peers.targets.push_back(device_of(target));
  }
  return peers;
}

absl::StatusOr<Literal> ReduceInputs(const CollectiveOp& op,
                                     std::span<const Literal* const> inputs) {
  if (inputs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeCollective(op), ": nothing to reduce"));
  }
  const Shape& shape = inputs[0]->shape();
  if (!shape.IsArray()) {
    return absl::InvalidArgumentError(absl::StrCat(
        DescribeCollective(op), ": cannot reduce a ", shape.ToString(false)));
  }
  for (const Literal* input : inputs) {
    if (!input->shape().Compatible(shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          DescribeCollective(op), ": participants sent different shapes, ",
          shape.ToString(false), " and ", input->shape().ToString(false)));
    }
  }
  Literal out = *inputs[0];
  if (inputs.size() == 1) return out;
  const ReducerKind kind = ClassifyReducer(op.instruction->to_apply());
  if (kind == ReducerKind::kGeneric) {
    CW_RETURN_IF_ERROR(ReduceGeneric(op, inputs, out));
    return out;
  }
  const ElementwiseCombine combine = PlainCombineOf(op, shape.type());
  if (combine == nullptr) {
    const bool bitwise = kind == ReducerKind::kAnd ||
                         kind == ReducerKind::kOr || kind == ReducerKind::kXor;
    return absl::InvalidArgumentError(absl::StrCat(
        DescribeCollective(op),
        bitwise ? ": a bitwise reducer on a floating-point value"
                : ": a maximum or minimum reducer on complex values"));
  }
  const int64_t n = shape.ElementCount();
  void* dst = out.mutable_untyped_data();
  for (size_t k = 1; k < inputs.size(); ++k) {
    combine(dst, dst, inputs[k]->untyped_data(), n);
  }
  return out;
}

ElementwiseCombine PlainCombineOf(const CollectiveOp& op,
                                  PrimitiveType type) {
  if (op.instruction == nullptr || !hlo::IsArrayType(type)) return nullptr;
  const ReducerKind kind = ClassifyReducer(op.instruction->to_apply());
  if (kind == ReducerKind::kGeneric) return nullptr;
  return hlo::VisitType(type, [&](auto tag) {
    using T = decltype(tag);
    return CombineFor<T>(kind);
  });
}

absl::StatusOr<int64_t> CollectiveDimension(const CollectiveOp& op) {
  const auto& dims = op.instruction->dimensions;
  if (dims.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeCollective(op),
                     " needs exactly one dimension in dimensions={}"));
  }
  return dims[0];
}

std::vector<int64_t> PermuteDomainOf(const CollectiveOp& op) {
  std::vector<int64_t> domain;
  if (op.instruction->channel_id.has_value()) {
    for (int64_t p = 0; p < op.num_partitions; ++p) {
      domain.push_back(op.replica_id * op.num_partitions + p);
    }
  } else {
    for (int64_t r = 0; r < op.replica_count; ++r) {
      domain.push_back(r * op.num_partitions + op.partition_id);
    }
  }
  return domain;
}

absl::Status CheckAllToAllOperands(const CollectiveOp& op, size_t operands,
                                   size_t group_size) {
  const bool array_form = !op.instruction->dimensions.empty();
  if (array_form && operands != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeCollective(op),
                     ": the array form (dimensions={...}) takes "
                     "one operand, got ",
                     operands));
  }
  if (!array_form && operands != group_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeCollective(op),
                     ": the tuple form takes one operand per group "
                     "member (",
                     group_size, "), got ", operands));
  }
  if (array_form) return CollectiveDimension(op).status();
  return absl::OkStatus();
}

absl::StatusOr<Literal> ConcatenateAlong(std::span<const Literal* const> parts,
                                         int64_t dimension) {
  if (parts.empty()) {
    return absl::InvalidArgumentError("nothing to concatenate");
  }
  const Shape& first = parts[0]->shape();
  if (!first.IsArray() || dimension < 0 || dimension >= first.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot concatenate ", first.ToString(false),
                     " along dimension ", dimension));
  }
  std::vector<int64_t> dims = first.dims();
  int64_t total = 0;
  for (const Literal* part : parts) {
    const Shape& s = part->shape();
    bool same = s.type() == first.type() && s.rank() == first.rank();
    for (int64_t d = 0; same && d < s.rank(); ++d) {
      if (d != dimension && s.dim(d) != first.dim(d)) same = false;
    }
    if (!same) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot concatenate ", first.ToString(false), " and ",
                       s.ToString(false), " along dimension ", dimension));
    }
    total += s.dim(dimension);
  }
  dims[dimension] = total;
  Literal out(Shape(first.type(), dims));
  int64_t outer = 1;
  for (int64_t d = 0; d < dimension; ++d) outer *= dims[d];
  int64_t inner_bytes = hlo::ByteWidth(first.type());
  for (int64_t d = dimension + 1; d < first.rank(); ++d) inner_bytes *= dims[d];
  if (out.size_bytes() == 0) return out;
  std::byte* dst = static_cast<std::byte*>(out.mutable_untyped_data());
  for (int64_t o = 0; o < outer; ++o) {
    for (const Literal* part : parts) {
      const int64_t chunk = part->shape().dim(dimension) * inner_bytes;
      if (chunk == 0) continue;
      std::memcpy(
          dst, static_cast<const std::byte*>(part->untyped_data()) + o * chunk,
          static_cast<size_t>(chunk));
      dst += chunk;
    }
  }
  return out;
}

absl::StatusOr<Literal> BlockAlong(const Literal& value, int64_t dimension,
                                   int64_t count, int64_t index) {
  const Shape& shape = value.shape();
  if (!shape.IsArray() || dimension < 0 || dimension >= shape.rank() ||
      count <= 0 || index < 0 || index >= count ||
      shape.dim(dimension) % count != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot split ", shape.ToString(false), " into ", count,
                     " equal blocks along dimension ", dimension));
  }
  std::vector<int64_t> dims = shape.dims();
  dims[dimension] /= count;
  if (count == 1) return value;
  Literal out(Shape(shape.type(), dims));
  if (out.size_bytes() == 0) return out;
  int64_t outer = 1;
  for (int64_t d = 0; d < dimension; ++d) outer *= dims[d];
  int64_t inner_bytes = hlo::ByteWidth(shape.type());
  for (int64_t d = dimension + 1; d < shape.rank(); ++d) inner_bytes *= dims[d];
  const int64_t block = dims[dimension] * inner_bytes;
  const int64_t row = shape.dim(dimension) * inner_bytes;
  const std::byte* src = static_cast<const std::byte*>(value.untyped_data());
  std::byte* dst = static_cast<std::byte*>(out.mutable_untyped_data());
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(dst + o * block, src + o * row + index * block,
                static_cast<size_t>(block));
  }
  return out;
}

}  // namespace causeway::exec
