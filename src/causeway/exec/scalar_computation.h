// Fast evaluation of the small scalar computations that reduce, reduce-
// window, scatter, select-and-scatter and sort call once per element
// (reducers, combiners, comparators), without going through the evaluator.
//
//  - MatchBinaryReducer recognises `ROOT op(p0, p1)` (either operand order)
//    for the ops the kernels have typed loops for.
//  - ScalarComputation compiles a computation made only of scalar
//    elementwise instructions into a flat program over raw element bits;
//    JAX's argmax reducer and total-order sort comparator are of this kind.
//  - ScalarFunction calls a computation through ScalarComputation when it
//    compiles, and through the evaluator's ComputationRunner otherwise.
//
// Values are passed as raw element bits in a uint64_t (the element's bytes,
// zero-extended; pred is 0 or 1). Elementwise semantics follow XLA's CPU
// backend: integer arithmetic wraps, x / 0 is -1 (unsigned: all ones),
// x % 0 is x, max/min propagate NaN, f16/bf16 compute in float and round
// per op.
#ifndef CAUSEWAY_EXEC_SCALAR_COMPUTATION_H_
#define CAUSEWAY_EXEC_SCALAR_COMPUTATION_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "causeway/exec/kernel_util.h"
#include "causeway/exec/kernels.h"
#include "causeway/exec/xla_math.h"
#include "causeway/hlo/ir.h"

