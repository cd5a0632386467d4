#include "causeway/exec/scalar_computation.h"

#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"
#include "causeway/exec/xla_math.h"

namespace causeway::exec {
namespace {

using hlo::ComparisonDirection;
using hlo::ComparisonType;
using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using Op = ScalarComputation::Op;
using OpFn = void (*)(const Op&, uint64_t*);
using BatchFn = void (*)(const Op&, uint64_t*, int64_t);

bool IsScalarArray(const hlo::Shape& shape) {
  return shape.IsArray() && shape.rank() == 0;
}

// The element types whose values fit the 64-bit slots and the bit-level
// kernels here: pred, the integers of 8 to 64 bits, f16, bf16, f32, f64.
// Computations on other types (complex, the minifloats, the sub-byte
// integers) are not compiled; their callers run them op by op.
bool IsWordType(PrimitiveType type) {
  return hlo::IsArrayType(type) && !hlo::IsComplex(type) &&
         !hlo::IsMinifloat(type) && !hlo::IsSubByteInteger(type);
}

// hlo::VisitType for the word types only; `fn` is not instantiated for the
// others, which get an empty OpFns.
template <typename Fn>
auto VisitWordType(PrimitiveType type, Fn&& fn) {
  return hlo::VisitType(type, [&](auto tag) -> decltype(fn(int32_t{})) {
    using E = decltype(tag);
    if constexpr (hlo::kIsComplex<E> || hlo::kIsMinifloat<E> ||
                  hlo::kIsNarrowInt<E>) {
      return {};
    } else {
      return fn(tag);
    }
  });
}

// Sign-extends the low `width` bytes of `bits`.
int64_t SignExtend(uint64_t bits, int64_t width) {
  const int shift = static_cast<int>(64 - width * 8);
  return static_cast<int64_t>(bits << shift) >> shift;
}

// Each op kind is a kernel K with `K::Apply(op, a, b, c)` on raw bits;
// ScalarWrap / BatchWrap run it on one value or on columns of values.
template <typename K>
void ScalarWrap(const Op& op, uint64_t* s) {
  s[op.out] = K::Apply(op, s[op.a], s[op.b], s[op.c]);
}

template <typename K>
void BatchWrap(const Op& op, uint64_t* frame, int64_t count) {
  constexpr int64_t w = ScalarComputation::kBatch;
  uint64_t* out = frame + op.out * w;
  const uint64_t* a = frame + op.a * w;
  const uint64_t* b = frame + op.b * w;
  const uint64_t* c = frame + op.c * w;
  for (int64_t i = 0; i < count; ++i) out[i] = K::Apply(op, a[i], b[i], c[i]);
}

struct OpFns {
  OpFn fn = nullptr;
  BatchFn batch = nullptr;
};

template <typename K>
OpFns Fns() {
  return {&ScalarWrap<K>, &BatchWrap<K>};
}

template <typename E, Opcode kOp>
struct BinaryK {
  static uint64_t Apply(const Op&, uint64_t a, uint64_t b, uint64_t) {
    return ToBits(ApplyBinaryElement<kOp>(BitsTo<E>(a), BitsTo<E>(b)));
  }
};

template <typename E>
OpFns BinaryFn(Opcode opcode) {
  using C = ComputeType<E>;
  switch (opcode) {
#define CW_BINARY_CASE(k)                           \
  case Opcode::k:                                   \
    if constexpr (kBinarySupported<Opcode::k, C>) { \
      return Fns<BinaryK<E, Opcode::k>>();          \
    } else {                                        \
      return {};                                    \
    }
    CW_BINARY_CASE(kAdd)
    CW_BINARY_CASE(kSubtract)
    CW_BINARY_CASE(kMultiply)
    CW_BINARY_CASE(kDivide)
    CW_BINARY_CASE(kRemainder)
    CW_BINARY_CASE(kMaximum)
    CW_BINARY_CASE(kMinimum)
    CW_BINARY_CASE(kPower)
    CW_BINARY_CASE(kAtan2)
    CW_BINARY_CASE(kAnd)
    CW_BINARY_CASE(kOr)
    CW_BINARY_CASE(kXor)
    CW_BINARY_CASE(kShiftLeft)
    CW_BINARY_CASE(kShiftRightLogical)
    CW_BINARY_CASE(kShiftRightArithmetic)
#undef CW_BINARY_CASE
    default:
      return {};
  }
}

template <Opcode kOp, typename C>
inline constexpr bool kUnarySupported =
    std::is_same_v<C, bool> ? kOp == Opcode::kNot
    : std::is_floating_point_v<C>
        ? kOp != Opcode::kNot&& kOp != Opcode::kIsFinite
        : (kOp == Opcode::kNegate || kOp == Opcode::kAbs ||
           kOp == Opcode::kNot || kOp == Opcode::kSign);

template <Opcode kOp, typename C>
C ApplyUnary(C x) {
  if constexpr (std::is_same_v<C, bool>) {
    return !x;
  } else if constexpr (std::is_floating_point_v<C>) {
    if constexpr (kOp == Opcode::kNegate) return -x;
    if constexpr (kOp == Opcode::kAbs) return std::fabs(x);
    if constexpr (kOp == Opcode::kSign) {
      if (std::isnan(x)) return x;
      return x > 0 ? C{1} : (x < 0 ? C{-1} : x);
    }
    if constexpr (kOp == Opcode::kExp) return std::exp(x);
    if constexpr (kOp == Opcode::kExpm1) return std::expm1(x);
    if constexpr (kOp == Opcode::kLog) return std::log(x);
    if constexpr (kOp == Opcode::kLog1p) return std::log1p(x);
    if constexpr (kOp == Opcode::kSqrt) return std::sqrt(x);
    if constexpr (kOp == Opcode::kRsqrt) {
      C y;
      RsqrtArray(&x, &y, 1);
      return y;
    }
    if constexpr (kOp == Opcode::kTanh) return std::tanh(x);
    if constexpr (kOp == Opcode::kLogistic) return C{1} / (C{1} + std::exp(-x));
    if constexpr (kOp == Opcode::kFloor) return std::floor(x);
    if constexpr (kOp == Opcode::kCeil) return std::ceil(x);
    if constexpr (kOp == Opcode::kRoundNearestEven) return std::nearbyint(x);
    if constexpr (kOp == Opcode::kRoundNearestAfz) return std::round(x);
    if constexpr (kOp == Opcode::kSin) return std::sin(x);
    if constexpr (kOp == Opcode::kCos) return std::cos(x);
    return x;
  } else {
    if constexpr (kOp == Opcode::kNegate) {
      return static_cast<C>(uint64_t{0} - static_cast<uint64_t>(x));
    }
    if constexpr (kOp == Opcode::kAbs) {
      if constexpr (std::is_signed_v<C>) {
        return x < 0 ? static_cast<C>(uint64_t{0} - static_cast<uint64_t>(x))
                     : x;
      }
      return x;
    }
    if constexpr (kOp == Opcode::kNot) return static_cast<C>(~x);
    if constexpr (kOp == Opcode::kSign) {
      if constexpr (std::is_signed_v<C>) return x > 0 ? 1 : (x < 0 ? -1 : 0);
      return x > 0 ? 1 : 0;
    }
    return x;
  }
}

template <typename E, Opcode kOp>
struct UnaryK {
  static uint64_t Apply(const Op&, uint64_t a, uint64_t, uint64_t) {
    return ToBits(FromCompute<E>(ApplyUnary<kOp>(ToCompute(BitsTo<E>(a)))));
  }
};

template <typename E>
struct IsFiniteK {
  static uint64_t Apply(const Op&, uint64_t a, uint64_t, uint64_t) {
    return std::isfinite(ToCompute(BitsTo<E>(a))) ? 1 : 0;
  }
};

template <typename E>
OpFns UnaryFn(Opcode opcode) {
  using C = ComputeType<E>;
  switch (opcode) {
#define CW_UNARY_CASE(k)                           \
  case Opcode::k:                                  \
    if constexpr (kUnarySupported<Opcode::k, C>) { \
      return Fns<UnaryK<E, Opcode::k>>();          \
    } else {                                       \
      return {};                                   \
    }
    CW_UNARY_CASE(kNegate)
    CW_UNARY_CASE(kAbs)
    CW_UNARY_CASE(kNot)
    CW_UNARY_CASE(kSign)
    CW_UNARY_CASE(kExp)
    CW_UNARY_CASE(kExpm1)
    CW_UNARY_CASE(kLog)
    CW_UNARY_CASE(kLog1p)
    CW_UNARY_CASE(kSqrt)
    CW_UNARY_CASE(kRsqrt)
    CW_UNARY_CASE(kTanh)
    CW_UNARY_CASE(kLogistic)
    CW_UNARY_CASE(kFloor)
    CW_UNARY_CASE(kCeil)
    CW_UNARY_CASE(kRoundNearestEven)
    CW_UNARY_CASE(kRoundNearestAfz)
    CW_UNARY_CASE(kSin)
    CW_UNARY_CASE(kCos)
#undef CW_UNARY_CASE
    default:
      return {};
  }
}

// How a compare orders its operands, resolved at compile time.
enum class CompareMode { kIeee, kTotalOrder, kSigned, kUnsigned };

template <ComparisonDirection kDir, typename T>
inline bool Ordered(T a, T b) {
  if constexpr (kDir == ComparisonDirection::kEq) return a == b;
  if constexpr (kDir == ComparisonDirection::kNe) return a != b;
  if constexpr (kDir == ComparisonDirection::kLt) return a < b;
  if constexpr (kDir == ComparisonDirection::kLe) return a <= b;
  if constexpr (kDir == ComparisonDirection::kGt) return a > b;
  if constexpr (kDir == ComparisonDirection::kGe) return a >= b;
  return false;
}

template <typename E, CompareMode kMode, ComparisonDirection kDir>
struct CompareK {
  static uint64_t Apply(const Op&, uint64_t a, uint64_t b, uint64_t) {
    constexpr int64_t kWidth = sizeof(E);
    if constexpr (kMode == CompareMode::kIeee) {
      if constexpr (kIsFloat<E>) {
        return Ordered<kDir>(ToCompute(BitsTo<E>(a)), ToCompute(BitsTo<E>(b)));
      } else {
        return false;
      }
    } else if constexpr (kMode == CompareMode::kTotalOrder) {
      int64_t x = SignExtend(a, kWidth), y = SignExtend(b, kWidth);
      constexpr int64_t kFlip =
          static_cast<int64_t>((uint64_t{1} << (kWidth * 8 - 1)) - 1);
      if (x < 0) x ^= kFlip;
      if (y < 0) y ^= kFlip;
      return Ordered<kDir>(x, y);
    } else if constexpr (kMode == CompareMode::kSigned) {
      return Ordered<kDir>(SignExtend(a, kWidth), SignExtend(b, kWidth));
    } else {
      return Ordered<kDir>(a, b);
    }
  }
};

template <typename E, CompareMode kMode>
OpFns CompareFnsFor(ComparisonDirection direction) {
  switch (direction) {
    case ComparisonDirection::kEq:
      return Fns<CompareK<E, kMode, ComparisonDirection::kEq>>();
    case ComparisonDirection::kNe:
      return Fns<CompareK<E, kMode, ComparisonDirection::kNe>>();
    case ComparisonDirection::kLt:
      return Fns<CompareK<E, kMode, ComparisonDirection::kLt>>();
    case ComparisonDirection::kLe:
      return Fns<CompareK<E, kMode, ComparisonDirection::kLe>>();
    case ComparisonDirection::kGt:
      return Fns<CompareK<E, kMode, ComparisonDirection::kGt>>();
    case ComparisonDirection::kGe:
      return Fns<CompareK<E, kMode, ComparisonDirection::kGe>>();
  }
  return {};
}

// The same choice CompareBits makes, as a typed kernel.
OpFns CompareFns(PrimitiveType element, ComparisonType type,
                 ComparisonDirection direction) {
  return VisitWordType(element, [&](auto tag) -> OpFns {
    using E = decltype(tag);
    if (hlo::IsFloating(element) && type != ComparisonType::kSigned &&
        type != ComparisonType::kUnsigned) {
      if (type == ComparisonType::kTotalOrder) {
        return CompareFnsFor<E, CompareMode::kTotalOrder>(direction);
      }
      return CompareFnsFor<E, CompareMode::kIeee>(direction);
    }
    const bool as_signed =
        type == ComparisonType::kSigned ||
        (type != ComparisonType::kUnsigned &&
         (hlo::IsSignedInteger(element) || hlo::IsFloating(element)));
    return as_signed ? CompareFnsFor<E, CompareMode::kSigned>(direction)
                     : CompareFnsFor<E, CompareMode::kUnsigned>(direction);
  });
}

struct SelectK {
  static uint64_t Apply(const Op&, uint64_t p, uint64_t t, uint64_t f) {
    return (p & 1) ? t : f;
  }
};

struct MoveK {
  static uint64_t Apply(const Op&, uint64_t a, uint64_t, uint64_t) { return a; }
};

template <typename E>
struct ClampK {
  static uint64_t Apply(const Op&, uint64_t lo, uint64_t x, uint64_t hi) {
    return ToBits(ApplyBinaryElement<Opcode::kMinimum>(
        ApplyBinaryElement<Opcode::kMaximum>(BitsTo<E>(x), BitsTo<E>(lo)),
        BitsTo<E>(hi)));
  }
};

template <typename To, typename From>
struct ConvertK {
  static uint64_t Apply(const Op&, uint64_t a, uint64_t, uint64_t) {
    return ToBits(ConvertElement<To>(BitsTo<From>(a)));
  }
};

template <typename Order>
bool Apply(ComparisonDirection direction, const Order& a, const Order& b) {
  switch (direction) {
    case ComparisonDirection::kEq:
      return a == b;
    case ComparisonDirection::kNe:
      return a != b;
    case ComparisonDirection::kLt:
      return a < b;
    case ComparisonDirection::kLe:
      return a <= b;
    case ComparisonDirection::kGt:
      return a > b;
    case ComparisonDirection::kGe:
      return a >= b;
  }
  return false;
}

}  // namespace

uint64_t TotalOrderKey(PrimitiveType element, bool as_signed, uint64_t bits) {
  // Bits, not bytes: s4/u4 and f4e2m1fn live in the low bits of their byte.
  const int shift = static_cast<int>(64 - hlo::BitWidth(element));
  const int64_t extended = static_cast<int64_t>(bits << shift) >> shift;
  constexpr uint64_t kSign = uint64_t{1} << 63;
  if (hlo::IsFloating(element) || hlo::IsMinifloat(element)) {
    // Sign and magnitude: a negative value's magnitude bits flip.
    int64_t s = extended;
    if (s < 0) s ^= static_cast<int64_t>((uint64_t{1} << (63 - shift)) - 1);
    return static_cast<uint64_t>(s) ^ kSign;
  }
  if (as_signed) return static_cast<uint64_t>(extended) ^ kSign;
  return bits & (~uint64_t{0} >> shift);
}

bool CompareBits(PrimitiveType element, ComparisonType type,
                 ComparisonDirection direction, uint64_t a, uint64_t b) {
  const bool floating = hlo::IsFloating(element) || hlo::IsMinifloat(element);
  if (floating && type != ComparisonType::kSigned &&
      type != ComparisonType::kUnsigned) {
    if (type == ComparisonType::kTotalOrder) {
      return Apply(direction, TotalOrderKey(element, true, a),
                   TotalOrderKey(element, true, b));
    }
    return hlo::VisitType(element, [&](auto tag) {
      using E = decltype(tag);
      if constexpr (kIsFloat<E>) {
        return Apply(direction, ToCompute(BitsTo<E>(a)),
                     ToCompute(BitsTo<E>(b)));
      } else if constexpr (hlo::kIsMinifloat<E>) {
        return Apply(direction, static_cast<float>(BitsTo<E>(a)),
                     static_cast<float>(BitsTo<E>(b)));
      } else {
        return false;
      }
    });
  }
  bool as_signed = type == ComparisonType::kSigned ||
                   (type != ComparisonType::kUnsigned &&
                    (hlo::IsSignedInteger(element) || floating));
  return Apply(direction, TotalOrderKey(element, as_signed, a),
               TotalOrderKey(element, as_signed, b));
}

std::optional<Opcode> MatchBinaryReducer(const hlo::Computation& c) {
  if (c.parameter_count() != 2 || c.root() == nullptr) return std::nullopt;
  const Instruction* root = c.root();
  switch (root->opcode) {
    case Opcode::kAdd:
    case Opcode::kMultiply:
    case Opcode::kMaximum:
    case Opcode::kMinimum:
    case Opcode::kAnd:
    case Opcode::kOr:
      break;
    default:
      return std::nullopt;
  }
  const Instruction* p0 = c.parameter(0);
  const Instruction* p1 = c.parameter(1);
  if (p0 == nullptr || p1 == nullptr || root->operand_count() != 2 ||
      !IsScalarArray(root->shape) || !IsScalarArray(p0->shape) ||
      !IsScalarArray(p1->shape) || p0->shape.type() != root->shape.type() ||
      p1->shape.type() != root->shape.type()) {
    return std::nullopt;
  }
  const Instruction* a = root->operand(0);
  const Instruction* b = root->operand(1);
  if ((a == p0 && b == p1) || (a == p1 && b == p0)) return root->opcode;
  return std::nullopt;
}

std::optional<ScalarComputation> ScalarComputation::Compile(
    const hlo::Computation& computation) {
  if (computation.root() == nullptr) return std::nullopt;
  return CompileImpl(computation, *computation.root());
}

std::optional<ScalarComputation> ScalarComputation::CompileValue(
    const hlo::Computation& computation, const hlo::Instruction& root) {
  if (root.opcode == Opcode::kTuple) return std::nullopt;
  return CompileImpl(computation, root);
}

std::optional<ScalarComputation> ScalarComputation::CompileImpl(
    const hlo::Computation& computation, const hlo::Instruction& root) {
  ScalarComputation program;
  const int64_t params = computation.parameter_count();
  for (int64_t i = 0; i < params; ++i) {
    const Instruction* p = computation.parameter(i);
    if (p == nullptr || !IsScalarArray(p->shape) ||
        !IsWordType(p->shape.type())) {
      return std::nullopt;
    }
    program.parameter_types_.push_back(p->shape.type());
  }
  // Instructions the root depends on.
  std::unordered_set<const Instruction*> needed;
  std::vector<const Instruction*> stack = {&root};
  while (!stack.empty()) {
    const Instruction* instr = stack.back();
    stack.pop_back();
    if (!needed.insert(instr).second) continue;
    for (const Instruction* operand : instr->operands) stack.push_back(operand);
  }
  std::unordered_map<const Instruction*, int32_t> slot;
  for (int64_t i = 0; i < params; ++i) {
    slot[computation.parameter(i)] = static_cast<int32_t>(i);
  }
  program.initial_frame_.assign(params, 0);
  auto new_slot = [&](const Instruction* instr) {
    int32_t s = static_cast<int32_t>(program.initial_frame_.size());
    program.initial_frame_.push_back(0);
    slot[instr] = s;
    return s;
  };
  for (const auto& owned : computation.instructions()) {
    const Instruction* instr = owned.get();
    if (!needed.count(instr) || instr->opcode == Opcode::kParameter) continue;
    if (instr->opcode == Opcode::kTuple) {
      if (instr != &root) return std::nullopt;
      for (const Instruction* operand : instr->operands) {
        if (!IsScalarArray(operand->shape)) return std::nullopt;
        program.result_slots_.push_back(slot.at(operand));
        program.result_types_.push_back(operand->shape.type());
      }
      continue;
    }
    if (!IsScalarArray(instr->shape) || !IsWordType(instr->shape.type())) {
      return std::nullopt;
    }
    for (const Instruction* operand : instr->operands) {
      if (!IsScalarArray(operand->shape) || !slot.count(operand) ||
          !IsWordType(operand->shape.type())) {
        return std::nullopt;
      }
    }
    const PrimitiveType type = instr->shape.type();
    Op op;
    OpFns fns;
    auto operand_slot = [&](int64_t i) { return slot.at(instr->operand(i)); };
    auto operand_type = [&](int64_t i) {
      return instr->operand(i)->shape.type();
    };
    const int64_t arity = instr->operand_count();
    if (instr->opcode == Opcode::kConstant) {
      if (!instr->literal.has_value() ||
          !IsScalarArray(instr->literal->shape()) ||
          instr->literal->shape().type() != type) {
        return std::nullopt;
      }
      int32_t s = new_slot(instr);
      program.initial_frame_[s] =
          LoadBits(instr->literal->untyped_data(), hlo::ByteWidth(type), 0);
      continue;
    }
    if (hlo::IsElementwiseBinary(instr->opcode) && arity == 2) {
      if (operand_type(0) != type || operand_type(1) != type)
        return std::nullopt;
      fns = VisitWordType(type, [&](auto tag) {
        return BinaryFn<decltype(tag)>(instr->opcode);
      });
      op.a = operand_slot(0);
      op.b = operand_slot(1);
    } else if (instr->opcode == Opcode::kIsFinite && arity == 1) {
      if (type != PrimitiveType::kPred || !hlo::IsFloating(operand_type(0))) {
        return std::nullopt;
      }
      fns = VisitWordType(operand_type(0), [&](auto tag) -> OpFns {
        using E = decltype(tag);
        if constexpr (kIsFloat<E>) {
          return Fns<IsFiniteK<E>>();
        } else {
          return {};
        }
      });
      op.a = operand_slot(0);
    } else if (hlo::IsElementwiseUnary(instr->opcode) && arity == 1) {
      if (operand_type(0) != type) return std::nullopt;
      fns = VisitWordType(type, [&](auto tag) {
        return UnaryFn<decltype(tag)>(instr->opcode);
      });
      op.a = operand_slot(0);
    } else if (instr->opcode == Opcode::kCompare && arity == 2) {
      if (type != PrimitiveType::kPred || operand_type(0) != operand_type(1)) {
        return std::nullopt;
      }
      fns = CompareFns(operand_type(0), instr->comparison_type,
                       instr->comparison_direction);
      op.a = operand_slot(0);
      op.b = operand_slot(1);
      op.operand_type = operand_type(0);
      op.direction = instr->comparison_direction;
      op.comparison = instr->comparison_type;
    } else if (instr->opcode == Opcode::kSelect && arity == 3) {
      if (operand_type(0) != PrimitiveType::kPred || operand_type(1) != type ||
          operand_type(2) != type) {
        return std::nullopt;
      }
      fns = Fns<SelectK>();
      op.a = operand_slot(0);
      op.b = operand_slot(1);
      op.c = operand_slot(2);
    } else if (instr->opcode == Opcode::kClamp && arity == 3) {
      if (operand_type(0) != type || operand_type(1) != type ||
          operand_type(2) != type) {
        return std::nullopt;
      }
      fns = VisitWordType(type, [&](auto tag) -> OpFns {
        using E = decltype(tag);
        if constexpr (std::is_same_v<E, bool>) {
          return {};
        } else {
          return Fns<ClampK<E>>();
        }
      });
      op.a = operand_slot(0);
      op.b = operand_slot(1);
      op.c = operand_slot(2);
    } else if (instr->opcode == Opcode::kConvert && arity == 1) {
      fns = VisitWordType(type, [&](auto to_tag) {
        return VisitWordType(operand_type(0), [&](auto from_tag) -> OpFns {
          return Fns<ConvertK<decltype(to_tag), decltype(from_tag)>>();
        });
      });
      op.a = operand_slot(0);
    } else if ((instr->opcode == Opcode::kBitcastConvert ||
                instr->opcode == Opcode::kBitcast ||
                instr->opcode == Opcode::kCopy ||
                instr->opcode == Opcode::kReshape) &&
               arity == 1) {
      if (hlo::ByteWidth(operand_type(0)) != hlo::ByteWidth(type) ||
          (type == PrimitiveType::kPred) !=
              (operand_type(0) == PrimitiveType::kPred)) {
        return std::nullopt;
      }
      fns = Fns<MoveK>();
      op.a = operand_slot(0);
    } else {
      return std::nullopt;
    }
    if (fns.fn == nullptr) return std::nullopt;
    op.fn = fns.fn;
    op.batch_fn = fns.batch;
    op.out = new_slot(instr);
    program.ops_.push_back(op);
  }
  if (root.opcode != Opcode::kTuple) {
    if (!IsScalarArray(root.shape)) return std::nullopt;
    program.result_slots_.push_back(slot.at(&root));
    program.result_types_.push_back(root.shape.type());
  }
  return program;
}

ScalarFunction::ScalarFunction(const hlo::Computation& computation,
                               const ComputationRunner& runner)
    : computation_(computation),
      runner_(runner),
      compiled_(ScalarComputation::Compile(computation)) {
  if (compiled_.has_value()) frame_ = compiled_->NewFrame();
  for (const Instruction* p : computation.parameters()) {
    parameter_types_.push_back(p != nullptr && IsScalarArray(p->shape)
                                   ? p->shape.type()
                                   : PrimitiveType::kInvalid);
  }
  const Instruction* root = computation.root();
  if (root != nullptr && root->shape.IsTuple()) {
    for (const hlo::Shape& element : root->shape.tuple_shapes()) {
      result_types_.push_back(IsScalarArray(element) ? element.type()
                                                     : PrimitiveType::kInvalid);
    }
  } else if (root != nullptr) {
    result_types_.push_back(IsScalarArray(root->shape)
                                ? root->shape.type()
                                : PrimitiveType::kInvalid);
  }
  for (PrimitiveType type : parameter_types_) {
    literal_args_.emplace_back(hlo::Shape::Scalar(
        hlo::IsArrayType(type) ? type : PrimitiveType::kPred));
  }
}

absl::Status ScalarFunction::CheckSignature(
    std::span<const PrimitiveType> param_types,
    std::span<const PrimitiveType> result_types, const char* what) const {
  auto list = [](std::span<const PrimitiveType> types) {
    std::string text;
    for (PrimitiveType t : types) {
      if (!text.empty()) text += ", ";
      text += std::string(hlo::PrimitiveTypeName(t));
    }
    return text;
  };
  bool ok = param_types.size() == parameter_types_.size() &&
            result_types.size() == result_types_.size();
  for (size_t i = 0; ok && i < param_types.size(); ++i) {
    ok = param_types[i] == parameter_types_[i];
  }
  for (size_t i = 0; ok && i < result_types.size(); ++i) {
    ok = result_types[i] == result_types_[i];
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, " computation ", computation_.name(), " must take scalars (",
      list(param_types), ") and return (", list(result_types), ")"));
}

