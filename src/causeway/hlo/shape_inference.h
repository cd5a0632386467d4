// Shape inference for HLO instructions: the result shape an instruction must
// have, computed from its operands' shapes and its attributes, following
// XLA's ShapeInference rules. The verifier compares it with the declared
// shape; the builder uses it so that users need not spell result shapes.
//
// For ops whose result is not derivable from operands (parameter, constant,
// convert, bitcast-convert, bitcast, reshape, broadcast, iota,
// rng-bit-generator) the declared `instr.shape` is checked for consistency
// and returned. Errors name the instruction, its line, and what disagrees:
//   instruction 'dot.3' (line 12): lhs contracting dim 1 has size 64 but rhs
//   contracting dim 0 has size 32
// custom-call and unknown ops are refused with Unimplemented.
//
// Stateless and thread-safe.
#ifndef CAUSEWAY_HLO_SHAPE_INFERENCE_H_
#define CAUSEWAY_HLO_SHAPE_INFERENCE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "causeway/hlo/collective_groups.h"
#include "causeway/hlo/ir.h"
#include "causeway/hlo/shape.h"

namespace causeway::hlo {

// The device counts of the module an instruction belongs to. Collectives
// with empty replica_groups (one group of everyone) need them to know their
// group size.
struct DeviceCounts {
  int64_t num_partitions = 1;
  int64_t replica_count = 1;
};

// Infers `instr`'s result shape. Without device counts, an all-gather,
// reduce-scatter or all-to-all whose group size depends on them accepts its
// declared size along the collective dimension.
absl::StatusOr<Shape> InferShape(const Instruction& instr);
absl::StatusOr<Shape> InferShape(const Instruction& instr,
                                 const DeviceCounts& counts);

// The result shape of an fft of `type` with `fft_length` on `operand`, as
// XLA's ShapeInference: FFT/IFFT keep a complex shape, RFFT turns f32/f64
// into c64/c128 with fft_length.back() / 2 + 1 bins in the last dim, IRFFT
// the reverse. Used by shape inference and by the fft kernel.
absl::StatusOr<Shape> InferFftShape(const Shape& operand, FftType type,
                                    const std::vector<int64_t>& fft_length);

// The number of devices in each group of collective `instr`; nullopt when
// it depends on device counts that are not given.
std::optional<int64_t> CollectiveGroupSize(const Instruction& instr,
                                           const DeviceCounts* counts);

// Output size of one window dimension (reduce-window, convolution,
// select-and-scatter) over an input dimension of `input_size`:
// floor((padded dilated input - dilated window) / stride) + 1, or 0 when the
// window does not fit; -1 for an invalid window (non-positive size, stride
// or dilation) or a size that overflows.
int64_t WindowOutputSize(int64_t input_size, const WindowDimension& window);

}  // namespace causeway::hlo

#endif  // CAUSEWAY_HLO_SHAPE_INFERENCE_H_
