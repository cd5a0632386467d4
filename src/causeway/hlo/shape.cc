#include "causeway/hlo/shape.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace causeway::hlo {
namespace {

struct TypeInfo {
  PrimitiveType type;
  std::string_view name;
  int64_t width;  // Bytes in memory.
  int64_t bits;   // Bits of the value.
};

constexpr TypeInfo kTypes[] = {
    {PrimitiveType::kPred, "pred", 1, 8},
    {PrimitiveType::kS8, "s8", 1, 8},
    {PrimitiveType::kS16, "s16", 2, 16},
    {PrimitiveType::kS32, "s32", 4, 32},
    {PrimitiveType::kS64, "s64", 8, 64},
    {PrimitiveType::kU8, "u8", 1, 8},
    {PrimitiveType::kU16, "u16", 2, 16},
    {PrimitiveType::kU32, "u32", 4, 32},
    {PrimitiveType::kU64, "u64", 8, 64},
    {PrimitiveType::kF16, "f16", 2, 16},
    {PrimitiveType::kBF16, "bf16", 2, 16},
    {PrimitiveType::kF32, "f32", 4, 32},
    {PrimitiveType::kF64, "f64", 8, 64},
    {PrimitiveType::kC64, "c64", 8, 64},
    {PrimitiveType::kC128, "c128", 16, 128},
    {PrimitiveType::kS2, "s2", 1, 2},
    {PrimitiveType::kS4, "s4", 1, 4},
    {PrimitiveType::kU2, "u2", 1, 2},
    {PrimitiveType::kU4, "u4", 1, 4},
    {PrimitiveType::kF8E5M2, "f8e5m2", 1, 8},
    {PrimitiveType::kF8E4M3, "f8e4m3", 1, 8},
    {PrimitiveType::kF8E4M3FN, "f8e4m3fn", 1, 8},
    {PrimitiveType::kF8E4M3B11FNUZ, "f8e4m3b11fnuz", 1, 8},
    {PrimitiveType::kF8E5M2FNUZ, "f8e5m2fnuz", 1, 8},
    {PrimitiveType::kF8E4M3FNUZ, "f8e4m3fnuz", 1, 8},
    {PrimitiveType::kF8E3M4, "f8e3m4", 1, 8},
    {PrimitiveType::kF8E8M0FNU, "f8e8m0fnu", 1, 8},
    {PrimitiveType::kF4E2M1FN, "f4e2m1fn", 1, 4},
    {PrimitiveType::kTuple, "tuple", 0, 0},
    {PrimitiveType::kToken, "token", 0, 0},
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

int64_t BitWidth(PrimitiveType type) {
  for (const TypeInfo& info : kTypes) {
    if (info.type == type) return info.bits;
  }
  return 0;
}

bool IsFloating(PrimitiveType type) {
  return type == PrimitiveType::kF16 || type == PrimitiveType::kBF16 ||
         type == PrimitiveType::kF32 || type == PrimitiveType::kF64;
}

bool IsMinifloat(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kF8E5M2:
    case PrimitiveType::kF8E4M3:
    case PrimitiveType::kF8E4M3FN:
    case PrimitiveType::kF8E4M3B11FNUZ:
    case PrimitiveType::kF8E5M2FNUZ:
    case PrimitiveType::kF8E4M3FNUZ:
    case PrimitiveType::kF8E3M4:
    case PrimitiveType::kF8E8M0FNU:
    case PrimitiveType::kF4E2M1FN:
      return true;
    default:
      return false;
  }
}

bool IsComplex(PrimitiveType type) {
  return type == PrimitiveType::kC64 || type == PrimitiveType::kC128;
}

PrimitiveType ComplexComponentType(PrimitiveType type) {
  if (type == PrimitiveType::kC64) return PrimitiveType::kF32;
  if (type == PrimitiveType::kC128) return PrimitiveType::kF64;
  return PrimitiveType::kInvalid;
}

PrimitiveType ComplexTypeOf(PrimitiveType component) {
  if (component == PrimitiveType::kF64) return PrimitiveType::kC128;
  if (IsFloating(component)) return PrimitiveType::kC64;
  return PrimitiveType::kInvalid;
}

bool IsSignedInteger(PrimitiveType type) {
  return type == PrimitiveType::kS8 || type == PrimitiveType::kS16 ||
         type == PrimitiveType::kS32 || type == PrimitiveType::kS64 ||
         type == PrimitiveType::kS2 || type == PrimitiveType::kS4;
}

bool IsUnsignedInteger(PrimitiveType type) {
  return type == PrimitiveType::kU8 || type == PrimitiveType::kU16 ||
         type == PrimitiveType::kU32 || type == PrimitiveType::kU64 ||
         type == PrimitiveType::kU2 || type == PrimitiveType::kU4;
}

bool IsSubByteInteger(PrimitiveType type) {
  return type == PrimitiveType::kS2 || type == PrimitiveType::kS4 ||
         type == PrimitiveType::kU2 || type == PrimitiveType::kU4;
}

bool IsInteger(PrimitiveType type) {
  return IsSignedInteger(type) || IsUnsignedInteger(type);
}

bool IsArrayType(PrimitiveType type) {
  return type != PrimitiveType::kInvalid && type != PrimitiveType::kTuple &&
         type != PrimitiveType::kToken;
}

Shape::Shape(PrimitiveType type, std::vector<int64_t> dims) : type_(type) {
  if (!dims.empty()) {
    rep_ = std::make_shared<Rep>();
    rep_->dims = std::move(dims);
  }
}

Shape Shape::Tuple(std::vector<Shape> elements) {
  Shape shape;
  shape.type_ = PrimitiveType::kTuple;
  if (!elements.empty()) shape.MutableRep().tuple_shapes = std::move(elements);
  return shape;
}

const Shape::Rep& Shape::EmptyRep() {
  static const Rep* empty = new Rep();
  return *empty;
}

Shape::Rep& Shape::MutableRep() {
  if (rep_ == nullptr) {
    rep_ = std::make_shared<Rep>();
  } else if (rep_.use_count() > 1) {
    rep_ = std::make_shared<Rep>(*rep_);
  }
  return *rep_;
}

Shape Shape::Token() {
  Shape shape;
  shape.type_ = PrimitiveType::kToken;
  return shape;
}

int64_t Shape::ElementCount() const {
  int64_t count = 1;
  for (int64_t d : dims()) count *= d;
  return count;
}

int64_t Shape::ByteSize() const {
  if (IsTuple()) {
    int64_t total = 0;
    for (const Shape& element : tuple_shapes()) total += element.ByteSize();
    return total;
  }
  return ElementCount() * ByteWidth(type_);
}

bool Shape::Compatible(const Shape& other) const {
  if (type_ != other.type_) return false;
  if (IsTuple()) {
    const std::vector<Shape>& mine = tuple_shapes();
    const std::vector<Shape>& theirs = other.tuple_shapes();
    if (mine.size() != theirs.size()) return false;
    for (size_t i = 0; i < mine.size(); ++i) {
      if (!mine[i].Compatible(theirs[i])) return false;
    }
    return true;
  }
  return rep_ == other.rep_ || dims() == other.dims();
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.type_ != b.type_) return false;
  if (a.rep_ == b.rep_) return true;
  const Shape::Rep& x = a.rep();
  const Shape::Rep& y = b.rep();
  return x.dims == y.dims && x.minor_to_major == y.minor_to_major &&
         x.dynamic_dims == y.dynamic_dims && x.tuple_shapes == y.tuple_shapes;
}

std::string Shape::ToString(bool with_layout) const {
  if (IsTuple()) {
    std::vector<std::string> parts;
    for (const Shape& element : tuple_shapes()) {
      parts.push_back(element.ToString(with_layout));
    }
    return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
  }
  if (IsToken()) return "token[]";
  std::string text = std::string(PrimitiveTypeName(type_)) + "[";
  const Rep& r = rep();
  for (size_t i = 0; i < r.dims.size(); ++i) {
    if (i > 0) text += ",";
    if (i < r.dynamic_dims.size() && r.dynamic_dims[i]) text += "<=";
    absl::StrAppend(&text, r.dims[i]);
  }
  text += "]";
  if (with_layout && !r.minor_to_major.empty()) {
    absl::StrAppend(&text, "{", absl::StrJoin(r.minor_to_major, ","), "}");
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

bool IsPermutation(std::span<const int64_t> perm, int64_t rank) {
  if (static_cast<int64_t>(perm.size()) != rank) return false;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) return false;
    seen[p] = true;
  }
  return true;
}

}  // namespace causeway::hlo