absl::Status ScalarFunction::Call(std::span<const uint64_t> args,
                                  std::span<uint64_t> results) {
  if (compiled_.has_value()) {
    compiled_->Run(frame_, args, results);
    return absl::OkStatus();
  }
  for (size_t i = 0; i < args.size(); ++i) {
    StoreBits(literal_args_[i].mutable_untyped_data(),
              hlo::ByteWidth(parameter_types_[i]), 0, args[i]);
  }
  CW_ASSIGN_OR_RETURN(Literal out, runner_(computation_, literal_args_));
  if (out.shape().IsTuple()) {
    if (out.elements().size() != results.size()) {
      return absl::InternalError(absl::StrCat(
          "computation ", computation_.name(), " returned ",
          out.elements().size(), " values, expected ", results.size()));
    }
    for (size_t i = 0; i < results.size(); ++i) {
      const Literal& element = out.elements()[i];
      results[i] = LoadBits(element.untyped_data(),
                            hlo::ByteWidth(element.shape().type()), 0);
    }
  } else {
    if (results.size() != 1 || !out.shape().IsArray() ||
        out.shape().ElementCount() != 1) {
      return absl::InternalError(
          absl::StrCat("computation ", computation_.name(), " returned ",
                       out.shape().ToString(), ", expected a scalar"));
    }
    results[0] =
        LoadBits(out.untyped_data(), hlo::ByteWidth(out.shape().type()), 0);
  }
  return absl::OkStatus();
}

}  // namespace causeway::exec
