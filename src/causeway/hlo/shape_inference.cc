#include "causeway/hlo/shape_inference.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/status.h"
#include "causeway/hlo/custom_call.h"

namespace causeway::hlo {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// absl 20220623's string_view is not std::string_view; StrCat needs this.
std::string Str(std::string_view text) { return std::string(text); }
std::string ShapeStr(const Shape& shape) { return shape.ToString(false); }
std::string TypeStr(PrimitiveType type) { return Str(PrimitiveTypeName(type)); }
std::string ListStr(const std::vector<int64_t>& values) {
  return absl::StrCat("{", absl::StrJoin(values, ","), "}");
}

bool Contains(const std::vector<int64_t>& values, int64_t value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
  return result;
}

std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
  return result;
}

std::optional<int64_t> CheckedWindowOutputSize(int64_t input_size,
                                               const WindowDimension& w) {
  using Wide = __int128;
  Wide dilated_base =
      input_size <= 0 ? 0 : Wide(input_size - 1) * w.base_dilation + 1;
  Wide padded = dilated_base + w.padding_low + w.padding_high;
  Wide dilated_window = Wide(w.size - 1) * w.window_dilation + 1;
  if (padded < dilated_window) return 0;
  Wide out = (padded - dilated_window) / w.stride + 1;
  if (out > kInt64Max) return std::nullopt;
  return static_cast<int64_t>(out);
}

bool IsNumeric(PrimitiveType type) {
  return IsInteger(type) || IsFloating(type) || IsMinifloat(type) ||
         IsComplex(type);
}

// Floats of every width: the minifloats compute as wider floats (as XLA's
// float normalization makes them).
bool IsAnyFloat(PrimitiveType type) {
  return IsFloating(type) || IsMinifloat(type);
}

// The unary ops XLA's elemental emitter has complex forms of.
bool AcceptsComplex(Opcode op) {
  switch (op) {
    case Opcode::kNegate:
    case Opcode::kAbs:
    case Opcode::kSign:
    case Opcode::kExp:
    case Opcode::kExpm1:
    case Opcode::kLog:
    case Opcode::kLog1p:
    case Opcode::kSqrt:
    case Opcode::kRsqrt:
    case Opcode::kSin:
    case Opcode::kCos:
    case Opcode::kTan:
    case Opcode::kTanh:
    case Opcode::kAdd:
    case Opcode::kSubtract:
    case Opcode::kMultiply:
    case Opcode::kDivide:
    case Opcode::kPower:
      return true;
    default:
      return false;
  }
}

// Infers one instruction's shape. Holds the instruction for error messages.
class Inferrer {
 public:
  Inferrer(const Instruction& instr, const DeviceCounts* counts)
      : instr_(instr), counts_(counts) {}

  absl::StatusOr<Shape> Infer() {
    for (int64_t i = 0; i < instr_.operand_count(); ++i) {
      if (instr_.operands[i] == nullptr) {
        return Error("operand ", i, " is missing");
      }
    }
    for (size_t i = 0; i < instr_.called_computations.size(); ++i) {
      if (instr_.called_computations[i] == nullptr) {
        return Error("called computation ", i, " is missing");
      }
    }
    CW_ASSIGN_OR_RETURN(Shape shape, InferByOpcode());
    CW_RETURN_IF_ERROR(CheckValid(shape, "result shape"));
    return shape;
  }

 private:
  template <typename... Args>
  absl::Status Error(const Args&... args) const {
    return absl::InvalidArgumentError(absl::StrCat(Where(), ": ", args...));
  }

  std::string Where() const {
    std::string where = absl::StrCat("instruction '", instr_.name, "'");
    if (instr_.line > 0) absl::StrAppend(&where, " (line ", instr_.line, ")");
    return where;
  }

  std::string OpName() const {
    return instr_.opcode == Opcode::kUnknown ? instr_.opcode_name
                                             : Str(OpcodeName(instr_.opcode));
  }

  const Shape& operand(int64_t i) const { return instr_.operands[i]->shape; }
  const Shape& declared() const { return instr_.shape; }

  // Dims non-negative and the byte size representable.
  absl::Status CheckValid(const Shape& shape, std::string_view what) const {
    if (shape.IsTuple()) {
      for (const Shape& element : shape.tuple_shapes()) {
        CW_RETURN_IF_ERROR(CheckValid(element, what));
      }
      return absl::OkStatus();
    }
    if (shape.IsToken()) return absl::OkStatus();
    if (!shape.IsArray()) {
      return Error(Str(what), " has no valid element type");
    }
    int64_t bytes = ByteWidth(shape.type());
    for (int64_t d : shape.dims()) {
      if (d < 0) {
        return Error(Str(what), " ", ShapeStr(shape),
                     " has a negative dimension");
      }
      std::optional<int64_t> product = CheckedMul(bytes, d);
      if (!product) {
        return Error(Str(what), " ", ShapeStr(shape), " is too large");
      }
      bytes = *product;
    }
    return absl::OkStatus();
  }

  absl::Status ExpectOperandCount(int64_t n) const {
    if (instr_.operand_count() != n) {
      return Error(OpName(), " expects ", n, " operand", n == 1 ? "" : "s",
                   " but has ", instr_.operand_count());
    }
    return absl::OkStatus();
  }

  absl::Status ExpectCalledCount(int64_t n) const {
    if (static_cast<int64_t>(instr_.called_computations.size()) != n) {
      return Error(OpName(), " expects ", n, " called computation",
                   n == 1 ? "" : "s", " but has ",
                   instr_.called_computations.size());
    }
    return absl::OkStatus();
  }

  absl::Status ExpectArray(const Shape& shape, std::string_view what) const {
    if (!shape.IsArray()) {
      return Error(Str(what), " must be an array but is ", ShapeStr(shape));
    }
    return absl::OkStatus();
  }

  absl::Status ExpectArrayOperand(int64_t i) const {
    return ExpectArray(operand(i), absl::StrCat("operand ", i));
  }

  absl::Status ExpectScalar(const Shape& shape, std::string_view what) const {
    if (!shape.IsArray() || shape.rank() != 0) {
      return Error(Str(what), " must be a scalar but is ", ShapeStr(shape));
    }
    return absl::OkStatus();
  }

  absl::Status ExpectDeclaredArray() const {
    if (!declared().IsArray()) {
      return Error(OpName(), " needs a declared array result shape, got '",
                   ShapeStr(declared()), "'");
    }
    return CheckValid(declared(), "declared shape");
  }

