#include "causeway/hlo/builder.h"

#include <atomic>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/hlo/shape_inference.h"
#include "causeway/hlo/verifier.h"

namespace causeway::hlo {
namespace builder_internal {

struct ComputationState {
  std::string name;
  std::unique_ptr<Computation> computation;  // Null once built.
  bool explicit_root = false;
  std::unordered_set<std::string> instruction_names;
};

struct ModuleState {
  explicit ModuleState(std::string name)
      : module(std::make_unique<Module>(std::move(name))) {}

  void Record(absl::Status error) {
    if (status.ok()) status = std::move(error);
  }

  // Distinguishes handles of different builders (never reused).
  const uint64_t id = NextId();
  std::unique_ptr<Module> module;  // Computations join it in Build().
  std::vector<ComputationState> computations;
  int64_t entry = -1;
  absl::Status status;
  bool built = false;

 private:
  static uint64_t NextId() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1);
  }
};

}  // namespace builder_internal

namespace {

using builder_internal::ModuleState;

std::string Str(std::string_view text) { return std::string(text); }

}  // namespace

// ---- ComputationBuilder ----------------------------------------------------

const std::string& ComputationBuilder::name() const {
  static const std::string* const kNone = new std::string();
  if (state_ == nullptr) return *kNone;
  return state_->computations[index_].name;
}

Computation* ComputationBuilder::computation() const {
  return state_->computations[index_].computation.get();
}

absl::StatusOr<Shape> ComputationBuilder::GetShape(XlaOp op) const {
  if (state_ == nullptr) {
    return absl::FailedPreconditionError("unusable ComputationBuilder");
  }
  if (state_->built) {
    return absl::FailedPreconditionError(
        absl::StrCat("computation '", name(), "' was already built"));
  }
  if (!op.valid() || op.module_id_ != state_->id || op.computation_ != index_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GetShape: the op is not a valid op of computation '", name(), "'"));
  }
  return op.instr_->shape;
}

void ComputationBuilder::SetRoot(XlaOp op) {
  if (state_ == nullptr || state_->built || !state_->status.ok()) return;
  if (!op.valid() || op.module_id_ != state_->id || op.computation_ != index_) {
    state_->Record(absl::InvalidArgumentError(absl::StrCat(
        "SetRoot: the op is not a valid op of computation '", name(), "'")));
    return;
  }
  state_->computations[index_].explicit_root = true;
  computation()->set_root(op.instr_);
}

XlaOp ComputationBuilder::Emit(
    Opcode opcode, const std::vector<XlaOp>& operands,
    const std::function<void(Instruction&)>& configure,
    const std::vector<const ComputationBuilder*>& called) {
  if (state_ == nullptr) return {};
  ModuleState& s = *state_;
  const std::string what =
      absl::StrCat(Str(OpcodeName(opcode)), " in computation '", name(), "'");
  if (s.built) {
    s.Record(absl::FailedPreconditionError(
        absl::StrCat(what, ": the module was already built")));
    return {};
  }
  if (!s.status.ok()) return {};
  auto instr = std::make_unique<Instruction>();
  instr->opcode = opcode;
  instr->opcode_name = Str(OpcodeName(opcode));  // As the parser fills it.
  for (size_t i = 0; i < operands.size(); ++i) {
    const XlaOp& op = operands[i];
    std::string problem;
    if (!op.valid()) {
      problem = "is not a valid op (default-constructed or from a failed call)";
    } else if (op.module_id_ != s.id) {
      problem = "comes from another ModuleBuilder";
    } else if (op.computation_ != index_) {
      problem = absl::StrCat("belongs to computation '",
                             s.computations[op.computation_].name, "'");
    }
    if (!problem.empty()) {
      s.Record(absl::InvalidArgumentError(
          absl::StrCat("operand ", i, " of ", what, " ", problem)));
      return {};
    }
    instr->operands.push_back(op.instr_);
  }
  for (const ComputationBuilder* callee : called) {
    std::string problem;
    if (callee->state_ != state_) {
      problem = "comes from another ModuleBuilder or is unusable";
    } else if (callee->index_ == index_) {
      problem = "is the calling computation itself";
    } else if (callee->computation()->root() == nullptr) {
      problem = "has no ops yet; build it before calling it";
    }
    if (!problem.empty()) {
      s.Record(absl::InvalidArgumentError(
          absl::StrCat("computation '", callee->name(), "' called by ", what,
                       " ", problem)));
      return {};
    }
    instr->called_computations.push_back(callee->computation());
  }
  if (configure) {
    const std::vector<Instruction*> operands_before = instr->operands;
    const std::vector<Computation*> called_before = instr->called_computations;
    configure(*instr);
    if (instr->opcode != opcode || instr->operands != operands_before ||
        instr->called_computations != called_before) {
      s.Record(absl::InvalidArgumentError(absl::StrCat(
          what,
          ": configure must not change the opcode, operands or called "
          "computations")));
      return {};
    }
  }

  builder_internal::ComputationState& cs = s.computations[index_];
  instr->unique_id = s.module->NextInstructionId();
  if (instr->name.empty()) {
    instr->name = absl::StrCat(Str(OpcodeName(opcode)), ".", instr->unique_id);
  }
  if (cs.instruction_names.count(instr->name)) {
    absl::StrAppend(&instr->name, ".", instr->unique_id);
  }
  DeviceCounts counts{s.module->num_partitions(), s.module->replica_count()};
  absl::StatusOr<Shape> shape = InferShape(*instr, counts);
  if (!shape.ok()) {
    s.Record(absl::Status(shape.status().code(),
                          absl::StrCat("computation '", name(),
                                       "': ", shape.status().message())));
    return {};
  }
  instr->shape = *std::move(shape);
  cs.instruction_names.insert(instr->name);
  Instruction* added = cs.computation->AddInstruction(std::move(instr));
  if (!cs.explicit_root) cs.computation->set_root(added);
  return XlaOp(s.id, index_, added);
}

