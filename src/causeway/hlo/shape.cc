#include "causeway/hlo/shape.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace causeway::hlo {
namespace {

struct TypeInfo {
  PrimitiveType type;
  std::string_view name;
  int64_t width;
};

constexpr TypeInfo kTypes[] = {
    {PrimitiveType::kPred, "pred", 1}, {PrimitiveType::kS8, "s8", 1},
    {PrimitiveType::kS16, "s16", 2},   {PrimitiveType::kS32, "s32", 4},
    {PrimitiveType::kS64, "s64", 8},   {PrimitiveType::kU8, "u8", 1},
    {PrimitiveType::kU16, "u16", 2},   {PrimitiveType::kU32, "u32", 4},
    {PrimitiveType::kU64, "u64", 8},   {PrimitiveType::kF16, "f16", 2},
    {PrimitiveType::kBF16, "bf16", 2}, {PrimitiveType::kF32, "f32", 4},
    {PrimitiveType::kF64, "f64", 8},   {PrimitiveType::kTuple, "tuple", 0},
    {PrimitiveType::kToken, "token", 0},
};

}  // namespace

std::optional<PrimitiveType> PrimitiveTypeFromName(std::string_view name) {
  for (const TypeInfo& info : kTypes) {
    if (info.name == name) return info.type;
  }
  return std::nullopt;
}

std::string_view PrimitiveTypeName(PrimitiveType type) {
  for (const TypeInfo& info : kTypes) {
    if (info.type == type) return info.name;
  }
  return "invalid";
}

int64_t ByteWidth(PrimitiveType type) {
  for (const TypeInfo& info : kTypes) {
    if (info.type == type) return info.width;
  }
  return 0;
}

bool IsFloating(PrimitiveType type) {
  return type == PrimitiveType::kF16 || type == PrimitiveType::kBF16 ||
         type == PrimitiveType::kF32 || type == PrimitiveType::kF64;
}

bool IsSignedInteger(PrimitiveType type) {
  return type == PrimitiveType::kS8 || type == PrimitiveType::kS16 ||
         type == PrimitiveType::kS32 || type == PrimitiveType::kS64;
}

bool IsUnsignedInteger(PrimitiveType type) {
  return type == PrimitiveType::kU8 || type == PrimitiveType::kU16 ||
         type == PrimitiveType::kU32 || type == PrimitiveType::kU64;
}

bool IsInteger(PrimitiveType type) {
  return IsSignedInteger(type) || IsUnsignedInteger(type);
}

bool IsArrayType(PrimitiveType type) {
  return type != PrimitiveType::kInvalid && type != PrimitiveType::kTuple &&
         type != PrimitiveType::kToken;
}

Shape::Shape(PrimitiveType type, std::vector<int64_t> dims)
    : type_(type), dims_(std::move(dims)) {}

Shape Shape::Tuple(std::vector<Shape> elements) {
  Shape shape;
  shape.type_ = PrimitiveType::kTuple;
  shape.tuple_shapes_ = std::move(elements);
  return shape;
}

Shape Shape::Token() {
  Shape shape;
  shape.type_ = PrimitiveType::kToken;
  return shape;
}

int64_t Shape::ElementCount() const {
  int64_t count = 1;
  for (int64_t d : dims_) count *= d;
  return count;
}

int64_t Shape::ByteSize() const {
  if (IsTuple()) {
    int64_t total = 0;
    for (const Shape& element : tuple_shapes_) total += element.ByteSize();
    return total;
  }
  return ElementCount() * ByteWidth(type_);
}

bool Shape::Compatible(const Shape& other) const {
  if (type_ != other.type_) return false;
  if (IsTuple()) {
    if (tuple_shapes_.size() != other.tuple_shapes_.size()) return false;
    for (size_t i = 0; i < tuple_shapes_.size(); ++i) {
      if (!tuple_shapes_[i].Compatible(other.tuple_shapes_[i])) return false;
    }
    return true;
  }
  return dims_ == other.dims_;
}

bool operator==(const Shape& a, const Shape& b) {
  return a.type_ == b.type_ && a.dims_ == b.dims_ &&
         a.minor_to_major_ == b.minor_to_major_ &&
         a.dynamic_dims_ == b.dynamic_dims_ && a.tuple_shapes_ == b.tuple_shapes_;
}

std::string Shape::ToString(bool with_layout) const {
  if (IsTuple()) {
    std::vector<std::string> parts;
    for (const Shape& element : tuple_shapes_) {
      parts.push_back(element.ToString(with_layout));
    }
    return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
  }
  if (IsToken()) return "token[]";
  std::string text = std::string(PrimitiveTypeName(type_)) + "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i > 0) text += ",";
    if (i < dynamic_dims_.size() && dynamic_dims_[i]) text += "<=";
    absl::StrAppend(&text, dims_[i]);
  }
  text += "]";
  if (with_layout && !minor_to_major_.empty()) {
    absl::StrAppend(&text, "{", absl::StrJoin(minor_to_major_, ","), "}");
  }
  return text;
}

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * dims[i + 1];
  }
  return strides;
}

}  // namespace causeway::hlo
