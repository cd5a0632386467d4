#include "causeway/hlo/custom_call.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace causeway::hlo {

bool IsSupportedCustomCall(std::string_view target) {
  return target == kTopKTarget;
}

bool IsHostCallback(std::string_view target) {
  for (std::string_view marker :
       {"python_cpu_callback", "python_gpu_callback", "python_callback"}) {
    if (target.find(marker) != std::string_view::npos) return true;
  }
  return false;
}

absl::Status UnsupportedCustomCall(const Instruction& instruction) {
  std::string where = absl::StrCat("custom-call '", instruction.name, "'");
  if (instruction.line > 0) absl::StrAppend(&where, " (line ", instruction.line, ")");
  if (IsHostCallback(instruction.custom_call_target)) {
    return absl::UnimplementedError(absl::StrCat(
        where, " is a host callback (custom_call_target=\"",
        instruction.custom_call_target,
        "\", what jax.debug.print, jax.pure_callback and io_callback "
        "compile to): it calls back into the Python process that compiled "
        "the program, and Causeway runs programs without Python. Take the "
        "callback out of the jitted function: return the values to print or "
        "to process as outputs, or compute the callback's result in JAX"));
  }
  return absl::UnimplementedError(
      absl::StrCat(where, ": unsupported custom-call target '",
                   instruction.custom_call_target, "'"));
}

}  // namespace causeway::hlo