XlaOp ComputationBuilder::Parameter(const Shape& shape, std::string name) {
  if (state_ == nullptr || state_->built) return Parameter(0, shape, name);
  return Parameter(computation()->parameter_count(), shape, std::move(name));
}

XlaOp ComputationBuilder::Parameter(int64_t number, const Shape& shape,
                                    std::string name) {
  if (state_ != nullptr && !state_->built && state_->status.ok()) {
    Computation* comp = computation();
    if (number < 0 || (number < comp->parameter_count() &&
                       comp->parameter(number) != nullptr)) {
      state_->Record(absl::InvalidArgumentError(
          absl::StrCat("parameter number ", number, " of computation '",
                       this->name(), "' is negative or already used")));
      return {};
    }
  }
  return Emit(Opcode::kParameter, {}, [&](Instruction& i) {
    i.parameter_number = number;
    i.shape = shape;
    i.name = name.empty() ? absl::StrCat("param.", number) : std::move(name);
  });
}

XlaOp ComputationBuilder::Constant(Literal literal) {
  return Emit(Opcode::kConstant, {}, [&](Instruction& i) {
    i.shape = literal.shape();
    i.literal = std::move(literal);
  });
}

XlaOp ComputationBuilder::Iota(const Shape& shape, int64_t iota_dimension) {
  return Emit(Opcode::kIota, {}, [&](Instruction& i) {
    i.shape = shape;
    i.iota_dimension = iota_dimension;
  });
}

XlaOp ComputationBuilder::PartitionId() {
  return Emit(Opcode::kPartitionId, {}, nullptr);
}

XlaOp ComputationBuilder::ReplicaId() {
  return Emit(Opcode::kReplicaId, {}, nullptr);
}

XlaOp ComputationBuilder::Unary(Opcode opcode, XlaOp x) {
  if (!IsElementwiseUnary(opcode)) {
    if (state_ != nullptr && state_->status.ok()) {
      state_->Record(absl::InvalidArgumentError(
          absl::StrCat("Unary: '", Str(OpcodeName(opcode)),
                       "' is not an elementwise unary op")));
    }
    return {};
  }
  return Emit(opcode, {x}, nullptr);
}

XlaOp ComputationBuilder::Binary(Opcode opcode, XlaOp lhs, XlaOp rhs) {
  if (!IsElementwiseBinary(opcode)) {
    if (state_ != nullptr && state_->status.ok()) {
      state_->Record(absl::InvalidArgumentError(
          absl::StrCat("Binary: '", Str(OpcodeName(opcode)),
                       "' is not an elementwise binary op")));
    }
    return {};
  }
  return Emit(opcode, {lhs, rhs}, nullptr);
}

XlaOp ComputationBuilder::Compare(XlaOp lhs, XlaOp rhs,
                                  ComparisonDirection direction,
                                  ComparisonType type) {
  return Emit(Opcode::kCompare, {lhs, rhs}, [&](Instruction& i) {
    i.comparison_direction = direction;
    i.comparison_type = type;
  });
}