  // Every entry in [0, bound), no repeats, and ascending when `sorted`.
  absl::Status CheckDimList(const std::vector<int64_t>& dims, int64_t bound,
                            std::string_view what, bool sorted) const {
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < 0 || dims[i] >= bound) {
        return Error(Str(what), " ", ListStr(dims), " has entry ", dims[i],
                     " outside [0, ", bound, ")");
      }
      for (size_t j = 0; j < i; ++j) {
        if (dims[j] == dims[i]) {
          return Error(Str(what), " ", ListStr(dims), " repeats ", dims[i]);
        }
      }
      if (sorted && i > 0 && dims[i - 1] > dims[i]) {
        return Error(Str(what), " ", ListStr(dims), " must be ascending");
      }
    }
    return absl::OkStatus();
  }

  absl::Status CheckWindow(const std::vector<WindowDimension>& window,
                           int64_t rank) const {
    if (static_cast<int64_t>(window.size()) != rank) {
      return Error("window has ", window.size(),
                   " dimensions but the operand has rank ", rank);
    }
    constexpr int64_t kMaxWindowValue = int64_t{1} << 40;
    for (size_t i = 0; i < window.size(); ++i) {
      const WindowDimension& w = window[i];
      if (w.size < 1 || w.stride < 1 || w.base_dilation < 1 ||
          w.window_dilation < 1) {
        return Error(
            "window dimension ", i,
            " needs positive size, stride and dilations (size=", w.size,
            " stride=", w.stride, " lhs_dilate=", w.base_dilation,
            " rhs_dilate=", w.window_dilation, ")");
      }
      if (w.size > kMaxWindowValue || w.stride > kMaxWindowValue ||
          w.base_dilation > kMaxWindowValue ||
          w.window_dilation > kMaxWindowValue ||
          std::abs(w.padding_low) > kMaxWindowValue ||
          std::abs(w.padding_high) > kMaxWindowValue) {
        return Error("window dimension ", i, " has out-of-range values");
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<int64_t>> WindowOutputDims(
      const Shape& input, const std::vector<WindowDimension>& window) const {
    CW_RETURN_IF_ERROR(CheckWindow(window, input.rank()));
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < input.rank(); ++i) {
      std::optional<int64_t> size =
          CheckedWindowOutputSize(input.dim(i), window[i]);
      if (!size) return Error("window output dimension ", i, " is too large");
      dims.push_back(*size);
    }
    return dims;
  }

  const Computation* Called(size_t i) const {
    return instr_.called_computations[i];
  }

  absl::StatusOr<const Shape*> RootShape(const Computation* comp) const {
    if (comp->root() == nullptr) {
      return Error("called computation '", comp->name(), "' has no root");
    }
    return &comp->root()->shape;
  }

  absl::StatusOr<const Shape*> ParameterShape(const Computation* comp,
                                              int64_t i) const {
    if (comp->parameter(i) == nullptr) {
      return Error("called computation '", comp->name(), "' lacks parameter ",
                   i);
    }
    return &comp->parameter(i)->shape;
  }

  // `comp` takes exactly `args` (compatible shapes) as its parameters.
  absl::Status CheckParameters(const Computation* comp,
                               const std::vector<const Shape*>& args,
                               std::string_view role) const {
    if (comp->parameter_count() != static_cast<int64_t>(args.size())) {
      return Error(Str(role), " '", comp->name(), "' takes ",
                   comp->parameter_count(), " parameter",
                   comp->parameter_count() == 1 ? "" : "s", " but is given ",
                   args.size());
    }
    for (size_t i = 0; i < args.size(); ++i) {
      CW_ASSIGN_OR_RETURN(const Shape* param, ParameterShape(comp, i));
      if (!param->Compatible(*args[i])) {
        return Error(Str(role), " '", comp->name(), "' parameter ", i, " is ",
                     ShapeStr(*param), " but is given ", ShapeStr(*args[i]));
      }
    }
    return absl::OkStatus();
  }

  // A reducer over N values: parameters (acc_0..acc_{N-1}, x_0..x_{N-1})
  // are scalars of `acc_types` then `input_types`; the root is acc_types as
  // a scalar (N == 1) or a tuple of scalars.
  absl::Status CheckReducer(const Computation* comp,
                            const std::vector<PrimitiveType>& acc_types,
                            const std::vector<PrimitiveType>& input_types,
                            std::string_view role) const {
    size_t n = acc_types.size();
    if (comp->parameter_count() != static_cast<int64_t>(2 * n)) {
      return Error(Str(role), " '", comp->name(), "' must take ", 2 * n,
                   " scalar parameters but takes ", comp->parameter_count());
    }
    for (size_t i = 0; i < 2 * n; ++i) {
      CW_ASSIGN_OR_RETURN(const Shape* param, ParameterShape(comp, i));
      PrimitiveType want = i < n ? acc_types[i] : input_types[i - n];
      if (!param->Compatible(Shape::Scalar(want))) {
        return Error(Str(role), " '", comp->name(), "' parameter ", i,
                     " must be ", TypeStr(want), "[] but is ",
                     ShapeStr(*param));
      }
    }
    CW_ASSIGN_OR_RETURN(const Shape* root, RootShape(comp));
    Shape want_root = Shape::Scalar(acc_types[0]);
    if (n > 1) {
      std::vector<Shape> elements;
      for (PrimitiveType t : acc_types) elements.push_back(Shape::Scalar(t));
      want_root = Shape::Tuple(std::move(elements));
    }
    if (!root->Compatible(want_root)) {
      return Error(Str(role), " '", comp->name(), "' must return ",
                   ShapeStr(want_root), " but returns ", ShapeStr(*root));
    }
    return absl::OkStatus();
  }

  // A binary reducer (T, T) -> T for some scalar type T; returns T.
  absl::StatusOr<PrimitiveType> CheckBinaryReducer(
      const Computation* comp, std::string_view role) const {
    if (comp->parameter_count() != 2) {
      return Error(Str(role), " '", comp->name(),
                   "' must take 2 scalar parameters but takes ",
                   comp->parameter_count());
    }
    CW_ASSIGN_OR_RETURN(const Shape* p0, ParameterShape(comp, 0));
    CW_RETURN_IF_ERROR(ExpectScalar(
        *p0, absl::StrCat(Str(role), " '", comp->name(), "' parameter 0")));
    PrimitiveType type = p0->type();
    CW_RETURN_IF_ERROR(CheckReducer(comp, {type}, {type}, role));
    return type;
  }

  absl::StatusOr<Shape> InferByOpcode() {
    const Opcode op = instr_.opcode;
    if (IsElementwiseUnary(op)) return Unary();
    if (IsElementwiseBinary(op)) return Binary();
    switch (op) {
      case Opcode::kParameter:
        return Parameter();
      case Opcode::kConstant:
        return Constant();
      case Opcode::kTuple:
        return TupleOp();
      case Opcode::kGetTupleElement:
        return GetTupleElement();
      case Opcode::kFusion:
      case Opcode::kCall:
        return CallOp();
      case Opcode::kWhile:
        return While();
      case Opcode::kConditional:
        return Conditional();
      case Opcode::kCopy:
      case Opcode::kOptimizationBarrier:
        CW_RETURN_IF_ERROR(ExpectOperandCount(1));
        return operand(0);
      case Opcode::kBitcast:
        return Bitcast();
      case Opcode::kCompare:
        return Compare();
      case Opcode::kSelect:
        return Select();
      case Opcode::kClamp:
        return Clamp();
      case Opcode::kConvert:
        return Convert();
      case Opcode::kBitcastConvert:
        return BitcastConvert();
      case Opcode::kReducePrecision:
        return ReducePrecision();
      case Opcode::kBroadcast:
        return Broadcast();
      case Opcode::kReshape:
        return Reshape();
      case Opcode::kTranspose:
        return Transpose();
      case Opcode::kSlice:
        return Slice();
      case Opcode::kConcatenate:
        return Concatenate();
      case Opcode::kPad:
        return Pad();
      case Opcode::kIota:
        return Iota();
      case Opcode::kReverse:
        return Reverse();
      case Opcode::kDynamicSlice:
        return DynamicSlice();
      case Opcode::kDynamicUpdateSlice:
        return DynamicUpdateSlice();
      case Opcode::kGather:
        return Gather();
      case Opcode::kScatter:
        return Scatter();
      case Opcode::kReduce:
        return Reduce();
      case Opcode::kReduceWindow:
        return ReduceWindow();
      case Opcode::kSelectAndScatter:
        return SelectAndScatter();
      case Opcode::kDot:
        return Dot();
      case Opcode::kConvolution:
        return Convolution();
      case Opcode::kSort:
        return Sort();
      case Opcode::kRngBitGenerator:
        return RngBitGenerator();
      case Opcode::kPartitionId:
      case Opcode::kReplicaId:
        CW_RETURN_IF_ERROR(ExpectOperandCount(0));
        return Shape::Scalar(PrimitiveType::kU32);
      case Opcode::kAllReduce:
        return AllReduce();
      case Opcode::kAllGather:
      case Opcode::kReduceScatter:
        return AllGatherOrReduceScatter();
      case Opcode::kAllToAll:
        return AllToAll();
      case Opcode::kCollectivePermute:
        return CollectivePermute();
      case Opcode::kAfterAll:
        return AfterAll();
      case Opcode::kMap:
        return Map();
      case Opcode::kReal:
      case Opcode::kImag:
        return RealOrImag();
      case Opcode::kComplex:
        return ComplexOp();
      case Opcode::kFft:
        return Fft();
      case Opcode::kCustomCall:
        if (instr_.custom_call_target == kTopKTarget) return TopK();
        if (auto lapack = ParseLapackTarget(instr_.custom_call_target)) {
          return Lapack(*lapack);
        }
        return UnsupportedCustomCall(instr_);
      default:
        return absl::UnimplementedError(
            absl::StrCat(Where(), ": unsupported op '", OpName(), "'"));
    }
  }

  // ---- Structure --------------------------------------------------------

  absl::StatusOr<Shape> Parameter() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(0));
    if (instr_.parameter_number < 0) {
      return Error("parameter number ", instr_.parameter_number,
                   " is negative");
    }
    if (!declared().IsArray() && !declared().IsTuple() &&
        !declared().IsToken()) {
      return Error("parameter has no valid shape");
    }
    CW_RETURN_IF_ERROR(CheckValid(declared(), "declared shape"));
    return declared();
  }

  absl::StatusOr<Shape> Constant() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(0));
    if (!instr_.literal.has_value()) {
      return Error("constant has no value");
    }
    return instr_.literal->shape();
  }

  absl::StatusOr<Shape> TupleOp() {
    std::vector<Shape> elements;
    for (int64_t i = 0; i < instr_.operand_count(); ++i) {
      elements.push_back(operand(i));
    }
    return Shape::Tuple(std::move(elements));
  }

  absl::StatusOr<Shape> GetTupleElement() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    const Shape& tuple = operand(0);
    if (!tuple.IsTuple()) {
      return Error("get-tuple-element operand must be a tuple but is ",
                   ShapeStr(tuple));
    }
    int64_t size = static_cast<int64_t>(tuple.tuple_shapes().size());
    if (instr_.tuple_index < 0 || instr_.tuple_index >= size) {
      return Error("tuple index ", instr_.tuple_index, " is out of range for ",
                   ShapeStr(tuple), " with ", size, " elements");
    }
    return tuple.tuple_shape(instr_.tuple_index);
  }

  std::vector<const Shape*> OperandShapes(int64_t begin, int64_t end) const {
    std::vector<const Shape*> shapes;
    for (int64_t i = begin; i < end; ++i) shapes.push_back(&operand(i));
    return shapes;
  }

  absl::StatusOr<Shape> CallOp() {
    CW_RETURN_IF_ERROR(ExpectCalledCount(1));
    const Computation* comp = Called(0);
    std::string role = instr_.opcode == Opcode::kFusion ? "fused computation"
                                                        : "called computation";
    CW_RETURN_IF_ERROR(
        CheckParameters(comp, OperandShapes(0, instr_.operand_count()), role));
    CW_ASSIGN_OR_RETURN(const Shape* root, RootShape(comp));
    return *root;
  }

  absl::StatusOr<Shape> While() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectCalledCount(2));
    const Shape& init = operand(0);
    const Computation* condition = Called(0);
    const Computation* body = Called(1);
    CW_RETURN_IF_ERROR(CheckParameters(condition, {&init}, "condition"));
    CW_RETURN_IF_ERROR(CheckParameters(body, {&init}, "body"));
    CW_ASSIGN_OR_RETURN(const Shape* cond_root, RootShape(condition));
    if (!cond_root->Compatible(Shape::Scalar(PrimitiveType::kPred))) {
      return Error("condition '", condition->name(),
                   "' must return pred[] but returns ", ShapeStr(*cond_root));
    }
    CW_ASSIGN_OR_RETURN(const Shape* body_root, RootShape(body));
    if (!body_root->Compatible(init)) {
      return Error("body '", body->name(), "' returns ", ShapeStr(*body_root),
                   " but the loop state is ", ShapeStr(init));
    }
    return init;
  }

  absl::StatusOr<Shape> Conditional() {
    if (instr_.operand_count() < 1) {
      return Error("conditional needs a branch index operand");
    }
    const Shape& index = operand(0);
    int64_t branches = static_cast<int64_t>(instr_.called_computations.size());
    if (!index.Compatible(Shape::Scalar(PrimitiveType::kPred)) &&
        !index.Compatible(Shape::Scalar(PrimitiveType::kS32))) {
      return Error("branch index must be s32[] or pred[] but is ",
                   ShapeStr(index));
    }
    if (index.type() == PrimitiveType::kPred && branches != 2) {
      return Error("a pred branch index needs 2 branches but there are ",
                   branches);
    }
    if (branches < 1) return Error("conditional has no branches");
    if (instr_.operand_count() != branches + 1) {
      return Error("conditional has ", branches, " branches but ",
                   instr_.operand_count() - 1, " branch operands");
    }
    CW_ASSIGN_OR_RETURN(const Shape* first_root, RootShape(Called(0)));
    for (int64_t b = 0; b < branches; ++b) {
      const Computation* branch = Called(b);
      CW_RETURN_IF_ERROR(CheckParameters(branch, {&operand(b + 1)},
                                         absl::StrCat("branch ", b)));
      CW_ASSIGN_OR_RETURN(const Shape* root, RootShape(branch));
      if (!root->Compatible(*first_root)) {
        return Error("branch ", b, " '", branch->name(), "' returns ",
                     ShapeStr(*root), " but branch 0 returns ",
                     ShapeStr(*first_root));
      }
    }
    return *first_root;
  }

  absl::StatusOr<Shape> Bitcast() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    CW_RETURN_IF_ERROR(ExpectDeclaredArray());
    if (declared().ByteSize() != operand(0).ByteSize()) {
      return Error("bitcast from ", ShapeStr(operand(0)), " (",
                   operand(0).ByteSize(), " bytes) to ", ShapeStr(declared()),
                   " (", declared().ByteSize(), " bytes) changes the size");
    }
    return declared();
  }

  // ---- Elementwise ------------------------------------------------------

  absl::StatusOr<Shape> Unary() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    const Shape& x = operand(0);
    PrimitiveType t = x.type();
    std::string_view need;
    switch (instr_.opcode) {
      case Opcode::kNot:
        if (t != PrimitiveType::kPred && !IsInteger(t))
          need = "pred or integer";
        break;
      case Opcode::kPopcnt:
      case Opcode::kClz:
        if (!IsInteger(t)) need = "integer";
        break;
      case Opcode::kNegate:
      case Opcode::kAbs:
        if (!IsNumeric(t)) need = "integer, floating-point or complex";
        break;
      case Opcode::kSign:
        if (!IsSignedInteger(t) && !IsAnyFloat(t) && !IsComplex(t)) {
          need = "signed integer, floating-point or complex";
        }
        break;
      default:  // Transcendental and rounding ops.
        if (IsComplex(t)) {
          if (!AcceptsComplex(instr_.opcode)) need = "floating-point";
        } else if (!IsAnyFloat(t)) {
          need = AcceptsComplex(instr_.opcode) ? "floating-point or complex"
                                               : "floating-point";
        }
        break;
    }
    if (!need.empty()) {
      return Error(OpName(), " needs a ", Str(need), " operand but got ",
                   ShapeStr(x));
    }
    if (instr_.opcode == Opcode::kIsFinite) {
      return Shape(PrimitiveType::kPred, x.dims());
    }
    if (instr_.opcode == Opcode::kAbs && IsComplex(t)) {
      return Shape(ComplexComponentType(t), x.dims());
    }
    return Shape(t, x.dims());
  }

  absl::Status ExpectSameArrays(int64_t a, int64_t b) const {
    CW_RETURN_IF_ERROR(ExpectArrayOperand(a));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(b));
    if (operand(a).dims() != operand(b).dims() ||
        operand(a).type() != operand(b).type()) {
      return Error(OpName(), " operands ", a, " and ", b,
                   " must have the same shape but are ", ShapeStr(operand(a)),
                   " and ", ShapeStr(operand(b)));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Shape> Binary() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(2));
    CW_RETURN_IF_ERROR(ExpectSameArrays(0, 1));
    PrimitiveType t = operand(0).type();
    std::string_view need;
    switch (instr_.opcode) {
      case Opcode::kAnd:
      case Opcode::kOr:
      case Opcode::kXor:
        if (t != PrimitiveType::kPred && !IsInteger(t))
          need = "pred or integer";
        break;
      case Opcode::kShiftLeft:
      case Opcode::kShiftRightLogical:
      case Opcode::kShiftRightArithmetic:
        if (!IsInteger(t)) need = "integer";
        break;
      case Opcode::kAtan2:
        if (!IsAnyFloat(t)) need = "floating-point";
        break;
      default:
        if (IsComplex(t) && !AcceptsComplex(instr_.opcode)) {
          need = "integer or floating-point";
        }
        break;
    }
    if (!need.empty()) {
      return Error(OpName(), " needs ", Str(need), " operands but got ",
                   ShapeStr(operand(0)));
    }
    return Shape(t, operand(0).dims());
  }

  // real, imag: the real or imaginary part of a complex (of a float: the
  // value, or zeros).
  absl::StatusOr<Shape> RealOrImag() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    const Shape& x = operand(0);
    if (IsComplex(x.type())) {
      return Shape(ComplexComponentType(x.type()), x.dims());
    }
    if (!IsFloating(x.type())) {
      return Error(OpName(), " needs a complex or floating-point operand but "
                   "got ", ShapeStr(x));
    }
    return x;
  }

  // complex(real, imag): f32 parts give c64, f64 parts c128.
  absl::StatusOr<Shape> ComplexOp() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(2));
    CW_RETURN_IF_ERROR(ExpectSameArrays(0, 1));
    const PrimitiveType t = operand(0).type();
    if (t != PrimitiveType::kF32 && t != PrimitiveType::kF64) {
      return Error("complex needs f32 or f64 parts but got ",
                   ShapeStr(operand(0)));
    }
    return Shape(ComplexTypeOf(t), operand(0).dims());
  }

  absl::StatusOr<Shape> Fft() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    absl::StatusOr<Shape> shape =
        InferFftShape(operand(0), instr_.fft_type, instr_.fft_length);
    if (!shape.ok()) return Error(shape.status().message());
    return *shape;
  }

  absl::StatusOr<Shape> Compare() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(2));
    CW_RETURN_IF_ERROR(ExpectSameArrays(0, 1));
    PrimitiveType t = operand(0).type();
    bool ok = true;
    switch (instr_.comparison_type) {
      case ComparisonType::kDefault:
        if (IsComplex(t)) {
          ok = instr_.comparison_direction == ComparisonDirection::kEq ||
               instr_.comparison_direction == ComparisonDirection::kNe;
          if (!ok) {
            return Error("complex values compare only for EQ and NE, not ",
                         ShapeStr(operand(0)), " with another direction");
          }
        }
        break;
      case ComparisonType::kFloat:
      case ComparisonType::kTotalOrder:
        ok = IsAnyFloat(t);
        break;
      case ComparisonType::kSigned:
        ok = IsSignedInteger(t);
        break;
      case ComparisonType::kUnsigned:
        ok = IsUnsignedInteger(t) || t == PrimitiveType::kPred;
        break;
    }
    if (!ok) {
      return Error("comparison type does not fit operand type ", TypeStr(t));
    }
    return Shape(PrimitiveType::kPred, operand(0).dims());
  }

  absl::StatusOr<Shape> Select() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(3));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    CW_RETURN_IF_ERROR(ExpectSameArrays(1, 2));
    const Shape& pred = operand(0);
    if (pred.type() != PrimitiveType::kPred) {
      return Error("select predicate must be pred but is ", ShapeStr(pred));
    }
    if (pred.rank() != 0 && pred.dims() != operand(1).dims()) {
      return Error("select predicate ", ShapeStr(pred),
                   " must be a scalar or match the operands' dims ",
                   ShapeStr(operand(1)));
    }
    return operand(1);
  }

  absl::StatusOr<Shape> Clamp() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(3));
    for (int64_t i = 0; i < 3; ++i) CW_RETURN_IF_ERROR(ExpectArrayOperand(i));
    const Shape& x = operand(1);
    for (int64_t i : {0, 2}) {
      const Shape& bound = operand(i);
      std::string_view which = i == 0 ? "min" : "max";
      if (bound.type() != x.type()) {
        return Error("clamp ", Str(which), " ", ShapeStr(bound),
                     " has a different element type than the operand ",
                     ShapeStr(x));
      }
      if (bound.rank() != 0 && bound.dims() != x.dims()) {
        return Error("clamp ", Str(which), " ", ShapeStr(bound),
                     " must be a scalar or match the operand ", ShapeStr(x));
      }
    }
    return x;
  }

  absl::StatusOr<Shape> Convert() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    CW_RETURN_IF_ERROR(ExpectDeclaredArray());
    if (declared().dims() != operand(0).dims()) {
      return Error("convert from ", ShapeStr(operand(0)), " to ",
                   ShapeStr(declared()), " changes the dims");
    }
    if (IsComplex(operand(0).type()) && !IsComplex(declared().type())) {
      // As XLA: take the real part with `real`.
      return Error("convert from complex ", ShapeStr(operand(0)),
                   " to real ", ShapeStr(declared()),
                   " is not defined (use real or imag)");
    }
    return declared();
  }

  absl::StatusOr<Shape> BitcastConvert() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    CW_RETURN_IF_ERROR(ExpectDeclaredArray());
    const Shape& in = operand(0);
    // Causeway stores sub-byte values one per byte, so splitting a byte
    // into nibbles is not a reinterpretation of its storage.
    for (PrimitiveType t : {in.type(), declared().type()}) {
      if (BitWidth(t) < 8) {
        return Error("bitcast-convert from ", ShapeStr(in), " to ",
                     ShapeStr(declared()),
                     " is not supported (sub-byte element types)");
      }
    }
    int64_t in_width = ByteWidth(in.type());
    int64_t out_width = ByteWidth(declared().type());
    std::vector<int64_t> want = in.dims();
    if (in_width > out_width) {
      want.push_back(in_width / out_width);
    } else if (in_width < out_width) {
      if (in.rank() == 0 || in.dims().back() != out_width / in_width) {
        return Error("bitcast-convert from ", ShapeStr(in), " to ",
                     TypeStr(declared().type()), " needs a last dim of size ",
                     out_width / in_width);
      }
      want.pop_back();
    }
    if (declared().dims() != want) {
      return Error("bitcast-convert from ", ShapeStr(in), " must give ",
                   ShapeStr(Shape(declared().type(), want)), " but declares ",
                   ShapeStr(declared()));
    }
    return declared();
  }

  absl::StatusOr<Shape> ReducePrecision() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    if (!IsFloating(operand(0).type())) {
      return Error("reduce-precision needs a floating-point operand but got ",
                   ShapeStr(operand(0)));
    }
    if (instr_.exponent_bits < 1 || instr_.mantissa_bits < 0) {
      return Error(
          "reduce-precision needs exponent_bits >= 1 and "
          "mantissa_bits >= 0 but has ",
          instr_.exponent_bits, " and ", instr_.mantissa_bits);
    }
    return operand(0);
  }

  // ---- Shape manipulation ----------------------------------------------

  absl::StatusOr<Shape> Broadcast() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    CW_RETURN_IF_ERROR(ExpectDeclaredArray());
    const Shape& in = operand(0);
    const Shape& out = declared();
    if (in.type() != out.type()) {
      return Error("broadcast of ", ShapeStr(in), " to ", ShapeStr(out),
                   " changes the element type");
    }
    const std::vector<int64_t>& dims = instr_.dimensions;
    if (static_cast<int64_t>(dims.size()) != in.rank()) {
      return Error("broadcast dimensions ", ListStr(dims), " has ", dims.size(),
                   " entries but the operand has rank ", in.rank());
    }
    CW_RETURN_IF_ERROR(
        CheckDimList(dims, out.rank(), "broadcast dimensions", false));
    for (int64_t i = 0; i < in.rank(); ++i) {
      if (in.dim(i) != out.dim(dims[i])) {
        return Error("broadcast maps operand dim ", i, " (size ", in.dim(i),
                     ") to output dim ", dims[i], " of size ",
                     out.dim(dims[i]));
      }
    }
    return out;
  }

  absl::StatusOr<Shape> Reshape() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    CW_RETURN_IF_ERROR(ExpectDeclaredArray());
    const Shape& in = operand(0);
    if (in.type() != declared().type() ||
        in.ElementCount() != declared().ElementCount()) {
      return Error("reshape from ", ShapeStr(in), " (", in.ElementCount(),
                   " elements) to ", ShapeStr(declared()), " (",
                   declared().ElementCount(),
                   " elements) must keep the element type and count");
    }
    return declared();
  }

  absl::StatusOr<Shape> Transpose() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    const Shape& in = operand(0);
    const std::vector<int64_t>& perm = instr_.dimensions;
    if (static_cast<int64_t>(perm.size()) != in.rank()) {
      return Error("transpose dimensions ", ListStr(perm),
                   " is not a permutation of the operand's ", in.rank(),
                   " dims");
    }
    CW_RETURN_IF_ERROR(
        CheckDimList(perm, in.rank(), "transpose dimensions", false));
    std::vector<int64_t> dims;
    for (int64_t p : perm) dims.push_back(in.dim(p));
    return Shape(in.type(), dims);
  }

  absl::StatusOr<Shape> Slice() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    const Shape& in = operand(0);
    if (static_cast<int64_t>(instr_.slice.size()) != in.rank()) {
      return Error("slice has ", instr_.slice.size(),
                   " dimensions but the operand ", ShapeStr(in), " has rank ",
                   in.rank());
    }
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < in.rank(); ++i) {
      const SliceDimension& s = instr_.slice[i];
      if (s.start < 0 || s.start > s.limit || s.limit > in.dim(i) ||
          s.stride < 1) {
        return Error("slice dimension ", i, " [", s.start, ":", s.limit, ":",
                     s.stride, "] does not fit operand dim of size ",
                     in.dim(i));
      }
      dims.push_back((s.limit - s.start + s.stride - 1) / s.stride);
    }
    return Shape(in.type(), dims);
  }

  absl::StatusOr<Shape> Concatenate() {
    if (instr_.operand_count() < 1) {
      return Error("concatenate needs at least one operand");
    }
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    const Shape& first = operand(0);
    if (instr_.dimensions.size() != 1) {
      return Error("concatenate needs exactly one dimension but has ",
                   ListStr(instr_.dimensions));
    }
    int64_t d = instr_.dimensions[0];
    if (d < 0 || d >= first.rank()) {
      return Error("concatenate dimension ", d, " is out of range for ",
                   ShapeStr(first));
    }
    std::vector<int64_t> dims = first.dims();
    for (int64_t i = 1; i < instr_.operand_count(); ++i) {
      CW_RETURN_IF_ERROR(ExpectArrayOperand(i));
      const Shape& next = operand(i);
      bool same = next.type() == first.type() && next.rank() == first.rank();
      for (int64_t j = 0; same && j < first.rank(); ++j) {
        same = j == d || next.dim(j) == first.dim(j);
      }
      if (!same) {
        return Error("concatenate operand ", i, " ", ShapeStr(next),
                     " does not match operand 0 ", ShapeStr(first),
                     " outside dimension ", d);
      }
      std::optional<int64_t> sum = CheckedAdd(dims[d], next.dim(d));
      if (!sum) return Error("concatenated size overflows");
      dims[d] = *sum;
    }
    return Shape(first.type(), dims);
  }

  absl::StatusOr<Shape> Pad() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(2));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    const Shape& in = operand(0);
    CW_RETURN_IF_ERROR(ExpectScalar(operand(1), "padding value"));
    if (operand(1).type() != in.type()) {
      return Error("padding value ", ShapeStr(operand(1)),
                   " must have the operand's element type ",
                   TypeStr(in.type()));
    }
    if (static_cast<int64_t>(instr_.padding.size()) != in.rank()) {
      return Error("padding has ", instr_.padding.size(),
                   " dimensions but the operand ", ShapeStr(in), " has rank ",
                   in.rank());
    }
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < in.rank(); ++i) {
      const PaddingDimension& p = instr_.padding[i];
      if (p.interior < 0) {
        return Error("padding dimension ", i, " has negative interior ",
                     p.interior);
      }
      __int128 size =
          __int128(in.dim(i)) + p.low + p.high +
          __int128(std::max<int64_t>(in.dim(i) - 1, 0)) * p.interior;
      if (size < 0 || size > kInt64Max) {
        return Error("padding dimension ", i, " (", p.low, "_", p.high, "_",
                     p.interior, ") gives an invalid size for operand dim ",
                     in.dim(i));
      }
      dims.push_back(static_cast<int64_t>(size));
    }
    return Shape(in.type(), dims);
  }

  absl::StatusOr<Shape> Iota() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(0));
    CW_RETURN_IF_ERROR(ExpectDeclaredArray());
    if (instr_.iota_dimension < 0 ||
        instr_.iota_dimension >= declared().rank()) {
      return Error("iota_dimension ", instr_.iota_dimension,
                   " is out of range for ", ShapeStr(declared()));
    }
    if (!IsNumeric(declared().type())) {
      return Error("iota needs a numeric type but declares ",
                   ShapeStr(declared()));
    }
    return declared();
  }

  absl::StatusOr<Shape> Reverse() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    CW_RETURN_IF_ERROR(CheckDimList(instr_.dimensions, operand(0).rank(),
                                    "reverse dimensions", false));
    return operand(0);
  }

  // ---- Indexing ---------------------------------------------------------

  // Operands [first, first + count) are integer scalars of one type.
  absl::Status CheckIndexScalars(int64_t first, int64_t count) const {
    for (int64_t i = first; i < first + count; ++i) {
      const Shape& index = operand(i);
      if (!index.IsArray() || index.rank() != 0 || !IsInteger(index.type())) {
        return Error("start index operand ", i,
                     " must be an integer scalar but is ", ShapeStr(index));
      }
      if (index.type() != operand(first).type()) {
        return Error("start index operands must share one type but ", first,
                     " is ", ShapeStr(operand(first)), " and ", i, " is ",
                     ShapeStr(index));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Shape> DynamicSlice() {
    if (instr_.operand_count() < 1) {
      return Error("dynamic-slice needs an operand");
    }
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    const Shape& in = operand(0);
    CW_RETURN_IF_ERROR(ExpectOperandCount(1 + in.rank()));
    CW_RETURN_IF_ERROR(CheckIndexScalars(1, in.rank()));
    const std::vector<int64_t>& sizes = instr_.dynamic_slice_sizes;
    if (static_cast<int64_t>(sizes.size()) != in.rank()) {
      return Error("dynamic_slice_sizes ", ListStr(sizes), " has ",
                   sizes.size(), " entries but the operand ", ShapeStr(in),
                   " has rank ", in.rank());
    }
    for (int64_t i = 0; i < in.rank(); ++i) {
      if (sizes[i] < 0 || sizes[i] > in.dim(i)) {
        return Error("dynamic slice size ", sizes[i], " of dim ", i,
                     " exceeds the operand's size ", in.dim(i));
      }
    }
    return Shape(in.type(), sizes);
  }

  absl::StatusOr<Shape> DynamicUpdateSlice() {
    if (instr_.operand_count() < 2) {
      return Error("dynamic-update-slice needs an operand and an update");
    }
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(1));
    const Shape& in = operand(0);
    const Shape& update = operand(1);
    CW_RETURN_IF_ERROR(ExpectOperandCount(2 + in.rank()));
    CW_RETURN_IF_ERROR(CheckIndexScalars(2, in.rank()));
    if (update.type() != in.type() || update.rank() != in.rank()) {
      return Error("update ", ShapeStr(update),
                   " must have the operand's element type and rank ",
                   ShapeStr(in));
    }
    for (int64_t i = 0; i < in.rank(); ++i) {
      if (update.dim(i) > in.dim(i)) {
        return Error("update ", ShapeStr(update), " is larger than operand ",
                     ShapeStr(in), " in dim ", i);
      }
    }
    return in;
  }

  // The index dims with an implicit trailing 1 when index_vector_dim ==
  // rank; validates index_vector_dim.
  absl::StatusOr<std::vector<int64_t>> ExpandedIndexDims(
      const Shape& indices, int64_t index_vector_dim) const {
    if (!indices.IsArray() || !IsInteger(indices.type())) {
      return Error("indices must be an integer array but are ",
                   ShapeStr(indices));
    }
    if (index_vector_dim < 0 || index_vector_dim > indices.rank()) {
      return Error("index_vector_dim ", index_vector_dim,
                   " is out of range for indices ", ShapeStr(indices));
    }
    std::vector<int64_t> dims = indices.dims();
    if (index_vector_dim == indices.rank()) dims.push_back(1);
    return dims;
  }

  absl::Status CheckBatchingDims(const Shape& operand_shape,
                                 const std::vector<int64_t>& operand_dims,
                                 const std::vector<int64_t>& indices_dims,
                                 const std::vector<int64_t>& expanded,
                                 int64_t index_vector_dim,
                                 std::string_view operand_name,
                                 std::string_view indices_name) const {
    if (indices_dims.size() != operand_dims.size()) {
      return Error(Str(operand_name), " ", ListStr(operand_dims), " and ",
                   Str(indices_name), " ", ListStr(indices_dims),
                   " must have the same length");
    }
    CW_RETURN_IF_ERROR(CheckDimList(indices_dims,
                                    static_cast<int64_t>(expanded.size()),
                                    indices_name, false));
    for (size_t i = 0; i < indices_dims.size(); ++i) {
      if (indices_dims[i] == index_vector_dim) {
        return Error(Str(indices_name), " must not contain index_vector_dim ",
                     index_vector_dim);
      }
      if (operand_shape.dim(operand_dims[i]) != expanded[indices_dims[i]]) {
        return Error(Str(operand_name), " dim ", operand_dims[i], " has size ",
                     operand_shape.dim(operand_dims[i]),
                     " but indices batching dim ", indices_dims[i],
                     " has size ", expanded[indices_dims[i]]);
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Shape> Gather() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(2));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    const Shape& in = operand(0);
    const GatherDimensionNumbers& g = instr_.gather_dimension_numbers;
    CW_ASSIGN_OR_RETURN(std::vector<int64_t> expanded,
                        ExpandedIndexDims(operand(1), g.index_vector_dim));
    const int64_t ivd = g.index_vector_dim;
    if (static_cast<int64_t>(g.start_index_map.size()) != expanded[ivd]) {
      return Error("start_index_map has ", g.start_index_map.size(),
                   " entries but the index vector (indices dim ", ivd,
                   ") has size ", expanded[ivd]);
    }
    CW_RETURN_IF_ERROR(
        CheckDimList(g.start_index_map, in.rank(), "start_index_map", false));
    CW_RETURN_IF_ERROR(CheckDimList(g.collapsed_slice_dims, in.rank(),
                                    "collapsed_slice_dims", true));
    CW_RETURN_IF_ERROR(CheckDimList(g.operand_batching_dims, in.rank(),
                                    "operand_batching_dims", true));
    for (int64_t d : g.operand_batching_dims) {
      if (Contains(g.collapsed_slice_dims, d)) {
        return Error("dim ", d,
                     " is both a collapsed slice dim and a batching dim");
      }
    }
    CW_RETURN_IF_ERROR(CheckBatchingDims(
        in, g.operand_batching_dims, g.start_indices_batching_dims, expanded,
        ivd, "operand_batching_dims", "start_indices_batching_dims"));
    const std::vector<int64_t>& sizes = instr_.gather_slice_sizes;
    if (static_cast<int64_t>(sizes.size()) != in.rank()) {
      return Error("slice_sizes ", ListStr(sizes), " has ", sizes.size(),
                   " entries but the operand ", ShapeStr(in), " has rank ",
                   in.rank());
    }
    std::vector<int64_t> offset_sizes;
    for (int64_t i = 0; i < in.rank(); ++i) {
      if (sizes[i] < 0 || sizes[i] > in.dim(i)) {
        return Error("slice size ", sizes[i], " of dim ", i,
                     " does not fit the operand's size ", in.dim(i));
      }
      bool removed = Contains(g.collapsed_slice_dims, i) ||
                     Contains(g.operand_batching_dims, i);
      if (removed && sizes[i] > 1) {
        return Error("collapsed or batching dim ", i,
                     " must have slice size 0 or 1 but has ", sizes[i]);
      }
      if (!removed) offset_sizes.push_back(sizes[i]);
    }
    if (g.offset_dims.size() != offset_sizes.size()) {
      return Error("offset_dims ", ListStr(g.offset_dims), " has ",
                   g.offset_dims.size(), " entries but the slice keeps ",
                   offset_sizes.size(), " operand dims");
    }
    std::vector<int64_t> batch_sizes;
    for (int64_t i = 0; i < static_cast<int64_t>(expanded.size()); ++i) {
      if (i != ivd) batch_sizes.push_back(expanded[i]);
    }
    int64_t out_rank =
        static_cast<int64_t>(offset_sizes.size() + batch_sizes.size());
    CW_RETURN_IF_ERROR(
        CheckDimList(g.offset_dims, out_rank, "offset_dims", true));
    std::vector<int64_t> dims;
    size_t next_offset = 0, next_batch = 0;
    for (int64_t i = 0; i < out_rank; ++i) {
      if (Contains(g.offset_dims, i)) {
        dims.push_back(offset_sizes[next_offset++]);
      } else {
        dims.push_back(batch_sizes[next_batch++]);
      }
    }
    return Shape(in.type(), dims);
  }

  absl::StatusOr<Shape> Scatter() {
    int64_t count = instr_.operand_count();
    if (count < 3 || count % 2 == 0) {
      return Error("scatter needs N inputs, indices and N updates but has ",
                   count, " operands");
    }
    int64_t n = (count - 1) / 2;
    CW_RETURN_IF_ERROR(ExpectCalledCount(1));
    for (int64_t i = 0; i < count; ++i) {
      if (i != n) CW_RETURN_IF_ERROR(ExpectArrayOperand(i));
    }
    const Shape& in = operand(0);
    const Shape& updates = operand(n + 1);
    std::vector<PrimitiveType> types;
    std::vector<Shape> results;
    for (int64_t i = 0; i < n; ++i) {
      if (operand(i).dims() != in.dims()) {
        return Error("scatter input ", i, " ", ShapeStr(operand(i)),
                     " differs in dims from input 0 ", ShapeStr(in));
      }
      const Shape& u = operand(n + 1 + i);
      if (u.dims() != updates.dims() || u.type() != operand(i).type()) {
        return Error("scatter update ", i, " ", ShapeStr(u),
                     " must have input ", i, "'s type and update 0's dims ",
                     ShapeStr(updates));
      }
      types.push_back(operand(i).type());
      results.push_back(operand(i));
    }
    const ScatterDimensionNumbers& s = instr_.scatter_dimension_numbers;
    const int64_t ivd = s.index_vector_dim;
    CW_ASSIGN_OR_RETURN(std::vector<int64_t> expanded,
                        ExpandedIndexDims(operand(n), ivd));
    CW_RETURN_IF_ERROR(CheckDimList(s.update_window_dims, updates.rank(),
                                    "update_window_dims", true));
    CW_RETURN_IF_ERROR(CheckDimList(s.inserted_window_dims, in.rank(),
                                    "inserted_window_dims", true));
    CW_RETURN_IF_ERROR(CheckDimList(s.input_batching_dims, in.rank(),
                                    "input_batching_dims", true));
    for (int64_t d : s.input_batching_dims) {
      if (Contains(s.inserted_window_dims, d)) {
        return Error("dim ", d,
                     " is both an inserted window dim and a batching dim");
      }
    }
    if (static_cast<int64_t>(s.update_window_dims.size() +
                             s.inserted_window_dims.size() +
                             s.input_batching_dims.size()) != in.rank()) {
      return Error("update_window_dims ", ListStr(s.update_window_dims),
                   ", inserted_window_dims ", ListStr(s.inserted_window_dims),
                   " and input_batching_dims ", ListStr(s.input_batching_dims),
                   " must together cover the input's rank ", in.rank());
    }
    if (static_cast<int64_t>(s.scatter_dims_to_operand_dims.size()) !=
        expanded[ivd]) {
      return Error("scatter_dims_to_operand_dims has ",
                   s.scatter_dims_to_operand_dims.size(),
                   " entries but the index vector (indices dim ", ivd,
                   ") has size ", expanded[ivd]);
    }
    CW_RETURN_IF_ERROR(CheckDimList(s.scatter_dims_to_operand_dims, in.rank(),
                                    "scatter_dims_to_operand_dims", false));
    CW_RETURN_IF_ERROR(CheckBatchingDims(
        in, s.input_batching_dims, s.scatter_indices_batching_dims, expanded,
        ivd, "input_batching_dims", "scatter_indices_batching_dims"));
    std::vector<int64_t> scatter_sizes;
    for (int64_t i = 0; i < static_cast<int64_t>(expanded.size()); ++i) {
      if (i != ivd) scatter_sizes.push_back(expanded[i]);
    }
    if (updates.rank() != static_cast<int64_t>(s.update_window_dims.size() +
                                               scatter_sizes.size())) {
      return Error("updates ", ShapeStr(updates), " must have rank ",
                   s.update_window_dims.size() + scatter_sizes.size(),
                   " (window dims plus index batch dims)");
    }
    size_t window = 0, batch = 0;
    for (int64_t operand_dim = 0; operand_dim < in.rank(); ++operand_dim) {
      if (Contains(s.inserted_window_dims, operand_dim) ||
          Contains(s.input_batching_dims, operand_dim)) {
        continue;
      }
      int64_t update_dim = s.update_window_dims[window++];
      if (updates.dim(update_dim) > in.dim(operand_dim)) {
        return Error("updates window dim ", update_dim, " has size ",
                     updates.dim(update_dim), " but input dim ", operand_dim,
                     " has only ", in.dim(operand_dim));
      }
    }
    for (int64_t d = 0; d < updates.rank(); ++d) {
      if (Contains(s.update_window_dims, d)) continue;
      if (updates.dim(d) != scatter_sizes[batch]) {
        return Error("updates dim ", d, " has size ", updates.dim(d),
                     " but the matching indices dim has size ",
                     scatter_sizes[batch]);
      }
      ++batch;
    }
    CW_RETURN_IF_ERROR(CheckReducer(Called(0), types, types, "to_apply"));
    return n == 1 ? results[0] : Shape::Tuple(std::move(results));
  }

  // ---- Reductions -------------------------------------------------------

  // reduce / reduce-window operands: N arrays of equal dims, then N scalar
  // init values. Fills element types of inputs and inits.
  absl::Status CheckReduceOperands(
      std::vector<PrimitiveType>* input_types,
      std::vector<PrimitiveType>* init_types) const {
    int64_t count = instr_.operand_count();
    if (count < 2 || count % 2 != 0) {
      return Error(OpName(), " needs N inputs and N init values but has ",
                   count, " operands");
    }
    int64_t n = count / 2;
    for (int64_t i = 0; i < n; ++i) {
      CW_RETURN_IF_ERROR(ExpectArrayOperand(i));
      if (operand(i).dims() != operand(0).dims()) {
        return Error(OpName(), " input ", i, " ", ShapeStr(operand(i)),
                     " differs in dims from input 0 ", ShapeStr(operand(0)));
      }
      CW_RETURN_IF_ERROR(
          ExpectScalar(operand(n + i), absl::StrCat("init value ", i)));
      input_types->push_back(operand(i).type());
      init_types->push_back(operand(n + i).type());
    }
    return ExpectCalledCount(1);
  }

  static Shape MaybeTuple(const std::vector<PrimitiveType>& types,
                          const std::vector<int64_t>& dims) {
    if (types.size() == 1) return Shape(types[0], dims);
    std::vector<Shape> elements;
    for (PrimitiveType t : types) elements.push_back(Shape(t, dims));
    return Shape::Tuple(std::move(elements));
  }

  absl::StatusOr<Shape> Reduce() {
    std::vector<PrimitiveType> input_types, init_types;
    CW_RETURN_IF_ERROR(CheckReduceOperands(&input_types, &init_types));
    const Shape& in = operand(0);
    CW_RETURN_IF_ERROR(
        CheckDimList(instr_.dimensions, in.rank(), "reduce dimensions", false));
    CW_RETURN_IF_ERROR(
        CheckReducer(Called(0), init_types, input_types, "to_apply"));
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < in.rank(); ++i) {
      if (!Contains(instr_.dimensions, i)) dims.push_back(in.dim(i));
    }
    return MaybeTuple(init_types, dims);
  }

  absl::StatusOr<Shape> ReduceWindow() {
    std::vector<PrimitiveType> input_types, init_types;
    CW_RETURN_IF_ERROR(CheckReduceOperands(&input_types, &init_types));
    CW_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                        WindowOutputDims(operand(0), instr_.window));
    CW_RETURN_IF_ERROR(
        CheckReducer(Called(0), init_types, input_types, "to_apply"));
    return MaybeTuple(init_types, dims);
  }

  absl::StatusOr<Shape> SelectAndScatter() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(3));
    CW_RETURN_IF_ERROR(ExpectCalledCount(2));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(1));
    const Shape& in = operand(0);
    const Shape& source = operand(1);
    CW_RETURN_IF_ERROR(ExpectScalar(operand(2), "init value"));
    PrimitiveType t = in.type();
    if (source.type() != t || operand(2).type() != t) {
      return Error("select-and-scatter source ", ShapeStr(source),
                   " and init value ", ShapeStr(operand(2)),
                   " must have the operand's element type ", TypeStr(t));
    }
    CW_ASSIGN_OR_RETURN(std::vector<int64_t> window_dims,
                        WindowOutputDims(in, instr_.window));
    if (source.dims() != window_dims) {
      return Error("source ", ShapeStr(source),
                   " must have the window "
                   "output shape ",
                   ShapeStr(Shape(t, window_dims)));
    }
    const Computation* select = Called(0);
    Shape scalar = Shape::Scalar(t);
    CW_RETURN_IF_ERROR(CheckParameters(select, {&scalar, &scalar}, "select"));
    CW_ASSIGN_OR_RETURN(const Shape* select_root, RootShape(select));
    if (!select_root->Compatible(Shape::Scalar(PrimitiveType::kPred))) {
      return Error("select '", select->name(),
                   "' must return pred[] but "
                   "returns ",
                   ShapeStr(*select_root));
    }
    CW_RETURN_IF_ERROR(CheckReducer(Called(1), {t}, {t}, "scatter"));
    return in;
  }

  // ---- Contractions -----------------------------------------------------

  // dot and convolution keep the declared element type (it may be wider
  // than the operands'); built instructions default to the lhs type.
  absl::StatusOr<PrimitiveType> ContractionType() const {
    const Shape& lhs = operand(0);
    const Shape& rhs = operand(1);
    bool compatible = lhs.type() == rhs.type() ||
                      (IsAnyFloat(lhs.type()) && IsAnyFloat(rhs.type())) ||
                      (IsInteger(lhs.type()) && IsInteger(rhs.type()));
    if (!compatible) {
      return Error(OpName(), " operands ", ShapeStr(lhs), " and ",
                   ShapeStr(rhs), " have incompatible element types");
    }
    if (declared().IsArray()) return declared().type();
    if (declared().type() != PrimitiveType::kInvalid) {
      return Error(OpName(), " result must be an array but is declared ",
                   ShapeStr(declared()));
    }
    return lhs.type();
  }

  absl::StatusOr<Shape> Dot() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(2));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(1));
    const Shape& lhs = operand(0);
    const Shape& rhs = operand(1);
    const DotDimensionNumbers& d = instr_.dot_dimension_numbers;
    if (d.lhs_batch_dims.size() != d.rhs_batch_dims.size()) {
      return Error("lhs has ", d.lhs_batch_dims.size(),
                   " batch dims but rhs has ", d.rhs_batch_dims.size());
    }
    if (d.lhs_contracting_dims.size() != d.rhs_contracting_dims.size()) {
      return Error("lhs has ", d.lhs_contracting_dims.size(),
                   " contracting dims but rhs has ",
                   d.rhs_contracting_dims.size());
    }
    for (bool is_lhs : {true, false}) {
      const Shape& side = is_lhs ? lhs : rhs;
      std::vector<int64_t> used = is_lhs ? d.lhs_batch_dims : d.rhs_batch_dims;
      const std::vector<int64_t>& contracting =
          is_lhs ? d.lhs_contracting_dims : d.rhs_contracting_dims;
      used.insert(used.end(), contracting.begin(), contracting.end());
      CW_RETURN_IF_ERROR(CheckDimList(used, side.rank(),
                                      is_lhs ? "lhs batch and contracting dims"
                                             : "rhs batch and contracting dims",
                                      false));
    }
    for (size_t i = 0; i < d.lhs_batch_dims.size(); ++i) {
      int64_t l = d.lhs_batch_dims[i], r = d.rhs_batch_dims[i];
      if (lhs.dim(l) != rhs.dim(r)) {
        return Error("lhs batch dim ", l, " has size ", lhs.dim(l),
                     " but rhs batch dim ", r, " has size ", rhs.dim(r));
      }
    }
    for (size_t i = 0; i < d.lhs_contracting_dims.size(); ++i) {
      int64_t l = d.lhs_contracting_dims[i], r = d.rhs_contracting_dims[i];
      if (lhs.dim(l) != rhs.dim(r)) {
        return Error("lhs contracting dim ", l, " has size ", lhs.dim(l),
                     " but rhs contracting dim ", r, " has size ", rhs.dim(r));
      }
    }
    CW_ASSIGN_OR_RETURN(PrimitiveType type, ContractionType());
    std::vector<int64_t> dims;
    for (int64_t l : d.lhs_batch_dims) dims.push_back(lhs.dim(l));
    for (int64_t i = 0; i < lhs.rank(); ++i) {
      if (!Contains(d.lhs_batch_dims, i) &&
          !Contains(d.lhs_contracting_dims, i)) {
        dims.push_back(lhs.dim(i));
      }
    }
    for (int64_t i = 0; i < rhs.rank(); ++i) {
      if (!Contains(d.rhs_batch_dims, i) &&
          !Contains(d.rhs_contracting_dims, i)) {
        dims.push_back(rhs.dim(i));
      }
    }
    return Shape(type, dims);
  }

  absl::StatusOr<Shape> Convolution() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(2));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(1));
    const Shape& lhs = operand(0);
    const Shape& rhs = operand(1);
    const ConvolutionDimensionNumbers& c = instr_.convolution_dimension_numbers;
    const int64_t spatial =
        static_cast<int64_t>(c.input_spatial_dimensions.size());
    if (static_cast<int64_t>(c.kernel_spatial_dimensions.size()) != spatial ||
        static_cast<int64_t>(c.output_spatial_dimensions.size()) != spatial) {
      return Error("dim_labels give ", spatial, " input, ",
                   c.kernel_spatial_dimensions.size(), " kernel and ",
                   c.output_spatial_dimensions.size(),
                   " output spatial dims; they must agree");
    }
    if (static_cast<int64_t>(instr_.window.size()) != spatial) {
      return Error("window has ", instr_.window.size(),
                   " dimensions but the convolution has ", spatial,
                   " spatial dims");
    }
    if (lhs.rank() != spatial + 2 || rhs.rank() != spatial + 2) {
      return Error("convolution with ", spatial, " spatial dims needs rank-",
                   spatial + 2, " input and kernel but has ", ShapeStr(lhs),
                   " and ", ShapeStr(rhs));
    }
    auto all_dims = [](int64_t a, int64_t b, const std::vector<int64_t>& s) {
      std::vector<int64_t> dims = {a, b};
      dims.insert(dims.end(), s.begin(), s.end());
      return dims;
    };
    CW_RETURN_IF_ERROR(CheckDimList(
        all_dims(c.input_batch_dimension, c.input_feature_dimension,
                 c.input_spatial_dimensions),
        lhs.rank(), "input dim_labels", false));
    CW_RETURN_IF_ERROR(CheckDimList(all_dims(c.kernel_input_feature_dimension,
                                             c.kernel_output_feature_dimension,
                                             c.kernel_spatial_dimensions),
                                    rhs.rank(), "kernel dim_labels", false));
    CW_RETURN_IF_ERROR(CheckDimList(
        all_dims(c.output_batch_dimension, c.output_feature_dimension,
                 c.output_spatial_dimensions),
        lhs.rank(), "output dim_labels", false));
    const int64_t fgc = instr_.feature_group_count;
    const int64_t bgc = instr_.batch_group_count;
    if (fgc < 1 || bgc < 1) {
      return Error("feature_group_count ", fgc, " and batch_group_count ", bgc,
                   " must be positive");
    }
    if (fgc > 1 && bgc > 1) {
      return Error(
          "feature_group_count and batch_group_count cannot both "
          "exceed 1");
    }
    const int64_t batch = lhs.dim(c.input_batch_dimension);
    const int64_t in_features = lhs.dim(c.input_feature_dimension);
    const int64_t kernel_in = rhs.dim(c.kernel_input_feature_dimension);
    const int64_t kernel_out = rhs.dim(c.kernel_output_feature_dimension);
    if (in_features % fgc != 0 || in_features / fgc != kernel_in) {
      return Error("input feature dim has size ", in_features,
                   " but kernel input feature dim has size ", kernel_in,
                   " (with feature_group_count ", fgc, " it must be ",
                   in_features / fgc, " and divide evenly)");
    }
    if (kernel_out % fgc != 0) {
      return Error("kernel output feature size ", kernel_out,
                   " is not divisible by feature_group_count ", fgc);
    }
    if (kernel_out % bgc != 0 || batch % bgc != 0) {
      return Error("kernel output feature size ", kernel_out,
                   " and input batch size ", batch,
                   " must be divisible by batch_group_count ", bgc);
    }
    CW_RETURN_IF_ERROR(CheckWindow(instr_.window, spatial));
    std::vector<int64_t> dims(lhs.rank());
    dims[c.output_batch_dimension] = batch / bgc;
    dims[c.output_feature_dimension] = kernel_out;
    for (int64_t i = 0; i < spatial; ++i) {
      const WindowDimension& w = instr_.window[i];
      int64_t kernel_size = rhs.dim(c.kernel_spatial_dimensions[i]);
      if (w.size != kernel_size) {
        return Error("window size ", w.size, " of spatial dim ", i,
                     " differs from the kernel's size ", kernel_size);
      }
      std::optional<int64_t> size =
          CheckedWindowOutputSize(lhs.dim(c.input_spatial_dimensions[i]), w);
      if (!size) return Error("convolution output is too large");
      dims[c.output_spatial_dimensions[i]] = *size;
    }
    CW_ASSIGN_OR_RETURN(PrimitiveType type, ContractionType());
    return Shape(type, dims);
  }

  // ---- Sort and random --------------------------------------------------

  // map: scalar `to_apply` applied element by element to N operands of
  // one shape, over all of their dims.
  absl::StatusOr<Shape> Map() {
    const int64_t n = instr_.operand_count();
    if (n < 1) return Error("map needs at least one operand");
    CW_RETURN_IF_ERROR(ExpectCalledCount(1));
    std::vector<Shape> scalars;
    for (int64_t i = 0; i < n; ++i) {
      CW_RETURN_IF_ERROR(ExpectArrayOperand(i));
      if (operand(i).dims() != operand(0).dims()) {
        return Error("map operand ", i, " ", ShapeStr(operand(i)),
                     " differs in dims from operand 0 ", ShapeStr(operand(0)));
      }
      scalars.push_back(Shape::Scalar(operand(i).type()));
    }
    CW_RETURN_IF_ERROR(CheckDimList(instr_.dimensions, operand(0).rank(),
                                    "map dimensions", /*sorted=*/true));
    if (static_cast<int64_t>(instr_.dimensions.size()) != operand(0).rank()) {
      return Error("map must apply over every dim of rank ",
                   operand(0).rank(), ", not ", ListStr(instr_.dimensions));
    }
    std::vector<const Shape*> args;
    for (const Shape& scalar : scalars) args.push_back(&scalar);
    const Computation* f = Called(0);
    CW_RETURN_IF_ERROR(CheckParameters(f, args, "to_apply"));
    CW_ASSIGN_OR_RETURN(const Shape* root, RootShape(f));
    if (!root->IsArray() || root->rank() != 0) {
      return Error("map's to_apply '", f->name(),
                   "' must return a scalar, not ", ShapeStr(*root));
    }
    return Shape(root->type(), operand(0).dims());
  }

  // The TopK custom-call (custom_call.h): k comes from the declared result.
  absl::StatusOr<Shape> TopK() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    CW_RETURN_IF_ERROR(ExpectCalledCount(1));
    const Shape& input = operand(0);
    if (input.rank() < 1) return Error("TopK needs an operand of rank >= 1");
    const Shape& d = declared();
    if (!d.IsTuple() || d.tuple_shapes().size() != 2 ||
        !d.tuple_shape(0).IsArray() ||
        d.tuple_shape(0).rank() != input.rank()) {
      return Error("TopK must declare (values, indices) of rank ",
                   input.rank(), ", not ", ShapeStr(d));
    }
    const int64_t k = d.tuple_shape(0).dims().back();
    if (k < 0 || k > input.dims().back()) {
      return Error("TopK asks for the top ", k, " of ", input.dims().back(),
                   " elements");
    }
    std::vector<int64_t> dims = input.dims();
    dims.back() = k;
    const Shape scalar = Shape::Scalar(input.type());
    const Shape index = Shape::Scalar(PrimitiveType::kS32);
    const Computation* comparator = Called(0);
    CW_RETURN_IF_ERROR(CheckParameters(
        comparator, {&scalar, &scalar, &index, &index}, "comparator"));
    CW_ASSIGN_OR_RETURN(const Shape* root, RootShape(comparator));
    if (!root->Compatible(Shape::Scalar(PrimitiveType::kPred))) {
      return Error("comparator '", comparator->name(),
                   "' must return pred[] but returns ", ShapeStr(*root));
    }
    return Shape::Tuple({Shape(input.type(), dims),
                         Shape(PrimitiveType::kS32, std::move(dims))});
  }

  // The LAPACK custom-calls (custom_call.h). u and vt of gesdd come from
  // the declared shape (their size depends on the mode), checked for batch
  // dims, type and the sides they share with the operand.
  absl::StatusOr<Shape> Lapack(const LapackCall& call) {
    const bool two = call.routine == LapackRoutine::kTrsm ||
                     call.routine == LapackRoutine::kOrgqr;
    CW_RETURN_IF_ERROR(ExpectOperandCount(two ? 2 : 1));
    for (int64_t i = 0; i < instr_.operand_count(); ++i) {
      CW_RETURN_IF_ERROR(ExpectArrayOperand(i));
      if (operand(i).type() != call.type) {
        return Error(instr_.custom_call_target, " takes ",
                     Str(PrimitiveTypeName(call.type)), " operands, not ",
                     ShapeStr(operand(i)));
      }
    }
    const Shape& a = operand(0);
    const int64_t minimum = call.routine == LapackRoutine::kOrgqr ? 1 : 2;
    if (a.rank() < 2 || (two && operand(1).rank() < minimum)) {
      return Error(instr_.custom_call_target, " needs batches of matrices");
    }
    const std::vector<int64_t> batch(a.dims().begin(), a.dims().end() - 2);
    const int64_t m = a.dims()[a.rank() - 2], n = a.dims().back();
    const int64_t k = std::min(m, n);
    auto with = [&](std::vector<int64_t> tail) {
      std::vector<int64_t> dims = batch;
      dims.insert(dims.end(), tail.begin(), tail.end());
      return dims;
    };
    const Shape info(PrimitiveType::kS32, batch);
    const PrimitiveType t = call.type;
    switch (call.routine) {
      case LapackRoutine::kPotrf:
        if (m != n) return Error("potrf needs square matrices, not ", ShapeStr(a));
        return Shape::Tuple({a, info});
      case LapackRoutine::kTrsm: {
        const Shape& b = operand(1);
        if (m != n || b.rank() != a.rank() ||
            !std::equal(batch.begin(), batch.end(), b.dims().begin()) ||
            (b.dims()[b.rank() - 2] != m && b.dims().back() != m)) {
          return Error("trsm of ", ShapeStr(a), " and ", ShapeStr(b));
        }
        return b;
      }
      case LapackRoutine::kGetrf:
        return Shape::Tuple({a, Shape(PrimitiveType::kS32, with({k})), info});
      case LapackRoutine::kGeqrf:
        return Shape::Tuple({a, Shape(t, with({k}))});
      case LapackRoutine::kOrgqr: {
        const Shape& tau = operand(1);
        if (tau.rank() != a.rank() - 1 ||
            !std::equal(batch.begin(), batch.end(), tau.dims().begin()) ||
            tau.dims().back() > n || n > m) {
          return Error("orgqr of ", ShapeStr(a), " and ", ShapeStr(tau));
        }
        return a;
      }
      case LapackRoutine::kSyevd:
        if (m != n) return Error("syevd needs square matrices, not ", ShapeStr(a));
        return Shape::Tuple({a, Shape(t, with({n})), info});
      case LapackRoutine::kGesdd: {
        const Shape& d = declared();
        if (!d.IsTuple() || d.tuple_shapes().size() != 5) {
          return Error("gesdd declares (a, s, u, vt, info), not ", ShapeStr(d));
        }
        const Shape& u = d.tuple_shape(2);
        const Shape& vt = d.tuple_shape(3);
        for (const Shape* f : {&u, &vt}) {
          if (!f->IsArray() || f->type() != t || f->rank() != a.rank() ||
              !std::equal(batch.begin(), batch.end(), f->dims().begin())) {
            return Error("gesdd's u and vt must be batches of ",
                         Str(PrimitiveTypeName(t)), " matrices, not ",
                         ShapeStr(d));
          }
        }
        if (u.dims()[u.rank() - 2] != m || vt.dims().back() != n ||
            u.dims().back() < k || vt.dims()[vt.rank() - 2] < k) {
          return Error("gesdd of ", ShapeStr(a), " cannot give ", ShapeStr(d));
        }
        return Shape::Tuple({a, Shape(t, with({k})), u, vt, info});
      }
    }
    return Error("unknown LAPACK routine");
  }

  absl::StatusOr<Shape> Sort() {
    int64_t n = instr_.operand_count();
    if (n < 1) return Error("sort needs at least one operand");
    CW_RETURN_IF_ERROR(ExpectCalledCount(1));
    std::vector<Shape> results;
    std::vector<Shape> scalars;
    for (int64_t i = 0; i < n; ++i) {
      CW_RETURN_IF_ERROR(ExpectArrayOperand(i));
      if (operand(i).dims() != operand(0).dims()) {
        return Error("sort operand ", i, " ", ShapeStr(operand(i)),
                     " differs in dims from operand 0 ", ShapeStr(operand(0)));
      }
      results.push_back(operand(i));
      scalars.push_back(Shape::Scalar(operand(i).type()));
      scalars.push_back(Shape::Scalar(operand(i).type()));
    }
    std::vector<const Shape*> comparator_args;
    for (const Shape& scalar : scalars) comparator_args.push_back(&scalar);
    if (instr_.dimensions.size() != 1 || instr_.dimensions[0] < 0 ||
        instr_.dimensions[0] >= operand(0).rank()) {
      return Error("sort needs one dimension within the operand's rank ",
                   operand(0).rank(), " but has ", ListStr(instr_.dimensions));
    }
    const Computation* comparator = Called(0);
    CW_RETURN_IF_ERROR(
        CheckParameters(comparator, comparator_args, "comparator"));
    CW_ASSIGN_OR_RETURN(const Shape* root, RootShape(comparator));
    if (!root->Compatible(Shape::Scalar(PrimitiveType::kPred))) {
      return Error("comparator '", comparator->name(),
                   "' must return pred[] but returns ", ShapeStr(*root));
    }
    return n == 1 ? results[0] : Shape::Tuple(std::move(results));
  }

  absl::StatusOr<Shape> RngBitGenerator() {
    CW_RETURN_IF_ERROR(ExpectOperandCount(1));
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    const Shape& state = operand(0);
    if (!declared().IsTuple() || declared().tuple_shapes().size() != 2) {
      return Error(
          "rng-bit-generator must declare (state, bits) but "
          "declares ",
          ShapeStr(declared()));
    }
    if (!declared().tuple_shape(0).Compatible(state)) {
      return Error("rng-bit-generator state result ",
                   ShapeStr(declared().tuple_shape(0)),
                   " must match the state operand ", ShapeStr(state));
    }
    const Shape& bits = declared().tuple_shape(1);
    if (!bits.IsArray() || !IsInteger(bits.type())) {
      return Error(
          "rng-bit-generator bits must be an integer array but "
          "are ",
          ShapeStr(bits));
    }
    return declared();
  }

  // ---- Collectives ------------------------------------------------------

  absl::StatusOr<Shape> AllReduce() {
    if (instr_.operand_count() < 1) {
      return Error("all-reduce needs at least one operand");
    }
    CW_RETURN_IF_ERROR(ExpectCalledCount(1));
    std::vector<Shape> results;
    for (int64_t i = 0; i < instr_.operand_count(); ++i) {
      CW_RETURN_IF_ERROR(ExpectArrayOperand(i));
      results.push_back(operand(i));
    }
    // Combined all-reduces may mix element types under one reducer, so the
    // reducer's type is not tied to the operands'.
    CW_RETURN_IF_ERROR(CheckBinaryReducer(Called(0), "to_apply").status());
    if (results.size() == 1) return results[0];
    return Shape::Tuple(std::move(results));
  }

  absl::StatusOr<Shape> AllGatherOrReduceScatter() {
    const bool gather = instr_.opcode == Opcode::kAllGather;
    int64_t n = instr_.operand_count();
    if (n < 1) return Error(OpName(), " needs at least one operand");
    if (gather) {
      CW_RETURN_IF_ERROR(ExpectCalledCount(0));
    } else {
      CW_RETURN_IF_ERROR(ExpectCalledCount(1));
      CW_RETURN_IF_ERROR(CheckBinaryReducer(Called(0), "to_apply").status());
    }
    if (instr_.dimensions.size() != 1) {
      return Error(OpName(), " needs exactly one dimension but has ",
                   ListStr(instr_.dimensions));
    }
    const int64_t d = instr_.dimensions[0];
    std::optional<int64_t> group = CollectiveGroupSize(instr_, counts_);
    if (group && *group < 1) return Error("collective group is empty");
    std::vector<Shape> results;
    for (int64_t i = 0; i < n; ++i) {
      CW_RETURN_IF_ERROR(ExpectArrayOperand(i));
      const Shape& in = operand(i);
      if (d < 0 || d >= in.rank()) {
        return Error(OpName(), " dimension ", d, " is out of range for ",
                     ShapeStr(in));
      }
      std::vector<int64_t> dims = in.dims();
      if (group) {
        if (gather) {
          std::optional<int64_t> size = CheckedMul(dims[d], *group);
          if (!size) return Error("all-gather result is too large");
          dims[d] = *size;
        } else {
          if (dims[d] % *group != 0) {
            return Error("reduce-scatter dimension ", d, " of ", ShapeStr(in),
                         " has size ", dims[d],
                         ", not divisible by the group size ", *group);
          }
          dims[d] /= *group;
        }
      } else {
        // The group size is unknown: take the declared size if it is a
        // whole multiple (all-gather) or fraction (reduce-scatter).
        const Shape* out = &declared();
        if (n > 1) {
          out =
              declared().IsTuple() && static_cast<int64_t>(
                                          declared().tuple_shapes().size()) == n
                  ? &declared().tuple_shape(i)
                  : nullptr;
        }
        if (out == nullptr || !out->IsArray() || out->rank() != in.rank()) {
          return Error("cannot infer the ", OpName(),
                       " result: replica_groups is empty and the device "
                       "counts are unknown");
        }
        int64_t big = gather ? out->dim(d) : dims[d];
        int64_t small = gather ? dims[d] : out->dim(d);
        if (small == 0 ? big != 0 : big % small != 0) {
          return Error(OpName(), " dimension ", d, " goes from ", dims[d],
                       " to ", out->dim(d), ", which no group size explains");
        }
        dims[d] = out->dim(d);
      }
      results.push_back(Shape(in.type(), dims));
    }
    if (n == 1) return results[0];
    return Shape::Tuple(std::move(results));
  }

  absl::StatusOr<Shape> AllToAll() {
    int64_t n = instr_.operand_count();
    if (n < 1) return Error("all-to-all needs at least one operand");
    std::optional<int64_t> group = CollectiveGroupSize(instr_, counts_);
    if (!instr_.dimensions.empty()) {  // Array form.
      CW_RETURN_IF_ERROR(ExpectOperandCount(1));
      CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
      const Shape& in = operand(0);
      if (instr_.dimensions.size() != 1 || instr_.dimensions[0] < 0 ||
          instr_.dimensions[0] >= in.rank()) {
        return Error("all-to-all split dimension ", ListStr(instr_.dimensions),
                     " is invalid for ", ShapeStr(in));
      }
      int64_t d = instr_.dimensions[0];
      if (group && (*group < 1 || in.dim(d) % *group != 0)) {
        return Error("all-to-all split dimension ", d, " of ", ShapeStr(in),
                     " has size ", in.dim(d),
                     ", not divisible by the group size ", *group);
      }
      return in;
    }
    std::vector<Shape> results;
    for (int64_t i = 0; i < n; ++i) {
      CW_RETURN_IF_ERROR(ExpectArrayOperand(i));
      results.push_back(operand(i));
    }
    if (group && *group != n) {
      return Error("tuple all-to-all has ", n, " operands but its groups have ",
                   *group, " members; it needs one operand per member");
    }
    return Shape::Tuple(std::move(results));
  }

  absl::StatusOr<Shape> CollectivePermute() {
    if (instr_.operand_count() != 1) {
      return absl::UnimplementedError(absl::StrCat(
          Where(), ": collective-permute with ", instr_.operand_count(),
          " operands (combined or in-place form) is not supported"));
    }
    CW_RETURN_IF_ERROR(ExpectArrayOperand(0));
    return operand(0);
  }

  absl::StatusOr<Shape> AfterAll() {
    for (int64_t i = 0; i < instr_.operand_count(); ++i) {
      if (!operand(i).IsToken()) {
        return Error("after-all operand ", i, " must be a token but is ",
                     ShapeStr(operand(i)));
      }
    }
    return Shape::Token();
  }

  const Instruction& instr_;
  const DeviceCounts* counts_;
};

}  // namespace

