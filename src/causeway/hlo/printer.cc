#include "causeway/hlo/printer.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "causeway/base/string_view.h"
#include "causeway/hlo/float16.h"

namespace causeway::hlo {
namespace {

// ---------------------------------------------------------------------------
// Values.

// A NaN as "nan" (the canonical quiet NaN) or "nan(0x<payload>)", signed.
std::string FormatNan(bool negative, uint64_t payload, int mantissa_bits) {
  std::string text = negative ? "-nan" : "nan";
  if (payload != (uint64_t{1} << (mantissa_bits - 1))) {
    absl::StrAppend(&text, "(0x", absl::Hex(payload), ")");
  }
  return text;
}

template <typename T>
std::string ShortestRoundTrip(T value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string FormatF32(float value) {
  if (std::isnan(value)) {
    uint32_t bits = std::bit_cast<uint32_t>(value);
    return FormatNan(bits >> 31, bits & 0x7FFFFF, 23);
  }
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  return ShortestRoundTrip(value);
}

std::string FormatF64(double value) {
  if (std::isnan(value)) {
    uint64_t bits = std::bit_cast<uint64_t>(value);
    return FormatNan(bits >> 63, bits & ((uint64_t{1} << 52) - 1), 52);
  }
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  return ShortestRoundTrip(value);
}

std::string Format16(uint16_t bits, float value, int mantissa_bits) {
  if (std::isnan(value)) {
    return FormatNan(bits >> 15, bits & ((1u << mantissa_bits) - 1),
                     mantissa_bits);
  }
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  return ShortestRoundTrip(value);
}

// A minifloat as the shortest decimal that parses back to the same bits
// (as XLA prints them).
template <typename M>
std::string FormatMinifloat(M value) {
  const float f = static_cast<float>(value);
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buffer[64];
  for (int precision = 1; precision < 12; ++precision) {
    auto result = std::to_chars(buffer, buffer + sizeof(buffer), f,
                                std::chars_format::general, precision);
    std::string text(buffer, result.ptr);
    if (M::FromDouble(std::strtod(text.c_str(), nullptr)) == value) {
      return text;
    }
  }
  return ShortestRoundTrip(f);
}

std::string FormatElement(const Literal& literal, int64_t i) {
  const void* data = literal.untyped_data();
  const PrimitiveType type = literal.shape().type();
  if (IsComplex(type) || IsMinifloat(type) || IsSubByteInteger(type)) {
    return VisitType(type, [&](auto tag) -> std::string {
      using E = decltype(tag);
      const E value = static_cast<const E*>(data)[i];
      if constexpr (std::is_same_v<E, C64>) {
        return absl::StrCat("(", FormatF32(value.real()), ", ",
                            FormatF32(value.imag()), ")");
      } else if constexpr (std::is_same_v<E, C128>) {
        return absl::StrCat("(", FormatF64(value.real()), ", ",
                            FormatF64(value.imag()), ")");
      } else if constexpr (kIsMinifloat<E>) {
        return FormatMinifloat(value);
      } else if constexpr (kIsNarrowInt<E>) {
        return absl::StrCat(value.value());
      } else {
        return "?";
      }
    });
  }
  switch (type) {
    case PrimitiveType::kPred:
      return static_cast<const uint8_t*>(data)[i] != 0 ? "true" : "false";
    case PrimitiveType::kS8:
      return absl::StrCat(static_cast<const int8_t*>(data)[i]);
    case PrimitiveType::kS16:
      return absl::StrCat(static_cast<const int16_t*>(data)[i]);
    case PrimitiveType::kS32:
      return absl::StrCat(static_cast<const int32_t*>(data)[i]);
    case PrimitiveType::kS64:
      return absl::StrCat(static_cast<const int64_t*>(data)[i]);
    case PrimitiveType::kU8:
      return absl::StrCat(static_cast<const uint8_t*>(data)[i]);
    case PrimitiveType::kU16:
      return absl::StrCat(static_cast<const uint16_t*>(data)[i]);
    case PrimitiveType::kU32:
      return absl::StrCat(static_cast<const uint32_t*>(data)[i]);
    case PrimitiveType::kU64:
      return absl::StrCat(static_cast<const uint64_t*>(data)[i]);
    case PrimitiveType::kF16: {
      F16 v = static_cast<const F16*>(data)[i];
      return Format16(v.bits, static_cast<float>(v), 10);
    }
    case PrimitiveType::kBF16: {
      BF16 v = static_cast<const BF16*>(data)[i];
      return Format16(v.bits, static_cast<float>(v), 7);
    }
    case PrimitiveType::kF32:
      return FormatF32(static_cast<const float*>(data)[i]);
    case PrimitiveType::kF64:
      return FormatF64(static_cast<const double*>(data)[i]);
    default:
      return "?";
  }
}

// Appends dimension `level` of an array literal starting at row-major
// element `*next`.
void AppendArrayLevel(const Literal& literal, int64_t level, int64_t* next,
                      std::string* out) {
  const Shape& shape = literal.shape();
  const int64_t size = shape.dim(level);
  const bool innermost = level + 1 == shape.rank();
  if (innermost) {
    out->push_back('{');
    for (int64_t i = 0; i < size; ++i) {
      if (i > 0) out->append(", ");
      out->append(FormatElement(literal, (*next)++));
    }
    out->push_back('}');
    return;
  }
  if (size == 0) {
    out->append("{}");
    return;
  }
  out->append("{ ");
  for (int64_t i = 0; i < size; ++i) {
    if (i > 0) out->append(", ");
    AppendArrayLevel(literal, level + 1, next, out);
  }
  out->append(" }");
}

void AppendLiteral(const Literal& literal, std::string* out) {
  const Shape& shape = literal.shape();
  if (shape.IsTuple()) {
    out->push_back('(');
    for (size_t i = 0; i < literal.elements().size(); ++i) {
      if (i > 0) out->append(", ");
      AppendLiteral(literal.elements()[i], out);
    }
    out->push_back(')');
    return;
  }
  if (!shape.IsArray()) return;
  if (shape.rank() == 0) {
    out->append(FormatElement(literal, 0));
    return;
  }
  int64_t next = 0;
  AppendArrayLevel(literal, 0, &next, out);
}

// ---------------------------------------------------------------------------
// Attribute values.

std::string IntList(const std::vector<int64_t>& values) {
  return absl::StrCat("{", absl::StrJoin(values, ","), "}");
}

std::string IotaText(const ReplicaGroups::Iota& iota) {
  std::string text =
      absl::StrCat("<=[", absl::StrJoin(iota.reshape_dims, ","), "]");
  if (!iota.transpose_perm.empty()) {
    absl::StrAppend(&text, "T(", absl::StrJoin(iota.transpose_perm, ","), ")");
  }
  return text;
}

std::string ReplicaGroupsText(const ReplicaGroups& groups) {
  if (groups.iota.has_value()) {
    return absl::StrCat("[", groups.iota->num_groups, ",",
                        groups.iota->group_size, "]", IotaText(*groups.iota));
  }
  std::vector<std::string> parts;
  for (const auto& group : groups.groups) parts.push_back(IntList(group));
  return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
}

std::string WindowText(const std::vector<WindowDimension>& window) {
  if (window.empty()) return "{}";
  auto join = [&](auto field) {
    std::vector<std::string> parts;
    for (const WindowDimension& dim : window) parts.push_back(field(dim));
    return absl::StrJoin(parts, "x");
  };
  std::string text = "{size=" + join([](const WindowDimension& d) {
                       return absl::StrCat(d.size);
                     });
  auto any = [&](auto predicate) {
    for (const WindowDimension& dim : window) {
      if (predicate(dim)) return true;
    }
    return false;
  };
  if (any([](const WindowDimension& d) { return d.stride != 1; })) {
    absl::StrAppend(&text, " stride=", join([](const WindowDimension& d) {
      return absl::StrCat(d.stride);
    }));
  }
  if (any([](const WindowDimension& d) {
        return d.padding_low != 0 || d.padding_high != 0;
      })) {
    absl::StrAppend(&text, " pad=", join([](const WindowDimension& d) {
      return absl::StrCat(d.padding_low, "_", d.padding_high);
    }));
  }
  if (any([](const WindowDimension& d) { return d.base_dilation != 1; })) {
    absl::StrAppend(&text, " lhs_dilate=", join([](const WindowDimension& d) {
      return absl::StrCat(d.base_dilation);
    }));
  }
  if (any([](const WindowDimension& d) { return d.window_dilation != 1; })) {
    absl::StrAppend(&text, " rhs_dilate=", join([](const WindowDimension& d) {
      return absl::StrCat(d.window_dilation);
    }));
  }
  if (any([](const WindowDimension& d) { return d.window_reversal; })) {
    absl::StrAppend(&text, " rhs_reversal=", join([](const WindowDimension& d) {
      return absl::StrCat(d.window_reversal ? 1 : 0);
    }));
  }
  return text + "}";
}

std::string PaddingText(const std::vector<PaddingDimension>& padding) {
  bool interior = false;
  for (const PaddingDimension& dim : padding) interior |= dim.interior != 0;
  std::vector<std::string> parts;
  for (const PaddingDimension& dim : padding) {
    parts.push_back(
        interior ? absl::StrCat(dim.low, "_", dim.high, "_", dim.interior)
                 : absl::StrCat(dim.low, "_", dim.high));
  }
  return absl::StrJoin(parts, "x");
}

// One part of dim_labels: `a`/`b` at their dims, spatial digits elsewhere.
std::string DimLabelPart(int64_t a_dim, char a, int64_t b_dim, char b,
                         const std::vector<int64_t>& spatial) {
  size_t rank = spatial.size() + 2;
  std::string part(rank, '?');
  auto put = [&](int64_t dim, char c) {
    if (dim >= 0 && static_cast<size_t>(dim) < rank) {
      part[static_cast<size_t>(dim)] = c;
    }
  };
  put(a_dim, a);
  put(b_dim, b);
  for (size_t i = 0; i < spatial.size(); ++i) {
    put(spatial[i], static_cast<char>('0' + i));
  }
  return part;
}

std::string DimLabelsText(const ConvolutionDimensionNumbers& n) {
  return absl::StrCat(
      DimLabelPart(n.input_batch_dimension, 'b', n.input_feature_dimension, 'f',
                   n.input_spatial_dimensions),
      "_",
      DimLabelPart(n.kernel_input_feature_dimension, 'i',
                   n.kernel_output_feature_dimension, 'o',
                   n.kernel_spatial_dimensions),
      "->",
      DimLabelPart(n.output_batch_dimension, 'b', n.output_feature_dimension,
                   'f', n.output_spatial_dimensions));
}

std::string_view DirectionText(ComparisonDirection direction) {
  switch (direction) {
    case ComparisonDirection::kEq:
      return "EQ";
    case ComparisonDirection::kNe:
      return "NE";
    case ComparisonDirection::kLt:
      return "LT";
    case ComparisonDirection::kLe:
      return "LE";
    case ComparisonDirection::kGt:
      return "GT";
    case ComparisonDirection::kGe:
      return "GE";
  }
  return "EQ";
}

std::string_view ComparisonTypeText(ComparisonType type) {
  switch (type) {
    case ComparisonType::kFloat:
      return "FLOAT";
    case ComparisonType::kTotalOrder:
      return "TOTALORDER";
    case ComparisonType::kSigned:
      return "SIGNED";
    case ComparisonType::kUnsigned:
      return "UNSIGNED";
    case ComparisonType::kDefault:
      return "";
  }
  return "";
}

std::string_view FusionKindText(FusionKind kind) {
  switch (kind) {
    case FusionKind::kLoop:
      return "kLoop";
    case FusionKind::kInput:
      return "kInput";
    case FusionKind::kOutput:
      return "kOutput";
    case FusionKind::kCustom:
      return "kCustom";
  }
  return "kLoop";
}

std::string_view RngAlgorithmText(RandomAlgorithm algorithm) {
  switch (algorithm) {
    case RandomAlgorithm::kDefault:
      return "rng_default";
    case RandomAlgorithm::kThreeFry:
      return "rng_three_fry";
    case RandomAlgorithm::kPhilox:
      return "rng_philox";
  }
  return "rng_default";
}

std::string ComputationName(const Computation* computation) {
  return computation == nullptr ? "%<null>"
                                : absl::StrCat("%", computation->name());
}

std::string CalledAt(const Instruction& inst, size_t i) {
  return i < inst.called_computations.size()
             ? ComputationName(inst.called_computations[i])
             : "%<missing>";
}

void AppendAttributes(const Instruction& inst, std::string* out) {
  auto attr = [&](std::string_view name, std::string_view value) {
    absl::StrAppend(out, ", ", AbslView(name), "=", AbslView(value));
  };
  const Opcode op = inst.opcode;
  switch (op) {
    case Opcode::kBroadcast:
    case Opcode::kTranspose:
    case Opcode::kReverse:
    case Opcode::kReduce:
    case Opcode::kConcatenate:
    case Opcode::kSort:
    case Opcode::kMap:
    case Opcode::kAllGather:
    case Opcode::kReduceScatter:
      attr("dimensions", IntList(inst.dimensions));
      break;
    case Opcode::kAllToAll:
      if (!inst.dimensions.empty())
        attr("dimensions", IntList(inst.dimensions));
      break;
    default:
      break;
  }
  switch (op) {
    case Opcode::kSlice: {
      std::vector<std::string> parts;
      for (const SliceDimension& dim : inst.slice) {
        parts.push_back(dim.stride == 1
                            ? absl::StrCat("[", dim.start, ":", dim.limit, "]")
                            : absl::StrCat("[", dim.start, ":", dim.limit, ":",
                                           dim.stride, "]"));
      }
      attr("slice", absl::StrCat("{", absl::StrJoin(parts, ", "), "}"));
      break;
    }
    case Opcode::kDynamicSlice:
      attr("dynamic_slice_sizes", IntList(inst.dynamic_slice_sizes));
      break;
    case Opcode::kPad:
      attr("padding", PaddingText(inst.padding));
      break;
    case Opcode::kCompare:
      attr("direction", DirectionText(inst.comparison_direction));
      if (inst.comparison_type != ComparisonType::kDefault) {
        attr("type", ComparisonTypeText(inst.comparison_type));
      }
      break;
    case Opcode::kDot: {
      const DotDimensionNumbers& d = inst.dot_dimension_numbers;
      if (!d.lhs_batch_dims.empty()) {
        attr("lhs_batch_dims", IntList(d.lhs_batch_dims));
      }
      attr("lhs_contracting_dims", IntList(d.lhs_contracting_dims));
      if (!d.rhs_batch_dims.empty()) {
        attr("rhs_batch_dims", IntList(d.rhs_batch_dims));
      }
      attr("rhs_contracting_dims", IntList(d.rhs_contracting_dims));
      break;
    }
    case Opcode::kConvolution:
      if (!inst.window.empty()) attr("window", WindowText(inst.window));
      // Never-set numbers (all zero) have no dim_labels spelling.
      if (inst.convolution_dimension_numbers != ConvolutionDimensionNumbers{}) {
        attr("dim_labels", DimLabelsText(inst.convolution_dimension_numbers));
      }
      if (inst.feature_group_count != 1) {
        attr("feature_group_count", absl::StrCat(inst.feature_group_count));
      }
      if (inst.batch_group_count != 1) {
        attr("batch_group_count", absl::StrCat(inst.batch_group_count));
      }
      break;
    case Opcode::kReduceWindow:
      attr("window", WindowText(inst.window));
      if (!inst.called_computations.empty())
        attr("to_apply", CalledAt(inst, 0));
      break;
    case Opcode::kSelectAndScatter:
      attr("window", WindowText(inst.window));
      attr("select", CalledAt(inst, 0));
      attr("scatter", CalledAt(inst, 1));
      break;
    case Opcode::kGather: {
      const GatherDimensionNumbers& g = inst.gather_dimension_numbers;
      attr("offset_dims", IntList(g.offset_dims));
      attr("collapsed_slice_dims", IntList(g.collapsed_slice_dims));
      attr("start_index_map", IntList(g.start_index_map));
      if (!g.operand_batching_dims.empty()) {
        attr("operand_batching_dims", IntList(g.operand_batching_dims));
      }
      if (!g.start_indices_batching_dims.empty()) {
        attr("start_indices_batching_dims",
             IntList(g.start_indices_batching_dims));
      }
      attr("index_vector_dim", absl::StrCat(g.index_vector_dim));
      attr("slice_sizes", IntList(inst.gather_slice_sizes));
      if (inst.indices_are_sorted) attr("indices_are_sorted", "true");
      break;
    }
    case Opcode::kScatter: {
      const ScatterDimensionNumbers& s = inst.scatter_dimension_numbers;
      attr("update_window_dims", IntList(s.update_window_dims));
      attr("inserted_window_dims", IntList(s.inserted_window_dims));
      attr("scatter_dims_to_operand_dims",
           IntList(s.scatter_dims_to_operand_dims));
      if (!s.input_batching_dims.empty()) {
        attr("input_batching_dims", IntList(s.input_batching_dims));
      }
      if (!s.scatter_indices_batching_dims.empty()) {
        attr("scatter_indices_batching_dims",
             IntList(s.scatter_indices_batching_dims));
      }
      attr("index_vector_dim", absl::StrCat(s.index_vector_dim));
      if (inst.indices_are_sorted) attr("indices_are_sorted", "true");
      if (inst.unique_indices) attr("unique_indices", "true");
      if (!inst.called_computations.empty())
        attr("to_apply", CalledAt(inst, 0));
      break;
    }
    case Opcode::kFusion:
      attr("kind", FusionKindText(inst.fusion_kind));
      if (!inst.called_computations.empty()) attr("calls", CalledAt(inst, 0));
      break;
    case Opcode::kCall:
    case Opcode::kReduce:
    case Opcode::kAllReduce:
    case Opcode::kReduceScatter:
      break;  // to_apply after the collective attributes, below.
    case Opcode::kSort:
      if (inst.is_stable) attr("is_stable", "true");
      break;
    case Opcode::kWhile:
      attr("condition", CalledAt(inst, 0));
      attr("body", CalledAt(inst, 1));
      break;
    case Opcode::kConditional: {
      bool pred = inst.operand_count() > 0 &&
                  inst.operand(0)->shape.type() == PrimitiveType::kPred &&
                  inst.called_computations.size() == 2;
      if (pred) {
        attr("true_computation", CalledAt(inst, 0));
        attr("false_computation", CalledAt(inst, 1));
      } else {
        std::vector<std::string> names;
        for (const Computation* c : inst.called_computations) {
          names.push_back(ComputationName(c));
        }
        attr("branch_computations",
             absl::StrCat("{", absl::StrJoin(names, ", "), "}"));
      }
      break;
    }
    case Opcode::kRngBitGenerator:
      attr("algorithm", RngAlgorithmText(inst.rng_algorithm));
      break;
    case Opcode::kFft:
      attr("fft_type", FftTypeName(inst.fft_type));
      attr("fft_length", absl::StrCat("{", absl::StrJoin(inst.fft_length, ","),
                                      "}"));
      break;
    case Opcode::kReducePrecision:
      attr("exponent_bits", absl::StrCat(inst.exponent_bits));
      attr("mantissa_bits", absl::StrCat(inst.mantissa_bits));
      break;
    case Opcode::kCustomCall: {
      attr("custom_call_target",
           absl::StrCat("\"", absl::CEscape(inst.custom_call_target), "\""));
      if (!inst.called_computations.empty()) {
        std::vector<std::string> names;
        for (const Computation* c : inst.called_computations) {
          names.push_back(ComputationName(c));
        }
        attr("called_computations",
             absl::StrCat("{", absl::StrJoin(names, ", "), "}"));
      }
      break;
    }
    case Opcode::kGetTupleElement:
      if (inst.tuple_index != -1) attr("index", absl::StrCat(inst.tuple_index));
      break;
    case Opcode::kIota:
      if (inst.iota_dimension != -1) {
        attr("iota_dimension", absl::StrCat(inst.iota_dimension));
      }
      break;
    default:
      break;
  }
  if (IsCollective(op)) {
    if (inst.channel_id.has_value()) {
      attr("channel_id", absl::StrCat(*inst.channel_id));
    }
    if (op != Opcode::kCollectivePermute) {
      attr("replica_groups", ReplicaGroupsText(inst.replica_groups));
    }
    if ((op == Opcode::kAllReduce || op == Opcode::kAllGather ||
         op == Opcode::kReduceScatter) &&
        inst.use_global_device_ids) {
      attr("use_global_device_ids", "true");
    }
    if (inst.constrain_layout) attr("constrain_layout", "true");
    if (op == Opcode::kCollectivePermute) {
      std::vector<std::string> pairs;
      for (const auto& [source, target] : inst.source_target_pairs) {
        pairs.push_back(absl::StrCat("{", source, ",", target, "}"));
      }
      attr("source_target_pairs",
           absl::StrCat("{", absl::StrJoin(pairs, ","), "}"));
    }
  }
  if (op == Opcode::kCall || op == Opcode::kReduce ||
      op == Opcode::kAllReduce || op == Opcode::kReduceScatter ||
      op == Opcode::kSort || op == Opcode::kMap) {
    if (!inst.called_computations.empty()) attr("to_apply", CalledAt(inst, 0));
  }
  if (inst.sharding.has_value())
    attr("sharding", PrintSharding(*inst.sharding));
  for (const auto& [name, value] : inst.raw_attributes) attr(name, value);
}

// ---------------------------------------------------------------------------
// Equality.

#define CW_COMPARE_FIELD(field, text)                                       \
  if (!(a.field == b.field)) {                                              \
    *diff = absl::StrCat("instruction '", a.name, "': ", text, " differs"); \
    return false;                                                           \
  }

bool InstructionsEqual(const Instruction& a, const Instruction& b,
                       std::string* diff) {
  if (a.name != b.name) {
    *diff = absl::StrCat("instruction '", a.name, "' vs '", b.name, "'");
    return false;
  }
  // opcode_name only means something for unknown opcodes (built modules
  // may leave it empty).
  if (a.opcode != b.opcode ||
      (a.opcode == Opcode::kUnknown && a.opcode_name != b.opcode_name)) {
    *diff = absl::StrCat("instruction '", a.name, "': opcode ",
                         AbslView(a.opcode_name), " vs ", AbslView(b.opcode_name));
    return false;
  }
  if (!(a.shape == b.shape)) {
    *diff = absl::StrCat("instruction '", a.name, "': shape ",
                         a.shape.ToString(), " vs ", b.shape.ToString());
    return false;
  }
  if (a.operands.size() != b.operands.size()) {
    *diff = absl::StrCat("instruction '", a.name, "': ", a.operands.size(),
                         " operands vs ", b.operands.size());
    return false;
  }
  for (size_t i = 0; i < a.operands.size(); ++i) {
    if (a.operands[i]->name != b.operands[i]->name) {
      *diff =
          absl::StrCat("instruction '", a.name, "': operand ", i, " is '",
                       a.operands[i]->name, "' vs '", b.operands[i]->name, "'");
      return false;
    }
  }
  if (a.called_computations.size() != b.called_computations.size()) {
    *diff = absl::StrCat("instruction '", a.name,
                         "': number of called computations differs");
    return false;
  }
  for (size_t i = 0; i < a.called_computations.size(); ++i) {
    if (ComputationName(a.called_computations[i]) !=
        ComputationName(b.called_computations[i])) {
      *diff = absl::StrCat("instruction '", a.name, "': called computation ", i,
                           " is ", ComputationName(a.called_computations[i]),
                           " vs ", ComputationName(b.called_computations[i]));
      return false;
    }
  }
  CW_COMPARE_FIELD(parameter_number, "parameter number");
  if (a.literal.has_value() != b.literal.has_value() ||
      (a.literal.has_value() && !(*a.literal == *b.literal))) {
    *diff = absl::StrCat("instruction '", a.name, "': constant value ",
                         a.literal ? a.literal->ToString() : "(none)", " vs ",
                         b.literal ? b.literal->ToString() : "(none)");
    return false;
  }
  CW_COMPARE_FIELD(tuple_index, "index");
  CW_COMPARE_FIELD(dimensions, "dimensions");
  CW_COMPARE_FIELD(iota_dimension, "iota_dimension");
  CW_COMPARE_FIELD(slice, "slice");
  CW_COMPARE_FIELD(dynamic_slice_sizes, "dynamic_slice_sizes");
  CW_COMPARE_FIELD(padding, "padding");
  CW_COMPARE_FIELD(comparison_direction, "comparison direction");
  CW_COMPARE_FIELD(comparison_type, "comparison type");
  CW_COMPARE_FIELD(dot_dimension_numbers, "dot dimension numbers");
  CW_COMPARE_FIELD(window, "window");
  CW_COMPARE_FIELD(convolution_dimension_numbers, "dim_labels");
  CW_COMPARE_FIELD(feature_group_count, "feature_group_count");
  CW_COMPARE_FIELD(batch_group_count, "batch_group_count");
  CW_COMPARE_FIELD(gather_dimension_numbers, "gather dimension numbers");
  CW_COMPARE_FIELD(gather_slice_sizes, "slice_sizes");
  CW_COMPARE_FIELD(scatter_dimension_numbers, "scatter dimension numbers");
  CW_COMPARE_FIELD(indices_are_sorted, "indices_are_sorted");
  CW_COMPARE_FIELD(unique_indices, "unique_indices");
  CW_COMPARE_FIELD(fusion_kind, "fusion kind");
  CW_COMPARE_FIELD(is_stable, "is_stable");
  CW_COMPARE_FIELD(rng_algorithm, "rng algorithm");
  CW_COMPARE_FIELD(fft_type, "fft_type");
  CW_COMPARE_FIELD(fft_length, "fft_length");
  CW_COMPARE_FIELD(exponent_bits, "exponent_bits");
  CW_COMPARE_FIELD(mantissa_bits, "mantissa_bits");
  CW_COMPARE_FIELD(replica_groups, "replica_groups");
  CW_COMPARE_FIELD(channel_id, "channel_id");
  CW_COMPARE_FIELD(use_global_device_ids, "use_global_device_ids");
  CW_COMPARE_FIELD(constrain_layout, "constrain_layout");
  CW_COMPARE_FIELD(source_target_pairs, "source_target_pairs");
  CW_COMPARE_FIELD(custom_call_target, "custom_call_target");
  if (a.sharding != b.sharding) {
    *diff =
        absl::StrCat("instruction '", a.name, "': sharding ",
                     a.sharding ? PrintSharding(*a.sharding) : "(none)", " vs ",
                     b.sharding ? PrintSharding(*b.sharding) : "(none)");
    return false;
  }
  CW_COMPARE_FIELD(raw_attributes, "raw attributes");
  return true;
}

#undef CW_COMPARE_FIELD

bool ComputationsEqual(const Computation& a, const Computation& b,
                       std::string* diff) {
  if (a.name() != b.name()) {
    *diff = absl::StrCat("computation '", a.name(), "' vs '", b.name(), "'");
    return false;
  }
  if (a.is_entry() != b.is_entry()) {
    *diff = absl::StrCat("computation '", a.name(), "': is_entry differs");
    return false;
  }
  if (a.raw_attributes() != b.raw_attributes()) {
    *diff = absl::StrCat("computation '", a.name(), "': attributes differ");
    return false;
  }
  if (a.instructions().size() != b.instructions().size()) {
    *diff =
        absl::StrCat("computation '", a.name(), "': ", a.instructions().size(),
                     " instructions vs ", b.instructions().size());
    return false;
  }
  for (size_t i = 0; i < a.instructions().size(); ++i) {
    if (!InstructionsEqual(*a.instructions()[i], *b.instructions()[i], diff)) {
      *diff = absl::StrCat("computation '", a.name(), "': ", *diff);
      return false;
    }
  }
  const Instruction* root_a = a.root();
  const Instruction* root_b = b.root();
  if ((root_a == nullptr) != (root_b == nullptr) ||
      (root_a != nullptr && root_a->name != root_b->name)) {
    *diff = absl::StrCat("computation '", a.name(), "': root differs");
    return false;
  }
  return true;
}

}  // namespace

std::string PrintLiteralValues(const Literal& literal) {
  std::string out;
  AppendLiteral(literal, &out);
  return out;
}

std::string PrintSharding(const Sharding& sharding) {
  switch (sharding.kind) {
    case Sharding::Kind::kReplicated:
      return "{replicated}";
    case Sharding::Kind::kManual:
      return "{manual}";
    case Sharding::Kind::kMaximal:
      return absl::StrCat("{maximal device=", sharding.maximal_device, "}");
    case Sharding::Kind::kTiled: {
      std::string text = absl::StrCat(
          "{devices=[", absl::StrJoin(sharding.tile_dims, ","), "]");
      if (sharding.iota.has_value()) {
        text += IotaText(*sharding.iota);
      } else {
        text += absl::StrJoin(sharding.tile_devices, ",");
      }
      if (sharding.last_tile_dim_replicate) text += " last_tile_dim_replicate";
      if (!sharding.last_tile_dims.empty()) {
        absl::StrAppend(&text, " last_tile_dims={",
                        absl::StrJoin(sharding.last_tile_dims, ", "), "}");
      }
      return text + "}";
    }
    case Sharding::Kind::kTuple: {
      std::vector<std::string> parts;
      for (const Sharding& element : sharding.tuple_elements) {
        parts.push_back(PrintSharding(element));
      }
      return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
    }
    case Sharding::Kind::kUnknown:
      return sharding.unknown_text.empty() ? "{unknown}"
                                           : sharding.unknown_text;
  }
  return "{unknown}";
}

namespace {

std::string PrintInstructionLine(const Instruction& inst, bool is_root) {
  std::string out;
  if (is_root) out += "ROOT ";
  absl::StrAppend(&out, "%", inst.name, " = ", inst.shape.ToString(), " ");
  if (inst.opcode == Opcode::kUnknown) {
    out += inst.opcode_name;
  } else {
    out += std::string(OpcodeName(inst.opcode));
  }
  out += "(";
  if (inst.opcode == Opcode::kParameter) {
    absl::StrAppend(&out, inst.parameter_number);
  } else if (inst.opcode == Opcode::kConstant) {
    if (inst.literal.has_value()) AppendLiteral(*inst.literal, &out);
  } else {
    for (size_t i = 0; i < inst.operands.size(); ++i) {
      if (i > 0) out += ", ";
      absl::StrAppend(&out, "%", inst.operands[i]->name);
    }
  }
  out += ")";
  AppendAttributes(inst, &out);
  return out;
}

}  // namespace

std::string PrintInstruction(const Instruction& inst) {
  return PrintInstructionLine(inst, inst.is_root);
}

std::string PrintModule(const Module& module) {
  std::string out = absl::StrCat("HloModule ", module.name());
  const std::string* stack_frames = nullptr;
  for (const auto& [name, value] : module.raw_attributes()) {
    if (name == "#stack_frames") {
      stack_frames = &value;
      continue;
    }
    absl::StrAppend(&out, ", ", name, "=", value);
  }
  if (module.replica_count() != 1) {
    absl::StrAppend(&out, ", replica_count=", module.replica_count());
  }
  if (module.num_partitions() != 1) {
    absl::StrAppend(&out, ", num_partitions=", module.num_partitions());
  }
  out += "\n\n";
  if (stack_frames != nullptr) absl::StrAppend(&out, *stack_frames, "\n\n");
  for (const auto& computation : module.computations()) {
    if (computation->is_entry()) out += "ENTRY ";
    absl::StrAppend(&out, "%", computation->name(), " (");
    bool first = true;
    for (const Instruction* parameter : computation->parameters()) {
      if (parameter == nullptr) continue;
      if (!first) out += ", ";
      first = false;
      absl::StrAppend(&out, parameter->name, ": ",
                      parameter->shape.ToString(/*with_layout=*/false));
    }
    absl::StrAppend(&out, ") -> ",
                    computation->root() == nullptr
                        ? "()"
                        : computation->root()->shape.ToString(false),
                    " {\n");
    for (const auto& instruction : computation->instructions()) {
      absl::StrAppend(
          &out, "  ",
          PrintInstructionLine(*instruction,
                               instruction.get() == computation->root()),
          "\n");
    }
    out += "}";
    for (const auto& [name, value] : computation->raw_attributes()) {
      absl::StrAppend(&out, ", ", name, "=", value);
    }
    out += "\n\n";
  }
  return out;
}

bool ModulesEqual(const Module& a, const Module& b, std::string* diff) {
  std::string local;
  std::string* d = diff != nullptr ? diff : &local;
  if (a.name() != b.name()) {
    *d = absl::StrCat("module name '", a.name(), "' vs '", b.name(), "'");
    return false;
  }
  if (a.num_partitions() != b.num_partitions() ||
      a.replica_count() != b.replica_count()) {
    *d = "num_partitions or replica_count differs";
    return false;
  }
  if (a.raw_attributes() != b.raw_attributes()) {
    *d = "module header attributes differ";
    return false;
  }
  if (a.computations().size() != b.computations().size()) {
    *d = absl::StrCat(a.computations().size(), " computations vs ",
                      b.computations().size());
    return false;
  }
  for (size_t i = 0; i < a.computations().size(); ++i) {
    if (!ComputationsEqual(*a.computations()[i], *b.computations()[i], d)) {
      return false;
    }
  }
  if ((a.entry() == nullptr) != (b.entry() == nullptr) ||
      (a.entry() != nullptr && a.entry()->name() != b.entry()->name())) {
    *d = "entry computation differs";
    return false;
  }
  return true;
}

}  // namespace causeway::hlo