XlaOp ComputationBuilder::Select(XlaOp pred, XlaOp on_true, XlaOp on_false) {
  return Emit(Opcode::kSelect, {pred, on_true, on_false}, nullptr);
}

XlaOp ComputationBuilder::Clamp(XlaOp min, XlaOp x, XlaOp max) {
  return Emit(Opcode::kClamp, {min, x, max}, nullptr);
}

XlaOp ComputationBuilder::Convert(XlaOp x, PrimitiveType type) {
  return Emit(Opcode::kConvert, {x}, [&](Instruction& i) {
    i.shape = Shape(type, i.operands[0]->shape.dims());
  });
}

XlaOp ComputationBuilder::Broadcast(XlaOp x, std::vector<int64_t> out_dims,
                                    std::vector<int64_t> broadcast_dimensions) {
  return Emit(Opcode::kBroadcast, {x}, [&](Instruction& i) {
    i.shape = Shape(i.operands[0]->shape.type(), std::move(out_dims));
    i.dimensions = std::move(broadcast_dimensions);
  });
}

XlaOp ComputationBuilder::Reshape(XlaOp x, std::vector<int64_t> dims) {
  return Emit(Opcode::kReshape, {x}, [&](Instruction& i) {
    i.shape = Shape(i.operands[0]->shape.type(), std::move(dims));
  });
}

XlaOp ComputationBuilder::Transpose(XlaOp x, std::vector<int64_t> permutation) {
  return Emit(Opcode::kTranspose, {x},
              [&](Instruction& i) { i.dimensions = std::move(permutation); });
}

XlaOp ComputationBuilder::Slice(XlaOp x, std::vector<int64_t> starts,
                                std::vector<int64_t> limits,
                                std::vector<int64_t> strides) {
  if (strides.empty()) strides.assign(starts.size(), 1);
  if (starts.size() != limits.size() || starts.size() != strides.size()) {
    if (state_ != nullptr && state_->status.ok() && !state_->built) {
      state_->Record(absl::InvalidArgumentError(absl::StrCat(
          "Slice in computation '", name(), "': ", starts.size(), " starts, ",
          limits.size(), " limits and ", strides.size(),
          " strides; they must have one entry per dimension")));
    }
    return {};
  }
  return Emit(Opcode::kSlice, {x}, [&](Instruction& i) {
    for (size_t d = 0; d < starts.size(); ++d) {
      i.slice.push_back({starts[d], limits[d], strides[d]});
    }
  });
}

XlaOp ComputationBuilder::Concatenate(const std::vector<XlaOp>& operands,
                                      int64_t dimension) {
  return Emit(Opcode::kConcatenate, operands,
              [&](Instruction& i) { i.dimensions = {dimension}; });
}

XlaOp ComputationBuilder::Pad(XlaOp x, XlaOp padding_value,
                              std::vector<PaddingDimension> padding) {
  return Emit(Opcode::kPad, {x, padding_value},
              [&](Instruction& i) { i.padding = std::move(padding); });
}

XlaOp ComputationBuilder::Reverse(XlaOp x, std::vector<int64_t> dimensions) {
  return Emit(Opcode::kReverse, {x},
              [&](Instruction& i) { i.dimensions = std::move(dimensions); });
}

XlaOp ComputationBuilder::DynamicSlice(XlaOp x,
                                       const std::vector<XlaOp>& start_indices,
                                       std::vector<int64_t> sizes) {
  std::vector<XlaOp> operands = {x};
  operands.insert(operands.end(), start_indices.begin(), start_indices.end());
  return Emit(Opcode::kDynamicSlice, operands, [&](Instruction& i) {
    i.dynamic_slice_sizes = std::move(sizes);
  });
}

XlaOp ComputationBuilder::DynamicUpdateSlice(
    XlaOp x, XlaOp update, const std::vector<XlaOp>& start_indices) {
  std::vector<XlaOp> operands = {x, update};
  operands.insert(operands.end(), start_indices.begin(), start_indices.end());
  return Emit(Opcode::kDynamicUpdateSlice, operands, nullptr);
}

XlaOp ComputationBuilder::Dot(XlaOp lhs, XlaOp rhs, DotDimensionNumbers dims,
                              std::optional<PrimitiveType> result_type) {
  return Emit(Opcode::kDot, {lhs, rhs}, [&](Instruction& i) {
    i.dot_dimension_numbers = std::move(dims);
    // Only the element type matters: inference supplies the dims.
    if (result_type) i.shape = Shape::Scalar(*result_type);
  });
}

