// The custom-call targets Causeway runs, and what it says about the rest.
//
// XLA's CPU backend lowers some JAX operations to custom-calls instead of
// HLO ops: lax.top_k and lax.approx_max_k to "TopK". Those listed here are
// verified (hlo/shape_inference.cc) and run (exec/custom_call.cc); any
// other target is refused by name, at load time. Host callbacks
// (jax.debug.print, jax.pure_callback, io_callback) call back into the
// Python process that compiled the program: Causeway runs programs without
// Python, so they are refused with a message that says what to do instead.
#ifndef CAUSEWAY_HLO_CUSTOM_CALL_H_
#define CAUSEWAY_HLO_CUSTOM_CALL_H_

#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "causeway/hlo/ir.h"

namespace causeway::hlo {

// "TopK": operand T[..., n]; result (T[..., k], s32[..., k]), the k first
// elements of each row along the last dim by the comparator
// called_computations[0] (ties: the lower index first), and their indices.
inline constexpr std::string_view kTopKTarget = "TopK";

// The LAPACK custom-calls of jnp.linalg / jax.scipy.linalg on CPU:
// "lapack_<s|d><routine>_ffi", f32 or f64, run by exec/lapack.cc with
// LAPACK itself. Batch dims lead; each matrix is the last two dims.
//   potrf  a[..., n, n]            -> (factor, info s32[...])        cholesky
//   trsm   a[..., k, k], b[..., m, n] -> x with b's shape     triangular_solve
//   getrf  a[..., m, n]            -> (lu, ipiv s32[..., min(m,n)] (1-based),
//                                      info s32[...])                      lu
//   geqrf  a[..., m, n]            -> (reflectors and r, tau[..., min(m,n)])
//   orgqr  a[..., m, n], tau[..., k] -> q[..., m, n]      householder_product
//   syevd  a[..., n, n]            -> (vectors, values[..., n], info)    eigh
//   gesdd  a[..., m, n]            -> (a, s[..., min], u, vt, info)       svd
// backend_config holds LAPACK's character options as ASCII codes
// (uplo, side, trans_x, diag, mode).
enum class LapackRoutine { kPotrf, kTrsm, kGetrf, kGeqrf, kOrgqr, kSyevd, kGesdd };
struct LapackCall {
  LapackRoutine routine;
  PrimitiveType type;  // f32 or f64.
};
std::optional<LapackCall> ParseLapackTarget(std::string_view target);

bool IsSupportedCustomCall(std::string_view target);

// JAX's host-callback targets (xla_python_cpu_callback and its FFI forms).
bool IsHostCallback(std::string_view target);

// Unimplemented for a custom-call that Causeway does not run, naming the
// instruction, its line and its target; for host callbacks, why and what
// to do instead.
absl::Status UnsupportedCustomCall(const Instruction& instruction);

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_CUSTOM_CALL_H_