absl::StatusOr<Shape> InferShape(const Instruction& instr) {
  return Inferrer(instr, nullptr).Infer();
}

absl::StatusOr<Shape> InferShape(const Instruction& instr,
                                 const DeviceCounts& counts) {
  return Inferrer(instr, &counts).Infer();
}

std::optional<int64_t> CollectiveGroupSize(const Instruction& instr,
                                           const DeviceCounts* counts) {
  const CollectiveGroupMode mode = GetCollectiveGroupMode(instr);
  const ReplicaGroups& groups = instr.replica_groups;
  std::optional<int64_t> listed;
  if (!groups.groups.empty()) {
    listed = static_cast<int64_t>(groups.groups[0].size());
  } else if (groups.iota.has_value()) {
    listed = groups.iota->group_size;
  }
  if (listed) {
    if (mode != CollectiveGroupMode::kCrossReplicaAndPartition) return listed;
    if (counts == nullptr) return std::nullopt;
    return CheckedMul(*listed, counts->num_partitions);
  }
  if (counts == nullptr) return std::nullopt;
  switch (mode) {
    case CollectiveGroupMode::kCrossReplica:
      return counts->replica_count;
    case CollectiveGroupMode::kCrossPartition:
      return counts->num_partitions;
    default:
      return CheckedMul(counts->replica_count, counts->num_partitions);
  }
}