XlaOp ComputationBuilder::Reduce(XlaOp x, XlaOp init,
                                 const ComputationBuilder& reducer,
                                 std::vector<int64_t> dimensions) {
  return Reduce(std::vector<XlaOp>{x}, std::vector<XlaOp>{init}, reducer,
                std::move(dimensions));
}

XlaOp ComputationBuilder::Reduce(const std::vector<XlaOp>& inputs,
                                 const std::vector<XlaOp>& inits,
                                 const ComputationBuilder& reducer,
                                 std::vector<int64_t> dimensions) {
  std::vector<XlaOp> operands = inputs;
  operands.insert(operands.end(), inits.begin(), inits.end());
  return Emit(Opcode::kReduce, operands,
              [&](Instruction& i) { i.dimensions = std::move(dimensions); },
              {&reducer});
}

XlaOp ComputationBuilder::Tuple(const std::vector<XlaOp>& elements) {
  return Emit(Opcode::kTuple, elements, nullptr);
}

XlaOp ComputationBuilder::GetTupleElement(XlaOp tuple, int64_t index) {
  return Emit(Opcode::kGetTupleElement, {tuple},
              [&](Instruction& i) { i.tuple_index = index; });
}

XlaOp ComputationBuilder::Call(const ComputationBuilder& callee,
                               const std::vector<XlaOp>& args) {
  return Emit(Opcode::kCall, args, nullptr, {&callee});
}

XlaOp ComputationBuilder::While(const ComputationBuilder& condition,
                                const ComputationBuilder& body, XlaOp init) {
  return Emit(Opcode::kWhile, {init}, nullptr, {&condition, &body});
}

XlaOp ComputationBuilder::Conditional(
    XlaOp branch_index, const std::vector<ComputationBuilder>& branches,
    const std::vector<XlaOp>& branch_operands) {
  std::vector<XlaOp> operands = {branch_index};
  operands.insert(operands.end(), branch_operands.begin(),
                  branch_operands.end());
  std::vector<const ComputationBuilder*> called;
  for (const ComputationBuilder& branch : branches) called.push_back(&branch);
  return Emit(Opcode::kConditional, operands, nullptr, called);
}

XlaOp ComputationBuilder::EmitCollective(Opcode opcode,
                                         const std::vector<XlaOp>& operands,
                                         const CollectiveOptions& options,
                                         const ComputationBuilder* reducer,
                                         std::vector<int64_t> dimensions) {
  std::vector<const ComputationBuilder*> called;
  if (reducer != nullptr) called.push_back(reducer);
  return Emit(
      opcode, operands,
      [&](Instruction& i) {
        i.replica_groups.groups = options.replica_groups;
        i.channel_id = options.channel_id;
        // XLA's all-to-all has no use_global_device_ids attribute: with a
        // channel its ids are partition ids.
        i.use_global_device_ids =
            opcode != Opcode::kAllToAll && options.use_global_device_ids;
        i.dimensions = std::move(dimensions);
      },
      called);
}

XlaOp ComputationBuilder::AllReduce(XlaOp x, const ComputationBuilder& reducer,
                                    const CollectiveOptions& options) {
  return EmitCollective(Opcode::kAllReduce, {x}, options, &reducer, {});
}

XlaOp ComputationBuilder::AllReduce(const std::vector<XlaOp>& xs,
                                    const ComputationBuilder& reducer,
                                    const CollectiveOptions& options) {
  return EmitCollective(Opcode::kAllReduce, xs, options, &reducer, {});
}

XlaOp ComputationBuilder::AllGather(XlaOp x, int64_t dimension,
                                    const CollectiveOptions& options) {
  return EmitCollective(Opcode::kAllGather, {x}, options, nullptr, {dimension});
}

XlaOp ComputationBuilder::ReduceScatter(XlaOp x,
                                        const ComputationBuilder& reducer,
                                        int64_t dimension,
                                        const CollectiveOptions& options) {
  return EmitCollective(Opcode::kReduceScatter, {x}, options, &reducer,
                        {dimension});
}

XlaOp ComputationBuilder::AllToAll(XlaOp x, int64_t split_dimension,
                                   const CollectiveOptions& options) {
  return EmitCollective(Opcode::kAllToAll, {x}, options, nullptr,
                        {split_dimension});
}

XlaOp ComputationBuilder::AllToAll(const std::vector<XlaOp>& xs,
                                   const CollectiveOptions& options) {
  return EmitCollective(Opcode::kAllToAll, xs, options, nullptr, {});
}

