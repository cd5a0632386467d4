// Which vector instruction set the executor's hot kernels run on.
//
// The whole build targets x86-64 with AVX2 and FMA (CMakeLists.txt). The
// kernels that gain from wider vectors (the matrix products of
// exec/gemm.h) are also compiled for AVX-512 (F, CD, VL, DQ, BW: what every
// AVX-512 processor since Skylake-SP and AMD Zen 4 has) and chosen once per
// process, at the first call, from what the processor reports
// (__builtin_cpu_supports, which also checks that the OS saves the ZMM
// registers). So one binary runs on both kinds of processor and uses the
// widest one it finds.
//
// CAUSEWAY_CPU_ISA=avx2 forces the AVX2 kernels on any processor (to test
// them, or to compare); =avx512 asks for AVX-512 and falls back to AVX2 with
// a warning when the processor lacks it; unset, empty or `auto` detects. An
// unknown value is reported (naming the valid ones) and treated as `auto`.
// Thread-safe.
#ifndef CAUSEWAY_EXEC_CPU_ISA_H_
#define CAUSEWAY_EXEC_CPU_ISA_H_

#include <string_view>

namespace causeway::exec {

enum class CpuIsa { kAvx2, kAvx512 };

// The instruction set the kernels use in this process (decided once).
CpuIsa ActiveCpuIsa();

// "avx2" or "avx512".
std::string_view CpuIsaName(CpuIsa isa);

// Whether this processor (and OS) can run the AVX-512 kernels.
bool CpuSupportsAvx512();

// The choice ActiveCpuIsa makes for a CAUSEWAY_CPU_ISA value (`requested`
// null when unset) on a processor with or without AVX-512; `warning` gets a
// message when the request cannot be followed as written, else is cleared.
CpuIsa ChooseCpuIsa(const char* requested, bool has_avx512,
                    std::string* warning);

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_CPU_ISA_H_
