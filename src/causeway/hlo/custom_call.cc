#include "causeway/hlo/custom_call.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace causeway::hlo {

std::optional<LapackCall> ParseLapackTarget(std::string_view target) {
  constexpr std::string_view kPrefix = "lapack_", kSuffix = "_ffi";
  if (target.size() <= kPrefix.size() + kSuffix.size() + 1 ||
      target.substr(0, kPrefix.size()) != kPrefix ||
      target.substr(target.size() - kSuffix.size()) != kSuffix) {
    return std::nullopt;
  }
  std::string_view name = target.substr(
      kPrefix.size(), target.size() - kPrefix.size() - kSuffix.size());
  LapackCall call;
  if (name[0] == 's') {
    call.type = PrimitiveType::kF32;
  } else if (name[0] == 'd') {
    call.type = PrimitiveType::kF64;
  } else {
    return std::nullopt;
  }
  name.remove_prefix(1);
  if (name == "potrf") {
    call.routine = LapackRoutine::kPotrf;
  } else if (name == "trsm") {
    call.routine = LapackRoutine::kTrsm;
  } else if (name == "getrf") {
    call.routine = LapackRoutine::kGetrf;
  } else if (name == "geqrf") {
    call.routine = LapackRoutine::kGeqrf;
  } else if (name == "orgqr") {
    call.routine = LapackRoutine::kOrgqr;
  } else if (name == "syevd") {
    call.routine = LapackRoutine::kSyevd;
  } else if (name == "gesdd") {
    call.routine = LapackRoutine::kGesdd;
  } else {
    return std::nullopt;
  }
  return call;
}

bool IsSupportedCustomCall(std::string_view target) {
  return target == kTopKTarget || ParseLapackTarget(target).has_value();
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