namespace causeway::exec {

// ---------------------------------------------------------------------------
// Raw element bits.

template <size_t kBytes>
using UnsignedOfSize = std::conditional_t<
    kBytes == 1, uint8_t,
    std::conditional_t<kBytes == 2, uint16_t,
                       std::conditional_t<kBytes == 4, uint32_t, uint64_t>>>;

template <typename T>
inline T BitsTo(uint64_t bits) {
  return std::bit_cast<T>(static_cast<UnsignedOfSize<sizeof(T)>>(bits));
}
template <typename T>
inline uint64_t ToBits(T value) {
  return std::bit_cast<UnsignedOfSize<sizeof(T)>>(value);
}
// Element `i` of an array whose elements are `width` bytes wide (1, 2, 4
// or 8; arrays are 64-byte aligned, so typed access is aligned).
inline uint64_t LoadBits(const void* data, int64_t width, int64_t i) {
  switch (width) {
    case 1:
      return static_cast<const uint8_t*>(data)[i];
    case 2:
      return static_cast<const uint16_t*>(data)[i];
    case 4:
      return static_cast<const uint32_t*>(data)[i];
    default:
      return static_cast<const uint64_t*>(data)[i];
  }
}
inline void StoreBits(void* data, int64_t width, int64_t i, uint64_t bits) {
  switch (width) {
    case 1:
      static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(bits);
      break;
    case 2:
      static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(bits);
      break;
    case 4:
      static_cast<uint32_t*>(data)[i] = static_cast<uint32_t>(bits);
      break;
    default:
      static_cast<uint64_t*>(data)[i] = bits;
      break;
  }
}

// ---------------------------------------------------------------------------
// Elementwise binary ops on compute types (float, double, integers, bool),
// with XLA's semantics. Supported(kOp, C) says which combinations exist.

template <hlo::Opcode kOp, typename C>
inline constexpr bool kBinarySupported =
    std::is_same_v<C, bool>
        ? (kOp == hlo::Opcode::kAnd || kOp == hlo::Opcode::kOr ||
           kOp == hlo::Opcode::kXor || kOp == hlo::Opcode::kMaximum ||
           kOp == hlo::Opcode::kMinimum)
    : hlo::kIsComplex<C>
        ? (kOp == hlo::Opcode::kAdd || kOp == hlo::Opcode::kSubtract ||
           kOp == hlo::Opcode::kMultiply)
    : std::is_floating_point_v<C>
        ? (kOp == hlo::Opcode::kAdd || kOp == hlo::Opcode::kSubtract ||
           kOp == hlo::Opcode::kMultiply || kOp == hlo::Opcode::kDivide ||
           kOp == hlo::Opcode::kRemainder || kOp == hlo::Opcode::kMaximum ||
           kOp == hlo::Opcode::kMinimum || kOp == hlo::Opcode::kPower ||
           kOp == hlo::Opcode::kAtan2)
        : (kOp != hlo::Opcode::kAtan2);

template <hlo::Opcode kOp, typename C>
inline C ApplyBinary(C a, C b) {
  using hlo::Opcode;
  if constexpr (std::is_same_v<C, bool>) {
    if constexpr (kOp == Opcode::kAnd || kOp == Opcode::kMinimum) return a && b;
    if constexpr (kOp == Opcode::kOr || kOp == Opcode::kMaximum) return a || b;
    if constexpr (kOp == Opcode::kXor) return a != b;
    return false;
  } else if constexpr (hlo::kIsComplex<C>) {
    // Part by part; the product as XLA's fused loops compute it.
    if constexpr (kOp == Opcode::kAdd) {
      return C(a.real() + b.real(), a.imag() + b.imag());
    }
    if constexpr (kOp == Opcode::kSubtract) {
      return C(a.real() - b.real(), a.imag() - b.imag());
    }
    if constexpr (kOp == Opcode::kMultiply) return ComplexMultiply(a, b);
    return C{};
  } else if constexpr (std::is_floating_point_v<C>) {
    if constexpr (kOp == Opcode::kAdd) return a + b;
    if constexpr (kOp == Opcode::kSubtract) return a - b;
    if constexpr (kOp == Opcode::kMultiply) return a * b;
    if constexpr (kOp == Opcode::kDivide) return a / b;
    if constexpr (kOp == Opcode::kRemainder) return std::fmod(a, b);
    if constexpr (kOp == Opcode::kMaximum) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return a > b ? a : b;
    }
    if constexpr (kOp == Opcode::kMinimum) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return a < b ? a : b;
    }
    if constexpr (kOp == Opcode::kPower) return std::pow(a, b);
    if constexpr (kOp == Opcode::kAtan2) return std::atan2(a, b);
    return C{0};
  } else {
    using U = std::make_unsigned_t<C>;
    constexpr int kBits = sizeof(C) * 8;
    if constexpr (kOp == Opcode::kAdd) {
      return static_cast<C>(static_cast<uint64_t>(a) +
                            static_cast<uint64_t>(b));
    }
    if constexpr (kOp == Opcode::kSubtract) {
      return static_cast<C>(static_cast<uint64_t>(a) -
                            static_cast<uint64_t>(b));
    }
    if constexpr (kOp == Opcode::kMultiply) {
      return static_cast<C>(static_cast<uint64_t>(a) *
                            static_cast<uint64_t>(b));
    }
    if constexpr (kOp == Opcode::kDivide) {
      if (b == 0) return static_cast<C>(-1);
      if constexpr (std::is_signed_v<C>) {
        if (a == std::numeric_limits<C>::min() && b == -1) return a;
      }
      return static_cast<C>(a / b);
    }
    if constexpr (kOp == Opcode::kRemainder) {
      if (b == 0) return a;
      if constexpr (std::is_signed_v<C>) {
        if (a == std::numeric_limits<C>::min() && b == -1) return 0;
      }
      return static_cast<C>(a % b);
    }
    if constexpr (kOp == Opcode::kMaximum) return a > b ? a : b;
    if constexpr (kOp == Opcode::kMinimum) return a < b ? a : b;
    if constexpr (kOp == Opcode::kAnd) return static_cast<C>(a & b);
    if constexpr (kOp == Opcode::kOr) return static_cast<C>(a | b);
    if constexpr (kOp == Opcode::kXor) return static_cast<C>(a ^ b);
    if constexpr (kOp == Opcode::kShiftLeft) {
      const U shift = static_cast<U>(b);
      if (shift >= kBits) return 0;
      return static_cast<C>(static_cast<U>(a) << shift);
    }
    if constexpr (kOp == Opcode::kShiftRightLogical) {
      const U shift = static_cast<U>(b);
      if (shift >= kBits) return 0;
      return static_cast<C>(static_cast<U>(a) >> shift);
    }
    if constexpr (kOp == Opcode::kShiftRightArithmetic) {
      using S = std::make_signed_t<C>;
      const U shift = static_cast<U>(b);
      const S sa = static_cast<S>(a);
      if (shift >= kBits) return static_cast<C>(sa < 0 ? -1 : 0);
      return static_cast<C>(sa >> shift);
    }
    if constexpr (kOp == Opcode::kPower) {
      if constexpr (std::is_signed_v<C>) {
        if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
      }
      uint64_t result = 1, base = static_cast<uint64_t>(a);
      U exponent = static_cast<U>(b);
      while (exponent != 0) {
        if (exponent & 1) result *= base;
        base *= base;
        exponent >>= 1;
      }
      return static_cast<C>(result);
    }
    return C{0};
  }
}

