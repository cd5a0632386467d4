// What the evaluator fuzzers (evaluator_fuzzer.cc, spmd_fuzzer.cc) share: how
// an input splits into module text and argument bytes, which modules are
// small enough to run in milliseconds, and how arguments are filled.
// Header-only: the fuzzers and their replay binaries include it; no library
// carries it.
#ifndef CAUSEWAY_EXEC_FUZZ_INPUTS_H_
#define CAUSEWAY_EXEC_FUZZ_INPUTS_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/shape.h"
#include "causeway/hlo/verifier.h"

namespace causeway::exec::fuzz {

// A fuzzed module runs in milliseconds even under ASan: its values stay under
// kMaxValueBytes, or are too big for the run's memory limit (the run must
// refuse them, ResourceExhausted naming the instruction, before it allocates
// them; an allocation of any size must never crash).
inline constexpr int64_t kMaxValueBytes = 16 << 10;
inline constexpr int64_t kMemoryLimitBytes = 1 << 20;

// An input is the module text, then optionally "\n#ARGS\n" and the bytes
// that fill the arguments (repeated as needed; zeros when absent).
struct FuzzInput {
  std::string_view text;
  std::string_view pattern;
};
inline FuzzInput SplitInput(std::string_view input) {
  constexpr std::string_view kSeparator = "\n#ARGS\n";
  const size_t split = input.find(kSeparator);
  if (split == std::string_view::npos) return {input, {}};
  return {input.substr(0, split), input.substr(split + kSeparator.size())};
}

// Every array in `shape` has at most `bytes` bytes (elements counted at 8
// bytes, without overflow).
inline bool AtMost(const hlo::Shape& shape, int64_t bytes) {
  if (shape.IsTuple()) {
    for (const hlo::Shape& element : shape.tuple_shapes()) {
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
inline bool Quick(const hlo::Shape& shape) {
  if (shape.IsTuple()) {
    for (const hlo::Shape& element : shape.tuple_shapes()) {
      if (!Quick(element)) return false;
    }
    return true;
  }
  return AtMost(shape, kMaxValueBytes) ||
         !AtMost(shape, 8 * kMemoryLimitBytes);
}

// Every instruction's value is Quick and every parameter small (arguments
// are allocated by the fuzzer, outside the run's limit); with
// `allow_while` false, no while loop either (a program may loop forever, as
// in XLA).
inline bool QuickModule(const hlo::Module& module, bool allow_while) {
  for (const hlo::Instruction* parameter : module.entry()->parameters()) {
    if (!AtMost(parameter->shape, kMaxValueBytes)) return false;
  }
  for (const auto& computation : module.computations()) {
    for (const auto& instruction : computation->instructions()) {
      if ((!allow_while && instruction->opcode == hlo::Opcode::kWhile) ||
          !Quick(instruction->shape)) {
        return false;
      }
    }
  }
  return true;
}

// Fills an array's bytes from `pattern` starting at byte `offset` of it,
// repeated (zeros if empty); pred elements get 0 or 1.
inline void Fill(hlo::Literal& literal, std::string_view pattern,
                 size_t offset = 0) {
  if (literal.shape().IsTuple()) {
    for (hlo::Literal& element : literal.mutable_elements()) {
      Fill(element, pattern, offset);
    }
    return;
  }
  if (!literal.shape().IsArray() || pattern.empty()) return;
  auto* bytes = static_cast<unsigned char*>(literal.mutable_untyped_data());
  const int64_t size = literal.size_bytes();
  for (int64_t i = 0; i < size; ++i) {
    bytes[i] =
        static_cast<unsigned char>(pattern[(offset + i) % pattern.size()]);
  }
  if (literal.shape().type() == hlo::PrimitiveType::kPred) {
    for (int64_t i = 0; i < size; ++i) bytes[i] &= 1;
  }
}

// The module `text` holds, parsed and verified, if `runnable` says the
// target runs it; else why not.
inline absl::StatusOr<std::unique_ptr<hlo::Module>> RunnableModule(
    std::string_view text, bool (*runnable)(const hlo::Module&)) {
  absl::StatusOr<std::unique_ptr<hlo::Module>> module = hlo::ParseModule(text);
  if (!module.ok()) return module.status();
  if (absl::Status verified = hlo::VerifyModule(**module); !verified.ok()) {
    return verified;
  }
  if (!runnable(**module)) {
    return absl::FailedPreconditionError(
        "not a program this target runs (see its opening comment)");
  }
  return module;
}

// Why an input was refused, on stderr, in the seed replay only (the
// replay builds define CAUSEWAY_FUZZ_REPLAY); libFuzzer's own runs refuse
// most mutations and stay quiet.
inline void ReplayNote(const absl::Status& why) {
#ifdef CAUSEWAY_FUZZ_REPLAY
  std::fprintf(stderr, "%s\n", why.ToString().c_str());
#endif
}

}  // namespace causeway::exec::fuzz

#endif  // CAUSEWAY_EXEC_FUZZ_INPUTS_H_
