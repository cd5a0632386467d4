#include "causeway/exec/cpu_isa.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "causeway/base/logging.h"

namespace causeway::exec {
namespace {

#if defined(__x86_64__) && defined(__AVX2__)
// This build's code uses AVX2 and FMA everywhere (CMakeLists.txt): on a
// processor without them it would die of SIGILL wherever the compiler put
// the first such instruction. Say why instead, before the program's own
// initializers run (priority 101, the earliest a program may use).
__attribute__((constructor(101))) void RefuseAProcessorWithoutAvx2() {
  if (CpuSupportsAvx2()) return;
  static constexpr char kMessage[] =
      "causeway: this build was compiled for AVX2 and FMA (the machine it "
      "was built on has them) and this processor lacks them; rebuild it on "
      "this machine (make configures for plain x86-64 there)\n";
  (void)!write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  _exit(70);
}
#endif

}  // namespace

std::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return "baseline";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool CpuSupportsAvx2() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
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

CpuIsa ChooseCpuIsa(const char* requested, CpuIsa widest,
                    std::string* warning) {
  warning->clear();
  const std::string_view value = requested == nullptr ? "" : requested;
  if (value.empty() || value == "auto") return widest;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (value != CpuIsaName(isa)) continue;
    if (isa > widest) {
      *warning = absl::StrCat("CAUSEWAY_CPU_ISA=", std::string(value),
                              ", but this processor lacks it: using the ",
                              std::string(CpuIsaName(widest)), " kernels");
      return widest;
    }
    return isa;
  }
  *warning = absl::StrCat(
      "CAUSEWAY_CPU_ISA='", std::string(value),
      "' is not one of auto, baseline, avx2, avx512: using ",
      std::string(CpuIsaName(widest)), " (detected)");
  return widest;
}

CpuIsa ActiveCpuIsa() {
  static const CpuIsa isa = [] {
    std::string warning;
    const CpuIsa widest = CpuSupportsAvx512() ? CpuIsa::kAvx512
                          : CpuSupportsAvx2() ? CpuIsa::kAvx2
                                              : CpuIsa::kBaseline;
    const CpuIsa chosen =
        ChooseCpuIsa(std::getenv("CAUSEWAY_CPU_ISA"), widest, &warning);
    if (!warning.empty()) {
      CW_LOG(WARNING) << warning;
    }
    return chosen;
  }();
  return isa;
}

}  // namespace causeway::exec
