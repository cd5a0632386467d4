#include "causeway/exec/xla_cpu_target.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/logging.h"

namespace causeway::exec {
namespace {

void Warn(std::string* warnings, const std::string& line) {
  if (!warnings->empty()) warnings->push_back('\n');
  absl::StrAppend(warnings, "CAUSEWAY_XLA_CPU: ", line);
}

// The comma-separated entries of `spec`, each without surrounding spaces,
// empty ones left out.
std::vector<std::string> Entries(std::string_view spec) {
  std::vector<std::string> entries;
  while (!spec.empty()) {
    const size_t comma = std::min(spec.find(','), spec.size());
    std::string_view entry = spec.substr(0, comma);
    spec.remove_prefix(std::min(comma + 1, spec.size()));
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    if (!entry.empty()) entries.emplace_back(entry);
  }
  return entries;
}

}  // namespace

XlaCpuTarget DetectXlaCpuTarget() {
  XlaCpuTarget target;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the ZMM state.
  target.avx512f = __builtin_cpu_supports("avx512f");
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (target.avx512f && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
    target.avx512fp16 = (edx >> 23) & 1;  // CPUID.(7,0):EDX[23].
  }
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) {
    char vendor[13] = {};
    std::memcpy(vendor, &ebx, 4);
    std::memcpy(vendor + 4, &edx, 4);
    std::memcpy(vendor + 8, &ecx, 4);
    target.amd = std::strcmp(vendor, "AuthenticAMD") == 0;
  }
#endif
  return target;
}

XlaCpuTarget ApplyXlaCpuOverrides(const XlaCpuTarget& detected,
                                  std::string_view spec,
                                  std::string* warnings) {
  XlaCpuTarget target = detected;
  constexpr std::string_view kMaxIsa = "max_isa=";
  for (std::string entry : Entries(spec)) {
    if (entry.rfind(kMaxIsa, 0) == 0) {
      entry.erase(0, kMaxIsa.size());
      if (entry == "SSE4_2" || entry == "AVX" || entry == "AVX2") {
        target.avx512f = target.avx512fp16 = false;
        if (entry != "AVX2") {
          Warn(warnings, absl::StrCat(
                             "max_isa=", entry,
                             ": XLA computes without FMA there, which the "
                             "evaluator does not imitate (it follows AVX2)"));
        }
      } else if (entry != "AVX512" && entry != "AVX512_VNNI" &&
                 entry != "AVX512_BF16" && entry != "AMX") {
        Warn(warnings, absl::StrCat("max_isa=", entry,
                                    " is not one of SSE4_2, AVX, AVX2, AVX512, "
                                    "AVX512_VNNI, AVX512_BF16, AMX: ignored"));
      }
    } else if (entry == "amd" || entry == "intel") {
      target.amd = entry == "amd";
    } else if (entry == "avx512fp16" || entry == "no_avx512fp16") {
      target.avx512fp16 = entry == "avx512fp16";
    } else if (entry == "no_avx512f") {
      target.avx512f = false;
    } else if (entry == "avx512f") {
      if (!detected.avx512f) {
        Warn(warnings, "avx512f: this processor lacks AVX-512 F, whose "
                       "estimate the f64 rsqrt would need: ignored");
      } else {
        target.avx512f = true;
      }
    } else if (entry == "disable_platform_dependent_math") {
      target.platform_dependent_math = false;
    } else {
      Warn(warnings, absl::StrCat(
                         "'", entry,
                         "' is not one of max_isa=NAME, amd, intel, "
                         "avx512fp16, no_avx512fp16, avx512f, no_avx512f, "
                         "disable_platform_dependent_math: ignored"));
    }
  }
  return target;
}

const XlaCpuTarget& ActiveXlaCpuTarget() {
  static const XlaCpuTarget target = [] {
    const char* spec = std::getenv("CAUSEWAY_XLA_CPU");
    std::string warnings;
    XlaCpuTarget chosen = ApplyXlaCpuOverrides(
        DetectXlaCpuTarget(), spec == nullptr ? "" : spec, &warnings);
    if (!warnings.empty()) {
      CW_LOG(WARNING) << warnings;
    }
    return chosen;
  }();
  return target;
}

std::string XlaCpuTargetText(const XlaCpuTarget& target) {
  std::vector<std::string> parts;
  parts.push_back(target.avx512f ? "avx512f" : "no_avx512f");
  parts.push_back(target.avx512fp16 ? "avx512fp16" : "no_avx512fp16");
  parts.push_back(target.amd ? "amd" : "intel");
  if (!target.platform_dependent_math) {
    parts.push_back("disable_platform_dependent_math");
  }
  return absl::StrJoin(parts, ",");
}

}  // namespace causeway::exec