int64_t WindowOutputSize(int64_t input_size, const WindowDimension& window) {
  if (window.size < 1 || window.stride < 1 || window.base_dilation < 1 ||
      window.window_dilation < 1) {
    return -1;
  }
  return CheckedWindowOutputSize(input_size, window).value_or(-1);
}

absl::StatusOr<Shape> InferFftShape(const Shape& x, FftType type,
                                    const std::vector<int64_t>& length) {
  auto error = [](auto&&... args) {
    return absl::InvalidArgumentError(absl::StrCat(args...));
  };
  const int64_t fft_rank = static_cast<int64_t>(length.size());
  const std::string type_name(FftTypeName(type));
  if (!x.IsArray()) {
    return error("fft needs an array operand but got ", ShapeStr(x));
  }
  if (fft_rank < 1 || fft_rank > 3) {
    return error("fft needs 1 to 3 fft_length entries but has ", fft_rank);
  }
  if (x.rank() < fft_rank) {
    return error("fft of ", fft_rank, " dims needs an operand of rank >= ",
                 fft_rank, " but got ", ShapeStr(x));
  }
  for (int64_t l : length) {
    if (l < 0) return error("fft_length ", ListStr(length), " is negative");
  }
  const int64_t first = x.rank() - fft_rank;
  std::vector<int64_t> dims = x.dims();
  auto trailing_must_be =
      [&](const std::vector<int64_t>& want) -> absl::Status {
    for (int64_t i = 0; i < fft_rank; ++i) {
      if (x.dim(first + i) != want[i]) {
        return error("fft ", type_name, " with fft_length ", ListStr(length),
                     " needs trailing dims ", ListStr(want),
                     " but the operand is ", ShapeStr(x));
      }
    }
    return absl::OkStatus();
  };
  const int64_t half_bins = length.back() == 0 ? 0 : length.back() / 2 + 1;
  switch (type) {
    case FftType::kFft:
    case FftType::kIfft:
      if (!IsComplex(x.type())) {
        return error("fft ", type_name, " needs a complex operand but got ",
                     ShapeStr(x));
      }
      CW_RETURN_IF_ERROR(trailing_must_be(length));
      return x;
    case FftType::kRfft:
      if (x.type() != PrimitiveType::kF32 && x.type() != PrimitiveType::kF64) {
        return error("fft RFFT needs an f32 or f64 operand but got ",
                     ShapeStr(x));
      }
      CW_RETURN_IF_ERROR(trailing_must_be(length));
      dims.back() = half_bins;
      return Shape(ComplexTypeOf(x.type()), dims);
    case FftType::kIrfft: {
      if (!IsComplex(x.type())) {
        return error("fft IRFFT needs a complex operand but got ",
                     ShapeStr(x));
      }
      std::vector<int64_t> want = length;
      want.back() = half_bins;
      CW_RETURN_IF_ERROR(trailing_must_be(want));
      for (int64_t i = 0; i < fft_rank; ++i) dims[first + i] = length[i];
      return Shape(ComplexComponentType(x.type()), dims);
    }
  }
  return error("unknown fft type");
}

}  // namespace causeway::hlo
