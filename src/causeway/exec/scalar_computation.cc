#include "causeway/exec/scalar_computation.h"

#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "causeway/base/status.h"

namespace causeway::exec {
namespace {

using hlo::ComparisonDirection;
using hlo::ComparisonType;
using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using Op = ScalarComputation::Op;
using OpFn = void (*)(const Op&, uint64_t*);

bool IsScalarArray(const hlo::Shape& shape) {
  return shape.IsArray() && shape.rank() == 0;
}

// Sign-extends the low `width` bytes of `bits`.
int64_t SignExtend(uint64_t bits, int64_t width) {
  const int shift = static_cast<int>(64 - width * 8);
  return static_cast<int64_t>(bits << shift) >> shift;
}

template <typename E, Opcode kOp>
void BinaryOp(const Op& op, uint64_t* s) {
  s[op.out] = ToBits(
      ApplyBinaryElement<kOp>(BitsTo<E>(s[op.a]), BitsTo<E>(s[op.b])));
}

template <typename E>
OpFn BinaryFn(Opcode opcode) {
  using C = ComputeType<E>;
  switch (opcode) {
#define CW_BINARY_CASE(k)                                  \
  case Opcode::k:                                          \
    if constexpr (kBinarySupported<Opcode::k, C>) {        \
      return &BinaryOp<E, Opcode::k>;                      \
    } else {                                               \
      return nullptr;                                      \
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
      return nullptr;
  }
}

template <Opcode kOp, typename C>
inline constexpr bool kUnarySupported =
    std::is_same_v<C, bool> ? kOp == Opcode::kNot
    : std::is_floating_point_v<C>
        ? kOp != Opcode::kNot && kOp != Opcode::kIsFinite
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
    if constexpr (kOp == Opcode::kRsqrt) return C{1} / std::sqrt(x);
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
void UnaryOp(const Op& op, uint64_t* s) {
  s[op.out] =
      ToBits(FromCompute<E>(ApplyUnary<kOp>(ToCompute(BitsTo<E>(s[op.a])))));
}

template <typename E>
void IsFiniteOp(const Op& op, uint64_t* s) {
  s[op.out] = std::isfinite(ToCompute(BitsTo<E>(s[op.a]))) ? 1 : 0;
}

template <typename E>
OpFn UnaryFn(Opcode opcode) {
  using C = ComputeType<E>;
  switch (opcode) {
#define CW_UNARY_CASE(k)                            \
  case Opcode::k:                                   \
    if constexpr (kUnarySupported<Opcode::k, C>) {  \
      return &UnaryOp<E, Opcode::k>;                \
    } else {                                        \
      return nullptr;                               \
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
      return nullptr;
  }
}

void CompareOp(const Op& op, uint64_t* s) {
  s[op.out] = CompareBits(op.operand_type, op.comparison, op.direction,
                          s[op.a], s[op.b])
                  ? 1
                  : 0;
}

void SelectOp(const Op& op, uint64_t* s) {
  s[op.out] = (s[op.a] & 1) ? s[op.b] : s[op.c];
}

void MoveOp(const Op& op, uint64_t* s) { s[op.out] = s[op.a]; }

template <typename E>
void ClampOp(const Op& op, uint64_t* s) {
  E low = BitsTo<E>(s[op.a]), x = BitsTo<E>(s[op.b]), high = BitsTo<E>(s[op.c]);
  s[op.out] = ToBits(ApplyBinaryElement<Opcode::kMinimum>(
      ApplyBinaryElement<Opcode::kMaximum>(x, low), high));
}

template <typename To, typename From>
void ConvertOp(const Op& op, uint64_t* s) {
  s[op.out] = ToBits(ConvertElement<To>(BitsTo<From>(s[op.a])));
}

template <typename Order>
bool Apply(ComparisonDirection direction, const Order& a, const Order& b) {
  switch (direction) {
    case ComparisonDirection::kEq: return a == b;
    case ComparisonDirection::kNe: return a != b;
    case ComparisonDirection::kLt: return a < b;
    case ComparisonDirection::kLe: return a <= b;
    case ComparisonDirection::kGt: return a > b;
    case ComparisonDirection::kGe: return a >= b;
  }
  return false;
}

}  // namespace

uint64_t TotalOrderKey(PrimitiveType element, bool as_signed, uint64_t bits) {
  const int64_t width = hlo::ByteWidth(element);
  constexpr uint64_t kSign = uint64_t{1} << 63;
  if (hlo::IsFloating(element)) {
    int64_t s = SignExtend(bits, width);
    if (s < 0) {
      s ^= static_cast<int64_t>((uint64_t{1} << (width * 8 - 1)) - 1);
    }
    return static_cast<uint64_t>(s) ^ kSign;
  }
  if (as_signed) return static_cast<uint64_t>(SignExtend(bits, width)) ^ kSign;
  return bits;
}

bool CompareBits(PrimitiveType element, ComparisonType type,
                 ComparisonDirection direction, uint64_t a, uint64_t b) {
  if (hlo::IsFloating(element) && type != ComparisonType::kSigned &&
      type != ComparisonType::kUnsigned) {
    if (type == ComparisonType::kTotalOrder) {
      return Apply(direction, TotalOrderKey(element, true, a),
                   TotalOrderKey(element, true, b));
    }
    return hlo::VisitType(element, [&](auto tag) {
      using E = decltype(tag);
      if constexpr (kIsFloat<E>) {
        return Apply(direction, ToCompute(BitsTo<E>(a)), ToCompute(BitsTo<E>(b)));
      } else {
        return false;
      }
    });
  }
  bool as_signed = type == ComparisonType::kSigned ||
                   (type != ComparisonType::kUnsigned &&
                    (hlo::IsSignedInteger(element) || hlo::IsFloating(element)));
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
  if (root->operand_count() != 2 || !IsScalarArray(root->shape) ||
      !IsScalarArray(p0->shape) || !IsScalarArray(p1->shape) ||
      p0->shape.type() != root->shape.type() ||
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
    if (p == nullptr || !IsScalarArray(p->shape)) return std::nullopt;
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
    if (!IsScalarArray(instr->shape)) return std::nullopt;
    for (const Instruction* operand : instr->operands) {
      if (!IsScalarArray(operand->shape) || !slot.count(operand)) {
        return std::nullopt;
      }
    }
    const PrimitiveType type = instr->shape.type();
    Op op;
    auto operand_slot = [&](int64_t i) { return slot.at(instr->operand(i)); };
    auto operand_type = [&](int64_t i) {
      return instr->operand(i)->shape.type();
    };
    const int64_t arity = instr->operand_count();
    if (instr->opcode == Opcode::kConstant) {
      if (!instr->literal.has_value() || !IsScalarArray(instr->literal->shape()) ||
          instr->literal->shape().type() != type) {
        return std::nullopt;
      }
      int32_t s = new_slot(instr);
      program.initial_frame_[s] =
          LoadBits(instr->literal->untyped_data(), hlo::ByteWidth(type), 0);
      continue;
    }
    if (hlo::IsElementwiseBinary(instr->opcode) && arity == 2) {
      if (operand_type(0) != type || operand_type(1) != type) return std::nullopt;
      op.fn = hlo::VisitType(type, [&](auto tag) { return BinaryFn<decltype(tag)>(instr->opcode); });
      op.a = operand_slot(0);
      op.b = operand_slot(1);
    } else if (instr->opcode == Opcode::kIsFinite && arity == 1) {
      if (type != PrimitiveType::kPred || !hlo::IsFloating(operand_type(0))) {
        return std::nullopt;
      }
      op.fn = hlo::VisitType(operand_type(0), [&](auto tag) -> OpFn {
        using E = decltype(tag);
        if constexpr (kIsFloat<E>) {
          return &IsFiniteOp<E>;
        } else {
          return nullptr;
        }
      });
      op.a = operand_slot(0);
    } else if (hlo::IsElementwiseUnary(instr->opcode) && arity == 1) {
      if (operand_type(0) != type) return std::nullopt;
      op.fn = hlo::VisitType(type, [&](auto tag) { return UnaryFn<decltype(tag)>(instr->opcode); });
      op.a = operand_slot(0);
    } else if (instr->opcode == Opcode::kCompare && arity == 2) {
      if (type != PrimitiveType::kPred || operand_type(0) != operand_type(1)) {
        return std::nullopt;
      }
      op.fn = &CompareOp;
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
      op.fn = &SelectOp;
      op.a = operand_slot(0);
      op.b = operand_slot(1);
      op.c = operand_slot(2);
    } else if (instr->opcode == Opcode::kClamp && arity == 3) {
      if (operand_type(0) != type || operand_type(1) != type ||
          operand_type(2) != type) {
        return std::nullopt;
      }
      op.fn = hlo::VisitType(type, [&](auto tag) -> OpFn {
        using E = decltype(tag);
        if constexpr (std::is_same_v<E, bool>) {
          return nullptr;
        } else {
          return &ClampOp<E>;
        }
      });
      op.a = operand_slot(0);
      op.b = operand_slot(1);
      op.c = operand_slot(2);
    } else if (instr->opcode == Opcode::kConvert && arity == 1) {
      op.fn = hlo::VisitType(type, [&](auto to_tag) {
        return hlo::VisitType(operand_type(0), [&](auto from_tag) -> OpFn {
          return &ConvertOp<decltype(to_tag), decltype(from_tag)>;
        });
      });
      op.a = operand_slot(0);
    } else if ((instr->opcode == Opcode::kBitcastConvert ||
                instr->opcode == Opcode::kBitcast ||
                instr->opcode == Opcode::kCopy ||
                instr->opcode == Opcode::kReshape) &&
               arity == 1) {
      if (hlo::ByteWidth(operand_type(0)) != hlo::ByteWidth(type) ||
          (type == PrimitiveType::kPred) != (operand_type(0) == PrimitiveType::kPred)) {
        return std::nullopt;
      }
      op.fn = &MoveOp;
      op.a = operand_slot(0);
    } else {
      return std::nullopt;
    }
    if (op.fn == nullptr) return std::nullopt;
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
    result_types_.push_back(IsScalarArray(root->shape) ? root->shape.type()
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
      return absl::InternalError(absl::StrCat(
          "computation ", computation_.name(), " returned ",
          out.shape().ToString(), ", expected a scalar"));
    }
    results[0] = LoadBits(out.untyped_data(),
                          hlo::ByteWidth(out.shape().type()), 0);
  }
  return absl::OkStatus();
}

}  // namespace causeway::exec
