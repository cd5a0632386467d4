// libFuzzer target for the evaluator: any module that parses and verifies
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
#include <string_view>
#include <vector>

#include "causeway/exec/evaluator.h"
#include "causeway/exec/fuzz_inputs.h"
#include "causeway/hlo/literal.h"
#include "causeway/hlo/parser.h"
#include "causeway/hlo/verifier.h"

namespace {

using causeway::hlo::Literal;
using causeway::hlo::Module;

bool Runnable(const Module& module) {
  return module.num_partitions() == 1 && module.replica_count() == 1 &&
         causeway::exec::fuzz::QuickModule(module, /*allow_while=*/false);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const causeway::exec::fuzz::FuzzInput input =
      causeway::exec::fuzz::SplitInput(
          std::string_view(reinterpret_cast<const char*>(data), size));
  absl::StatusOr<std::unique_ptr<Module>> module =
      causeway::exec::fuzz::RunnableModule(input.text, Runnable);
  if (!module.ok()) {
    // Kept out of the corpus (libFuzzer's -1); a seed the replay test
    // fails on (fuzz/replay_main.cc), which says why.
    causeway::exec::fuzz::ReplayNote(module.status());
    return -1;
  }
  absl::StatusOr<std::unique_ptr<causeway::exec::Evaluator>> evaluator =
      causeway::exec::Evaluator::Create(**module);
  if (!evaluator.ok()) return 0;
  const causeway::hlo::Computation& entry = *(*module)->entry();
  std::vector<Literal> arguments;
  for (int64_t i = 0; i < entry.parameter_count(); ++i) {
    arguments.emplace_back(entry.parameter(i)->shape);
    causeway::exec::fuzz::Fill(arguments.back(), input.pattern);
  }
  causeway::exec::RunContext context;
  context.memory_limit_bytes = causeway::exec::fuzz::kMemoryLimitBytes;
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
