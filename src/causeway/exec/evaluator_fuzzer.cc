// libFuzzer target for the executor: any module that parses and verifies
// must load (Evaluator::Create) or be refused with a clean error, and then
// run on arguments of its parameter shapes, filled with bytes from the
// input, to a result of the root's shape or a clean error. A crash, a
// sanitizer report or a wrong-shaped result is a bug.
//
// Bounded so that every input runs quickly: modules with a while loop (a
// program may loop forever, as in XLA) are skipped, and so are
// multi-partition modules (their collectives need peers) and modules with a
// value from 16 KiB up to the run's memory limit (1 MiB): slow to compute.
// Values past the limit stay in: the run must refuse them (ResourceExhausted
// naming the instruction) before it allocates them, and an allocation of
// any size must never crash. Modules nested past the evaluator's depth
// limit must be refused by Create. Input: the module text, then optionally
// "\n#ARGS\n" and the bytes that fill the arguments (repeated as needed;
// zeros when absent).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "causeway/exec/evaluator.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/verifier.h"

namespace {

using causeway::hlo::Instruction;
using causeway::hlo::Literal;
using causeway::hlo::Module;
using causeway::hlo::Opcode;
using causeway::hlo::Shape;

constexpr int64_t kMaxValueBytes = 16 << 10;
constexpr int64_t kMemoryLimitBytes = 1 << 20;

// Whether every array in `shape` has at most `bytes` bytes (checked without
// overflow; elements counted at 8 bytes).
bool AtMost(const Shape& shape, int64_t bytes) {
  if (shape.IsTuple()) {
    for (const Shape& element : shape.tuple_shapes()) {
      if (!AtMost(element, bytes)) return false;
    }
    return true;
  }
  if (!shape.IsArray()) return true;
  int64_t elements = 1;
  for (int64_t dim : shape.dims()) {
    if (dim < 0 || (dim > 0 && elements > bytes / dim)) return false;
    elements *= dim;
  }
  return elements * 8 <= bytes;
}

// Small enough to compute quickly, or too big to be allocated at all.
bool Quick(const Shape& shape) {
  if (shape.IsTuple()) {
    for (const Shape& element : shape.tuple_shapes()) {
      if (!Quick(element)) return false;
    }
    return true;
  }
  return AtMost(shape, kMaxValueBytes) || !AtMost(shape, 8 * kMemoryLimitBytes);
}

bool Runnable(const Module& module) {
  if (module.num_partitions() > 1 || module.replica_count() > 1) return false;
  // The arguments are allocated here, outside the run's limit.
  for (const Instruction* parameter : module.entry()->parameters()) {
    if (!AtMost(parameter->shape, kMaxValueBytes)) return false;
  }
  for (const auto& computation : module.computations()) {
    for (const auto& instruction : computation->instructions()) {
      if (instruction->opcode == Opcode::kWhile || !Quick(instruction->shape)) {
        return false;
      }
    }
  }
  return true;
}

// Fills an array's bytes from `pattern`, repeated (zeros if empty).
void Fill(Literal& literal, std::string_view pattern) {
  if (literal.shape().IsTuple()) {
    for (Literal& element : literal.mutable_elements()) Fill(element, pattern);
    return;
  }
  if (!literal.shape().IsArray() || pattern.empty()) return;
  auto* bytes = static_cast<unsigned char*>(literal.mutable_untyped_data());
  const int64_t size = literal.size_bytes();
  for (int64_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<unsigned char>(pattern[i % pattern.size()]);
  }
  // pred must hold 0 or 1.
  if (literal.shape().type() == causeway::hlo::PrimitiveType::kPred) {
    for (int64_t i = 0; i < size; ++i) bytes[i] &= 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view text = input, pattern;
  if (size_t split = input.find("\n#ARGS\n"); split != std::string_view::npos) {
    text = input.substr(0, split);
    pattern = input.substr(split + 7);
  }
  absl::StatusOr<std::unique_ptr<Module>> module =
      causeway::hlo::ParseModule(text);
  if (!module.ok() || !causeway::hlo::VerifyModule(**module).ok() ||
      !Runnable(**module)) {
    return 0;
  }
  absl::StatusOr<std::unique_ptr<causeway::exec::Evaluator>> evaluator =
      causeway::exec::Evaluator::Create(**module);
  if (!evaluator.ok()) return 0;
  const causeway::hlo::Computation& entry = *(*module)->entry();
  std::vector<Literal> arguments;
  for (int64_t i = 0; i < entry.parameter_count(); ++i) {
    arguments.emplace_back(entry.parameter(i)->shape);
    Fill(arguments.back(), pattern);
  }
  causeway::exec::RunContext context;
  context.memory_limit_bytes = kMemoryLimitBytes;
  absl::StatusOr<Literal> result = (*evaluator)->Run(arguments, context);
  if (result.ok() && !result->shape().Compatible(entry.root()->shape)) {
    std::fprintf(stderr, "result %s, root declares %s\n",
                 result->shape().ToString(false).c_str(),
                 entry.root()->shape.ToString(false).c_str());
    std::abort();
  }
  if (!result.ok() &&
      result.status().code() == absl::StatusCode::kInternal) {
    std::fprintf(stderr, "internal error: %s\n",
                 result.status().ToString().c_str());
    std::abort();
  }
  return 0;
}