// Storage-type wrapper: f16/bf16 compute in float and round once.
template <hlo::Opcode kOp, typename E>
inline E ApplyBinaryElement(E a, E b) {
  return FromCompute<E>(ApplyBinary<kOp>(ToCompute(a), ToCompute(b)));
}

// The opcode of a computation that is exactly `ROOT op(p0, p1)` or
// `ROOT op(p1, p0)` on two scalar parameters of one type, for op in add,
// multiply, maximum, minimum, and, or; nullopt otherwise.
std::optional<hlo::Opcode> MatchBinaryReducer(const hlo::Computation& c);

// Orders two values with a comparison's semantics (`type` as written on
// compare; kDefault picks float/signed/unsigned from `element`).
bool CompareBits(hlo::PrimitiveType element, hlo::ComparisonType type,
                 hlo::ComparisonDirection direction, uint64_t a, uint64_t b);

// An order-preserving uint64 key for `bits` under a total order: signed and
// unsigned integers, pred, and floats in XLA's total order (-NaN < -inf <
// ... < -0 < +0 < ... < inf < NaN).
uint64_t TotalOrderKey(hlo::PrimitiveType element, bool as_signed,
                       uint64_t bits);

// ---------------------------------------------------------------------------

// A computation of scalar elementwise instructions compiled to a flat
// program. Immutable once compiled; Run is thread-safe given distinct
// frames.
class ScalarComputation {
 public:
  // Compiles `computation` (its root; a tuple root gives several results).
  // nullopt when an instruction is not a scalar elementwise op this
  // interpreter knows.
  static std::optional<ScalarComputation> Compile(
      const hlo::Computation& computation);
  // Compiles the subgraph that computes `root` (an instruction of
  // `computation`); parameters keep their numbers.
  static std::optional<ScalarComputation> CompileValue(
      const hlo::Computation& computation, const hlo::Instruction& root);

  // Working storage for one caller.
  std::vector<uint64_t> NewFrame() const { return initial_frame_; }

  int64_t parameter_count() const {
    return static_cast<int64_t>(parameter_types_.size());
  }
  hlo::PrimitiveType parameter_type(int64_t i) const {
    return parameter_types_[i];
  }
  int64_t result_count() const {
    return static_cast<int64_t>(result_slots_.size());
  }
  hlo::PrimitiveType result_type(int64_t i) const { return result_types_[i]; }

  // Runs on `args` (one per parameter); writes one value per result.
  void Run(std::span<uint64_t> frame, std::span<const uint64_t> args,
           std::span<uint64_t> results) const {
    for (size_t i = 0; i < args.size(); ++i) frame[i] = args[i];
    for (const Op& op : ops_) op.fn(op, frame.data());
    for (size_t i = 0; i < result_slots_.size(); ++i) {
      results[i] = frame[result_slots_[i]];
    }
  }
  // Single-result convenience.
  uint64_t Run1(std::span<uint64_t> frame,
                std::span<const uint64_t> args) const {
    for (size_t i = 0; i < args.size(); ++i) frame[i] = args[i];
    for (const Op& op : ops_) op.fn(op, frame.data());
    return frame[result_slots_[0]];
  }