XlaOp ComputationBuilder::CollectivePermute(
    XlaOp x, std::vector<std::pair<int64_t, int64_t>> source_target_pairs,
    std::optional<int64_t> channel_id) {
  return Emit(Opcode::kCollectivePermute, {x}, [&](Instruction& i) {
    i.source_target_pairs = std::move(source_target_pairs);
    i.channel_id = channel_id;
  });
}

XlaOp ComputationBuilder::Generic(
    Opcode opcode, const std::vector<XlaOp>& operands,
    const std::function<void(Instruction&)>& configure,
    const std::vector<ComputationBuilder>& called) {
  std::vector<const ComputationBuilder*> callees;
  for (const ComputationBuilder& c : called) callees.push_back(&c);
  return Emit(opcode, operands, configure, callees);
}

// ---- ModuleBuilder ---------------------------------------------------------

ModuleBuilder::ModuleBuilder(std::string name)
    : state_(std::make_shared<ModuleState>(std::move(name))) {}

ModuleBuilder::~ModuleBuilder() {
  // Computation builders may outlive this one; make them refuse work.
  if (state_ != nullptr) state_->built = true;
}

ComputationBuilder ModuleBuilder::NewComputation(std::string name) {
  if (state_ == nullptr) return {};
  for (const auto& c : state_->computations) {
    if (c.name == name) {
      state_->Record(absl::InvalidArgumentError(
          absl::StrCat("computation name '", name, "' is used twice")));
      break;
    }
  }
  builder_internal::ComputationState cs;
  cs.name = name;
  cs.computation = std::make_unique<Computation>(std::move(name));
  state_->computations.push_back(std::move(cs));
  return ComputationBuilder(
      state_, static_cast<int64_t>(state_->computations.size()) - 1);
}

ComputationBuilder ModuleBuilder::NewEntry(std::string name) {
  if (state_ == nullptr) return {};
  if (state_->entry >= 0) {
    state_->Record(absl::InvalidArgumentError(absl::StrCat(
        "module '", state_->module->name(), "' already has entry '",
        state_->computations[state_->entry].name, "'")));
  }
  ComputationBuilder entry = NewComputation(std::move(name));
  if (state_->entry < 0) state_->entry = entry.index_;
  return entry;
}

void ModuleBuilder::set_num_partitions(int64_t n) {
  if (state_ != nullptr) state_->module->set_num_partitions(n);
}

void ModuleBuilder::set_replica_count(int64_t n) {
  if (state_ != nullptr) state_->module->set_replica_count(n);
}

absl::Status ModuleBuilder::status() const {
  if (state_ == nullptr) {
    return absl::FailedPreconditionError("the ModuleBuilder was built");
  }
  return state_->status;
}

absl::StatusOr<std::unique_ptr<Module>> ModuleBuilder::Build() && {
  if (state_ == nullptr) {
    return absl::FailedPreconditionError(
        "ModuleBuilder::Build on a builder that was already built");
  }
  std::shared_ptr<ModuleState> s = std::move(state_);
  s->built = true;
  CW_RETURN_IF_ERROR(s->status);
  if (s->entry < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("module '", s->module->name(),
                     "' has no entry computation; call NewEntry"));
  }
  // Callees before callers, as XLA prints modules.
  const size_t n = s->computations.size();
  std::unordered_map<const Computation*, size_t> index;
  for (size_t i = 0; i < n; ++i) {
    index[s->computations[i].computation.get()] = i;
  }
  std::vector<bool> visited(n, false);
  std::vector<size_t> order;
  std::function<void(size_t)> visit = [&](size_t i) {
    if (visited[i]) return;
    visited[i] = true;
    for (const auto& instr : s->computations[i].computation->instructions()) {
      for (const Computation* callee : instr->called_computations) {
        visit(index.at(callee));
      }
    }
    order.push_back(i);
  };
  for (size_t i = 0; i < n; ++i) visit(i);
  for (size_t i : order) {
    std::unique_ptr<Computation>& comp = s->computations[i].computation;
    for (const auto& instr : comp->instructions()) {
      instr->is_root = instr.get() == comp->root();
    }
    comp->set_is_entry(static_cast<int64_t>(i) == s->entry);
    s->module->AddComputation(std::move(comp));
  }
  std::unique_ptr<Module> module = std::move(s->module);
  CW_RETURN_IF_ERROR(VerifyModule(*module));
  return module;
}

}  // namespace causeway::hlo
