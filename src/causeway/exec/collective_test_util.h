// Test helpers: collective instructions and reducers built by hand, and the
// CollectiveOp of one participant. For tests only.
#ifndef CAUSEWAY_EXEC_COLLECTIVE_TEST_UTIL_H_
#define CAUSEWAY_EXEC_COLLECTIVE_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "causeway/exec/collectives.h"
#include "causeway/hlo/ir.h"

namespace causeway::exec::testutil {

// Owns the instructions and computations it makes.
class CollectiveBuilder {
 public:
  // `reducer(p0, p1)` on scalars of `type`.
  hlo::Computation* Reducer(std::string name, hlo::Opcode opcode,
                            hlo::PrimitiveType type) {
    auto computation = std::make_unique<hlo::Computation>(std::move(name));
    hlo::Instruction* params[2];
    for (int i = 0; i < 2; ++i) {
      auto p = std::make_unique<hlo::Instruction>();
      p->name = absl::StrCat("p", i);
      p->opcode = hlo::Opcode::kParameter;
      p->parameter_number = i;
      p->shape = hlo::Shape::Scalar(type);
      params[i] = computation->AddInstruction(std::move(p));
    }
    auto root = std::make_unique<hlo::Instruction>();
    root->name = "root";
    root->opcode = opcode;
    root->shape = hlo::Shape::Scalar(type);
    root->operands = {params[0], params[1]};
    root->is_root = true;
    computation->AddInstruction(std::move(root));
    computations_.push_back(std::move(computation));
    return computations_.back().get();
  }

  // A collective with channel_id=1 (and use_global_device_ids=true where the
  // op has the flag), reducing with an f32 add where it reduces.
  hlo::Instruction* Collective(hlo::Opcode opcode) {
    if (add_ == nullptr) {
      add_ = Reducer("add", hlo::Opcode::kAdd, hlo::PrimitiveType::kF32);
    }
    auto instruction = std::make_unique<hlo::Instruction>();
    instruction->name = std::string(hlo::OpcodeName(opcode)).append(".1");
    instruction->opcode = opcode;
    instruction->line = 7;
    instruction->unique_id = static_cast<int64_t>(instructions_.size());
    instruction->channel_id = 1;
    if (opcode == hlo::Opcode::kAllReduce ||
        opcode == hlo::Opcode::kReduceScatter) {
      instruction->called_computations = {add_};
    }
    if (opcode == hlo::Opcode::kAllReduce ||
        opcode == hlo::Opcode::kAllGather ||
        opcode == hlo::Opcode::kReduceScatter) {
      instruction->use_global_device_ids = true;
    }
    instructions_.push_back(std::move(instruction));
    return instructions_.back().get();
  }

 private:
  hlo::Computation* add_ = nullptr;
  std::vector<std::unique_ptr<hlo::Computation>> computations_;
  std::vector<std::unique_ptr<hlo::Instruction>> instructions_;
};

// The call of grid device `device` (replica × num_partitions + partition)
// of run `run_id`.
inline CollectiveOp OpFor(const hlo::Instruction* instruction, int64_t device,
                          int64_t num_partitions, int64_t replica_count = 1,
                          int64_t execution = 0, uint64_t run_id = 1) {
  CollectiveOp op;
  op.instruction = instruction;
  op.partition_id = device % num_partitions;
  op.replica_id = device / num_partitions;
  op.num_partitions = num_partitions;
  op.replica_count = replica_count;
  op.key = {.run_id = run_id,
            .instruction_id = instruction->unique_id,
            .execution_count = execution};
  return op;
}

}  // namespace causeway::exec::testutil

#endif  // CAUSEWAY_EXEC_COLLECTIVE_TEST_UTIL_H_
