#include "causeway/exec/cpu_isa.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"

namespace causeway::exec {

std::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool CpuSupportsAvx512() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw");
#else
  return false;
#endif
}

CpuIsa ChooseCpuIsa(const char* requested, bool has_avx512,
                    std::string* warning) {
  warning->clear();
  const CpuIsa detected = has_avx512 ? CpuIsa::kAvx512 : CpuIsa::kAvx2;
  const std::string_view value = requested == nullptr ? "" : requested;
  if (value.empty() || value == "auto") return detected;
  if (value == "avx2") return CpuIsa::kAvx2;
  if (value == "avx512") {
    if (!has_avx512) {
      *warning =
          "CAUSEWAY_CPU_ISA=avx512, but this processor has no AVX-512 "
          "(F, CD, VL, DQ, BW): using the AVX2 kernels";
    }
    return detected;
  }
  *warning = absl::StrCat("CAUSEWAY_CPU_ISA='", std::string(value),
                          "' is not one of auto, avx2, avx512: using ",
                          std::string(CpuIsaName(detected)), " (detected)");
  return detected;
}

CpuIsa ActiveCpuIsa() {
  static const CpuIsa isa = [] {
    std::string warning;
    const CpuIsa chosen = ChooseCpuIsa(std::getenv("CAUSEWAY_CPU_ISA"),
                                       CpuSupportsAvx512(), &warning);
    if (!warning.empty()) {
      CW_LOG(WARNING) << warning;
    }
    return chosen;
  }();
  return isa;
}

}  // namespace causeway::exec
