// The typed element loops behind the elementwise kernels (EvalUnary,
// EvalBinary, EvalCompare, EvalSelect, EvalClamp, EvalConvert,
// EvalReducePrecision), over `n` contiguous elements of raw buffers. The
// fused loop evaluator (fused_loop.h) runs them chunk by chunk, so a fused
// computation computes exactly the bits the op-by-op kernels compute.
//
// No shape checks: callers have checked the operand types and dims against
// `instr` as the Eval* kernels do. Denormal flushing is the caller's job
// (hold a ScopedFlushDenormals, as the kernels do). Pure functions;
// thread-safe.
#ifndef CAUSEWAY_EXEC_ELEMENTWISE_H_
#define CAUSEWAY_EXEC_ELEMENTWISE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/shape.h"

namespace causeway::exec {

// instr.opcode is an elementwise unary op (is-finite included). `type` is
// the operand's element type; `out` has instr.shape's element type.
absl::Status UnaryElements(const hlo::Instruction& instr,
                           hlo::PrimitiveType type, const void* in, void* out,
                           int64_t n);

// instr.opcode is an elementwise binary op on instr.shape.type().
absl::Status BinaryElements(const hlo::Instruction& instr, const void* lhs,
                            const void* rhs, void* out, int64_t n);

// BinaryElements with one operand broadcast along rows: element i of that
// operand is rows[(phase + i) / row_length * row_stride] (the lhs when
// `rows_on_left`), the other is full[i]. The same element function as
// BinaryElements, so the same bits as broadcasting first. instr's type
// is f32 or f64 (RowOperandsSupported).
absl::Status BinaryRowElements(const hlo::Instruction& instr, const void* full,
                               const void* rows, int64_t row_stride,
                               int64_t row_length, int64_t phase,
                               bool rows_on_left, void* out, int64_t n);
// MultiplyAddElements with operand `row_operand` (0 or 1: a factor, 2: the
// addend) broadcast along rows as in BinaryRowElements; `first` and
// `second` are the other two operands, in order. f32 or f64.
absl::Status MultiplyAddRowElements(hlo::PrimitiveType type,
                                    bool negate_product, bool negate_addend,
                                    int row_operand, const void* first,
                                    const void* second, const void* rows,
                                    int64_t row_stride, int64_t row_length,
                                    int64_t phase, void* out, int64_t n);
inline bool RowOperandsSupported(hlo::PrimitiveType type) {
  return type == hlo::PrimitiveType::kF32 || type == hlo::PrimitiveType::kF64;
}

// out[i] = round(±(a[i] * b[i]) ± c[i]) with one rounding (a fused
// multiply-add, as XLA's CPU backend contracts a multiply into an add; see
// multiply_add.h). `type` is f16, f32 or f64.
absl::Status MultiplyAddElements(hlo::PrimitiveType type, bool negate_product,
                                 bool negate_addend, const void* a,
                                 const void* b, const void* c, void* out,
                                 int64_t n);

// compare with instr's direction and comparison type on operands of `type`.
absl::Status CompareElements(const hlo::Instruction& instr,
                             hlo::PrimitiveType type, const void* lhs,
                             const void* rhs, bool* out, int64_t n);

// out[i] = pred[i] ? on_true[i] : on_false[i], elements `byte_width` wide
// (1, 2, 4, 8 or 16).
absl::Status SelectElements(int64_t byte_width, const bool* pred,
                            const void* on_true, const void* on_false,
                            void* out, int64_t n);

// out[i] = min(max(x[i], lo[i * lo_step]), hi[i * hi_step]) with XLA's
// NaN rules; `type` is not pred.
void ClampElements(hlo::PrimitiveType type, const void* lo, int64_t lo_step,
                   const void* x, const void* hi, int64_t hi_step, void* out,
                   int64_t n);

// XLA's convert from `from` to `to` (different types).
void ConvertElements(hlo::PrimitiveType from, hlo::PrimitiveType to,
                     const void* in, void* out, int64_t n);

// Complex kernels (complex_elementwise.cc), XLA's formulas: `type` is c64
// or c128. Unary: instr.opcode is negate, abs (into the component type),
// sign, exponential, exponential-minus-one, log, log-plus-one, sine,
// cosine, tan, tanh, sqrt or rsqrt. Binary: add, subtract, multiply,
// divide or power.
absl::Status ComplexUnaryElements(const hlo::Instruction& instr,
                                  hlo::PrimitiveType type, const void* in,
                                  void* out, int64_t n);
absl::Status ComplexBinaryElements(const hlo::Instruction& instr,
                                   hlo::PrimitiveType type, const void* lhs,
                                   const void* rhs, void* out, int64_t n);
// real (imag = false) or imag of complex elements of `type`, into its
// component type.
void ComplexPartElements(bool imag, hlo::PrimitiveType type, const void* in,
                         void* out, int64_t n);
// complex(re, im) from parts of `part_type` (f32 or f64).
void ComplexFromPartsElements(hlo::PrimitiveType part_type, const void* re,
                              const void* im, void* out, int64_t n);

// reduce-precision with instr's exponent_bits and mantissa_bits (checked:
// >= 1 and >= 0) on floats of instr.shape.type().
void ReducePrecisionElements(const hlo::Instruction& instr, const void* in,
                             void* out, int64_t n);

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_ELEMENTWISE_H_
