// Which vector instruction set the evaluator's hot kernels run on.
//
// Where the build machine has AVX2 and FMA the whole build targets them
// (CMakeLists.txt, CAUSEWAY_AVX2); elsewhere it targets plain x86-64, and
// the element loops take their portable paths. The matrix products of
// exec/gemm.h are compiled three times: for plain x86-64 (Eigen alone), for
// AVX2 + FMA, and for AVX-512 (F, CD, VL, DQ, BW: what every AVX-512
// processor since Skylake-SP and AMD Zen 4 has), and one is chosen once per
// process, at the first call, from what the processor reports
// (__builtin_cpu_supports, which also checks that the OS saves the ZMM
// registers). So one binary uses the widest vectors it finds. A build for
// AVX2 started on a processor without it stops at once with a message
// saying so (rather than dying of SIGILL somewhere).
//
// CAUSEWAY_CPU_ISA=avx2 or =baseline forces those kernels (to test them, or
// to compare); asking for a set the processor lacks falls back to what it
// has, with a warning; unset, empty or `auto` detects. An unknown value is
// reported (naming the valid ones) and treated as `auto`. Thread-safe.
#ifndef CAUSEWAY_EXEC_CPU_ISA_H_
#define CAUSEWAY_EXEC_CPU_ISA_H_

#include <string>
#include <string_view>

namespace causeway::exec {

enum class CpuIsa { kBaseline, kAvx2, kAvx512 };

// The instruction set the kernels use in this process (decided once).
CpuIsa ActiveCpuIsa();

// "baseline", "avx2" or "avx512".
std::string_view CpuIsaName(CpuIsa isa);

// Whether this processor (and OS) can run the AVX2 + FMA kernels, and the
// AVX-512 ones.
bool CpuSupportsAvx2();
bool CpuSupportsAvx512();

// The choice ActiveCpuIsa makes for a CAUSEWAY_CPU_ISA value (`requested`
// null when unset) on a processor whose widest set is `widest`; `warning`
// gets a message when the request cannot be followed as written, else is
// cleared.
CpuIsa ChooseCpuIsa(const char* requested, CpuIsa widest, std::string* warning);

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_CPU_ISA_H_
