// The facts about the processor that XLA's CPU compiler bases its numerics
// on, so that the evaluator computes what the installed XLA (jaxlib 0.10.2)
// computes on the processor it runs on (docs/hlo.md, "Rounding").
//
// XLA compiles for the host: LLVM's host features, filtered by
// --xla_cpu_max_isa, and its own device type (Intel or AMD). Measured with
// JAX 0.10.2 and read in XLA's CPU code generator, three of its choices
// change results:
//  - f16 arithmetic inside a fusion is the processor's own half precision,
//    so a multiply feeding an add contracts into an f16 fused multiply-add,
//    only with AVX512-FP16 (`avx512fp16`); elsewhere each f16 operation is
//    computed in f32 and rounded to f16, and nothing f16 contracts;
//  - f32 rsqrt is the processor's estimate (RSQRTPS) refined by two Newton
//    steps, one on AMD processors (`amd`: their estimate is more precise);
//  - f64 rsqrt is the AVX-512 estimate (VRSQRT14PD) and two Newton steps
//    with AVX-512 F (`avx512f`), else 1/sqrt(x);
// and --xla_backend_extra_options=xla_cpu_disable_platform_dependent_math
// makes both rsqrt 1/sqrt(x) (`platform_dependent_math` false).
//
// The facts are read once per process from CPUID. CAUSEWAY_XLA_CPU
// overrides them, to test the paths of other processors on this one or to
// follow an XLA started with flags; it is a comma-separated list of
//   max_isa=NAME   as --xla_cpu_max_isa=NAME: below AVX512 (SSE4_2, AVX,
//                  AVX2) drops avx512f and avx512fp16; AVX512, AVX512_VNNI,
//                  AVX512_BF16 and AMX keep what the processor has;
//   amd | intel    the vendor XLA sees (which XLA itself cannot be told);
//   avx512fp16 | no_avx512fp16 | avx512f | no_avx512f
//                  one feature on or off (the evaluator computes either
//                  way: it emulates f16 FMA and the AVX-512 estimate needs
//                  AVX-512, so `avx512f` on a processor without it is
//                  refused with a warning);
//   disable_platform_dependent_math
//                  as XLA's option of that name.
// An unknown entry is reported (naming the valid ones) and ignored.
#ifndef CAUSEWAY_EXEC_XLA_CPU_TARGET_H_
#define CAUSEWAY_EXEC_XLA_CPU_TARGET_H_

#include <string>
#include <string_view>

namespace causeway::exec {

struct XlaCpuTarget {
  bool avx512f = false;
  bool avx512fp16 = false;
  bool amd = false;
  bool platform_dependent_math = true;

  bool operator==(const XlaCpuTarget&) const = default;
};

// What this processor reports (CPUID, and the OS saving the ZMM state).
XlaCpuTarget DetectXlaCpuTarget();

// `detected` with the CAUSEWAY_XLA_CPU entries of `spec` applied; each
// problem is appended to `warnings` (one line each).
XlaCpuTarget ApplyXlaCpuOverrides(const XlaCpuTarget& detected,
                                  std::string_view spec,
                                  std::string* warnings);

// The target of this process: detected, then CAUSEWAY_XLA_CPU (decided once,
// at the first call; thread-safe).
const XlaCpuTarget& ActiveXlaCpuTarget();

// "avx512f,avx512fp16,intel,platform_dependent_math" style, for logs and
// `causeway` diagnostics.
std::string XlaCpuTargetText(const XlaCpuTarget& target);

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_XLA_CPU_TARGET_H_