  // Batched runs: slot i's values live in frame[i * kBatch, (i + 1) *
  // kBatch); parameter i is slot i. Up to kBatch independent argument
  // sets run at once, which amortises the dispatch per op.
  static constexpr int64_t kBatch = 128;
  std::vector<uint64_t> NewBatchFrame() const {
    std::vector<uint64_t> frame(initial_frame_.size() * kBatch);
    for (size_t i = 0; i < initial_frame_.size(); ++i) {
      std::fill(frame.begin() + i * kBatch, frame.begin() + (i + 1) * kBatch,
                initial_frame_[i]);
    }
    return frame;
  }
  // Runs on the first `count` (<= kBatch) lanes of every parameter column.
  void RunBatch(std::span<uint64_t> frame, int64_t count) const {
    for (const Op& op : ops_) op.batch_fn(op, frame.data(), count);
  }
  // The column holding result i after RunBatch.
  const uint64_t* ResultColumn(std::span<const uint64_t> frame,
                               int64_t i) const {
    return frame.data() + result_slots_[i] * kBatch;
  }

  struct Op {
    void (*fn)(const Op&, uint64_t*) = nullptr;
    void (*batch_fn)(const Op&, uint64_t*, int64_t) = nullptr;
    int32_t out = 0, a = 0, b = 0, c = 0;
    hlo::ComparisonDirection direction = hlo::ComparisonDirection::kEq;
    hlo::ComparisonType comparison = hlo::ComparisonType::kDefault;
    hlo::PrimitiveType operand_type = hlo::PrimitiveType::kInvalid;
    uint64_t mask = 0;  // Width mask for bitcasts.
  };

 private:
  ScalarComputation() = default;
  static std::optional<ScalarComputation> CompileImpl(
      const hlo::Computation& computation, const hlo::Instruction& root);

  std::vector<Op> ops_;
  std::vector<uint64_t> initial_frame_;  // Parameters, constants, temps.
  std::vector<hlo::PrimitiveType> parameter_types_;
  std::vector<int32_t> result_slots_;
  std::vector<hlo::PrimitiveType> result_types_;
};

// Calls a scalar computation on raw element bits: compiled when possible,
// else through `runner`. Not thread-safe (owns one frame); one per kernel
// call.
class ScalarFunction {
 public:
  ScalarFunction(const hlo::Computation& computation,
                 const ComputationRunner& runner);

  bool compiled() const { return compiled_.has_value(); }
  // The compiled program, or null when calls go through the runner.
  const ScalarComputation* program() const {
    return compiled_.has_value() ? &*compiled_ : nullptr;
  }
  // Parameter / result types as declared by the computation.
  hlo::PrimitiveType parameter_type(int64_t i) const {
    return parameter_types_[i];
  }
  int64_t parameter_count() const {
    return static_cast<int64_t>(parameter_types_.size());
  }
  int64_t result_count() const {
    return static_cast<int64_t>(result_types_.size());
  }
  hlo::PrimitiveType result_type(int64_t i) const { return result_types_[i]; }

  // Checks that the computation takes `params` scalars of `types` (in
  // order) and returns `results` scalars of the types given; InvalidArgument
  // naming `what` otherwise.
  absl::Status CheckSignature(std::span<const hlo::PrimitiveType> param_types,
                              std::span<const hlo::PrimitiveType> result_types,
                              const char* what) const;

  absl::Status Call(std::span<const uint64_t> args,
                    std::span<uint64_t> results);

 private:
  const hlo::Computation& computation_;
  const ComputationRunner& runner_;
  std::optional<ScalarComputation> compiled_;
  std::vector<uint64_t> frame_;
  std::vector<hlo::PrimitiveType> parameter_types_;
  std::vector<hlo::PrimitiveType> result_types_;
  std::vector<Literal> literal_args_;
};

}  // namespace causeway::exec

#endif  // CAUSEWAY_EXEC_SCALAR_COMPUTATION_H_
