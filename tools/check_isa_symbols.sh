#!/bin/sh
# Fails when an object compiled for a wider instruction set than the
# build's (exec/gemm_avx512.cc; exec/gemm_avx2.cc, which a build for plain
# x86-64 also compiles with AVX2 on) defines a weak symbol outside its own
# namespaces: the linker merges weak symbols (inline functions, template
# instantiations) across objects and may keep the wide copy for every
# caller, which would then crash with SIGILL on a processor without it.
# Usage: check_isa_symbols.sh OBJECT... (the gemm_avx512 and gemm_avx2
# objects among them are checked; ctest passes CMake's ;-separated list of
# cw_exec's objects as one argument).
set -eu
checked=0
for object in $(echo "$@" | tr ';' ' '); do
  case "$object" in
    *gemm_avx512.cc.o) eigen=CwEigenAvx512 isa=gemm_avx512 ;;
    *gemm_avx2.cc.o) eigen=CwEigenAvx2 isa=gemm_avx2 ;;
    *) continue ;;
  esac
  checked=$((checked + 1))
  # Weak (W, V) and unique (u) definitions; DW.ref.__gxx_personality_v0 is
  # a pointer to the C++ runtime's personality routine, not code.
  leaks=$(nm -C --defined-only "$object" | awk '$2 ~ /^[WVu]$/' |
          grep -v -e "$eigen::" -e "causeway::exec::$isa::" \
                  -e 'DW.ref.__gxx_personality_v0' || true)
  if [ -n "$leaks" ]; then
    echo "$object defines weak symbols outside its ISA namespaces:" >&2
    echo "$leaks" >&2
    exit 1
  fi
done
if [ "$checked" -eq 0 ]; then
  echo "no gemm_avx512.cc.o or gemm_avx2.cc.o among the objects given" >&2
  exit 1
fi
echo "checked $checked object(s)"
